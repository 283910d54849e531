"""Fit cost of the private learner's stumps and trees on n x d float64 points, against scikit-learn's
non-private DecisionTreeClassifier of the same depth, in the same run.

    python -m bench.fitcost [--quick] [--n N] [--d D]

Each fit runs in a fresh subprocess (so one fit's freed memory never lowers another's peak): the
process makes the data, resets its peak resident set (Linux: ``/proc/self/clear_refs``), fits, and
reports wall seconds and the peak resident memory above what it held before the fit
(``VmHWM`` - ``VmRSS``), plus, for the learner, tracemalloc's peak of the fit's Python and numpy
allocations. ``memory_x_data`` divides by the data's size (n d 8 bytes). Rows: everlast stumps,
everlast trees of depth 3 (epsilon 1), and scikit-learn's tree of depth 1 and 3 (needs the ``bench``
extra); ``ratio_*`` compare each learner row with scikit-learn's tree of the same depth.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

CHILD = r"""
import json, sys, time, tracemalloc
import numpy as np

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return 0

method, depth, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
g = np.random.default_rng(0)
x = g.random((n, d))
y = ((x[:, 0] >= 0.5) & (x[:, 1] >= 0.3) | (x[:, 2] >= 0.9)).astype(np.int8)
if method == "sklearn":
    from sklearn.tree import DecisionTreeClassifier
    fit = lambda: DecisionTreeClassifier(max_depth=depth, random_state=0).fit(x, y)
else:
    from everlast.engine.learner import PrivateLearner
    spec = {"name": "stumps", "d": d} if method == "stumps" else {"name": "trees", "d": d, "depth": depth}
    fit = lambda: PrivateLearner.fit(spec, x, y, epsilon=1.0, seed=1)
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    reset = True
except OSError:
    reset = False
before = status("VmRSS")
tracemalloc.start()
t0 = time.perf_counter()
fit()
secs = time.perf_counter() - t0
traced = tracemalloc.get_traced_memory()[1]
print(json.dumps({"seconds": secs, "peak_rss_extra": status("VmHWM") - before if reset else None,
                  "traced_peak": traced, "data_bytes": x.nbytes}))
"""


def measure(method: str, depth: int, n: int, d: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, method, str(depth), str(n), str(d)], capture_output=True,
                         text=True, timeout=1800, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{method} depth {depth}: {out.stderr[-2000:]}")
    r: dict[str, Any] = json.loads(out.stdout)
    data = r["data_bytes"]
    r.update({"method": method, "depth": depth, "n": n, "d": d,
              "memory_x_data": None if r["peak_rss_extra"] is None else r["peak_rss_extra"] / data,
              "traced_x_data": r["traced_peak"] / data})
    return r


def have_sklearn() -> bool:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="n = 1e5 (default 1e6)")
    ap.add_argument("--n", type=int, default=None)
    ap.add_argument("--d", type=int, default=10)
    args = ap.parse_args(argv)
    n = args.n or (10**5 if args.quick else 10**6)
    rows = []
    for method, depth in (("stumps", 1), ("trees", 3)):
        print(f"fitcost everlast-{method} n={n} d={args.d} ...", file=sys.stderr)
        r = measure(method, depth, n, args.d)
        if have_sklearn():
            print(f"fitcost sklearn depth={depth} ...", file=sys.stderr)
            base = measure("sklearn", depth, n, args.d)
            r["sklearn_seconds"] = base["seconds"]
            r["sklearn_peak_rss_extra"] = base["peak_rss_extra"]
            r["ratio_seconds"] = r["seconds"] / base["seconds"]
            if r["peak_rss_extra"] is not None and base["peak_rss_extra"]:
                r["ratio_memory"] = r["peak_rss_extra"] / base["peak_rss_extra"]
        else:
            r["sklearn"] = "not installed (pip install -e '.[bench]')"
        rows.append(r)
    print(json.dumps({"fitcost": rows}))


if __name__ == "__main__":
    main()
