"""The thresholds vote count: the engine's search (``sorted_search``) against a plain binary search.

    python -m bench.search [--quick]

For each number of classifiers T and batch size B: ns per query of ``np.searchsorted(t, x)`` (the
baseline, measured in the same run) and of ``engine.concepts.thresholds.sorted_search``, which
sorts the batch first where ``search_order`` says so; ``ratio`` = baseline / engine (> 1: the
engine is faster). Every batch is fresh random needles: timing one batch over and over lets the
branch predictor learn it and makes the plain search look 2-5x cheaper than it is on a stream.
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


def row(T: int, B: int, total: int, repeats: int) -> dict[str, object]:
    g = np.random.default_rng(T * 7919 + B)
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
    return {"T": T, "batch": B, "plain_ns": plain, "engine_ns": engine, "ratio": plain / engine,
            "sorted": search_order(T, batches[0]) is not None}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer sizes and queries (a smoke run, for CI)")
    args = ap.parse_args(argv)
    Ts = [10, 300, 10**4] if args.quick else [10, 30, 100, 300, 10**3, 10**4, 10**5, 10**6]
    Bs = [64, 4096] if args.quick else [64, 256, 1024, 4096, 65536]
    total, repeats = (200_000, 2) if args.quick else (2_000_000, 3)
    rows: list[dict[str, object]] = []
    for T in Ts:
        print(f"search T={T} ...", file=sys.stderr)
        rows.extend(row(T, B, total, repeats) for B in Bs)
    print(json.dumps({"search": rows}))


if __name__ == "__main__":
    main()
