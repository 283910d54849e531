"""How many labeled examples each method needs to answer Q queries at expected error alpha with
(epsilon, delta) privacy for the training set -- *computed* from each method's own accounting and
the accuracy rules of ``peers.design`` (thresholds, realizable, natural logs), not run.

For each method, n_required(Q) is the smallest n for which the method, sized by the rules, answers
at least Q queries (its privacy budget) and its error bound is at most alpha:
  * nonprivate:      n = lam with one classifier, 2/(lam+1) <= alpha (no privacy; independent of Q);
  * dwork_feldman:   eps0(Q) = largest per-query epsilon whose Q-fold composition is (epsilon, delta)
                     (basic / advanced / optimal); T = ceil(4 ln(1/alpha) / eps0); n = lam * T;
  * sparse_vector:   for a cutoff c, the calibrated instance parameters (``sparse_vector.calibrate``);
                     T must make the noisy answers accurate and the unstable-rate bound u satisfy
                     Q u <= c/2; n = lam * min over c of that T;
  * private_learner: smallest n with (|X|+1)(e^{-n alpha/16} + e^{-eps n alpha/8}) <= alpha/2
                     (independent of Q; ``None`` -- impossible -- on an infinite domain);
  * dagan_feldman:   smallest n >= 72 pi/alpha^2 whose per-query eps0(n) (``dagan_feldman``) is at most
                     eps0(Q) above;
  * everlast:        from the planner (``everlast_n_required``), when it is available.
The ``computed_or_run`` field says "computed" for these numbers; the comparison tool marks the
ones it measured by running as "run".
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from everlast.engine import roots
from everlast.peers import accounting, dagan_feldman, design, sparse_vector

METHODS = ("nonprivate", "dwork_feldman", "sparse_vector", "private_learner", "dagan_feldman")
COMPUTED = "computed"
UNAVAILABLE = "unavailable"
IMPOSSIBLE = "impossible"


@dataclass(frozen=True, slots=True)
class Requirement:
    """n needed by one method for one horizon."""

    method: str
    horizon: int
    n_required: int | None
    """``None`` when impossible (infinite domain) or unavailable (no planner)."""
    computed_or_run: str
    """"computed", "impossible" or "unavailable" ("run" is set by the comparison tool)."""
    note: str = ""


def _smallest(ok: Callable[[int], bool], lo: int) -> int:
    """Smallest n >= lo with ok(n), for ok monotone (false then true); ArithmeticError past 2^80."""
    return roots.smallest_int_from(ok, lo, limit=1 << 80)


def nonprivate_n(alpha: float) -> int:
    """lam with 2/(lam+1) <= alpha (one ERM classifier)."""
    design.check_alpha(alpha)
    return _smallest(lambda lam: design.chunk_error_bound(lam) <= alpha, 1)


def dwork_feldman_n(horizon: int, epsilon: float, delta: float, alpha: float) -> int:
    eps0 = accounting.max_eps0(horizon, epsilon, delta)
    return design.chunk_size(alpha) * design.noisy_majority_t(eps0, alpha)


def sparse_vector_t(horizon: int, lam: int, c: int, epsilon: float, delta: float, alpha: float) -> int | None:
    """The smallest T for cutoff c (``None`` if c is too small for the horizon): T >= 4 ln(1/alpha) /
    eps_answer and T/4 >= 1 + w + s, where s makes P[nu - rho > s] <= c/(2Q) - 8/(lam+1)."""
    level = c / (2.0 * horizon) - 4.0 * design.chunk_error_bound(lam)
    if level <= 0.0:
        return None
    p = sparse_vector.calibrate(c, epsilon, delta)
    if level >= 0.5:
        s = 0.0
    else:
        def below(x: float) -> bool:
            return sparse_vector.laplace_difference_sf(x, p.b1, p.b2) <= level

        _, hi = roots.grow_until(below, 0.0, 1.0)  # doubling hi; the search keeps lo = 0
        s = roots.smallest_float(below, 0.0, hi, rel_tol=1e-9)
    t1 = design.noisy_majority_t(p.eps_answer, alpha)
    t2 = math.ceil(4.0 * (1.0 + p.w + s))
    return max(t1, t2)


_C_FACTORS = (1.01, 1.03, 1.1, 1.3, 1.6, 2.0, 3.0, 5.0, 10.0, 30.0, 100.0)


def sparse_vector_design(horizon: int, epsilon: float, delta: float, alpha: float) -> tuple[int, int]:
    """(T, c) minimizing T over cutoffs c = c_min * factor, c_min the least c with c/(2Q) > 8/(lam+1)."""
    lam = design.chunk_size(alpha)
    c_min = math.floor(2.0 * horizon * 4.0 * design.chunk_error_bound(lam)) + 1
    best: tuple[int, int] | None = None
    for f in _C_FACTORS:
        c = max(1, math.ceil(c_min * f))
        T = sparse_vector_t(horizon, lam, c, epsilon, delta, alpha)
        if T is not None and (best is None or best[0] > T):
            best = (T, c)
    if best is None:  # pragma: no cover - c_min * 1.01 is always feasible
        raise ArithmeticError("no feasible cutoff")
    return best


def sparse_vector_n(horizon: int, epsilon: float, delta: float, alpha: float) -> int:
    T, _ = sparse_vector_design(horizon, epsilon, delta, alpha)
    return design.chunk_size(alpha) * T


def private_learner_n(domain_size: int | None, epsilon: float, alpha: float) -> int | None:
    """``None`` for an infinite domain (no private learner exists for thresholds on the reals)."""
    if domain_size is None:
        return None
    return _smallest(lambda n: design.learner_error_bound(n, domain_size, epsilon, alpha) <= alpha, 1)


def dagan_feldman_n(horizon: int, epsilon: float, delta: float, alpha: float) -> int:
    target = accounting.max_eps0(horizon, epsilon, delta)
    n0, rho = design.df_subset_size(alpha), design.df_flip(alpha)

    def ok(n: int) -> bool:
        eta = dagan_feldman.index_inclusion(n, n0)
        return dagan_feldman.per_query_epsilon(design.df_gamma(n, n0, alpha), eta, rho) <= target

    return _smallest(ok, max(design.df_min_n(alpha), n0))


@lru_cache(maxsize=256)
def everlast_n_required(epsilon: float, delta: float, alpha: float) -> int | None:
    """The training-set size the everlast planner asks for (``engine.planner.plan(Targets(...))``,
    its default accounting), or ``None`` if the planner is not importable, raises (e.g. infeasible
    targets), or returns nothing we can read an n from. Everlast's n does not depend on the horizon.
    (The planner is written elsewhere; this is only a hook, looked up at call time.)"""
    try:
        planner: Any = importlib.import_module("everlast.engine.planner")
    except Exception:
        return None
    try:
        targets_cls = getattr(planner, "Targets", None)
        if targets_cls is not None:
            result = planner.plan(targets_cls(epsilon=epsilon, delta=delta, alpha=alpha))
        else:
            result = planner.plan(epsilon=epsilon, delta=delta, alpha=alpha)
    except Exception:
        return None
    return _read_n(result)


def _read_n(result: Any) -> int | None:
    for key in ("n_required", "n", "training_size", "initial_size"):
        val = result.get(key) if isinstance(result, dict) else getattr(result, key, None)
        if isinstance(val, int | float) and math.isfinite(val) and val > 0:
            return math.ceil(val)
    return None


def n_required(method: str, horizon: int, epsilon: float, delta: float, alpha: float,
               domain_size: int | None = None) -> Requirement:
    """One method's requirement for one horizon Q."""
    if horizon < 1:
        raise ValueError("the horizon must be at least 1 query")
    if method == "nonprivate":
        return Requirement(method, horizon, nonprivate_n(alpha), COMPUTED, "no privacy")
    if method == "dwork_feldman":
        return Requirement(method, horizon, dwork_feldman_n(horizon, epsilon, delta, alpha), COMPUTED)
    if method == "sparse_vector":
        return Requirement(method, horizon, sparse_vector_n(horizon, epsilon, delta, alpha), COMPUTED)
    if method == "dagan_feldman":
        return Requirement(method, horizon, dagan_feldman_n(horizon, epsilon, delta, alpha), COMPUTED)
    if method == "private_learner":
        n = private_learner_n(domain_size, epsilon, alpha)
        if n is None:
            return Requirement(method, horizon, None, IMPOSSIBLE, "infinite domain: no private learner exists")
        return Requirement(method, horizon, n, COMPUTED, f"|X| = {domain_size}")
    if method == "everlast":
        n = everlast_n_required(epsilon, delta, alpha)
        if n is None:
            return Requirement(method, horizon, None, UNAVAILABLE, "planner unavailable")
        return Requirement(method, horizon, n, COMPUTED, "from engine.planner")
    raise ValueError(f"unknown method {method!r}; known: {', '.join((*METHODS, 'everlast'))}")


def table(horizons: Sequence[int], epsilon: float, delta: float, alpha: float, domain_size: int | None = None,
          methods: Sequence[str] = (*METHODS, "everlast")) -> list[dict[str, Any]]:
    """Per method, the ``everlast compare --json`` shape: {"name", "n_required": [...],
    "computed_or_run": [...]} with one entry per horizon."""
    out: list[dict[str, Any]] = []
    for m in methods:
        reqs = [n_required(m, q, epsilon, delta, alpha, domain_size) for q in horizons]
        out.append({
            "name": m,
            "n_required": [r.n_required for r in reqs],
            "computed_or_run": [r.computed_or_run for r in reqs],
        })
    return out
