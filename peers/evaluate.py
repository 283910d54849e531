"""Score a peer on a stream of i.i.d. queries from a task: how many it answers before refusing, and
how often those answers are wrong against the task's hidden concept."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.adversary_sim.iid import Task
from everlast.peers.base import StreamPredictor

BATCH = 1 << 16


def query_points(peer: StreamPredictor, task: Task, queries: int | NDArray[np.float64], seed: int | None
                 ) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    """The query points and their true labels: ``queries`` i.i.d. draws from the task (own stream,
    seeded by ``seed``), or the given points. A peer with a finite ``grid`` gets its queries snapped
    onto the grid (and labeled there), since it is defined on the grid only."""
    if isinstance(queries, int | np.integer):
        x = task.sample(np.random.default_rng([0 if seed is None else seed, 0x9E75]), int(queries))[0]
    else:
        x = np.asarray(queries, dtype=np.float64)
    grid = getattr(peer, "grid", None)
    if grid is not None:
        x = grid.snap(x)
    return x, task.concept.label(task.target, x)


def run_peer(peer: StreamPredictor, task: Task, queries: int | NDArray[np.float64], seed: int | None = None,
             batch: int = BATCH) -> dict[str, Any]:
    """Answer the queries in batches of ``batch`` and score them.

    Returns {"name", "queries", "answered", "answered_before_refusal", "refused", "errors",
    "error_rate" (errors / answered; None if nothing was answered), "error_rate_before_refusal",
    "epsilon", "delta", "protects_queries", "max_queries", "seconds", "queries_per_second"}.
    """
    x, truth = query_points(peer, task, queries, seed)
    n = x.shape[0]
    labels = np.empty(n, dtype=np.int8)
    t0 = time.perf_counter()
    for s in range(0, n, batch):
        labels[s : s + batch] = peer.answer(x[s : s + batch])
    seconds = time.perf_counter() - t0
    answered = labels >= 0
    refused_at = int(np.argmin(answered)) if not answered.all() else n
    wrong = answered & (labels != truth)
    n_ans = int(answered.sum())
    errs_before = int(wrong[:refused_at].sum())
    acc = peer.privacy
    return {
        "name": peer.name,
        "queries": n,
        "answered": n_ans,
        "answered_before_refusal": refused_at,
        "refused": n - n_ans,
        "errors": int(wrong.sum()),
        "error_rate": float(wrong.sum()) / n_ans if n_ans else None,
        "error_rate_before_refusal": errs_before / refused_at if refused_at else None,
        "epsilon": acc.epsilon,
        "delta": acc.delta,
        "protects_queries": acc.protects_queries,
        "max_queries": acc.max_queries,
        "seconds": seconds,
        "queries_per_second": n / seconds if seconds > 0 else None,
    }
