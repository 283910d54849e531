"""The tight schedule solver (docs/notes/calibration.md 2): from targets to a schedule, for the engine's
two designs (engine.design).

Privacy side (never weakened):
  * target-charged: eps0_i is the largest per-query level whose round meets the budget (E, Delta)
    by Lemmas Q and TC (``target_charging.max_eps0``); there is no gap condition, and T_i is set by
    accuracy: Theorem A's bound on every answer's error (``round_solvers.TargetChargedSolver``);
  * paper: each of the min(c_i, R_i) BetweenThresholds instances is Theorem B (discrete, one top);
    the instances' (eps_inst, delta_mu) make the KOV composition meet (E, Delta) (the delta split
    optimised), and (eps', band slack) minimise T_i (``theorem_b.plan_instance``);
  * rates come from BBG: r_1 = (e^eps - 1)/(e^{E_1 + res} - 1), r_D = (e^{eps_D} - 1)/(e^{L + E_2 +
    res} - 1) (both capped at 1; L = ln 4 by Lemma LB, 3 by Lemma C.1; eps_D = eps - the in-round
    step), with Delta_1 = delta/r_1 and Delta_2 = delta_D/(f r_D) (f = 1 by Lemma LB, 4e by Lemma
    C.1), where ``res`` reserves room for LabelBoost's labeled-part charge subsampled at r_S and
    is checked a posteriori;
  * round 1's BT is charged to the training chain (budget E_1), rounds >= 2 to the query chain
    (budget E_2); the two budgets are chosen to minimise n.

Accuracy side (tunable, never affects privacy): lambda_i, alpha_i and gamma_i per design (the
target-charged design: ``round_solvers.TargetChargedSolver``, docs/privacy/genericbbl.md 6.3; the
paper's: Theorem A.2 at alpha_i = alpha/2^i, gamma_i = alpha_i, T floors from Claims D.2 and D.7),
the halt budget c_i (policy "paper" = min(R_i, 64 alpha_i R_i), or "split-votes"), |S-hat_i| from
Lemma C.2 and Lemma R (Claim E.1 made exact).

Sizes chain backwards: R_i = ceil(lambda_{i+1} T_{i+1} / r_D), so T_i depends on T_{i+1}. Rounds
1..K are listed; round K repeats (``repeat_last``) and is solved as a fixed point (its R_K feeds
its own next round). Its alpha stays alpha_K: beyond round K the accuracy argument of Claim E.1
(sum of 2 alpha_j) is not covered (accuracy only). T_1 moves by a factor 2^{-(K-1)} of the tail's
change, so K = 12 fixes n to many digits.

Rounding: T, R, c, n rounded up; m_S, m_D are exact sizes with realised rates m/N never above the
planned rate (which is itself shaved by 1e-9).

The search over (E_1, E_2) uses a fast Gaussian-DP estimate of the composition; the final
schedule is then recomputed exactly, and ``chain.certify`` re-derives its epsilon independently.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

from scipy.optimize import minimize_scalar

from everlast.engine import roots
from everlast.engine.planner import amplification as amp
from everlast.engine.planner.accountants import DELTA_CAP
from everlast.engine.planner.accuracy import relabel_size
from everlast.engine.planner.design_table import PLANNERS
from everlast.engine.planner.learning import labelboost_size
from everlast.engine.planner.options import TightOptions
from everlast.engine.planner.round_solvers import Infeasible, RoundSize
from everlast.engine.schedule import RoundSpec

RATE_SHAVE = 1.0 - 1e-9
RESERVE_SLACK = 1.15
"""The room reserved for LabelBoost's labeled-part charge (eps_LS, checked after the solve) over its
estimate: a larger reserve wastes budget, a smaller one costs another solve."""


@dataclass(frozen=True, slots=True)
class RoundPlan:
    """How round i was sized: its budget and which constraint set T_i."""

    round: int
    E: float
    Delta: float
    eps_bt: float
    delta_bt: float
    theta: float
    t_privacy: int
    t_accuracy: int
    binding: str
    eps_ls: float


@dataclass(frozen=True, slots=True)
class TightSchedule:
    specs: tuple[RoundSpec, ...]
    n_required: int
    E1: float
    E2: float
    r1: float
    rD: float
    reserve: float
    rounds: tuple[RoundPlan, ...]


class _Problem:
    def __init__(self, epsilon: float, delta: float, alpha: float, beta: float, vc_dim: int,
                 opts: TightOptions) -> None:
        if opts.rounds < 2:
            raise ValueError("the tight planner needs at least 2 rounds")
        self.eps, self.delta, self.vc, self.o = epsilon, delta, vc_dim, opts
        K = opts.rounds
        self.K = K
        self.acct = opts.accountant
        self.solver = PLANNERS[opts.design].solver(self, alpha, beta, vc_dim)  # type: ignore[arg-type]
        self.a, self.b, self.lam = self.solver.a, self.solver.b, self.solver.lam
        # the query chain pays the in-round step first (Theorem Q): eps_D = eps - eps_in and
        # delta_D = delta - delta_in, delta_in for the halting test's hard cap (Lemma Cap)
        self.eps_in, self.delta_in, self.delta_cap = self.solver.in_round_budget(delta)
        self.eps_query = epsilon - self.eps_in
        if self.eps_query <= 0.0:
            raise _Infeasible(f"the in-round test (eps_h = {self.eps_in:g}) uses the whole "
                              f"query budget epsilon = {epsilon:g}")
        self.delta_query = delta - self.delta_in

    # -- one round
    def round_t(self, i: int, R: int, E: float, Delta: float, exact: bool) -> _RoundT:
        """Size round i for R queries and budget (E, Delta) under the design (its solver)."""
        return self.solver.round_t(i, R, E, Delta, exact)

    def r_for(self, next_size: int, rD: float) -> int:
        return max(1, math.ceil(next_size / (rD * RATE_SHAVE)))

    # -- rounds 2..K given the query budget
    def tail(self, E2: float, rD: float, Delta: float, exact: bool) -> list[_RoundT]:
        K, lamK = self.K, self.lam[-1]

        def f(T: int) -> _RoundT:
            return self.round_t(K, self.r_for(lamK * T, rD), E2, Delta, exact)

        last = _fixed_point(f)
        out = [last]
        for i in range(K - 1, 1, -1):
            nxt = out[-1]
            out.append(self.round_t(i, self.r_for(self.lam[i] * nxt.T, rD), E2, Delta, exact))
        out.reverse()
        return out  # rounds 2..K

    def rates(self, E1: float, E2: float, res: float) -> tuple[float, float, float, float]:
        r1 = amp.bbg_rate(self.eps, E1 + res)
        rD = amp.bbg_rate(self.eps_query, self.acct.labelboost_eps("unlabeled") + E2 + res)
        Delta1 = min(DELTA_CAP, self.delta / r1)
        Delta2 = min(DELTA_CAP, self.delta_query / (self.acct.labelboost_delta_factor * rD))
        return r1, rD, Delta1, Delta2


_Infeasible = Infeasible
_RoundT = RoundSize





def _fixed_point(f: Callable[[int], _RoundT]) -> _RoundT:
    """Smallest-ish integer T with f(T).T <= T for a monotone f growing like sqrt(T): a secant
    search in log T, then bisection (``roots.smallest_int``, to 1e-7 relative) keeping the invariant
    f(hi).T <= hi (so the returned round meets its own constraints)."""
    x0, x1 = math.log(1e4), math.log(1e8)
    g0 = math.log(f(math.ceil(math.exp(x0))).T) - x0
    g1 = math.log(f(math.ceil(math.exp(x1))).T) - x1
    for _ in range(30):
        if abs(g1) < 1e-6 or g1 == g0:
            break
        x2 = x1 - g1 * (x1 - x0) / (g1 - g0)
        x2 = min(max(x2, x1 - 20.0), x1 + 20.0, 690.0)
        x0, g0 = x1, g1
        x1 = x2
        g1 = math.log(f(math.ceil(math.exp(x1))).T) - x1
    hi = max(1, math.ceil(math.exp(x1) * 1.000001))
    r = f(hi)
    while hi < r.T:
        hi = max(r.T, math.ceil(hi * 1.01))
        r = f(hi)
    lo = hi
    while True:  # find lo with f(lo).T > lo, moving hi down while the invariant holds
        if lo == 1:
            return r
        lo = max(1, math.floor(lo / 1.01))
        rl = f(lo)
        if lo < rl.T:
            break
        hi, r = lo, rl
    seen = {hi: r}

    def meets(T: int) -> bool:
        seen[T] = f(T)
        return T >= seen[T].T

    return seen[roots.smallest_int(meets, lo, hi, rel_tol=1e-7)]


def solve(epsilon: float, delta: float, alpha: float, beta: float = 0.05, vc_dim: int = 1,
          opts: TightOptions | None = None) -> TightSchedule:
    """Solve the tight schedule for targets (epsilon, delta) on both chains and accuracy (alpha, beta).

    Raises ``ValueError`` when the targets cannot be met by any schedule of this shape.
    """
    o = opts or TightOptions()
    if not (epsilon > 0 and 0 < delta < 1 and 0 < alpha < 0.5 and 0 < beta < 1):
        raise ValueError("need epsilon > 0, delta in (0,1), alpha in (0,1/2), beta in (0,1)")
    res = min(1e-4, epsilon / 100.0)
    try:
        o = _with_sizes(epsilon, delta, alpha, beta, vc_dim, o, res)
        P = _Problem(epsilon, delta, alpha, beta, vc_dim, o)
        share = getattr(P.solver, "share", None)
        if share is not None:  # the growing relabelling's S-hat share: LabelBoost's charge, known up front
            res = max(res, amp.bbg(min(1.0, RESERVE_SLACK * share), P.acct.labelboost_eps("labeled"), 0.0)[0])
        for _ in range(8):
            sol = _solve_with_reserve(P, res)
            worst = max(r.eps_ls for r in sol.rounds)
            if worst <= res:
                return sol
            res = worst * RESERVE_SLACK
            if res >= epsilon:
                break
    except _Infeasible as exc:
        raise ValueError(f"targets cannot be met: {exc}") from None
    raise ValueError("targets cannot be met: LabelBoost's subsample needs more than the budget")


def _growing(o: TightOptions) -> bool:
    return (o.design.name == "target-charged" and o.chunks == "sized" and o.relabelling == "growing"
            and o.sizes_from is None)


def _with_sizes(epsilon: float, delta: float, alpha: float, beta: float, vc_dim: int, o: TightOptions,
                res: float) -> TightOptions:
    """``o`` with ``sizes_from`` filled in for the ``growing`` relabelling: the T of each round of the
    ``even`` schedule for the same targets (the search's estimate; round 1's is not needed), from which
    ``round_solvers.growing_chunks`` sets the growth. Search only."""
    if not _growing(o):
        return o
    cur = dataclasses.replace(o, relabelling="even")
    even = _Problem(epsilon, delta, alpha, beta, vc_dim, cur)
    lo2 = max(1e-4, even.eps_query - even.acct.labelboost_eps("unlabeled") - res)
    E2 = _argmin(lambda e: _obj2(even, e, res), lo2, lo2 + 8.0)  # the even schedule's query budget
    P = even
    for _ in range(2):  # the even schedule's T, then the grown one's (larger chunks need fewer of them)
        _, rD, _, D2 = P.rates(epsilon, E2, res)
        tail = P.tail(E2, rD, D2, exact=False)
        cur = dataclasses.replace(o, sizes_from=(tail[0].T, *(r.T for r in tail)))
        P = _Problem(epsilon, delta, alpha, beta, vc_dim, cur)
    return cur


def estimate_n(epsilon: float, delta: float, alpha: float, beta: float = 0.05, vc_dim: int = 1,
               opts: TightOptions | None = None) -> float:
    """The search phase of :func:`solve` alone (Gaussian-DP estimates, no exact pass): an estimate
    of n_required, used to choose design parameters (e.g. eps_r). +inf if infeasible. Never used
    to certify."""
    o = opts or TightOptions()
    res = min(1e-4, epsilon / 100.0)
    try:
        P = _Problem(epsilon, delta, alpha, beta, vc_dim, o)
        E2 = _argmin(lambda e: _obj2(P, e, res), max(1e-4, P.eps_query - P.acct.labelboost_eps("unlabeled") - res),
                     max(1e-4, P.eps_query - P.acct.labelboost_eps("unlabeled") - res) + 8.0)
        _, rD, _, D2 = P.rates(epsilon, E2, res)
        tail = P.tail(E2, rD, D2, exact=False)
        R1 = P.r_for(P.lam[1] * tail[0].T, rD)
        lo1 = max(1e-4, epsilon - res)
        E1 = _argmin(lambda e: _obj1(P, e, E2, R1, res), lo1, lo1 + 8.0)
        return math.exp(_obj1(P, E1, E2, R1, res))
    except (_Infeasible, OverflowError, ValueError):
        return math.inf


def _obj2(P: _Problem, E2: float, res: float) -> float:
    """log R_1 for the query budget E2 (rounds 2..K, estimated)."""
    _, rD, _, D2 = P.rates(P.eps, E2, res)
    if rD <= 0.0:
        return math.inf
    try:
        t = P.tail(E2, rD, D2, exact=False)
    except (_Infeasible, OverflowError, ValueError):
        return math.inf
    return math.log(P.lam[1] * t[0].T / rD)


def _obj1(P: _Problem, E1: float, E2: float, R1: int, res: float) -> float:
    """log n for the training budget E1 (round 1, estimated)."""
    r1, _, D1, _ = P.rates(E1, E2, res)
    if r1 <= 0.0:
        return math.inf
    try:
        t1 = P.round_t(1, R1, E1, D1, exact=False)
    except (_Infeasible, OverflowError, ValueError):
        return math.inf
    return math.log(P.lam[0] * t1.T / r1)


def _solve_with_reserve(P: _Problem, res: float) -> TightSchedule:
    eps = P.eps
    # ---- E2: minimise R_1 = lambda_2 T_2 / r_D (n is increasing in R_1 for fixed E1)
    lo2 = max(1e-4, P.eps_query - P.acct.labelboost_eps("unlabeled") - res)  # below this r_D = 1: more budget is free

    def obj2(E2: float) -> float:
        return _obj2(P, E2, res)

    E2 = _argmin(obj2, lo2, lo2 + 8.0)
    _, rD, _, D2 = P.rates(eps, E2, res)
    tail = P.tail(E2, rD, D2, exact=True)
    R1 = P.r_for(P.lam[1] * tail[0].T, rD)

    # ---- E1: minimise n = lambda_1 T_1 / r_1
    lo1 = max(1e-4, eps - res)

    def obj1(E1: float) -> float:
        return _obj1(P, E1, E2, R1, res)

    E1 = _argmin(obj1, lo1, lo1 + 8.0)
    r1, _, D1, _ = P.rates(E1, E2, res)
    first = P.round_t(1, R1, E1, D1, exact=True)
    rounds = [first, *tail]

    # ---- sizes of the subsamples
    specs: list[RoundSpec] = []
    plans: list[RoundPlan] = []
    for i, rt in enumerate(rounds, start=1):
        if i < P.K:
            m_D = P.lam[i] * rounds[i].T
            a_n, b_n, lam_n = P.a[i], P.b[i], P.lam[i]
        else:
            m_D = P.lam[i - 1] * rt.T
            a_n, b_n, lam_n = P.a[i - 1], P.b[i - 1], P.lam[i - 1]
        S_size = P.lam[i - 1] * rt.T
        m_S = min(S_size, max(labelboost_size(m_D, a_n, b_n, P.vc), relabel_size(a_n, b_n, P.vc), lam_n))
        eps_ls, _ = amp.bbg(min(1.0, math.nextafter(m_S / S_size, math.inf)), P.acct.labelboost_eps("labeled"), 0.0)
        specs.append(RoundSpec(
            T=rt.T, lam=P.lam[i - 1], R=rt.R, c=rt.c, eps_bt=rt.eps0, alpha=P.a[i - 1], m_S=m_S, m_D=m_D,
            beta=P.b[i - 1], **P.solver.spec_fields(rt),  # type: ignore[arg-type]
        ))
        binding = P.solver.binding(rt)
        plans.append(RoundPlan(
            round=i, E=E1 if i == 1 else E2, Delta=D1 if i == 1 else D2, eps_bt=rt.eps0,
            delta_bt=rt.delta0, theta=rt.theta, t_privacy=rt.t_priv, t_accuracy=rt.t_acc,
            binding=binding, eps_ls=eps_ls,
        ))
    n = max(specs[0].labeled_size, math.ceil(specs[0].labeled_size / (r1 * RATE_SHAVE)))
    return TightSchedule(specs=tuple(specs), n_required=n, E1=E1, E2=E2, r1=r1, rD=rD,
                         reserve=res, rounds=tuple(plans))


def _argmin(f: Callable[[float], float], lo: float, hi: float) -> float:
    """Bounded scalar minimisation (search only: any value is privacy-valid)."""
    with warnings.catch_warnings():  # an infeasible (inf) probe makes scipy's parabola step NaN: harmless
        warnings.simplefilter("ignore", RuntimeWarning)
        res = minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-3})
    x = float(res.x)
    best, fx = x, f(x)
    for cand in (lo, lo + 1e-3):
        fc = f(cand)
        if fc < fx:
            best, fx = cand, fc
    if not math.isfinite(fx):
        raise _Infeasible("no budget split meets the targets")
    return best
