"""What the private stump's two accuracy bounds say on real data, beside what the stump does
(docs/privacy/learner.md 9: where the realizable bound is contradicted and the agnostic one is not).

    python -m bench.bounds [--quick] [--json] [--fits N] [--epsilon E]

For each data set of ``bench.realdata`` (its 70/30 split of seed 0; n = the training part): the error the
realizable bound (Theorem L2) proves for a stump on all finite float64 at n, epsilon and beta = 0.05,
and the excess the agnostic bound (Theorem L3) proves over the best stump's error; then, on the test
part, the private stump's error (``PrivateLearner.fit``, mean over ``--fits`` seeded fits), the
non-private depth-1 tree's (scikit-learn, ``best-stump`` in ``bench.accuracy``) and the least error of
*any* stump (every coordinate, cut and sign, exactly: the comparator of Theorem L3 measured on the
test part). Errors in %. ``--quick``: Bananas, 3 fits. Needs the ``bench`` extra (river, scikit-learn).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from bench.realdata import DATASETS, accuracy, baseline_fit, load, private_fit

BETA = 0.05


def least_stump_error(x: np.ndarray, y: np.ndarray) -> float:
    """min over stumps (coordinate, cut between distinct values or beyond them, sign) of the error rate."""
    n = y.size
    best = n
    for k in range(x.shape[1]):
        order = np.argsort(x[:, k], kind="stable")
        xs, ys = x[order, k], y[order].astype(np.int64)
        ones = np.concatenate(([0], np.cumsum(ys)))  # ones among the first j points
        j = np.arange(n + 1)
        cut = np.ones(n + 1, dtype=bool)
        cut[1:n] = xs[1:] > xs[:-1]  # a cut between two equal values is no cut
        up = ones + ((n - j) - (ones[-1] - ones))  # label 1 from the cut on: ones left + zeros right
        best = min(best, int(up[cut].min()), int((n - up)[cut].min()))
    return best / n


def bounds(n: int, d: int, epsilon: float) -> tuple[float, float]:
    """(realizable alpha, agnostic excess) for a stump on R^d over float64 at n."""
    from everlast.engine.planner import Targets
    from everlast.engine.planner.mechanisms import learner_cost

    c = learner_cost(Targets(epsilon=epsilon, alpha=0.1, beta=BETA, concept="stumps", d=d), n)
    return float(c.extra["realizable"]["alpha_at_n"]), float(c.extra["agnostic"]["excess_at_n"])


def row(name: str, epsilon: float, fits: int) -> dict[str, Any]:
    s = load(name)
    n, d = s.x_train.shape
    alpha, excess = bounds(n, d, epsilon)
    private = [1.0 - accuracy(private_fit("everlast-stumps", s, epsilon, seed), s) for seed in range(fits)]
    return {"dataset": name, "n": n, "d": d, "epsilon": epsilon, "beta": BETA, "realizable_alpha": alpha,
            "agnostic_excess": excess, "private_stump_test_error": float(np.mean(private)), "fits": fits,
            "sklearn_stump_test_error": 1.0 - accuracy(baseline_fit("best-stump", s), s),
            "least_stump_test_error": least_stump_error(s.x_test, s.y_test)}


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| data set | n | d | realizable bound: error <= | agnostic bound: excess <= | private stump (test) "
           "| scikit-learn stump (test) | best stump on the test part |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['dataset']} | {r['n']:,} | {r['d']} | {100 * r['realizable_alpha']:.2f} | "
                   f"{100 * r['agnostic_excess']:.1f} | {100 * r['private_stump_test_error']:.1f} | "
                   f"{100 * r['sklearn_stump_test_error']:.1f} | {100 * r['least_stump_test_error']:.1f} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Bananas, 3 fits")
    ap.add_argument("--json", action="store_true", help="one JSON object per line and data set")
    ap.add_argument("--fits", type=int, default=None, help="seeded private fits per data set [20; quick: 3]")
    ap.add_argument("--epsilon", type=float, default=1.0, help="epsilon of the fits and the bounds [1]")
    args = ap.parse_args(argv)
    names = ("bananas",) if args.quick else DATASETS
    rows = [row(name, args.epsilon, args.fits or (3 if args.quick else 20)) for name in names]
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(f"Errors in %, epsilon = {args.epsilon:g}, beta = {BETA}; bounds for a stump on all finite float64.")
        print(table(rows))


if __name__ == "__main__":
    main()
