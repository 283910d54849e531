"""A call that fails changes nothing.

A ``MemoryError`` is forced (monkeypatch) at each stage of ``answer`` and ``transition``; every
draw-consuming stage is swept call by call (the k-th ``NoiseStream.take``, the k-th block sampled,
the k-th use of the round's sampling generator). After each failure ``everlast.engine.codec.dumps(p)`` must
be byte-identical to before, and the next successful call must give exactly what an untouched twin
(restored from those bytes) gives.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import everlast.engine.concepts.random_order
import everlast.engine.concepts.thresholds
import everlast.engine.design
import everlast.engine.noise
import everlast.engine.predictor
from everlast.engine import between_thresholds as bt
from everlast.engine import burn as burns
from everlast.engine import clients as cl
from everlast.engine import codec, phases
from everlast.engine import quotas as qt
from everlast.engine.concepts.thresholds import ThresholdEnsemble
from everlast.engine.design import RoundNoise
from everlast.engine.noise import NoiseStream
from everlast.engine.phases import Phase
from everlast.engine.predictor import Predictor
from everlast.engine.reservoir import Reservoir
from everlast.engine.serving import Answers
from tests.engine.helpers import DESIGNS, client_predictor, predictor, split_vote, tops_predictor

QUERIES = np.random.default_rng(8).random(9000)


class Forced:
    """Counts calls of a wrapped callable and raises ``MemoryError`` at the ``k``-th (never if 0)."""

    def __init__(self, k: int = 0) -> None:
        self.k, self.calls = k, 0

    def tick(self) -> None:
        self.calls += 1
        if self.calls == self.k:
            raise MemoryError("forced")

    def before(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapped(*a: Any, **kw: Any) -> Any:
            self.tick()
            return fn(*a, **kw)
        return wrapped

    def after(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Run the real call (its side effects happen), then fail."""
        def wrapped(*a: Any, **kw: Any) -> Any:
            out = fn(*a, **kw)
            self.tick()
            return out
        return wrapped


class GeneratorProxy:
    """A numpy Generator whose every method call ticks ``forced`` first."""

    def __init__(self, g: np.random.Generator, forced: Forced) -> None:
        self._g, self._f = g, forced

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._g, name)
        return self._f.before(attr) if callable(attr) else attr


Patch = Callable[[pytest.MonkeyPatch, Forced], None]


def patch_attr(owner: Any, name: str, when: str = "before") -> Patch:
    def apply(mp: pytest.MonkeyPatch, f: Forced) -> None:
        real = getattr(owner, name)
        mp.setattr(owner, name, f.before(real) if when == "before" else f.after(real))
    return apply


def patch_both(*patches: Patch) -> Patch:
    """Each of several call sites, counted together (a stage the designs reach by different calls)."""
    def apply(mp: pytest.MonkeyPatch, f: Forced) -> None:
        for p in patches:
            p(mp, f)
    return apply


def patch_sampling_generator(mp: pytest.MonkeyPatch, f: Forced) -> None:
    real = vars(everlast.engine.predictor)["generator"]
    mp.setattr(everlast.engine.predictor, "generator", lambda *a: GeneratorProxy(real(*a), f))


ANSWER_STAGES: dict[str, Patch] = {
    "vote counting": patch_attr(ThresholdEnsemble, "votes"),
    "noise take (each)": patch_attr(NoiseStream, "take"),
    "noise block sampling (each)": patch_attr(everlast.engine.noise, "sample"),
    "per-query noise": patch_attr(RoundNoise, "per_query"),
    # small batches call the feed once per top, large ones peek and skip (bt.LOOKAHEAD_MIN_BATCH)
    "threshold redraw (each, paper)": patch_both(patch_attr(everlast.engine.predictor._MuFeed, "__call__"),
                                                 patch_attr(everlast.engine.predictor._MuFeed, "peek"),
                                                 patch_attr(everlast.engine.predictor._MuFeed, "skip")),
    "threshold commit (paper)": patch_attr(everlast.engine.predictor._MuFeed, "committed"),
    "mechanism tct": patch_attr(bt, "halt_tct"),
    "mechanism paper": patch_attr(bt, "run_paper"),
    "reservoir write (after writing)": patch_attr(everlast.engine.predictor, "_offer", "after"),
    "phase table": patch_attr(phases, "fire"),
    "building the answers": patch_attr(everlast.engine.predictor, "Answers"),
}

TRANSITION_STAGES: dict[str, Patch] = {
    "labelboost": patch_attr(everlast.engine.concepts.thresholds, "threshold_em"),
    "transition generators (each draw: labelboost, S-hat, reservoir; S_i+1's order)": patch_sampling_generator,
    "random order of S_i+1": patch_attr(everlast.engine.concepts.random_order, "random_order"),
    "fit": patch_attr(everlast.engine.concepts.thresholds, "_chunk_thresholds"),
    "reservoir draw": patch_attr(Reservoir, "draw"),
    "noise plan": patch_attr(everlast.engine.predictor, "noise_plan"),
    "round noise start": patch_attr(RoundNoise, "start"),
    "round noise streams (each)": patch_attr(everlast.engine.design, "generator"),
    # paper: mu from its kept stream (take); target-charged: rho_h straight from its generator (sample)
    "round noise first draw (each)": patch_both(patch_attr(NoiseStream, "take"),
                                                patch_attr(everlast.engine.design, "sample")),
    "phase table": patch_attr(phases, "fire"),
}


@functools.cache
def scenario(design: str, name: str) -> tuple[bytes, np.ndarray[Any, Any]]:
    """A predictor's bytes and the batch to feed it."""
    if name == "mid-round":
        # paper: mu ~ DLap(1) keeps the band open, so the batch has tops (threshold redraws)
        sharp: dict[str, Any] = {"eps_bt": 2.0} if design == "paper" else {}
        p = predictor(design, **sharp)
        p.answer(QUERIES[:100])
        return codec.dumps(p), QUERIES[100:400]
    if name == "halts inside the batch":
        p = (tops_predictor(design, halt_threshold=4, c=10) if design == "target-charged"
             else tops_predictor(design, c=4))
        p.answer(np.full(2, 0.5))
        return codec.dumps(p), np.r_[-1.0, 0.5, 2.0, 0.5, 0.5, 0.5]
    assert name == "crosses a noise block"  # 8192 draws per block of a per-query stream
    over = {"halt_threshold": 10_000} if design == "target-charged" else {}
    p = predictor(design, R=20_000, c=20_000, **over)  # never halts
    p.answer(QUERIES[:8000])
    return codec.dumps(p), QUERIES[8000:8400]


def same_answers(a: Answers, b: Answers) -> bool:
    return (np.array_equal(a.labels, b.labels) and np.array_equal(a.outcomes, b.outcomes)
            and np.array_equal(a.refusals, b.refusals) and (a.round, a.consumed) == (b.round, b.consumed))


def sweep(blob: bytes, patch: Patch, call: Callable[[Predictor], Any], follow: Callable[[Predictor], Any],
          compare: Callable[[Any, Any], bool], setup: Callable[[Predictor], Any] | None = None) -> int:
    """Force a failure of ``call`` at the 1st, 2nd, ... call of the patched stage until a run
    passes it untouched; after each, ``follow`` (unpatched) must give what it gives on a twin.
    ``setup`` (unpatched) runs first on each restored predictor; ``blob`` is then its bytes.
    Returns how many failures were forced."""
    k, start = 0, blob
    while True:
        k += 1
        p = codec.loads(start)
        assert isinstance(p, Predictor)
        if setup is not None:
            setup(p)
            blob = codec.dumps(p)
        forced = Forced(k)
        with pytest.MonkeyPatch.context() as mp:
            patch(mp, forced)
            try:
                call(p)
            except MemoryError:
                failed = True
            else:
                failed = False
        if not failed:
            assert forced.calls < k
            return k - 1
        assert codec.dumps(p) == blob, f"state changed by a failure at call {k} of the stage"
        twin = codec.loads(blob)
        assert isinstance(twin, Predictor)
        assert compare(follow(p), follow(twin))
        assert codec.dumps(p) == codec.dumps(twin)


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("where", ["mid-round", "halts inside the batch", "crosses a noise block"])
@pytest.mark.parametrize("stage", list(ANSWER_STAGES))
def test_a_failed_answer_changes_nothing(design: str, where: str, stage: str) -> None:
    blob, batch = scenario(design, where)
    forced = sweep(blob, ANSWER_STAGES[stage], lambda p: p.answer(batch), lambda p: p.answer(batch), same_answers)
    tct = design == "target-charged"
    if (stage == "mechanism tct" and not tct) or (stage in ("mechanism paper", "threshold redraw (each, paper)",
                                                            "threshold commit (paper)") and tct):
        assert forced == 0  # not this design's stage
    elif stage in ("threshold redraw (each, paper)", "threshold commit (paper)") and where == "crosses a noise block":
        assert forced >= 0  # the paper's band may be closed (mu large) for a whole batch
    else:
        assert forced >= 1, "the stage was never reached"


def transition_due(design: str) -> bytes:
    p = predictor(design)
    p.answer(QUERIES[:600])
    assert p.phase is Phase.TRANSITION_DUE
    return codec.dumps(p)


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("stage", list(TRANSITION_STAGES))
def test_a_failed_transition_changes_nothing(design: str, stage: str) -> None:
    blob = transition_due(design)

    def then_answer(p: Predictor) -> Answers:
        p.transition()
        return p.answer(QUERIES[600:900])

    forced = sweep(blob, TRANSITION_STAGES[stage], lambda p: p.transition(), then_answer, same_answers)
    assert forced >= 1, "the stage was never reached"
    if stage.startswith("transition generators"):
        assert forced >= 2  # S-hat_{i+1} and the reservoir positions (the rest draw raw bits through the proxy)


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("stage", list(TRANSITION_STAGES))
def test_a_failed_transition_after_the_last_batch_changes_nothing(design: str, stage: str) -> None:
    """The same sweep on a predictor that has just answered its round's last batch, so the
    transition starts from the order that batch prepared (``PreparedOrder``); a retry after a
    failure, which may have changed that order's array, must still equal a restored twin."""
    p = predictor(design)
    p.answer(QUERIES[:500])
    blob = codec.dumps(p)

    def last_batch(q: Predictor) -> None:
        q.answer(QUERIES[500:600])
        assert q.phase is Phase.TRANSITION_DUE and q._prepared is not None

    def then_answer(q: Predictor) -> Answers:
        q.transition()
        return q.answer(QUERIES[600:900])

    forced = sweep(blob, TRANSITION_STAGES[stage], lambda q: q.transition(), then_answer, same_answers, last_batch)
    if stage == "random order of S_i+1":
        assert forced == 0  # drawn by the last batch: the transition takes it and draws none
    else:
        assert forced >= 1, "the stage was never reached"


def test_the_sweeps_reach_every_draw() -> None:
    """The transition of a target-charged round opens three round streams and takes rho_h."""
    blob = transition_due("target-charged")
    assert sweep(blob, TRANSITION_STAGES["round noise streams (each)"], lambda p: p.transition(),
                 lambda p: p.transition(), lambda a, b: a is b is None) == 3


# -- with per-client quotas and the burn-rate signal on ---------------------------------------------------

CLIENT_STAGES: dict[str, Patch] = {
    "client ids": patch_attr(cl, "batch"),
    "quota decisions (each)": patch_attr(qt, "decide"),
    "quota commit (each)": patch_attr(qt, "commit"),
    "client threshold streams (each)": patch_attr(everlast.engine.predictor, "client_generator"),
    "burn windows": patch_attr(burns, "windows"),
    "mechanism tct": patch_attr(bt, "halt_tct"),
    "noise take (each)": patch_attr(NoiseStream, "take"),
    "building the answers": patch_attr(everlast.engine.predictor, "Answers"),
}
WHO = [("a", "b", None, f"new-{i}")[i % 4] for i in range(400)]


@functools.cache
def client_scenario(name: str) -> tuple[bytes, np.ndarray[Any, Any]]:
    if name == "mid-round":  # new clients arrive, "a" (all tops) passes its quota, windows complete
        p = split_vote(client_predictor(eps_bt=50.0))
        p.answer(np.full(100, 0.5), WHO[:100])
        return codec.dumps(p), np.full(300, 0.5)
    assert name == "halts inside the batch"
    p = split_vote(client_predictor(quotas={"share": 1.0, "eps": 1.0}, eps_bt=50.0, halt_eps=100.0,
                                    halt_threshold=150, c=200))
    p.answer(np.full(100, 0.5), WHO[:100])
    return codec.dumps(p), np.full(300, 0.5)


def same_client_answers(a: Answers, b: Answers) -> bool:
    return same_answers(a, b) and np.array_equal(a.burn, b.burn)


@pytest.mark.parametrize("where", ["mid-round", "halts inside the batch"])
@pytest.mark.parametrize("stage", list(CLIENT_STAGES))
def test_a_failed_answer_with_quotas_changes_nothing(where: str, stage: str) -> None:
    blob, batch = client_scenario(where)

    def call(p: Predictor) -> Answers:
        return p.answer(batch, WHO[100:400])

    forced = sweep(blob, CLIENT_STAGES[stage], call, call, same_client_answers)
    assert forced >= 1, "the stage was never reached"
    if stage.endswith("(each)") and where == "halts inside the batch":
        assert forced >= 2  # decided again up to the halt
