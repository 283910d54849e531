"""Run an i.i.d. query stream through an in-process predictor and score it round by round (the
engine of ``everlast simulate``): a thin wrapper of ``adversary_sim.streams.run_stream``."""

from __future__ import annotations

from collections.abc import Callable

from everlast.adversary_sim.iid import Task
from everlast.adversary_sim.streams import IIDStream, StreamReport, run_stream
from everlast.engine.predictor import Predictor


def run_iid(
    p: Predictor,
    task: Task,
    queries: int,
    *,
    seed: int,
    batch: int = 1 << 16,
    fresh_points: int = 20_000,
    progress: Callable[[int], None] | None = None,
) -> StreamReport:
    """Answer ``queries`` i.i.d. queries from ``task``, score the answers against the hidden concept
    and, at the start of each round, the round's decision rule on fresh points (read-only, its own
    noise: ``engine.diagnostics.shadow_labels``). A failed predictor keeps refusing to the end.
    ``queries_per_second`` counts only the time spent inside the predictor."""
    return run_stream(p, IIDStream(task, seed), queries, seed=seed, batch=batch, fresh_points=fresh_points,
                      reference=task.sample, stop_when_halted=False, progress=progress)
