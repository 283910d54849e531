"""The plain bisection for the best epsilon an n certifies: an exact plan at every step (about 13 of
them). The library's ``engine.planner.best_epsilon`` (``engine.planner.search``) guides a few exact
plans by a search-only estimate; this slow, obvious form is kept here as its oracle (tests/planner/test_search.py)."""

from __future__ import annotations

import math

from everlast.engine import roots
from everlast.engine.planner.api import Achievable, Plan, PlanInfeasible, Targets, _eps, plan


def _try_plan(t: Targets) -> Plan | None:
    try:
        return plan(t)
    except PlanInfeasible:
        return None


def best_epsilon(n: int, targets: Targets, lo: float = 1e-2, hi: float | None = None,
                 rel_tol: float = 5e-3) -> Achievable:
    """Smallest target epsilon whose plan needs <= n training examples (bisection on log epsilon;
    n_required is decreasing in epsilon over the searched range). The paper accounting searches
    (0, 1] (Theorem 5.1's range)."""
    if hi is None:
        hi = targets.accountant.epsilon_ceiling
    top = _try_plan(targets.with_epsilon(hi))
    if top is None or top.n_required > n:
        need = "" if top is None else f" (epsilon = {hi:g} already needs n = {top.n_required:.3g})"
        need = need.replace("e+0", "e").replace("e+", "e")
        return Achievable(n=n, epsilon=math.inf, target=math.inf, plan=None,
                          reason=f"no epsilon <= {hi:g} can be certified with n = {n}{need}")
    bottom = _try_plan(targets.with_epsilon(lo))
    if bottom is not None and bottom.n_required <= n:
        return Achievable(n=n, epsilon=_eps(bottom), target=lo, plan=bottom,
                          reason=f"searched down to epsilon = {lo:g} only")
    fitting = {math.log(hi): top}

    def fits(log_eps: float) -> bool:
        p = _try_plan(targets.with_epsilon(math.exp(log_eps)))
        if p is None or p.n_required > n:
            return False
        fitting[log_eps] = p
        return True

    b = roots.smallest_float(fits, math.log(lo), math.log(hi), abs_tol=rel_tol)
    return Achievable(n=n, epsilon=_eps(fitting[b]), target=math.exp(b), plan=fitting[b])
