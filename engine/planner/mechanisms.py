"""Which mechanism certifies what, at what data cost: GenericBBL beside the generic private learner.

``compare(targets, mechanisms, n)`` plans every requested mechanism for the same targets (and, with
``n``, what that many examples certify) and names the cheapest one that certifies the targets with
proven numbers. The private learner's numbers come from ``engine.planner.learner``
(docs/privacy/learner.md), GenericBBL's from ``engine.planner.plan`` / ``best_epsilon`` unchanged.

Pure: no I/O; the JSON/text helpers build values and strings for ``cli/plan.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from everlast.engine.learner.hypothesis import CLASSES, hypothesis_count
from everlast.engine.learner.ordinals import FLOAT64_POINTS
from everlast.engine.learner.tree import DEFAULT_DEPTH
from everlast.engine.planner import agnostic as ag
from everlast.engine.planner import learner as pl
from everlast.engine.planner.api import TARGET_SLACK, Achievable, Plan, PlanInfeasible, Targets, best_epsilon, plan
from everlast.engine.planner.report import fmt

MECHANISMS = ("generic-bbl", "private-learner")
__all__ = ["FLOAT64_POINTS", "MECHANISMS", "MechanismCost", "bbl_cost", "bbl_infeasible", "best_at_n", "cheapest",
           "compare", "comparison_json", "comparison_text", "learner_cost", "learner_json", "learner_text"]
LEARNER_NOTE = ("two accuracy bounds: the realizable one assumes labels from a hypothesis of the class (for "
                "trees: from one stump) -- real data can contradict it, and nothing checks it; the agnostic one "
                "holds for every distribution, as an excess over a comparator it names; the privacy guarantees "
                "hold for every data set")
REALIZABLE_IF = {"trees": "the labels are those of one stump"}


@dataclass(frozen=True, slots=True)
class MechanismCost:
    """What one mechanism certifies for the targets, and at what data cost."""

    mechanism: str
    n_required: int | None
    """None: the mechanism cannot meet the targets (``reason``)."""
    epsilon_training: float
    delta_training: float
    epsilon_queries: float
    """+inf when the query chain is not proven."""
    delta_queries: float
    query_private: bool
    certified: bool
    """Both chains proven within the targets (the candidates for ``cheapest``)."""
    reason: str = ""
    n: int | None = None
    epsilon_at_n: float | None = None
    """The smallest epsilon certified with ``n`` examples (at the targets' alpha, beta)."""
    alpha_at_n: float | None = None
    """The private learner: the smallest alpha proven with ``n`` examples at the target epsilon."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def meets_at_n(self) -> bool | None:
        if self.n is None:
            return None
        return self.n_required is not None and self.certified and self.n >= self.n_required


# -- the private learner ------------------------------------------------------------------------------


def agnostic_json(shape: ag.ClassShape, t: Targets, n: int | None) -> dict[str, Any]:
    """The agnostic bound (Theorem L3, or T3 for trees): its comparator, the n that makes the excess
    <= alpha, and with n the excess it proves."""
    d: dict[str, Any] = {
        "theorem": "T3 (docs/privacy/learner.md 8)" if shape.concept == "trees" else "L3 (docs/privacy/learner.md 9)",
        "comparator": ag.COMPARATOR[shape.concept],
        "n_required": ag.n_for_excess(shape, t.alpha, t.epsilon, t.beta),
    }
    if n is not None:
        d["excess_at_n"] = ag.excess(shape, n, t.epsilon, t.beta)
    return d


def learner_cost(t: Targets, n: int | None = None, domain_size: int = FLOAT64_POINTS,
                 depth: int = DEFAULT_DEPTH) -> MechanismCost:
    """The generic private learner for the targets: (eps, 0) training, (0, 0) queries, the realizable
    n (Theorem L2; trees: T2) and the agnostic one (Theorems L3, T3)."""
    if t.concept not in CLASSES:
        why = f"the private learner supports {', '.join(CLASSES)} (not {t.concept})"
        return MechanismCost("private-learner", None, math.inf, 0.0, 0.0, 0.0, True, False, why, n)
    shape = ag.ClassShape(t.concept, t.d, depth, domain_size)
    size = hypothesis_count(t.concept, domain_size, t.d, depth)
    ln_h = math.log(size)
    extra: dict[str, Any] = {
        "hypotheses": str(size) if size < 10**60 else f"{size:.4e}",
        "ln_hypotheses": ln_h,
        "domain_size": str(domain_size),
        "domain": "all finite float64" if domain_size == FLOAT64_POINTS else f"{domain_size} points",
        "note": LEARNER_NOTE,
    }
    at_eps = at_alpha = None
    if t.concept == "trees":
        extra["depth"] = depth
        n_real = ag.tree_n_required(shape, t.epsilon, t.alpha, t.beta)
        extra["theorem"] = "T2 (docs/privacy/learner.md 8)"
        if n is not None:
            at_alpha = ag.tree_best_alpha(shape, n, t.epsilon, t.beta)
    else:
        b = pl.n_required(t.epsilon, t.alpha, t.beta, ln_h)
        n_real = b.n_required or 0
        extra.update({"theorem": "L2 (docs/privacy/learner.md section 4)", "beta_em": b.beta_em,
                      "beta_uc": b.beta_uc, "t_errors": b.t_errors})
        if n is not None:
            at_eps = pl.best_epsilon(n, t.alpha, t.beta, ln_h)
            at_alpha = pl.best_alpha(n, t.epsilon, t.beta, ln_h)
    extra["realizable_if"] = REALIZABLE_IF.get(t.concept, "the labels are those of a hypothesis of the class")
    extra["agnostic"] = agnostic_json(shape, t, n)
    return MechanismCost("private-learner", n_real, t.epsilon, 0.0, 0.0, 0.0, True, True, "", n,
                         at_eps, at_alpha, extra)


# -- GenericBBL ---------------------------------------------------------------------------------------


def bbl_infeasible(t: Targets, reason: str, n: int | None = None,
                   achievable: Achievable | None = None) -> MechanismCost:
    """GenericBBL when no schedule meets the targets (``PlanInfeasible``)."""
    return MechanismCost("generic-bbl", None, math.inf, t.delta, math.inf, t.delta, False, False, reason, n,
                         None if achievable is None else achievable.epsilon)


def bbl_cost(t: Targets, n: int | None = None, p: Plan | None = None,
             achievable: Achievable | None = None) -> MechanismCost:
    """GenericBBL's default design for the targets (or the given plan); ``n``: its best epsilon."""
    if p is None:
        try:
            p = plan(t)
        except PlanInfeasible as exc:
            return bbl_infeasible(t, str(exc), n, achievable)
    if n is not None and achievable is None:
        achievable = best_epsilon(n, t)
    c = p.certificate
    bound = t.epsilon * (1.0 + TARGET_SLACK)
    certified = c.query_private and c.epsilon_training <= bound and c.epsilon_queries <= bound
    reason = "" if certified else (c.queries_reason or "the certified epsilons exceed the target")
    extra = {"design": f"{c.halting}+{c.restarts}", "accounting": t.accounting}
    return MechanismCost("generic-bbl", p.n_required, c.epsilon_training, c.delta_training,
                         c.epsilon_queries if c.query_private else math.inf, c.delta_queries,
                         c.query_private, certified, reason, n,
                         None if achievable is None else achievable.epsilon, None, extra)


# -- comparison ---------------------------------------------------------------------------------------


def compare(t: Targets, mechanisms: tuple[str, ...] = MECHANISMS, n: int | None = None,
            domain_size: int = FLOAT64_POINTS, bbl_plan: Plan | None = None,
            bbl_achievable: Achievable | None = None) -> tuple[MechanismCost, ...]:
    out = []
    for m in mechanisms:
        if m == "generic-bbl":
            out.append(bbl_cost(t, n, bbl_plan, bbl_achievable))
        elif m == "private-learner":
            out.append(learner_cost(t, n, domain_size))
        else:
            raise ValueError(f"unknown mechanism {m!r}; known: {', '.join(MECHANISMS)}")
    return tuple(out)


def cheapest(costs: tuple[MechanismCost, ...]) -> MechanismCost | None:
    """The certified mechanism with the smallest n_required."""
    ok = [c for c in costs if c.certified and c.n_required is not None]
    return min(ok, key=lambda c: c.n_required or 0) if ok else None


def best_at_n(costs: tuple[MechanismCost, ...]) -> MechanismCost | None:
    """With ``n``: the mechanism certifying the smallest epsilon (training and queries) at n."""
    ok = [c for c in costs if c.epsilon_at_n is not None and math.isfinite(c.epsilon_at_n)]
    return min(ok, key=lambda c: c.epsilon_at_n or 0.0) if ok else None


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def cost_json(c: MechanismCost) -> dict[str, Any]:
    d: dict[str, Any] = {
        "mechanism": c.mechanism, "n_required": c.n_required, "certified": c.certified,
        "epsilon_training": _num(c.epsilon_training), "delta_training": c.delta_training,
        "epsilon_queries": _num(c.epsilon_queries), "delta_queries": c.delta_queries,
        "query_private": c.query_private,
    }
    if c.reason:
        d["reason"] = c.reason
    if c.n is not None:
        d["n"] = c.n
        d["meets_targets_at_n"] = c.meets_at_n
        d["epsilon_at_n"] = None if c.epsilon_at_n is None else _num(c.epsilon_at_n)
        if c.alpha_at_n is not None:
            d["alpha_at_n"] = c.alpha_at_n
    d.update(c.extra)
    return d


def comparison_json(costs: tuple[MechanismCost, ...]) -> dict[str, Any]:
    """Keys added to ``everlast plan --json`` by ``--mechanism``."""
    best = cheapest(costs)
    d: dict[str, Any] = {"mechanisms": [cost_json(c) for c in costs],
                         "cheapest_mechanism": None if best is None else best.mechanism}
    if any(c.n is not None for c in costs):
        at = best_at_n(costs)
        d["best_mechanism_at_n"] = None if at is None else at.mechanism
    return d


def learner_json(t: Targets, c: MechanismCost) -> dict[str, Any]:
    """The whole ``everlast plan --mechanism private-learner --json`` object (the GenericBBL
    contract's keys, with the learner's values, plus its own)."""
    eps = c.epsilon_training
    d: dict[str, Any] = {
        "mechanism": "private-learner",
        "n_required": c.n_required,
        "n": c.n_required,
        "epsilon": _num(eps), "epsilon_training": _num(eps), "epsilon_queries": 0.0,
        "delta": 0.0, "delta_training": 0.0, "delta_queries": 0.0,
        "query_private": True,
        "accounting": "exponential-mechanism",
        "meets_targets": c.certified,
        "steps": [
            {"chain": "training", "name": "release one hypothesis",
             "lemma": ("Theorem T1: one exponential mechanism per node, parallel within a level, sequential "
                       "across levels (docs/privacy/learner.md 8)" if t.concept == "trees" else
                       "Theorem L1: exponential mechanism, sensitivity 1 (McSherry-Talwar 2007), exact sampler "
                       "(docs/privacy/learner.md 2-3)"), "epsilon": _num(eps), "delta": 0.0},
            {"chain": "queries", "name": "answer every query with it",
             "lemma": "Theorem L1: an answer is a function of the released hypothesis and its own query",
             "epsilon": 0.0, "delta": 0.0},
        ],
        "schedule": [],
        "targets": {"epsilon": t.epsilon, "delta": t.delta, "alpha": t.alpha, "beta": t.beta,
                    "concept": t.concept, "d": t.d},
        "warnings": [LEARNER_NOTE] if c.n_required is not None else [c.reason],
    }
    if c.n_required is None:
        d["n_required_reason"] = c.reason
    d["accuracy"] = {"alpha": t.alpha, "beta": t.beta, **c.extra}
    if c.n is not None:
        d["epsilon_achievable"] = None if c.epsilon_at_n is None else _num(c.epsilon_at_n)
        if d["epsilon_achievable"] is None:
            d["epsilon_achievable_reason"] = (f"Theorem L2 proves alpha = {t.alpha:g}, beta = {t.beta:g} for no "
                                              f"epsilon with n = {c.n}: even an error-free release fails its "
                                              "union bound over H")
        d["epsilon_achievable_n"] = c.n
        d["alpha_achievable"] = c.alpha_at_n
    d.update(comparison_json((c,)))
    return d


def _eps(x: float) -> str:
    return fmt(x) if math.isfinite(x) else "not proven"


def comparison_text(costs: tuple[MechanismCost, ...]) -> str:
    with_n = any(c.n is not None for c in costs)
    head = "| mechanism | training eps, delta | query eps, delta | n_required | certifies the targets |"
    sep = "|---|---|---|---|---|"
    if with_n:
        n = next(c.n for c in costs if c.n is not None)
        head += f" best eps at n = {fmt(n)} |"
        sep += "---|"
    rows = [head, sep]
    for c in costs:
        cert = "yes" if c.certified else f"no: {c.reason}"
        row = (f"| {c.mechanism} | {_eps(c.epsilon_training)}, {fmt(c.delta_training)} | "
               f"{_eps(c.epsilon_queries)}, {fmt(c.delta_queries)} | "
               f"{fmt(c.n_required) if c.n_required is not None else 'infeasible'} | {cert} |")
        if with_n:
            e = c.epsilon_at_n
            row += f" {'-' if e is None else fmt(e) if math.isfinite(e) else 'none'} |"
        rows.append(row)
    best = cheapest(costs)
    rows.append("")
    rows.append(f"Cheapest certified mechanism: {best.mechanism} (n = {fmt(best.n_required)})." if best else
                "No mechanism certifies these targets.")
    if with_n:
        top = best_at_n(costs)
        if top is not None and top.epsilon_at_n is not None:
            rows.append(f"With n = {fmt(top.n)}: {top.mechanism} certifies the smallest epsilon "
                        f"({fmt(top.epsilon_at_n)}).")
    if any(c.mechanism == "private-learner" and c.n_required is not None for c in costs):
        rows.append(f"private-learner: {LEARNER_NOTE}.")
    return "\n".join(rows)


def learner_text(t: Targets, c: MechanismCost) -> str:
    depth = c.extra.get("depth")
    lines = [f"everlast plan --mechanism private-learner: {t.concept}"
             + (f" of depth {depth}" if depth else "")
             + (f" on R^{t.d}" if t.concept in ("stumps", "trees") else "")
             + f", epsilon = {fmt(t.epsilon)}, alpha = {fmt(t.alpha)}, beta = {fmt(t.beta)}", ""]
    if c.n_required is None:
        lines.append(f"Not available: {c.reason}")
        return "\n".join(lines)
    x = c.extra
    ag_x = x["agnostic"]
    lines += [
        f"Realizable bound (Theorem {x['theorem'].split()[0]}): error <= alpha = {fmt(t.alpha)} with probability "
        f">= {fmt(1 - t.beta)} needs n = {fmt(c.n_required)}, IF {x['realizable_if']}; real data can contradict "
        "this condition and nothing checks it.",
        f"Agnostic bound (Theorem {ag_x['theorem'].split()[0]}): error <= {ag_x['comparator']} + excess; the "
        f"excess is <= {fmt(t.alpha)} from n = {fmt(ag_x['n_required'])} (holds for every distribution).",
        f"|H| = {x['hypotheses'] if t.concept == 'trees' else fmt(float(x['hypotheses']))}, ln|H| = "
        f"{x['ln_hypotheses']:.2f}, domain: {x['domain']}.",
        f"  training set:  epsilon = {fmt(t.epsilon)}, delta = 0 (exponential mechanism, exact sampler; "
        + ("one per node, epsilon split over the levels; Theorem T1)" if t.concept == "trees" else "Theorem L1)"),
        "  queries:       epsilon = 0, delta = 0 (each answer depends only on the released hypothesis "
        "and its own query)",
        "  no rounds, no halting, no refusals; queries cannot change the model",
    ]
    if "beta_em" in x:
        lines.append(f"  realizable proof split: beta_em = {fmt(x['beta_em'])}, beta_uc = {fmt(x['beta_uc'])}, "
                     f"t = {x['t_errors']:.1f} training errors")
    if c.n is not None:
        e = c.epsilon_at_n if c.epsilon_at_n is not None else math.inf
        first = (f"epsilon = {fmt(e)} at alpha = {fmt(t.alpha)}; " if math.isfinite(e) else
                 "" if t.concept == "trees" else
                 f"no epsilon proves alpha = {fmt(t.alpha)} (too little data for the union bound over H); ")
        exc = ag_x["excess_at_n"]
        lines.append(f"With n = {fmt(c.n)}: {first}realizable alpha = {fmt(c.alpha_at_n)} at epsilon = "
                     f"{fmt(t.epsilon)}; agnostic excess = {exc:.3g}" + (" (vacuous: >= 1)" if exc >= 1 else "") + ".")
    lines += ["", f"Note: {LEARNER_NOTE}."]
    return "\n".join(lines)
