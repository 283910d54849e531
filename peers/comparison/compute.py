"""The whole comparison: everything ``everlast compare`` reports, as one JSON-ready dict."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from everlast.adversary_sim.iid import Task, make_task
from everlast.engine.concepts import Thresholds
from everlast.peers.comparison.runs import run_horizon, run_one
from everlast.peers.comparison.settings import (
    COMPUTED,
    EVERLAST_NAMES,
    EXACT_MAX_HORIZON,
    GROWING,
    HALTS,
    LEARNER_NAMES,
    METHODS,
    QUERY_PRIVACY_NOTE,
    RUN,
    Settings,
    settings_dict,
)
from everlast.peers.comparison.sizes import (
    crossover,
    eps0_at,
    everlast_epsilon_at,
    everlast_n_at_eps,
    everlast_plan_summary,
    extended_n,
    gdp_mu,
    learner_agnostic,
    learner_crossover_log2,
    learner_n,
    peer_n_required,
)

Progress = Callable[[int], AbstractContextManager[Callable[[], None]]]
"""A progress bar for ``total`` runs: a context manager yielding the tick called after each run."""


@contextmanager
def no_progress(total: int) -> Iterator[Callable[[], None]]:
    """The default: no bar."""
    yield lambda: None


def domain_effect(s: Settings, everlast: dict[str, dict[str, Any]], task: Task,
                  tick: Callable[[], None]) -> dict[str, Any]:
    """Computed n vs |X| for the private learner and everlast, and runs of the learner."""
    finite = sorted(d for d in s.domain_sizes if d is not None)
    run_queries = min(s.queries, 100_000)
    n_fixed = learner_n(s, finite[0]) if finite else None
    rows: list[dict[str, Any]] = []
    for d in s.domain_sizes:
        n_pl = learner_n(s, d) if d is not None else None
        row: dict[str, Any] = {
            "domain_size": d,
            "log2_domain_size": None if d is None else math.log2(d),
            "private_learner_n": n_pl,
            "private_learner_computed_or_run": COMPUTED,
            **{f"{name}_n": everlast[name].get("n_required") for name in EVERLAST_NAMES},
        }
        if d is not None and n_pl is not None:
            sub = Settings(**{**settings_dict(s), "grid_size": d})
            r_own = run_one("private_learner_grid", n_pl, run_queries, sub, task)
            tick()
            row["run_at_computed_n"] = r_own
            if n_fixed is not None:
                row["run_at_fixed_n"] = run_one("private_learner_grid", n_fixed, run_queries, sub, task)
                tick()
            row["private_learner_computed_or_run"] = RUN
        else:
            row["note"] = "infinite domain: no private learner for thresholds on the reals"
        rows.append(row)
    out: dict[str, Any] = {
        "rows": rows,
        "fixed_n": n_fixed,
        "run_queries": run_queries,
        "float64_n": learner_n(s, None),
        "note": ("everlast's n does not depend on |X| (the planner's inputs are epsilon, delta, alpha, beta "
                 "and the VC dimension, 1 for thresholds on any ordered domain); the learner's bound grows "
                 "with ln|X| (Theorem L2, docs/privacy/learner.md 4), but on i.i.d. data from a smooth distribution "
                 "its runs do not show it"),
    }
    for name in EVERLAST_NAMES:
        n_ev = everlast[name].get("n_required")
        out[f"log2_domain_crossover_{name}"] = None if n_ev is None else learner_crossover_log2(n_ev, s)
    return out


def _run_count(s: Settings, ns_ok: dict[str, list[tuple[int, int]]]) -> int:
    finite = [d for d in s.domain_sizes if d is not None]
    return len(METHODS) * len(s.n_values) + sum(len(v) for v in ns_ok.values()) + 2 * len(finite)


def compute(s: Settings, beyond: bool = True, progress: Progress = no_progress) -> dict[str, Any]:
    """Everything ``everlast compare`` reports, as one JSON-ready dict (see the module docstring).
    ``beyond``: also tabulate the growing peers' n at decades past the last horizon (for plots);
    ``progress``: a bar over the runs (the command's is on stderr)."""
    t_start = time.perf_counter()
    task = make_task(Thresholds(), "uniform", s.seed)
    everlast = {name: everlast_plan_summary(s.epsilon, s.delta, s.alpha, halts) for name, halts in HALTS}

    # computed n per method and horizon; which (method, horizon) pairs are small enough to run
    table: dict[str, tuple[list[int | None], list[str]]] = {}
    to_run: dict[str, list[tuple[int, int]]] = {}
    for m in METHODS:
        ns: list[int | None] = []
        status: list[str] = []
        for q in s.horizons:
            if m.name in EVERLAST_NAMES:
                n_ev = everlast[m.name].get("n_required")
                ns.append(n_ev)
                status.append("ok" if n_ev is not None else "unavailable")
                continue
            n, st = peer_n_required(m.name, q, s)
            ns.append(n)
            status.append(st)
            if n is not None and n <= s.max_run_n and q <= s.queries:
                to_run.setdefault(m.name, []).append((q, n))
        table[m.name] = (ns, status)

    methods: list[dict[str, Any]] = []
    with progress(_run_count(s, to_run)) as tick:
        for m in METHODS:
            ns, status = table[m.name]
            checks: list[dict[str, Any] | None] = [None] * len(s.horizons)
            cor = [COMPUTED] * len(s.horizons)
            for q, n in to_run.get(m.name, []):
                i = s.horizons.index(q)
                checks[i] = run_horizon(m.name, n, q, s, task)
                tick()
                if checks[i] is not None and checks[i]["status"] == "ok":  # type: ignore[index]
                    cor[i] = RUN
            runs = []
            for n in s.n_values:
                runs.append(run_one(m.name, n, s.queries, s, task))
                tick()
            entry: dict[str, Any] = {
                "name": m.name,
                "label": m.label,
                "n_required": ns,
                "computed_or_run": cor,
                "status": status,
                "run_checks": checks,
                "queries_answered_at_n": [r["answered_before_refusal"] for r in runs],
                "runs": runs,
                "protects_queries": m.protects_queries,
                "privacy": m.privacy,
                "grows_with_horizon": m.name in GROWING,
            }
            if m.name == "private_learner_grid":
                entry["domain_size"] = s.grid_size
            if m.name in LEARNER_NAMES:
                entry["n_criterion"] = ("Theorem L2 (docs/privacy/learner.md 4) at alpha' + beta' = alpha: expected "
                                        "error <= alpha, the table's criterion (realizable: the task's labels come "
                                        "from a threshold)")
                entry["agnostic"] = learner_agnostic(s, s.grid_size if m.name == "private_learner_grid" else None)
            if m.name in EVERLAST_NAMES:
                entry["plan"] = everlast[m.name]
                entry["query_privacy_proven"] = bool(everlast[m.name].get("query_privacy_proven"))
                entry["notes"] = QUERY_PRIVACY_NOTE
                entry["runs_note"] = ("runs use an explicit small schedule (everlast_run_schedule), not the "
                                      "planner's: its certified epsilon is in each run and does NOT meet the target")
            methods.append(entry)
        domain = domain_effect(s, everlast, task, tick)

    crossovers: list[dict[str, Any]] = []
    for name in EVERLAST_NAMES:
        n_ev = everlast[name].get("n_required")
        if n_ev is None:
            continue
        for peer in GROWING:
            crossovers.append({"peer": peer, "everlast": name, "everlast_n": n_ev, **crossover(peer, n_ev, s)})

    at_df = {name: [everlast_epsilon_at(n, s, dict(HALTS)[name]) if n is not None else None
                    for n in table["dwork_feldman"][0]] for name in EVERLAST_NAMES}

    result: dict[str, Any] = {
        "epsilon": s.epsilon,
        "delta": s.delta,
        "alpha": s.alpha,
        "horizons": list(s.horizons),
        "methods": methods,
        "n_values": list(s.n_values),
        "queries": s.queries,
        "seed": s.seed,
        "max_run_n": s.max_run_n,
        "task": {"concept": "thresholds", "distribution": task.distribution, "target": task.target},
        "everlast_plans": everlast,
        "crossovers": crossovers,
        "extrapolation": {
            "exact_up_to": EXACT_MAX_HORIZON,
            "gdp_mu": gdp_mu(s.epsilon, s.delta),
            "exact_eps0_sqrtQ_at_exact_max": eps0_at(EXACT_MAX_HORIZON, s)[0] * math.sqrt(EXACT_MAX_HORIZON),
            "method": ("dwork_feldman and dagan_feldman: eps0(Q) = mu/sqrt(Q), the Gaussian-DP limit of "
                       "Q-fold composition; sparse_vector: power law of its last exact decade"),
        },
        "everlast_epsilon_at_dwork_feldman_n": at_df,
        "everlast_n_at_epsilon_64": {h: everlast_n_at_eps(64.0, s.delta, s.alpha, h) for _, h in HALTS},
        "domain_effect": domain,
    }
    if beyond:
        result["beyond_horizons"] = _beyond(s, crossovers)
    result["seconds"] = time.perf_counter() - t_start
    return result


def _beyond(s: Settings, crossovers: list[dict[str, Any]]) -> dict[str, Any]:
    """The growing peers' n at decades from the last horizon to past the largest crossover."""
    q_stars = [c["q_star"] for c in crossovers if c.get("q_star")]
    top = min(40, max(math.ceil(math.log10(max(q_stars))) + 1 if q_stars else 0, 20))
    qs = [10.0**e for e in range(math.ceil(math.log10(max(s.horizons))), top + 1)]
    out: dict[str, Any] = {"horizons": qs}
    for name in GROWING:
        vals = [extended_n(name, q, s) for q in qs]
        out[name] = [v for v, _ in vals]
        out[f"{name}_exact"] = [e for _, e in vals]
    return out
