"""Query streams and an in-process driver that scores a predictor against them round by round.

Every stream follows ``adversary_sim.kafka_replay.Stream`` (the protocol ``everlast replay`` drives
through Kafka), so the same object runs in-process here and against the daemon there:

* ``adaptive``: whether the stream waits for its answers (closed loop);
* ``next_batch(n) -> (x, y)``: the next n points and their true labels (``None`` if unknown);
* ``observe(labels)``: the answers to the last batch, in order (0/1, -1 = refused).

Streams are seeded and deterministic: the same seed gives the same points, and an adaptive stream's
points are a function of its seed and of the answers it has observed. A stream may also offer
``reference(g, n)``: a sample of "the true distribution" its accuracy should be judged on (drift:
where the queries come from now; poisoning: the honest users' distribution).

``run_stream`` answers a stream with an in-process ``engine.predictor.Predictor`` (running
transitions as rounds end) and records, per round, the queries, refusals (by reason: ``Refusal.code``)
and where the round paused (its halting test fired: the rest of the round is refused ``round-paused``
and the next round answers again), tops used against the budget c_i, the error of the answers
against the true labels, and the error of the round's decision rule on fresh points of the
reference distribution (``engine.diagnostics.shadow_labels``: read-only, never a serving path).
Tops and shadow errors are private diagnostics: a simulation may print them, a daemon must not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from everlast.adversary_sim.iid import Task
from everlast.engine.diagnostics import shadow_labels
from everlast.engine.phases import Phase
from everlast.engine.predictor import Predictor
from everlast.engine.serving import Refusal

Points = NDArray[np.float64]
Labels = NDArray[np.int8]


@runtime_checkable
class Stream(Protocol):
    """The stream protocol of ``adversary_sim.kafka_replay`` (repeated here to keep this module free
    of Kafka imports)."""

    adaptive: bool

    def next_batch(self, n: int) -> tuple[Points, Labels | None]: ...

    def observe(self, labels: Labels) -> None: ...


class IIDStream:
    """I.i.d. points from a task (a named distribution of ``adversary_sim.iid`` and a hidden concept).

    The same draws as ``adversary_sim.kafka_replay.IIDStream`` for the same seed."""

    adaptive = False

    def __init__(self, task: Task, seed: int) -> None:
        self.task = task
        self.seed = seed
        self._g = np.random.default_rng([seed, 7])

    def next_batch(self, n: int) -> tuple[Points, Labels | None]:
        return self.task.sample(self._g, n)

    def observe(self, labels: Labels) -> None:
        pass

    def reference(self, g: np.random.Generator, n: int) -> tuple[Points, Labels]:
        return self.task.sample(g, n)


# -- in-process driver -----------------------------------------------------------------------------


@dataclass(slots=True)
class RoundRecord:
    round: int
    queries: int = 0
    refused: int = 0
    tops_used: int = 0
    tops_allowed: int = 0
    scored: int = 0
    wrong: int = 0
    error_fresh: float | None = None
    error_original: float | None = None
    """Error on the stream's original distribution (drift), when it has one."""
    halted_after: int | None = None
    """Queries this round had taken when the predictor failed for good (a state written before rounds
    paused; None: it did not)."""
    paused_after: int | None = None
    """Queries this round had taken (answered or refused for a client quota) when it paused (None: it
    did not pause)."""
    reasons: dict[str, int] = field(default_factory=dict)
    """Refused queries by reason (``Refusal.code``: ``round-paused``, ``client-quota``, ...)."""

    def to_json(self) -> dict[str, Any]:
        answered = self.queries - self.refused
        return {
            "round": self.round,
            "queries": self.queries,
            "refused": self.refused,
            "refusals": dict(sorted(self.reasons.items())),
            "paused": self.paused_after is not None,
            "paused_after": self.paused_after,
            "tops_used": self.tops_used,
            "tops_allowed": self.tops_allowed,
            "error_answers": (self.wrong / self.scored) if self.scored else None,
            "error": (self.wrong / self.scored) if self.scored else None,
            "error_fresh": self.error_fresh,
            "error_original": self.error_original,
            "answered": answered,
            "halted_after": self.halted_after,
        }


@dataclass(slots=True)
class StreamReport:
    stream: str
    rounds: list[RoundRecord] = field(default_factory=list)
    queries: int = 0
    halted: bool = False
    """The predictor refuses for good (a legacy halted state): a paused round is not a halt."""
    queries_to_halt: int | None = None
    """Queries answered, over the whole run, when the predictor failed for good (None: it never did)."""
    queries_to_pause: int | None = None
    """Queries sent, over the whole run, when a round first paused (None: none did)."""
    details: dict[str, Any] = field(default_factory=dict)
    trace: list[tuple[int, int, int]] = field(default_factory=list)
    """(queries sent so far, round, tops used in that round) after every batch."""
    seconds: float = 0.0
    """Time spent inside the predictor (answering and transitions), for queries_per_second."""

    @property
    def queries_per_second(self) -> float:
        return self.queries / self.seconds if self.seconds > 0 else float("nan")

    @property
    def paused_rounds(self) -> list[int]:
        return [r.round for r in self.rounds if r.paused_after is not None]

    def to_json(self, max_trace: int = 1000) -> dict[str, Any]:
        step = max(1, -(-len(self.trace) // max_trace))
        trace = self.trace[::step]
        if self.trace and trace[-1] != self.trace[-1]:
            trace.append(self.trace[-1])
        return {
            "kind": "stream-run",
            "stream": self.stream,
            "queries": self.queries,
            "halted": self.halted,
            "queries_to_halt": self.queries_to_halt,
            "paused_rounds": self.paused_rounds,
            "queries_to_pause": self.queries_to_pause,
            "rounds": [r.to_json() for r in self.rounds],
            "accuracy_fresh": [None if r.error_fresh is None else 1.0 - r.error_fresh for r in self.rounds],
            "stream_details": self.details,
            "trace": {"queries": [t[0] for t in trace], "round": [t[1] for t in trace],
                      "tops": [t[2] for t in trace]},
        }


def run_stream(
    p: Predictor,
    stream: Stream,
    queries: int,
    *,
    seed: int = 0,
    batch: int = 1024,
    fresh_points: int = 20_000,
    reference: Callable[[np.random.Generator, int], tuple[Points, Labels]] | None = None,
    stop_when_halted: bool = True,
    progress: Callable[[int], None] | None = None,
) -> StreamReport:
    """Answer up to ``queries`` points of ``stream`` with ``p``; adaptive streams see each batch's
    answers before choosing the next batch. ``reference`` (default: the stream's own ``reference``
    if it has one) supplies fresh labeled points to score each round's decision rule on."""
    ref = reference if reference is not None else getattr(stream, "reference", None)
    ref0 = getattr(stream, "reference_original", None)
    g_ref = np.random.default_rng([seed, 3])
    g_shadow = np.random.default_rng([seed, 4])
    report = StreamReport(stream=type(stream).__name__)

    def open_round() -> RoundRecord:
        rec = RoundRecord(round=p.round, tops_allowed=p.spec.c)
        if ref is not None and p.phase is Phase.ANSWERING:
            fx, fy = ref(g_ref, fresh_points)
            rec.error_fresh = float(np.mean(shadow_labels(p, fx, g_shadow) != fy))
        if ref0 is not None and p.phase is Phase.ANSWERING:
            fx, fy = ref0(g_ref, fresh_points)
            rec.error_original = float(np.mean(shadow_labels(p, fx, g_shadow) != fy))
        report.rounds.append(rec)
        return rec

    cur = open_round()
    done = 0
    while done < queries:
        x, y = stream.next_batch(min(batch, queries - done))
        n = x.shape[0]
        if n == 0:
            break
        got: list[Labels] = []
        pos = 0
        while pos < n:
            if p.phase is Phase.TRANSITION_DUE:
                t0 = time.perf_counter()
                p.transition()
                report.seconds += time.perf_counter() - t0
                if p.round != cur.round:
                    cur = open_round()
            was_answering = p.phase is Phase.ANSWERING
            before = p.answered_in_round
            t0 = time.perf_counter()
            res = p.answer(x[pos:])
            report.seconds += time.perf_counter() - t0
            lab = res.labels
            got.append(lab)
            cur.queries += lab.size
            cur.refused += int((lab < 0).sum())
            cur.tops_used = p.tops_in_round
            codes, counts = np.unique(res.refusals[res.refusals != Refusal.NONE], return_counts=True)
            for code, k in zip(codes.tolist(), counts.tolist(), strict=True):
                name = Refusal(code).code
                cur.reasons[name] = cur.reasons.get(name, 0) + k
            paused = np.flatnonzero(res.refusals == Refusal.ROUND_PAUSED)
            if paused.size and cur.paused_after is None:
                cur.paused_after = before + int(paused[0])
                if report.queries_to_pause is None:
                    report.queries_to_pause = done + pos + int(paused[0])
            if y is not None:
                ok = lab >= 0
                cur.scored += int(ok.sum())
                cur.wrong += int((lab[ok] != y[pos : pos + res.consumed][ok]).sum())
            if was_answering and p.phase is Phase.HALTED:
                cur.halted_after = before + int((lab >= 0).sum())
                report.halted = True
                report.queries_to_halt = done + pos + int((lab >= 0).sum())
            pos += res.consumed
        labels = np.concatenate(got) if got else np.zeros(0, np.int8)
        if stream.adaptive:
            stream.observe(labels)
        done += n
        report.trace.append((done, p.round, p.tops_in_round))
        if progress is not None:
            progress(n)
        if report.halted and stop_when_halted:
            break
    report.queries = done
    det = getattr(stream, "report", None)
    if callable(det):
        report.details = dict(det())
    return report


def quantile_of(task: Task, q: float, seed: int = 0, n: int = 200_001) -> float:
    """A quantile of the task's distribution along its first coordinate (by a fixed large sample)."""
    x, _ = task.sample(np.random.default_rng([seed, 0x0A11]), n)
    first = x if x.ndim == 1 else x[:, 0]
    return float(np.quantile(first, q))

