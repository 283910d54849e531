"""Which mechanism certifies what, at what data cost: GenericBBL beside the generic private learner.

``compare(targets, mechanisms, n)`` plans every requested mechanism for the same targets (and, with
``n``, what that many examples certify) and names the cheapest one that certifies the targets with
proven numbers. The private learner's numbers come from ``engine.planner.learner`` and
``engine.planner.agnostic`` (docs/privacy/learner.md); its n_required, epsilon at n and whether it
meets the targets follow one accuracy bound, ``guarantee`` (this function's default agnostic;
``everlast plan``'s default is validated, the daemon's: its start-up check under an a-priori
``learner.guarantee`` uses the same numbers, and under validated alpha is checked after the fit), and
both bounds are reported. GenericBBL's come from ``engine.planner.plan`` / ``best_epsilon`` unchanged.

Pure: no I/O; the JSON/text helpers build values and strings for ``cli/plan.py``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any

from everlast.engine import roots
from everlast.engine.learner.hypothesis import CLASSES, hypothesis_count
from everlast.engine.learner.ordinals import FLOAT64_POINTS
from everlast.engine.learner.tree import DEFAULT_DEPTH
from everlast.engine.planner import agnostic as ag
from everlast.engine.planner import learner as pl
from everlast.engine.planner.api import TARGET_SLACK, Achievable, Plan, PlanInfeasible, Targets, plan
from everlast.engine.planner.report import fmt
from everlast.engine.planner.search import best_epsilon

MECHANISMS = ("generic-bbl", "private-learner")
GUARANTEES = ("agnostic", "realizable", "validated")
VALIDATED_RATES = (0.05, 0.1, 0.2, 0.5)
EXACT_MARGIN_UP_TO = 100_000
"""Held-out sizes up to which the plan inverts the exact law (Lemma V1); above, the Hoeffding form."""
"""Holdout error rates at which the plan prints the validated certificate's margin."""
__all__ = ["FLOAT64_POINTS", "GUARANTEES", "MECHANISMS", "MechanismCost", "bbl_cost", "bbl_infeasible", "best_at_n",
           "cheapest", "compare", "comparison_json", "comparison_text", "learner_cost", "learner_json",
           "learner_text", "realizable_if"]
LEARNER_NOTE = ("two accuracy bounds, both only for a training set of n i.i.d. draws from the distribution the "
                "queries come from (drift, or a training set that is not such a sample, breaks both): the "
                "realizable one also assumes labels from a hypothesis of the class (for trees: from one stump) -- "
                "real data can contradict it, and nothing checks it; the agnostic one holds for every such "
                "distribution, as an excess over a comparator it names; the privacy guarantees hold for every "
                "data set")
REALIZABLE_IF = {"trees": "the labels are those of one stump"}


def realizable_if(concept: str) -> str:
    """The condition of the realizable bound (Theorem L2; trees: T2, a one-stump target)."""
    return REALIZABLE_IF.get(concept, "the labels are those of a hypothesis of the class")


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
    <= alpha, and with n the excess it proves and the least epsilon that proves an excess <= alpha."""
    d: dict[str, Any] = {
        "theorem": "T3 (docs/privacy/learner.md 8)" if shape.concept == "trees" else "L3 (docs/privacy/learner.md 9)",
        "comparator": ag.COMPARATOR[shape.concept],
        "n_required": ag.n_for_excess(shape, t.alpha, t.epsilon, t.beta),
    }
    if n is not None:
        d["excess_at_n"] = ag.excess(shape, n, t.epsilon, t.beta)
        d["epsilon_at_n"] = _num(ag.epsilon_for_n(shape, n, t.alpha, t.beta))
    return d


def validated_margin(n: int, epsilon: float, beta: float, rate: float, share: float | None = None) -> float:
    """The validated certificate's margin U(c) - c / m (Theorem V, docs/privacy/learner.md 10) at a holdout
    error rate ``rate`` and no noise (c = round(rate m)), for n examples of which ``holdout_size(n, share)``
    are held out; 1.0 when none are."""
    from everlast.engine.learner.validate import DEFAULT_SHARE, holdout_size, upper_bound

    m = holdout_size(n, DEFAULT_SHARE if share is None else share)
    if m == 0:
        return 1.0
    if m > EXACT_MARGIN_UP_TO:  # the Hoeffding form, a valid (looser) bound
        return _hoeffding_margin(m, epsilon, beta)
    c = round(rate * m)
    return upper_bound(c, m, epsilon, beta) - c / m


def _hoeffding_margin(m: int, epsilon: float, beta: float) -> float:
    """t / m + sqrt(ln(2 / beta) / (2m)): the margin of the Hoeffding form of the validated bound (the
    noise's tail and Hoeffding's, each at beta / 2), a valid bound at any holdout error."""
    q = math.exp(-epsilon)
    t = max(0.0, math.log(2.0 / (beta * (1.0 + q))) / epsilon)
    return min(1.0, t / m + math.sqrt(math.log(2.0 / beta) / (2.0 * m)))


@functools.lru_cache(maxsize=256)
def _validated_n(epsilon: float, beta: float, alpha: float) -> int:
    """The least n whose held-out quarter makes the Hoeffding form's margin <= alpha (it decreases in m)."""
    from everlast.engine.learner.validate import DEFAULT_SHARE, holdout_size

    def ok(k: int) -> bool:
        m = holdout_size(k, DEFAULT_SHARE)
        return m > 0 and _hoeffding_margin(m, epsilon, beta) <= alpha

    lo, hi = 1, 128
    while not ok(hi):
        lo, hi = hi, hi * 2
    return roots.smallest_int(ok, lo, hi)


def _validated_epsilon(n: int, beta: float, alpha: float) -> float:
    """The least epsilon (to a relative 10^-6) whose Hoeffding-form margin at n's held-out quarter is
    <= alpha (the margin decreases in epsilon); +inf when none is (no holdout, or the sampling term
    alone exceeds alpha)."""
    from everlast.engine.learner.validate import DEFAULT_SHARE, holdout_size

    m = holdout_size(n, DEFAULT_SHARE)
    if m == 0 or math.sqrt(math.log(2.0 / beta) / (2.0 * m)) >= alpha:
        return math.inf
    hi = 1.0
    while _hoeffding_margin(m, hi, beta) > alpha:
        hi *= 2.0
    lo = hi / 2.0
    while _hoeffding_margin(m, lo, beta) <= alpha and lo > 2.0**-900:
        lo, hi = lo / 2.0, lo
    return roots.smallest_float(lambda e: _hoeffding_margin(m, e, beta) <= alpha, lo, hi, rel_tol=1e-6)


def validated_json(t: Targets, n: int | None) -> dict[str, Any]:
    """The validated certificate for planning: the n from which the margin of its Hoeffding form (valid
    at any holdout error) is at most alpha, and with n the margin at a few holdout error rates. What it
    certifies (error <= the measured holdout error + the margin) is known only after the fit."""
    d: dict[str, Any] = {"theorem": "V (docs/privacy/learner.md 10)", "holdout_share": 0.25,
                         "comparator": "the released model's measured holdout error",
                         "n_required": _validated_n(t.epsilon, t.beta, t.alpha)}
    if n is not None:
        d["margin_at_n"] = {f"{r:g}": validated_margin(n, t.epsilon, t.beta, r) for r in VALIDATED_RATES}
        d["excess_at_n"] = d["margin_at_n"]["0.5"]
        d["epsilon_at_n"] = _num(_validated_epsilon(n, t.beta, t.alpha))
    return d


def learner_cost(t: Targets, n: int | None = None, domain_size: int = FLOAT64_POINTS,
                 depth: int = DEFAULT_DEPTH, guarantee: str = "agnostic") -> MechanismCost:
    """The generic private learner for the targets: (eps, 0) training, (0, 0) queries, and both accuracy
    bounds: realizable (Theorem L2; trees: T2) and agnostic (Theorems L3, T3). ``n_required``,
    ``epsilon_at_n``, ``alpha_at_n`` (agnostic: the excess at n) and so ``meets_at_n`` follow
    ``guarantee``: the same numbers the daemon checks ``learner.alpha`` against."""
    if guarantee not in GUARANTEES:
        raise ValueError(f"unknown guarantee {guarantee!r}; known: {', '.join(GUARANTEES)}")
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
        "guarantee": guarantee,
    }
    real: dict[str, Any] = {"if": realizable_if(t.concept)}
    if t.concept == "trees":
        extra["depth"] = depth
        real.update({"theorem": "T2 (docs/privacy/learner.md 8)",
                     "n_required": ag.tree_n_required(shape, t.epsilon, t.alpha, t.beta)})
        if n is not None:
            real["alpha_at_n"] = ag.tree_best_alpha(shape, n, t.epsilon, t.beta)
    else:
        b = pl.n_required(t.epsilon, t.alpha, t.beta, ln_h)
        real.update({"theorem": "L2 (docs/privacy/learner.md 4)", "n_required": b.n_required,
                     "beta_em": b.beta_em, "beta_uc": b.beta_uc, "t_errors": b.t_errors})
        if n is not None:
            real["epsilon_at_n"] = _num(pl.epsilon_for_n(n, t.alpha, t.beta, ln_h))
            real["alpha_at_n"] = pl.best_alpha(n, t.epsilon, t.beta, ln_h)
    agn = agnostic_json(shape, t, n)
    extra["realizable"], extra["agnostic"] = real, agn
    extra["validated"] = validated_json(t, n)
    chosen = extra[guarantee]
    at_eps = None if n is None or (guarantee == "realizable" and t.concept == "trees") \
        else (chosen["epsilon_at_n"] if chosen["epsilon_at_n"] is not None else math.inf)
    at_alpha = None if n is None else real["alpha_at_n"] if guarantee == "realizable" else chosen["excess_at_n"]
    return MechanismCost("private-learner", chosen["n_required"], t.epsilon, 0.0, 0.0, 0.0, True, True, "", n,
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
            bbl_achievable: Achievable | None = None, guarantee: str = "agnostic") -> tuple[MechanismCost, ...]:
    out = []
    for m in mechanisms:
        if m == "generic-bbl":
            out.append(bbl_cost(t, n, bbl_plan, bbl_achievable))
        elif m == "private-learner":
            out.append(learner_cost(t, n, domain_size, guarantee=guarantee))
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
                    "concept": t.concept, "d": t.d, "guarantee": c.extra.get("guarantee")},
        "warnings": [LEARNER_NOTE] if c.n_required is not None else [c.reason],
    }
    if c.n_required is None:
        d["n_required_reason"] = c.reason
    d["accuracy"] = {"alpha": t.alpha, "beta": t.beta, **c.extra}
    if c.n is not None:
        d["epsilon_achievable"] = None if c.epsilon_at_n is None else _num(c.epsilon_at_n)
        if d["epsilon_achievable"] is None:
            d["epsilon_achievable_reason"] = _no_epsilon_reason(t, c)
        d["epsilon_achievable_n"] = c.n
        d["alpha_achievable"] = c.alpha_at_n
    d.update(comparison_json((c,)))
    return d


def _no_epsilon_reason(t: Targets, c: MechanismCost) -> str:
    if c.extra.get("guarantee") == "validated":
        return (f"Theorem V's margin (Hoeffding form) is <= {t.alpha:g} at beta = {t.beta:g} for no epsilon with "
                f"n = {c.n}: no holdout, or its sampling term alone exceeds it")
    if c.extra.get("guarantee") == "agnostic":
        return (f"Theorem {c.extra['agnostic']['theorem'].split()[0]} proves an excess <= {t.alpha:g} at beta = "
                f"{t.beta:g} for no epsilon with n = {c.n}: its uniform-convergence terms alone exceed it")
    if t.concept == "trees":
        return "not computed for trees under the realizable bound (alpha_achievable is, at the target epsilon)"
    return (f"Theorem L2 proves alpha = {t.alpha:g}, beta = {t.beta:g} for no epsilon with n = {c.n}: even an "
            "error-free release fails its union bound over H")


def _other_bound(c: MechanismCost) -> str:
    """The learner's n under the bound its n_required does not follow (both are always reported)."""
    g = c.extra["guarantee"]
    other = "realizable" if g == "agnostic" else "agnostic"
    o = c.extra[other]
    return (f"private-learner's n_required follows the {g} bound (Theorem {c.extra[g]['theorem'].split()[0]}; "
            f"--guarantee, as the daemon's learner.guarantee); the {other} bound (Theorem {o['theorem'].split()[0]}) "
            f"needs n = {fmt(o['n_required'])}")


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
    for c in costs:
        if c.mechanism == "private-learner" and c.n_required is not None:
            rows.append(f"{_other_bound(c)}.")
            rows.append(f"private-learner: {LEARNER_NOTE}.")
    return "\n".join(rows)


def _validated_line(t: Targets, v: dict[str, Any], n: int | None) -> str:
    head = (f"Validated certificate (Theorem {v['theorem'].split()[0]}; the daemon's default guarantee): "
            f"validated: error <= e (w.p. {fmt(1 - t.beta)}, on i.i.d. queries), e = the released model's error "
            f"measured privately on a held-out quarter of the training set + a margin (no extra epsilon); ")
    if n is None or "margin_at_n" not in v:
        return head + f"the margin is <= {fmt(t.alpha)} at any holdout error from n = {fmt(v['n_required'])}."
    ms = ", ".join(f"{fmt(m)} at {float(r):.0%}" for r, m in v["margin_at_n"].items())
    return head + f"with n = {fmt(n)} the margin is {ms} holdout error (known after the fit)."


def learner_text(t: Targets, c: MechanismCost) -> str:
    x = c.extra
    depth = x.get("depth")
    lines = [f"everlast plan --mechanism private-learner: {t.concept}"
             + (f" of depth {depth}" if depth else "")
             + (f" on R^{t.d}" if t.concept in ("stumps", "trees") else "")
             + f", epsilon = {fmt(t.epsilon)}, alpha = {fmt(t.alpha)}, beta = {fmt(t.beta)}", ""]
    if c.n_required is None:
        lines.append(f"Not available: {c.reason}")
        return "\n".join(lines)
    g, real, agn = x["guarantee"], x["realizable"], x["agnostic"]
    mark = {g: " [n_required: --guarantee " + g + ", as the daemon checks learner.alpha]"}
    lines += [
        f"n_required = {fmt(c.n_required)} (the {g} bound).",
        f"Realizable bound (Theorem {real['theorem'].split()[0]}): error <= alpha = {fmt(t.alpha)} with probability "
        f">= {fmt(1 - t.beta)} needs n = {fmt(real['n_required'])}, IF {real['if']}; real data can contradict "
        f"this condition and nothing checks it.{mark.get('realizable', '')}",
        f"Agnostic bound (Theorem {agn['theorem'].split()[0]}): error <= {agn['comparator']} + excess; the "
        f"excess is <= {fmt(t.alpha)} from n = {fmt(agn['n_required'])} (for every distribution)."
        + mark.get("agnostic", ""),
        _validated_line(t, x["validated"], c.n) + mark.get("validated", ""),
        "All bounds assume the training set is n i.i.d. draws from the distribution the queries come from.",
        f"|H| = {x['hypotheses'] if t.concept == 'trees' else fmt(float(x['hypotheses']))}, ln|H| = "
        f"{x['ln_hypotheses']:.2f}, domain: {x['domain']}.",
        f"  training set:  epsilon = {fmt(t.epsilon)}, delta = 0 (exponential mechanism, exact sampler; "
        + ("one per node, epsilon split over the levels; Theorem T1)" if t.concept == "trees" else "Theorem L1)"),
        "  queries:       epsilon = 0, delta = 0 (each answer depends only on the released hypothesis "
        "and its own query)",
        "  no rounds, no halting; refuses only queries outside the domain (a function of the query and the "
        "public domain alone); queries cannot change the model",
    ]
    if "beta_em" in real:
        lines.append(f"  realizable proof split: beta_em = {fmt(real['beta_em'])}, beta_uc = {fmt(real['beta_uc'])}, "
                     f"t = {real['t_errors']:.1f} training errors")
    if c.n is not None:
        e = c.epsilon_at_n if c.epsilon_at_n is not None else math.inf
        if g == "validated":
            first = (f"the validated certificate's margin (its Hoeffding form, at any holdout error) is <= "
                     f"alpha = {fmt(t.alpha)} from epsilon = {fmt(e)}; " if math.isfinite(e) else
                     f"no epsilon makes the validated certificate's margin <= alpha = {fmt(t.alpha)} (too little "
                     "data: no holdout, or the sampling term alone exceeds it); ")
        else:
            first = (f"the {g} bound proves alpha = {fmt(t.alpha)} from epsilon = {fmt(e)}; " if math.isfinite(e) else
                     "" if c.epsilon_at_n is None else
                     f"no epsilon makes the {g} bound prove alpha = {fmt(t.alpha)} (too little data: "
                     + ("its uniform-convergence terms alone exceed it); " if g == "agnostic" else
                        "its union bound over H fails even for an error-free release); "))
        exc = agn["excess_at_n"]
        vacuous = " (vacuous: >= 1)" if exc >= 1 else ""
        lines.append(f"With n = {fmt(c.n)}: {first}at epsilon = {fmt(t.epsilon)}, realizable alpha = "
                     f"{fmt(real['alpha_at_n'])}, agnostic excess = {exc:.3g}{vacuous}; meets the targets under "
                     f"the {g} bound: {'yes' if c.meets_at_n else 'no'}.")
    lines += ["", f"Note: {LEARNER_NOTE}."]
    return "\n".join(lines)
