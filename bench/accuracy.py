"""Test accuracy of the private learner against diffprivlib and non-private baselines on real data
sets shipped inside packages, in one run (data sets and methods: ``bench.realdata``).

    python -m bench.accuracy [--quick] [--json] [--fits N] [--plot PATH]

Every private method is fitted ``--fits`` times (default 20, seeds 0..N-1) at each epsilon of 0.5, 1,
2 and 8 on the fixed 70/30 split, and scored on the test part: mean and standard deviation. The
non-private baselines are deterministic and fitted once. Prints a Markdown table (or, with
``--json``, one JSON object per line and (data set, method, epsilon): {"dataset", "method",
"epsilon", "mean", "std", "fits"}, epsilon null for a baseline) and writes a PNG plot of accuracy
against epsilon per data set (``--plot``). ``--quick``: Bananas only, 3 fits, epsilon 1 (what CI
runs). Needs the ``bench`` extra (river, scikit-learn, diffprivlib); without diffprivlib its rows are
left out, and said so.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from bench.realdata import BASELINES, DATASETS, PRIVATE, accuracy, baseline_fit, have, load, private_fit

EPSILONS = (0.5, 1.0, 2.0, 8.0)


def run(datasets: tuple[str, ...], epsilons: tuple[float, ...], fits: int) -> list[dict[str, Any]]:
    from tqdm import tqdm

    methods = [m for m in PRIVATE if m.startswith("everlast-") or have("diffprivlib")]
    rows: list[dict[str, Any]] = []
    total = len(datasets) * (len(methods) * len(epsilons) * fits + len(BASELINES))
    with tqdm(total=total, desc="bench.accuracy", unit="fit", file=sys.stderr, disable=None) as bar:
        for name in datasets:
            s = load(name)
            for m in methods:
                for eps in epsilons:
                    acc = [accuracy(private_fit(m, s, eps, seed), s) for seed in range(fits)]
                    bar.update(fits)
                    rows.append({"dataset": name, "method": m, "epsilon": eps, "mean": float(np.mean(acc)),
                                 "std": float(np.std(acc)), "fits": fits})
            for b in BASELINES:
                rows.append({"dataset": name, "method": b, "epsilon": None, "mean": accuracy(baseline_fit(b, s), s),
                             "std": 0.0, "fits": 1})
                bar.update(1)
    return rows


def table(rows: list[dict[str, Any]], epsilons: tuple[float, ...]) -> str:
    head = "| data set | method | " + " | ".join(f"eps = {e:g}" for e in epsilons) + " | non-private |"
    out = [head, "|" + "---|" * (len(epsilons) + 3)]
    for name in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == name]
        for m in dict.fromkeys(r["method"] for r in mine):
            cells = {r["epsilon"]: r for r in mine if r["method"] == m}
            vals = [f"{100 * cells[e]['mean']:.1f} ± {100 * cells[e]['std']:.1f}" if e in cells else ""
                    for e in epsilons]
            base = f"{100 * cells[None]['mean']:.1f}" if None in cells else ""
            out.append(f"| {name} | {m} | " + " | ".join(vals) + f" | {base} |")
    return "\n".join(out)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["dataset"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        mine = [r for r in rows if r["dataset"] == name]
        for m in dict.fromkeys(r["method"] for r in mine if r["epsilon"] is not None):
            pts = sorted((r["epsilon"], r["mean"], r["std"]) for r in mine if r["method"] == m)
            e, mu, sd = (np.array(v) for v in zip(*pts, strict=True))
            ax.errorbar(e, 100 * mu, yerr=100 * sd, marker="o", capsize=3, label=m,
                        lw=2.2 if m.startswith("everlast") else 1.0)
        for r in (r for r in mine if r["epsilon"] is None and r["method"] in ("best-stump", "tree-3")):
            ax.axhline(100 * r["mean"], ls="--", lw=0.8, color="grey")
            ax.text(0.45, 100 * r["mean"], f" {r['method']} (non-private)", fontsize=7, va="bottom")
        ax.set_xscale("log", base=2)
        ax.set_title(name)
        ax.set_xlabel("epsilon")
        ax.set_ylabel("test accuracy (%)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="Bananas, 3 fits, epsilon 1 (CI)")
    ap.add_argument("--json", action="store_true", help="one JSON object per line and (data set, method, epsilon)")
    ap.add_argument("--fits", type=int, default=None, help="fits per private method and epsilon [20; quick: 3]")
    ap.add_argument("--plot", type=Path, default=None, help="PNG path [docs/img/accuracy.png; quick: none]")
    args = ap.parse_args(argv)
    for mod in ("sklearn", "river"):
        if not have(mod):
            ap.error(f"{mod} is missing: pip install -e '.[bench]'")
    datasets, epsilons = (("bananas",), (1.0,)) if args.quick else (DATASETS, EPSILONS)
    fits = args.fits or (3 if args.quick else 20)
    rows = run(datasets, epsilons, fits)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(table(rows, epsilons))
        if not have("diffprivlib"):
            print("\n(diffprivlib is not installed: its rows are left out; pip install -e '.[bench]')")
    path = args.plot or (None if args.quick else Path("docs/img/accuracy.png"))
    if path is not None:
        plot(rows, path)
        print(f"plot: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
