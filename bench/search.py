"""The thresholds vote count: the engine's search (``sorted_search``) against a plain binary search.

    python -m bench.search [--quick]

For each table, number of classifiers T and batch size B: ns per query of ``np.searchsorted(t, x)``
(the baseline, measured in the same run) and of ``engine.concepts.thresholds.sorted_search``, which
sorts the batch first where ``search_order`` says so; ``ratio`` = baseline / engine (> 1: the
engine is faster). Every batch is fresh random needles: timing one batch over and over lets the
branch predictor learn it and makes the plain search look 2-5x cheaper than it is on a stream.

``table``: ``trained``, the T thresholds the engine fits (``Predictor.create`` on T chunks of 10
uniform points labeled 1[x >= 1/2]: the tables it serves, bunched at the boundary, where a plain
search's branches repeat for every needle on one side), or ``random``, T uniform values (a table
no learner makes; the worst case for a plain search).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts.thresholds import search_order, sorted_search


def trained_table(T: int) -> NDArray[np.float64]:
    """The sorted thresholds of the engine's ensemble for T chunks of 10 uniform points (x >= 1/2)."""
    from everlast.engine.concepts import Thresholds
    from everlast.engine.planner.fill import fill_tests
    from everlast.engine.predictor import Predictor
    from everlast.engine.schedule import RoundSpec, Schedule

    spec = RoundSpec(T=T, lam=10, R=10**12, c=10**9, eps_bt=0.5, delta_bt=None, alpha=0.1, m_S=100, m_D=T * 10)
    x = np.random.default_rng([T, 3]).random(T * 10)
    sched = Schedule((fill_tests(spec),))
    p = Predictor.create(Thresholds(), sched, x, (x >= 0.5).astype(np.int8), seed=0)
    return np.sort(np.asarray(p.ensemble.to_arrays()["t"], dtype=np.float64))


def row(T: int, B: int, total: int, repeats: int, table: str = "random",
        t: NDArray[np.float64] | None = None) -> dict[str, object]:
    g = np.random.default_rng(T * 7919 + B)
    if t is None:
        t = np.sort(g.random(T))
    batches = [g.random(B) for _ in range(max(4, total // B))]

    def per_query(fn: Callable[[NDArray[np.float64]], object]) -> float:
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            for x in batches:
                fn(x)
            best = min(best, time.perf_counter() - t0)
        return best / (len(batches) * B) * 1e9

    plain = per_query(lambda x: np.searchsorted(t, x, side="right"))
    engine = per_query(lambda x: sorted_search(t, x, "right"))
    return {"table": table, "T": T, "batch": B, "plain_ns": plain, "engine_ns": engine, "ratio": plain / engine,
            "sorted": search_order(T, batches[0]) is not None}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and queries (a smoke run, for CI)")
    args = ap.parse_args(argv)
    Ts = [10, 300, 10**4] if args.quick else [10, 30, 100, 300, 10**3, 10**4, 3 * 10**4, 10**5, 10**6]
    Bs = [64, 4096] if args.quick else [64, 256, 1024, 4096, 65536]
    total, repeats = (200_000, 2) if args.quick else (2_000_000, 3)
    rows: list[dict[str, object]] = []
    for table in ("trained", "random"):
        for T in Ts:
            print(f"search {table} T={T} ...", file=sys.stderr)
            t = trained_table(T) if table == "trained" else None
            rows.extend(row(T, B, total, repeats, table, t) for B in Bs)
    print(json.dumps({"search": rows}))


if __name__ == "__main__":
    main()
