"""The best epsilon a training-set size supports, found with few exact plans.

The plain bisection (tests/planner/bisection.py, the tests' oracle) bisects log epsilon with an
exact plan at every step (about 13 plans, 25-50 s for the target-charged design). This search
returns the same kind of answer -- an exact plan for the user's targets whose n_required fits, and
a target epsilon within ``rel_tol`` (in log epsilon) of one whose plan does not fit -- from about
three exact plans:

1. locate the root of log n_required(epsilon) = log n with the planner's search-only estimate
   (``tight.estimate_n``: the Gaussian-DP search phase without the exact pass, within ~1% of the
   exact n and a few times cheaper), by regula falsi on log epsilon;
2. bracket it with exact plans at the predicted root -+ rel_tol/2, re-predicting from the exact
   points (secant) until the bracket is at most rel_tol wide; bisection if the secant stalls.

Nothing is weakened: every number reported comes from ``plan`` (exact, certified by
``chain.certify``); the estimate only chooses where to look. Plans are cached (``api.plan``), so
the final plan costs nothing more. The paper accounting's plans are cheap and its epsilon range is
(0, 1]: it uses the same search without estimates.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import solve_store
from everlast.engine.planner.api import Achievable, Plan, PlanInfeasible, Targets, plan, tight_options
from everlast.engine.planner.tight import estimate_n

LO = 1e-2
"""The smallest target epsilon searched (as the plain bisection)."""
REL_TOL = 5e-3
"""Width of the final bracket in log epsilon (as the plain bisection)."""


def _try(t: Targets) -> Plan | None:
    try:
        return plan(t)
    except PlanInfeasible:
        return None


def _certified(p: Plan) -> float:
    """What a plan certifies (as the plain bisection): max of both chains for a query-private
    design, the conditional chains otherwise."""
    return p.certificate.epsilon_claimed


def _estimator(targets: Targets, n: int) -> Callable[[float], float] | None:
    """x = log epsilon -> log(estimated n_required / n), or None when no estimate exists (paper
    accounting)."""
    if not targets.accountant.estimates:
        return None
    t = targets
    try:
        t.design  # noqa: B018  (validates: a retired design is refused by plan() with the reason)
    except InvalidSchedule:  # a retired design: plan() refuses it with the reason
        return None
    opts = tight_options(t)
    vc = t.vc

    def g(x: float) -> float:
        est = solve_store.estimate_through(estimate_n, (math.exp(x), t.delta, t.alpha, t.beta, vc, opts))
        return math.log(est / n) if math.isfinite(est) and est > 0 else math.inf

    return g


def _secant(g: Callable[[float], float], x0: float, g0: float, x1: float, lo: float, hi: float,
            ftol: float = 1e-3, max_evals: int = 8) -> float:
    """A root of a decreasing, smooth g (log n_required vs log epsilon) by the secant method from
    (x0, g0) and x1, kept inside [lo, hi]; stops when |g| <= ftol (the exact phase corrects what
    is left). A point where g is +inf (no estimate) sends the next step halfway back."""
    g1 = g(x1)
    for _ in range(max_evals):
        if math.isfinite(g1) and abs(g1) <= ftol:
            break
        if not math.isfinite(g1):
            x2 = 0.5 * (x0 + x1)
        elif math.isfinite(g0) and g1 != g0 and (g1 - g0) / (x1 - x0) < 0:
            x2 = x1 - g1 * (x1 - x0) / (g1 - g0)
        else:
            x2 = x1 - g1 / -1.5  # n ~ epsilon^-1.5 between the two regimes: a first guess
        x2 = min(max(x2, lo), hi)
        if x2 == x1:
            break
        if math.isfinite(g1):
            x0, g0 = x1, g1
        x1, g1 = x2, g(x2)
    return x1


def best_epsilon(n: int, targets: Targets, lo: float = LO, hi: float | None = None,
                 rel_tol: float = REL_TOL) -> Achievable:
    """Smallest target epsilon (within ``rel_tol`` in log epsilon) whose plan needs <= n training
    examples; the same contract as the plain bisection (tests/planner/bisection.py)."""
    if hi is None:
        hi = targets.accountant.epsilon_ceiling
    x_lo, x_hi = math.log(lo), math.log(hi)
    plans: dict[float, Plan | None] = {}

    def exact(x: float) -> Plan | None:
        if x not in plans:
            plans[x] = _try(targets.with_epsilon(math.exp(x)))
        return plans[x]

    def fits(x: float) -> bool:
        p = exact(x)
        return p is not None and p.n_required <= n

    def g_exact(x: float) -> float:
        p = exact(x)
        return math.inf if p is None else math.log(p.n_required / n)

    est = _estimator(targets, n)
    g0 = est if est is not None else g_exact
    ghi = g0(x_hi)
    if ghi > 0:  # (estimated) too few examples even at hi: settle it with the exact plan
        if not fits(x_hi):
            return _none_fit(n, hi, exact(x_hi))
        ghi = g_exact(x_hi)
    guess = _secant(g0, x_hi, ghi, x_hi - 2.0, x_lo, x_hi)
    if guess <= x_lo + rel_tol and fits(x_lo):
        bottom = exact(x_lo)
        assert bottom is not None
        return Achievable(n=n, epsilon=_certified(bottom), target=lo, plan=bottom,
                          reason=f"searched down to epsilon = {lo:g} only")
    b = _bracket(guess, x_lo, x_hi, rel_tol, g_exact)
    best = exact(b)
    if best is None or best.n_required > n:  # only when the estimate said hi fits and it does not
        return _none_fit(n, hi, exact(x_hi))
    return Achievable(n=n, epsilon=_certified(best), target=math.exp(b), plan=best)


def _none_fit(n: int, hi: float, top: Plan | None) -> Achievable:
    need = "" if top is None else f" (epsilon = {hi:g} already needs n = {top.n_required:.3g})"
    need = need.replace("e+0", "e").replace("e+", "e")
    return Achievable(n=n, epsilon=math.inf, target=math.inf, plan=None,
                      reason=f"no epsilon <= {hi:g} can be certified with n = {n}{need}")


def _bracket(guess: float, x_lo: float, x_hi: float, rel_tol: float,
             g_exact: Callable[[float], float]) -> float:
    """Exact plans around ``guess`` until a fitting x (g <= 0) and a non-fitting one are within
    rel_tol; returns the fitting end (x_hi when nothing below fits)."""
    a, b = x_lo, x_hi  # a: largest x known not to fit (or the floor); b: smallest fitting (or hi)
    known: list[tuple[float, float]] = []  # (x, g) of exact plans with a finite g

    def visit(x: float) -> None:
        nonlocal a, b
        gx = g_exact(x)
        if math.isfinite(gx):
            known.append((x, gx))
        if gx <= 0:
            b = min(b, x)
        else:
            a = max(a, x)

    r = guess
    for step in range(16):
        if b - a <= rel_tol:
            break
        if step < 6:
            # aim at the predicted root from both sides, so that one round can close the bracket
            r = min(max(r, a + 0.5 * rel_tol), b - 0.5 * rel_tol)
            for x in (r - 0.45 * rel_tol, r + 0.45 * rel_tol):
                if a < x < b and b - a > rel_tol:
                    visit(x)
            near = sorted(known, key=lambda p: abs(p[1]))[:2]
            if len(near) == 2 and near[0][1] != near[1][1]:
                (x1, g1), (x2, g2) = near
                r = x1 - g1 * (x2 - x1) / (g2 - g1)
        else:
            visit(0.5 * (a + b))  # the secant stalled: bisect
    return b
