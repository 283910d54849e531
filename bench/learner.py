"""The private learner's fit (the exact exponential-mechanism sampler), as ratios to np.sort.

    python -m bench.learner [--quick]

For each class and n: seconds of ``PrivateLearner.fit`` on n i.i.d. points of the float64 domain
(stumps on R^10), against ``np.sort`` of the same points (the O(n log n) floor every sampler pays:
stumps sort d columns).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from everlast.engine.learner import PrivateLearner

CASES = (("thresholds", 1), ("intervals", 1), ("stumps", 10))


def row(concept: str, d: int, n: int, repeats: int) -> dict[str, object]:
    g = np.random.default_rng(0)
    x = g.random((n, d)) if d > 1 else g.random(n)
    col = x[:, 0] if d > 1 else x
    y = (col >= 0.3).astype(np.int8)
    spec: dict[str, object] = {"name": concept, "d": d} if concept == "stumps" else {"name": concept}
    fit, srt = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        PrivateLearner.fit(spec, x, y, epsilon=1.0, seed=r)
        fit.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        np.sort(x, axis=0)
        srt.append(time.perf_counter() - t0)
    f, s = min(fit), min(srt)
    return {"concept": concept, "d": d, "n": n, "fit_seconds": f, "sort_seconds": s, "ratio": f / s}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="n = 1e4 and 1e5 only, 2 repeats")
    args = ap.parse_args(argv)
    sizes = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6]
    repeats = 2 if args.quick else 3
    out = []
    for concept, d in CASES:
        for n in sizes:
            print(f"learner {concept} d={d} n={n} ...", file=sys.stderr)
            out.append(row(concept, d, n, repeats))
    print(json.dumps({"learner": out}))


if __name__ == "__main__":
    main()
