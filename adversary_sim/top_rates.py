"""Top rates of i.i.d. queries under the target-charged design, measured with the repo's own ERMs.

    python -m everlast.adversary_sim.top_rates [--quick] [--json] [--out FILE]

A round's tops are the queries whose noisy vote count v + z (z ~ DLap(1/eps0), eps0 the accuracy
floor ``engine.planner.fill.accuracy_eps0``) lands in the band [lo, hi] (engine.design.noise_plan).
For each concept class (thresholds, intervals, stumps on R^d), data distribution
(``adversary_sim.iid``), band half-width gamma and chunk size lambda, this fits ``reps`` ensembles of
T classifiers on fresh training sets labeled by the task's hidden concept, sends each ``queries``
i.i.d. queries, and reports p_top = tops / queries next to the planner's rule
(``engine.planner.learning.top_rate``): ``ratio`` = p_top / rule, ``upper`` = a one-sided 1 - 1e-6
binomial upper bound on p_top (Clopper-Pearson; it treats the reps' queries as one sample, which
ignores the small spread between ensembles). docs/halt_budget.md holds the table this prints.

Everything is seeded: the same arguments print the same numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from everlast.adversary_sim.iid import DISTRIBUTIONS, Task, make_task
from everlast.engine import noise
from everlast.engine.concepts import from_spec
from everlast.engine.design import DEFAULT, noise_plan
from everlast.engine.planner.fill import accuracy_eps0
from everlast.engine.planner.learning import top_rate
from everlast.engine.schedule import RoundSpec

UPPER_CONFIDENCE = 1e-6
"""One-sided miss probability of ``Measurement.upper``."""
R_NOMINAL = 1_000_000
"""R the per-query level eps0 is sized for (the accuracy floor at beta = 0.05)."""


@dataclass(frozen=True, slots=True)
class Measurement:
    concept: str
    distribution: str
    d: int
    target_coordinate: int
    label_noise: float
    gamma: float
    lam: int
    T: int
    eps0: float
    queries: int
    tops: int
    p_top: float
    upper: float
    rule: float
    ratio: float
    worst_ensemble_ratio: float
    """The largest p_top / rule among the reps (one ensemble = one round's classifiers)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def binomial_upper(k: int, n: int, miss: float = UPPER_CONFIDENCE) -> float:
    """Clopper-Pearson one-sided upper bound on p from k successes in n trials."""
    if k >= n:
        return 1.0
    return float(stats.beta.ppf(1.0 - miss, k + 1, n - k))


def task_for(concept: str, distribution: str, d: int, target_coordinate: int, seed: int) -> Task:
    cls = from_spec({"name": concept, "d": d})
    task = make_task(cls, distribution, seed=seed)
    if concept == "stumps" and target_coordinate != 0:
        return Task(cls, distribution, {**task.target, "j": target_coordinate})
    return task


def measure(concept: str, distribution: str, gamma: float, lam: int, *, d: int = 1, T: int = 4000,
            queries: int = 200_000, reps: int = 4, seed: int = 0, target_coordinate: int = 0,
            label_noise: float = 0.0, eps0: float | None = None) -> Measurement:
    """p_top of i.i.d. queries for one configuration (module docstring)."""
    task = task_for(concept, distribution, d, target_coordinate, seed)
    if eps0 is None:
        eps0 = accuracy_eps0(gamma, T, R_NOMINAL, 0.05)
    spec = RoundSpec(T=T, lam=lam, R=R_NOMINAL, c=1, eps_bt=eps0, delta_bt=None, alpha=gamma, m_S=1,
                     m_D=1, gamma=gamma, halt_eps=1.0, halt_threshold=1)
    plan = noise_plan(DEFAULT, spec)
    rule = top_rate(concept, gamma, lam, d)
    tops = 0
    worst = 0.0
    for rep in range(reps):
        g = np.random.default_rng([seed, rep, 0x7095])
        x, y = task.sample(g, T * lam)
        if label_noise > 0.0:
            y = np.where(g.random(y.size) < label_noise, 1 - y, y).astype(np.int8)
        shape = (T, lam) if task.concept.point_dim == 1 else (T, lam, task.concept.point_dim)
        ens = task.concept.fit(x.reshape(shape), y.reshape(T, lam))
        q, _ = task.sample(g, queries)
        v = ens.votes(q)
        z = noise.sample(g, plan.query, queries)
        w = v + z
        k = int(np.count_nonzero((w >= plan.lo) & (w <= plan.hi)))
        tops += k
        worst = max(worst, k / queries / rule)
    n = queries * reps
    p = tops / n
    return Measurement(concept, distribution, d, target_coordinate, label_noise, gamma, lam, T, eps0, n, tops, p,
                       binomial_upper(tops, n), rule, p / rule, worst)


GAMMAS = (0.05, 0.1, 0.2, 0.3)
LAMS = (10, 15, 20, 50, 200)


def grid(quick: bool) -> list[dict[str, Any]]:
    """The configurations of docs/halt_budget.md's tables."""
    out: list[dict[str, Any]] = []
    gammas, lams = ((0.1,), (20, 50)) if quick else (GAMMAS, LAMS)
    dists = ("uniform", "ties", "spike") if quick else tuple(sorted(DISTRIBUTIONS))
    for concept in ("thresholds", "intervals"):
        for dist in dists:
            for gamma in gammas:
                for lam in lams:
                    out.append({"concept": concept, "distribution": dist, "gamma": gamma, "lam": lam})
    for dd in (1, 2, 10) if quick else (1, 2, 5, 20):
        for tc in sorted({0, dd - 1}):
            for lam in lams:
                out.append({"concept": "stumps", "distribution": "uniform", "gamma": 0.1, "lam": lam, "d": dd,
                            "target_coordinate": tc})
    for noise_rate in (0.01, 0.05, 0.1, 0.2):
        for lam in lams:
            out.append({"concept": "thresholds", "distribution": "uniform", "gamma": 0.1, "lam": lam,
                        "label_noise": noise_rate})
    return out


def markdown(rows: list[dict[str, Any]]) -> str:
    """p_top / rule per configuration, one table per (concept, d, target coordinate, label noise):
    rows are distributions (and gamma), columns lambda."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        key = (r["concept"], r["d"], r["target_coordinate"], r["label_noise"])
        groups.setdefault(key, []).append(r)
    out: list[str] = []
    for (concept, d, tc, eta), rs in groups.items():
        lams = sorted({r["lam"] for r in rs})
        title = concept + (f" on R^{d}, target on coordinate {tc}" if concept == "stumps" else "")
        title += f", labels flipped w.p. {eta:g}" if eta else ""
        out.append(f"**{title}** (p_top / rule; rule x lambda in brackets)\n")
        out.append("| distribution | gamma | " + " | ".join(f"lambda={lam}" for lam in lams) + " |")
        out.append("|---|---|" + "---|" * len(lams))
        cells: dict[tuple[str, float], dict[int, dict[str, Any]]] = {}
        for r in rs:
            cells.setdefault((r["distribution"], r["gamma"]), {})[r["lam"]] = r
        for (dist, gamma), by_lam in cells.items():
            vals = [f"{by_lam[lam]['ratio']:.2f} [{by_lam[lam]['rule'] * lam:.3f}]" if lam in by_lam else "-"
                    for lam in lams]
            out.append(f"| {dist} | {gamma:g} | " + " | ".join(vals) + " |")
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a small grid (smoke run)")
    ap.add_argument("--T", type=int, default=4000, help="classifiers per ensemble [4000]")
    ap.add_argument("--queries", type=int, default=200_000, help="queries per ensemble [200000]")
    ap.add_argument("--reps", type=int, default=4, help="ensembles per configuration [4]")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--markdown", type=Path, default=None, metavar="JSON",
                    help="print docs/halt_budget.md's tables from a --json output file and exit")
    args = ap.parse_args(argv)
    if args.markdown is not None:
        print(markdown(json.loads(args.markdown.read_text())["rows"]))
        return
    rows = []
    for cfg in grid(args.quick):
        m = measure(T=args.T, queries=args.queries, reps=args.reps, seed=args.seed, **cfg)
        rows.append(m.to_json())
        print(f"{m.concept:>10} d={m.d:<2} j*={m.target_coordinate:<2} {m.distribution:>8} noise={m.label_noise:<4} "
              f"gamma={m.gamma:<4} lam={m.lam:<3} p_top*lam={m.p_top * m.lam:8.4f} rule*lam={m.rule * m.lam:7.4f} "
              f"ratio={m.ratio:6.3f} worst={m.worst_ensemble_ratio:6.3f}", file=sys.stderr)
    if args.json:
        print(json.dumps({"T": args.T, "queries": args.queries, "reps": args.reps, "seed": args.seed,
                          "rows": rows}))


if __name__ == "__main__":
    main()
