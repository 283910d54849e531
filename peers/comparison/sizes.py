"""Computed sample sizes: each method's n at a horizon, the extrapolation past the peers' exact
accountants, the crossover horizon Q*, and the private learner's domain-size crossover."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from everlast.engine import roots
from everlast.engine.planner import PlanInfeasible, Targets, best_epsilon, plan
from everlast.peers import accounting, dagan_feldman, design, sample_complexity, served_learner
from everlast.peers.base import Grid
from everlast.peers.comparison.settings import (
    CROSSOVER_MAX,
    EXACT_MAX_HORIZON,
    LEARNER_NAMES,
    QUERY_PRIVACY_NOTE,
    Settings,
)


@lru_cache(maxsize=16)
def everlast_plan_summary(epsilon: float, delta: float, alpha: float, halts: str) -> dict[str, Any]:
    """The planner's plan (tight accounting) for the targets and halt budget, as a dict: n, the
    certified training epsilon, the conditional query epsilon, and why a number is missing."""
    targets = Targets(epsilon=epsilon, delta=delta, alpha=alpha, halt_budget=halts)  # type: ignore[arg-type]
    try:
        p = plan(targets)
    except PlanInfeasible as exc:
        return {"halts": halts, "n_required": None, "reason": str(exc)}
    c = p.certificate
    r1 = p.rounds[0]
    return {
        "halts": halts,
        "accounting": "tight",
        "design": c.design,
        "n_required": p.n_required,
        "meets_targets": p.meets_targets,
        "epsilon_training": c.epsilon_training,
        "delta_training": c.delta_training,
        "epsilon_queries": c.epsilon_queries,
        "epsilon_queries_reason": c.queries_reason,
        "runnable": c.runnable,
        "not_runnable_reason": c.not_runnable_reason,
        "epsilon_queries_conditional": c.epsilon_queries_conditional,
        "query_privacy_proven": c.query_private,
        "round_1": {"T": r1.T, "lam": r1.lam, "R": r1.R, "c": r1.c, "eps_bt": r1.eps_bt},
        "note": QUERY_PRIVACY_NOTE,
    }


@lru_cache(maxsize=16)
def everlast_n_at_eps(epsilon: float, delta: float, alpha: float, halts: str) -> int | None:
    try:
        return plan(Targets(epsilon=epsilon, delta=delta, alpha=alpha,
                            halt_budget=halts)).n_required  # type: ignore[arg-type]
    except PlanInfeasible:
        return None


def everlast_epsilon_at(n: int, s: Settings, halts: str) -> float:
    """The best epsilon everlast's planner certifies with n examples (+inf: none <= 64). The
    costly bisection of ``best_epsilon`` only runs when epsilon = 64 fits n."""
    n64 = everlast_n_at_eps(64.0, s.delta, s.alpha, halts)
    if n64 is None or n < n64:
        return math.inf
    t = Targets(epsilon=s.epsilon, delta=s.delta, alpha=s.alpha, halt_budget=halts)  # type: ignore[arg-type]
    return best_epsilon(n, t).epsilon


def peer_n_required(name: str, horizon: int, s: Settings) -> tuple[int | None, str]:
    """(n, status) for a peer: status "ok", "impossible" or "unavailable"."""
    if name == "private_learner":
        return None, "impossible"
    if name in LEARNER_NAMES:
        return learner_n(s, s.grid_size if name == "private_learner_grid" else None), "ok"
    try:
        req = sample_complexity.n_required(name, horizon, s.epsilon, s.delta, s.alpha, None)
    except (ArithmeticError, ValueError) as exc:
        return None, f"unavailable: {exc}"
    if req.n_required is None:
        return None, req.computed_or_run
    return req.n_required, "ok"


def learner_n(s: Settings, domain_size: int | None) -> int:
    """The served learner's n (Theorem L2, expected error <= alpha) on a grid, or on float64 (None)."""
    return _learner_n(s.epsilon, s.alpha, domain_size)


@lru_cache(maxsize=64)
def learner_agnostic(s: Settings, domain_size: int | None) -> dict[str, Any]:
    """The learner row's agnostic bound (Theorem L3, docs/privacy/learner.md 9): the n whose excess over the
    best threshold is <= alpha with probability >= 1 - alpha, for labels from any distribution."""
    from everlast.engine.learner.ordinals import FLOAT64_POINTS
    from everlast.engine.planner import agnostic as ag

    shape = ag.ClassShape("thresholds", 1, 1, FLOAT64_POINTS if domain_size is None else domain_size)
    return {"theorem": "L3 (docs/privacy/learner.md 9)", "comparator": ag.COMPARATOR["thresholds"],
            "n_for_excess_alpha": ag.n_for_excess(shape, s.alpha, s.epsilon, s.alpha)}


@lru_cache(maxsize=64)
def _learner_n(epsilon: float, alpha: float, domain_size: int | None) -> int:
    return served_learner.n_required(epsilon, alpha, None if domain_size is None else Grid(0.0, 1.0, domain_size))


@lru_cache(maxsize=4)
def gdp_mu(epsilon: float, delta: float) -> float:
    """mu with delta_mu(epsilon) = delta for mu-Gaussian DP (Dong-Roth-Su 2019, Cor. 2.13):
    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2). Q-fold composition of eps0-DP
    randomized response with eps0 sqrt(Q) -> mu tends to mu-GDP (their Thm 3.5)."""
    from scipy import optimize, special

    def excess(mu: float) -> float:
        return float(special.ndtr(-epsilon / mu + mu / 2) - math.exp(epsilon) * special.ndtr(-epsilon / mu - mu / 2)
                     ) - delta

    return float(optimize.brentq(excess, 1e-6, 100.0, xtol=1e-15, rtol=1e-13))


def eps0_at(horizon: float, s: Settings) -> tuple[float, bool]:
    """(per-query epsilon of a Q-fold adaptive composition meeting (epsilon, delta), exact?)."""
    if horizon <= EXACT_MAX_HORIZON:
        return accounting.max_eps0(max(1, round(horizon)), s.epsilon, s.delta), True
    return gdp_mu(s.epsilon, s.delta) / math.sqrt(horizon), False


def dagan_feldman_n_for_eps0(eps0: float, alpha: float) -> int:
    """Smallest n meeting Dagan-Feldman's per-query target eps0, with the idealized inclusion
    probability eta = 1 - (1 - 1/n)^n0 (the peer's 52-bit index sampler floors it near n = 2^52;
    for the extrapolation we assume an exact sampler, which only favours Dagan-Feldman)."""
    n0, rho = design.df_subset_size(alpha), design.df_flip(alpha)

    def ok(n: int) -> bool:
        eta = -math.expm1(n0 * math.log1p(-1.0 / n))
        return dagan_feldman.per_query_epsilon(design.df_gamma(n, n0, alpha), eta, rho) <= eps0

    return roots.smallest_int_from(ok, max(design.df_min_n(alpha), n0 + 1))


def extended_n(name: str, horizon: float, s: Settings) -> tuple[float, bool]:
    """(n a growing peer needs at horizon Q, exact?) for any Q >= 1: the peers' own formulas up to
    ``EXACT_MAX_HORIZON``, the extrapolations of the module docstring beyond."""
    if horizon <= EXACT_MAX_HORIZON:
        n, _ = peer_n_required(name, max(1, round(horizon)), s)
        if n is None:  # pragma: no cover - the growing peers always have a number
            raise ArithmeticError(f"no n for {name}")
        return float(n), True
    if name == "dwork_feldman":
        e0, _ = eps0_at(horizon, s)
        return float(design.chunk_size(s.alpha) * design.noisy_majority_t(e0, s.alpha)), False
    if name == "dagan_feldman":
        e0, _ = eps0_at(horizon, s)
        return float(dagan_feldman_n_for_eps0(e0, s.alpha)), False
    if name == "sparse_vector":
        q1, q0 = EXACT_MAX_HORIZON, EXACT_MAX_HORIZON // 10
        n1, n0 = _sv_exact(q1, s), _sv_exact(q0, s)
        slope = math.log(n1 / n0) / math.log(q1 / q0)
        return n1 * (horizon / q1) ** slope, False
    raise ValueError(f"{name} does not grow with the horizon")


def _sv_exact(q: int, s: Settings) -> float:
    return float(_sv_n_cached(q, s.epsilon, s.delta, s.alpha))


@lru_cache(maxsize=64)
def _sv_n_cached(q: int, epsilon: float, delta: float, alpha: float) -> int:
    return sample_complexity.sparse_vector_n(q, epsilon, delta, alpha)


def crossover(name: str, n_everlast: int, s: Settings) -> dict[str, Any]:
    """The smallest horizon Q* (to 1e-4 in log10 Q) at which ``name`` needs more than
    ``n_everlast`` examples; bisection on log10 Q over [10^3, ``CROSSOVER_MAX``]."""
    lo, hi = math.log10(min(s.horizons)), math.log10(CROSSOVER_MAX)
    n_lo, _ = extended_n(name, 10**lo, s)
    if n_lo > n_everlast:
        return {"q_star": 10**lo, "how": "exact", "note": "the peer already needs more at the first horizon"}
    n_hi, _ = extended_n(name, 10**hi, s)
    if n_hi <= n_everlast:
        return {"q_star": None, "how": "extrapolated", "note": f"no crossover below Q = {CROSSOVER_MAX:.0e}"}
    q_star = 10 ** roots.smallest_float(lambda x: extended_n(name, 10**x, s)[0] > n_everlast, lo, hi, abs_tol=1e-4)
    exact = q_star <= EXACT_MAX_HORIZON
    n_at, _ = extended_n(name, q_star, s)
    return {"q_star": q_star, "how": "exact" if exact else "extrapolated", "peer_n_at_q_star": n_at}


def learner_crossover_log2(n_everlast: int, s: Settings) -> float:
    """log2 of the domain size at which the served learner's Theorem L2 (expected error <= alpha)
    needs n_everlast examples: the largest ln|H| whose n fits (bisection in log space; |H| = 2(|X| + 1)
    for thresholds). A display number: the float evaluation at n ~ 10^16 is approximate."""
    from everlast.engine.planner import learner as pl

    def fits(ln_h: float) -> bool:
        return pl.expected_error_holds(n_everlast, s.epsilon, s.alpha, ln_h)

    lo, hi = math.log(2.0), 2.0 * math.log(2.0)
    if not fits(lo):
        return 0.0
    lo, hi = roots.grow_until(fits, lo, hi, want=False)
    return roots.largest_float(fits, lo, hi, steps=40, geometric=True) / math.log(2.0) - 1.0
