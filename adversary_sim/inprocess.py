"""Run a query stream through an in-process predictor and score it round by round."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adversary_sim.iid import Task
from engine.diagnostics import shadow_labels
from engine.phases import Phase
from engine.predictor import Predictor


@dataclass(slots=True)
class RoundStats:
    round: int
    queries: int = 0
    refused: int = 0
    tops_used: int = 0
    tops_allowed: int = 0
    wrong: int = 0
    error_fresh: float | None = None

    def to_json(self) -> dict[str, Any]:
        answered = self.queries - self.refused
        return {
            "round": self.round,
            "queries": self.queries,
            "refused": self.refused,
            "tops_used": self.tops_used,
            "tops_allowed": self.tops_allowed,
            "error_answers": (self.wrong / answered) if answered else None,
            "error_fresh": self.error_fresh,
        }


@dataclass(slots=True)
class RunReport:
    rounds: list[RoundStats] = field(default_factory=list)
    halted: bool = False
    exhausted: bool = False
    queries: int = 0
    seconds: float = 0.0

    @property
    def queries_per_second(self) -> float:
        return self.queries / self.seconds if self.seconds > 0 else float("nan")


def run_iid(
    p: Predictor,
    task: Task,
    queries: int,
    *,
    seed: int,
    batch: int = 1 << 16,
    fresh_points: int = 20_000,
    progress: Callable[[int], None] | None = None,
) -> RunReport:
    """Answer ``queries`` i.i.d. queries from ``task`` and score the answers against the hidden
    concept; at the start of each round, score the round's decision rule on fresh points (read-
    only, with its own noise: ``engine.diagnostics.shadow_labels``). Only the time spent inside
    the predictor (answering and transitions) counts towards ``queries_per_second``."""
    g_stream = np.random.default_rng([seed, 1])
    g_fresh = np.random.default_rng([seed, 2])
    g_shadow = np.random.default_rng([seed, 3])
    fresh_x, fresh_y = task.sample(g_fresh, fresh_points)
    report = RunReport()

    def open_round() -> RoundStats:
        err = float(np.mean(shadow_labels(p, fresh_x, g_shadow) != fresh_y))
        st = RoundStats(round=p.round, tops_allowed=p.spec.c, error_fresh=err)
        report.rounds.append(st)
        return st

    cur = open_round()
    done = 0
    while done < queries:
        x, y = task.sample(g_stream, min(batch, queries - done))
        pos = 0
        while pos < x.shape[0]:
            if p.phase is Phase.TRANSITION_DUE:
                t0 = time.perf_counter()
                p.transition()
                report.seconds += time.perf_counter() - t0
                if p.round != cur.round:
                    cur = open_round()
            t0 = time.perf_counter()
            res = p.answer(x[pos:])
            report.seconds += time.perf_counter() - t0
            _score(cur, res.labels, y[pos : pos + res.consumed])
            cur.tops_used = p.tops_in_round
            pos += res.consumed
        done += x.shape[0]
        if progress is not None:
            progress(x.shape[0])
    report.queries = done
    report.halted = p.phase is Phase.HALTED
    report.exhausted = p.phase is Phase.EXHAUSTED
    return report


def _score(st: RoundStats, labels: NDArray[np.int8], truth: NDArray[np.int8]) -> None:
    refused = labels < 0
    st.queries += labels.size
    st.refused += int(refused.sum())
    st.wrong += int(((labels != truth) & ~refused).sum())
