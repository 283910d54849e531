"""The answer path does the same work whatever the private counts (docs/privacy/genericbbl.md 8).

``Predictor.answer`` (target-charged, with and without per-client quotas and the burn-rate signal) is
traced call by call, line by line and bytecode by bytecode: every Python instruction the engine
executes (so a branch inside a line shows too), every function it calls and every C function
(numpy's included) it calls directly. Two predictors that differ only in
their private counts -- one round far below its halting threshold with no top in sight, one within
reach of it with a client's quota firing inside the traced batch -- must give the same trace for
the same batch (same size, same round position, same clients). The noise sampler is traced as one
call (its rejection loops depend on the noise values it draws, never on the data), and so is each
call into numpy.

``run_tct`` used to skip forming the per-query counts when C_n + max(xi) < c0 + rho_h; the near run
below is built so that this condition differs between the two runs, and the test checks that it does.

The same calls can still do more work: ``np.ones(tops)`` is one call whatever ``tops`` is. So the
tracer also records, line by line, how many bytes the line allocated at its peak (``tracemalloc``, which
sees numpy's array data as well as Python objects), and the two runs must agree line by line within
``ALLOC_SLACK`` bytes. A mutant whose work grows with the private top count (kept below) is caught by
that comparison and passed by the call-by-call one.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

import numpy as np
import pytest

from everlast.engine import between_thresholds as bt
from everlast.engine.phases import Phase
from everlast.engine.predictor import Predictor
from tests.engine.helpers import client_predictor, split_vote, tops_predictor

Event = tuple[str, str, Any]


class Tracer:
    """Records the engine's own work inside one call (``run``)."""

    def __init__(self, root: CodeType, sizes: bool = False) -> None:
        self.root = root
        self.events: list[Event] = []
        self.sizes: list[tuple[str, int, int]] | None = [] if sizes else None
        """(file, line, the peak bytes allocated while the line ran) per line event, if asked."""
        self._base = 0
        self._last = ("answer", 0)
        """The line running (the root call's entry until its first line event)."""

    @staticmethod
    def engine_file(name: str) -> bool:
        return "/engine/" in name and not name.endswith("/noise.py")

    def ours(self, code: CodeType) -> bool:
        return code is self.root or self.engine_file(code.co_filename)

    def where(self, frame: FrameType | None) -> str | None:
        """'engine' if every frame from ``frame`` up to the root call is engine code (not the
        sampler), 'opaque' if some is not, None outside the root call."""
        f, inside = frame, True
        while f is not None:
            if not self.ours(f.f_code):
                inside = False
            if f.f_code is self.root:
                return "engine" if inside else "opaque"
            f = f.f_back
        return None

    @staticmethod
    def short(code: CodeType) -> str:
        return code.co_filename.rsplit("/engine/", 1)[-1]

    def trace(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event != "call":
            return None
        parent = self.where(frame.f_back) if frame.f_code is not self.root else "engine"
        if parent != "engine":
            return None
        self.events.append(("call", self.short(frame.f_code), frame.f_code.co_name))
        if not self.ours(frame.f_code):
            return None
        frame.f_trace_opcodes = True  # every bytecode: a branch inside a line (x if c else y, and/or) shows
        return self.line

    def line(self, frame: FrameType, event: str, arg: Any) -> Callable[..., Any] | None:
        if event == "line":
            if self.sizes is not None:  # the line that ran until now: its peak above what it began with
                now, peak = tracemalloc.get_traced_memory()
                self.sizes.append((*self._last, peak - self._base))
                tracemalloc.reset_peak()
                self._base, self._last = now, (self.short(frame.f_code), frame.f_lineno)
            self.events.append(("line", self.short(frame.f_code), frame.f_lineno))
        elif event == "opcode":
            self.events.append(("op", self.short(frame.f_code), frame.f_lasti))
        return self.line

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call" and self.ours(frame.f_code) and self.where(frame) == "engine":
            self.events.append(("c_call", getattr(arg, "__module__", None) or "", getattr(arg, "__qualname__", "")))

    def run(self, fn: Callable[[], Any]) -> Any:
        """``fn()``, traced. The garbage collector is held off: a collection may run finalizers
        (Python code) inside any call, at moments that depend on earlier allocations, not on data.
        Other threads are held off too (a long GIL switch interval: they run only where this one
        blocks), as tracemalloc counts every thread's allocations."""
        gc.collect()
        gc.disable()
        switch = sys.getswitchinterval()
        sys.setswitchinterval(0.5)  # other threads' allocations stay out of tracemalloc's counts
        if self.sizes is not None:
            tracemalloc.start()
            self._base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        sys.settrace(self.trace)
        sys.setprofile(self.profile)
        try:
            return fn()
        finally:
            sys.setprofile(None)
            sys.settrace(None)
            if self.sizes is not None:
                tracemalloc.stop()
            sys.setswitchinterval(switch)
            gc.enable()


def traced_answer(p: Predictor, x: np.ndarray[Any, Any], who: Any) -> tuple[list[Event], Any]:
    t = Tracer(Predictor.answer.__code__)
    res = t.run(lambda: p.answer(x, who))
    assert t.events and any(e[0] == "c_call" for e in t.events) and any(e[0] == "line" for e in t.events)
    return t.events, res


ALLOC_SLACK = 512
"""Bytes by which one line's peak allocation may differ between two runs that differ only in their
private counts: a few Python objects (an int above the small-int cache in one run and not the other, a
float served from a free list in one run): measured at most 59 bytes. An array whose length is the
round's top count costs 8 bytes per top: the runs below differ by 180 tops or more (1,440 bytes)."""


def allocations(p: Predictor, x: np.ndarray[Any, Any], who: Any) -> list[tuple[str, int, int]]:
    """(file, line, peak bytes) for every line ``p.answer(x, who)`` runs."""
    t = Tracer(Predictor.answer.__code__, sizes=True)
    t.run(lambda: p.answer(x, who))
    assert t.sizes is not None and t.sizes
    return t.sizes


def allocation_gaps(far: list[tuple[str, int, int]], near: list[tuple[str, int, int]]) -> list[str]:
    """The lines whose peak allocations differ by more than ``ALLOC_SLACK`` (same lines in both)."""
    return [f"{f}:{line}: {a} vs {b} bytes" for f, line, a, b in _paired(far, near) if abs(a - b) > ALLOC_SLACK]


def _paired(far: list[tuple[str, int, int]], near: list[tuple[str, int, int]]) -> list[tuple[str, int, int, int]]:
    assert [a[:2] for a in far] == [b[:2] for b in near]
    return [(a[0], a[1], a[2], b[2]) for a, b in zip(far, near, strict=True)]


REPEATS = 3
"""Fresh twins measured this many times; a line is a gap only if it differs in every repeat.
tracemalloc sees every thread's allocations, so a thread left running by another test of the same
worker (an executor, a transition's second core) can add a few KB to one line of one run (seen once in
CI: 2,308 bytes at ``clients.py``'s ``np.fromiter``). A difference that comes from the private counts
is there in every repeat (the kept mutant is caught by this same check)."""


def repeated_gaps(twins: Callable[[], tuple[Predictor, Predictor]],
                  measure: Callable[[Predictor, float], list[tuple[str, int, int]]]) -> list[str]:
    """``allocation_gaps`` of a fresh pair ``twins()`` (far, near) measured as ``measure(p, side)``
    (side -1.0 for far, 0.5 for near), ``REPEATS`` times: a line counts only if it differs in all."""
    worst: dict[int, tuple[int, str]] = {}
    for r in range(REPEATS):
        far, near = twins()
        rows = _paired(measure(far, -1.0), measure(near, 0.5))
        for i, (f, line, a, b) in enumerate(rows):
            if r == 0 or i in worst:
                gap = abs(a - b)
                if gap <= ALLOC_SLACK:
                    worst.pop(i, None)
                elif r == 0 or gap < worst[i][0]:
                    worst[i] = (gap, f"{f}:{line}: {a} vs {b} bytes")
    return [worst[i][1] for i in sorted(worst)]


def same_allocations(make: Callable[[], Predictor], twins: Callable[[], tuple[Predictor, Predictor]],
                     batch: np.ndarray[Any, Any], who: Any) -> list[str]:
    """``repeated_gaps`` of far and near answering the same ``batch``, after a warm-up on a third
    predictor in far's state (the first traced call pays one-off allocations: caches filled on first use)."""
    warm = make()
    warm.answer(np.full(250, -1.0), who[:250])
    allocations(warm, batch, who[250:350])
    return repeated_gaps(twins, lambda p, _: allocations(p, batch, who[250:350]))


def old_shortcut(p: Predictor, n: int, out_tops: int) -> bool:
    """Whether run_tct's removed shortcut (C_n + max(xi) < c0 + rho_h and C_n < c) held for the next
    n queries, out_tops of which are tops: the data-dependent branch this test pins away."""
    _, xi, _ = p._live.noise.per_query(n)
    assert xi is not None and p.plan.c0 is not None
    end = p.tops_in_round + out_tops
    return end < p.plan.c and end + int(xi.max()) < p.plan.c0 + p._live.bt.rho_h


def twins(make: Callable[[], Predictor], who: Any, k: int = 250) -> tuple[Predictor, Predictor]:
    """Far's and near's twins, for the allocation check: ``k`` queries with no tops, and k tops."""
    far, near = make(), make()
    far.answer(np.full(k, -1.0), who[:k])
    near.answer(np.full(k, 0.5), who[:k])
    return far, near


SHARP: dict[str, Any] = {"eps_bt": 50.0, "halt_eps": 0.5}
"""Split votes with negligible count noise (a query at 0.5 is a top, at -1 an L), and a halting test
with real noise (xi ~ DLap(8)): a round with 250 tops and c0 = 300 is within its reach."""
CASES = {
    "quotas off": lambda: tops_predictor("target-charged", seed=SEED, **SHARP),
    "quotas and burn on": lambda: split_vote(client_predictor(seed=SEED, quotas={"share": 0.2, "eps": 100.0},
                                                              burn={"window": 50, "eps": 0.5}, **SHARP)),
}
SEED = 4  # a seed where neither run halts and the removed shortcut differs (checked below)


@pytest.mark.parametrize("case", list(CASES))
def test_the_answer_path_does_the_same_work_whatever_the_counts(case: str) -> None:
    far, near = CASES[case](), CASES[case]()
    who = [("a", "b", None)[i % 3] for i in range(400)]
    far.answer(np.full(250, -1.0), who[:250])  # no tops at all
    near.answer(np.full(250, 0.5), who[:250])  # 250 tops: each client ~83, over its quota of 60
    assert far.tops_in_round == 0 and 180 <= near.tops_in_round <= 250
    batch = np.r_[np.full(70, -1.0), np.full(30, 0.5)]  # the same batch; its tops come last
    if case == "quotas off":  # the removed shortcut would have run in one and not the other
        assert old_shortcut(far, 100, 30) and not old_shortcut(near, 100, 30)
    ev_far, res_far = traced_answer(far, batch, who[250:350])
    ev_near, res_near = traced_answer(near, batch, who[250:350])
    assert far.phase is near.phase is Phase.ANSWERING  # neither halted
    if case != "quotas off":
        assert (res_near.refusals != 0).all() and (res_far.refusals == 0).all()  # quotas: released, not timed
        assert res_far.burn.shape == res_near.burn.shape == (2, 3)
    assert ev_far == ev_near, differ(ev_far, ev_near)
    gaps = same_allocations(CASES[case], lambda: twins(CASES[case], who), batch, who)
    assert not gaps, "the answer path allocates by the private counts:\n" + "\n".join(gaps)


def test_a_mutant_whose_work_grows_with_the_top_count_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The mutant: the halting test also sums an array as long as the round's private top count (at
    10^6 tops, milliseconds against microseconds at none). Its calls and lines are the same in both
    runs, so the call-by-call trace passes it; the allocation sizes catch it."""
    real = bt.halt_tct

    def growing(out: Any, xi: Any, plan: Any, state: bt.BTState, refused: Any = None) -> bt.BTRun:
        np.ones(state.tops, dtype=np.int64).sum()  # work proportional to a private count
        return real(out, xi, plan, state, refused)

    monkeypatch.setattr(bt, "halt_tct", growing)
    make = CASES["quotas off"]
    far, near = make(), make()
    who = [None] * 400
    far.answer(np.full(250, -1.0))
    near.answer(np.full(250, 0.5))
    batch = np.r_[np.full(70, -1.0), np.full(30, 0.5)]
    ev_far, _ = traced_answer(far, batch, who[250:350])
    ev_near, _ = traced_answer(near, batch, who[250:350])
    assert ev_far == ev_near  # the call-by-call trace alone cannot see it
    gaps = same_allocations(make, lambda: twins(make, [None] * 250), batch, who)
    assert gaps and any("test_constant_work.py" in g for g in gaps), gaps


def differ(a: list[Event], b: list[Event]) -> str:
    """Where two traces part (for the failure message)."""
    import difflib
    lines = difflib.unified_diff([str(e) for e in a], [str(e) for e in b], "far", "near", lineterm="", n=3)
    return "the traces differ:\n" + "\n".join(list(lines)[:40])


def test_a_quota_firing_inside_the_batch_costs_no_extra_work() -> None:
    """The firing itself (released only when the client's next query is refused) takes no branch:
    the batch where three clients' tests fire traces like one where none does."""
    quiet, firing = (split_vote(client_predictor(seed=SEED, quotas={"share": 0.2, "eps": 100.0}, burn=None,
                                                 **SHARP)) for _ in range(2))
    who = [("a", "b", None)[i % 3] for i in range(300)]
    quiet.answer(np.full(150, -1.0), who[:150])
    firing.answer(np.full(150, 0.5), who[:150])  # 50 tops each: 10 short of the quota of 60
    ev_quiet, r_quiet = traced_answer(quiet, np.full(60, -1.0), who[150:210])
    ev_firing, r_firing = traced_answer(firing, np.full(60, 0.5), who[150:210])
    assert (r_quiet.refusals == 0).all() and 0 < int((r_firing.refusals != 0).sum()) < 60
    assert ev_quiet == ev_firing
    # and the same allocation sizes, line by line (twins in the same states; a warm-up trace first)
    make = lambda: split_vote(client_predictor(seed=SEED, quotas={"share": 0.2, "eps": 100.0}, burn=None,  # noqa: E731
                                               **SHARP))
    warm = make()
    warm.answer(np.full(150, -1.0), who[:150])
    allocations(warm, np.full(60, -1.0), who[150:210])
    gaps = repeated_gaps(lambda: twins(make, who, 150),
                         lambda p, x: allocations(p, np.full(60, x), who[150:210]))
    assert not gaps, "a quota firing allocates by the private counts:\n" + "\n".join(gaps)


def test_the_tracer_sees_a_data_dependent_branch() -> None:
    """The tracer is not blind: run_tct with the old shortcut put back gives different traces."""
    def shortcut(v: Any, z: Any, xi: Any, plan: Any, state: bt.BTState) -> bt.BTRun:
        out = bt.outcomes_tct(v, z, plan)
        end = state.tops + int(np.count_nonzero(out == bt.TOP))
        if end < plan.c and end + int(xi.max()) < plan.c0 + state.rho_h:
            return bt.BTRun(out, out.size, bt.BTState(tops=end, rho_h=state.rho_h), False)
        return bt.halt_tct(out, xi, plan, state)

    far, near = CASES["quotas off"](), CASES["quotas off"]()
    far.answer(np.full(250, -1.0))
    near.answer(np.full(250, 0.5))
    batch = np.r_[np.full(70, -1.0), np.full(30, 0.5)]
    events = []
    for p in (far, near):
        _, xi, _ = p._live.noise.per_query(100)
        assert xi is not None
        t = Tracer(bt.run_tct.__code__)
        t.run(lambda p=p, xi=xi: bt.run_tct(p.ensemble.votes(batch), p._live.noise.per_query(100)[0], xi, p.plan,
                                            p._live.bt))
        s = Tracer(shortcut.__code__)
        s.run(lambda p=p, xi=xi: shortcut(p.ensemble.votes(batch), p._live.noise.per_query(100)[0], xi, p.plan,
                                          p._live.bt))
        events.append((t.events, s.events))
    assert events[0][0] == events[1][0]  # run_tct: the same work
    assert events[0][1] != events[1][1]  # the old shortcut: not
