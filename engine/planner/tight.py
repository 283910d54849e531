"""The tight schedule solver (calibration.md section 2): from targets to a schedule.

Privacy side (never weakened):
  * T_i is the smallest integer meeting Lemma C.3's gap condition (P1) for the (eps'_i, delta'_i)
    in use, with eps'_i < 1 and delta'_i < 1 (P2);
  * (eps'_i, delta'_i) is chosen so that the min(c_i, R_i)-fold exact optimal (KOV) composition
    meets the round's budget (E, Delta); the delta split between the instances' own delta and the
    composition is optimised (``composition.choose_instance``);
  * rates come from BBG: r_1 = (e^eps - 1)/(e^{E_1 + res} - 1), r_D = (e^eps - 1)/(e^{3 + E_2 +
    res} - 1) (both capped at 1), with Delta_1 = delta/r_1 and Delta_2 = delta/(4e r_D), where
    ``res`` reserves room for eps_LS = ln(1 + r_S (e^3 - 1)) and is checked a posteriori;
  * round 1's BT is charged to the training chain (budget E_1), rounds >= 2 to the query chain
    (budget E_2); the two budgets are chosen to minimise n.

Accuracy side (tunable, never affects privacy): lambda_i (Theorem A.2), alpha_i = alpha/2^i,
gamma_i = alpha_i, the halt budget c_i (policy "paper" = min(R_i, 64 alpha_i R_i), or
"split-votes"), T floors from Claims D.2 and D.7, |S-hat_i| from Lemma C.2 and Claim E.1.

Sizes chain backwards: R_i = ceil(lambda_{i+1} T_{i+1} / r_D), so T_i depends on T_{i+1}. Rounds
1..K are listed; round K repeats (``repeat_last``) and is solved as a fixed point (its R_K feeds
its own next round). Its alpha stays alpha_K: beyond round K the accuracy argument of Claim E.1
(sum of alpha_j) is not covered (accuracy only). T_1 moves by a factor 2^{-(K-1)} of the tail's
change, so K = 12 fixes n to many digits.

Rounding: T, R, c, n rounded up; m_S, m_D are exact sizes with realised rates m/N never above the
planned rate (which is itself shaved by 1e-9).

The search over (E_1, E_2) uses a fast Gaussian-DP estimate of the composition; the final
schedule is then recomputed exactly, and ``chain.certify`` re-derives its epsilon independently.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from scipy.optimize import minimize_scalar

from engine.planner import above_threshold as at
from engine.planner import amplification as amp
from engine.planner import block as blk
from engine.planner import bt, lemma_s
from engine.planner import composition as comp
from engine.planner.chain import DELTA_CAP, LABELBOOST_DELTA_FACTOR, LABELBOOST_EPS
from engine.planner.learning import (
    HaltBudget,
    LambdaLog,
    chunk_size,
    d2_floor,
    halt_budget,
    labelboost_size,
)
from engine.schedule import RoundSpec

RATE_SHAVE = 1.0 - 1e-9
IN_ROUND_DELTA_SHARE = 1e-3
"""Share of the query chain's delta given to the in-round step (Lemma Cap's charge for the caps)."""
BETA_H_SHARE = 1e-3
"""Premature-halt probability of the noisy halting test, as a share of beta_i (accuracy only)."""
LEMMA_S_EPS_R = 1e-3
"""eps_r of the conditional one-threshold-noise design (its restart test is set never to fire)."""


@dataclass(frozen=True, slots=True)
class TightOptions:
    halts: HaltBudget = "paper"
    k: float = 2.0
    rounds: int = 12
    lambda_log: LambdaLog = "log2"
    boundaries: int = 1
    cap_c: bool = True
    """Cap the paper's halt budget at R_i (False only to reproduce calibration.md table (iii))."""
    accuracy_floors: bool = True
    """Raise T_i to Claim D.2's and D.7's accuracy floors (privacy-neutral: a larger T only helps)."""
    halting: str = "paper"
    """Halting policy (engine.schedule): "paper" (c = the halt budget), "never" (c = R + 1),
    "noisy" (threshold c0 = budget + g_low, hard cap c = c0 + g_high; docs/PRIVACY.md 5)."""
    restarts: str = "per-top"
    """Restart policy: "per-top" (Lemma C.3 x min(c, R)), "stateless" (Lemma C.3 x R), "private"
    (Theorem B blocks, Lemma N, KOV)."""
    eps_h: float = 0.1
    """eps_h of the noisy halting test (charged to every query, Theorem Q)."""
    eps_r: float = 0.25
    """eps_r of the private restart test (charged to every query, Theorem Q)."""
    block_bound: str = "pure"
    """"pure" (Theorem B) or "lemma-s" (UNREVIEWED; conditional accounting, one block per round)."""

    @property
    def in_round_eps(self) -> float:
        """Theorem Q's epsilon for this design: eps_h (noisy) + eps_r (private)."""
        e = self.eps_h if self.halting == "noisy" else 0.0
        if self.restarts == "private":
            e += LEMMA_S_EPS_R if self.block_bound == "lemma-s" else self.eps_r
        return e

    @property
    def restart_eps(self) -> float:
        return LEMMA_S_EPS_R if self.block_bound == "lemma-s" else self.eps_r


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


@dataclass(frozen=True, slots=True)
class _RoundT:
    T: int
    R: int
    c: int
    eps0: float
    delta0: float
    theta: float
    t_priv: int
    t_acc: int
    c0: float | None = None
    k0: float | None = None
    k_max: int | None = None


class _Problem:
    def __init__(self, epsilon: float, delta: float, alpha: float, beta: float, vc_dim: int,
                 opts: TightOptions) -> None:
        if opts.rounds < 2:
            raise ValueError("the tight planner needs at least 2 rounds")
        self.eps, self.delta, self.vc, self.o = epsilon, delta, vc_dim, opts
        K = opts.rounds
        self.K = K
        self.a = [alpha / 2**i for i in range(1, K + 1)]
        self.b = [beta / 2**i for i in range(1, K + 1)]
        self.lam = [chunk_size(a, b, vc_dim, opts.lambda_log) for a, b in zip(self.a, self.b, strict=True)]
        # the query chain pays the in-round step first (Theorem Q): eps_D = eps - eps_in and
        # delta_D = delta - delta_in, delta_in for the halting test's hard cap (Lemma Cap; private
        # restarts have no hard cap in the mechanism, docs/PRIVACY.md 5.3)
        self.eps_in = opts.in_round_eps
        self.eps_query = epsilon - self.eps_in
        if self.eps_query <= 0.0:
            raise _Infeasible(f"the in-round tests (eps_h + eps_r = {self.eps_in:g}) use the whole "
                              f"query budget epsilon = {epsilon:g}")
        caps = int(opts.halting == "noisy")
        self.delta_in = IN_ROUND_DELTA_SHARE * delta if caps else 0.0
        self.delta_query = delta - self.delta_in
        self.delta_cap = (self.delta_in / (caps * at.cap_charge(self.eps_in, 1.0)) if caps else 0.0)

    # -- one round
    def round_t(self, i: int, R: int, E: float, Delta: float, exact: bool) -> _RoundT:
        """Size round i for R queries and BT budget (E, Delta) under the design's policies."""
        a, b, lam = self.a[i - 1], self.b[i - 1], self.lam[i - 1]
        gamma = a
        o = self.o
        c_util = halt_budget(o.halts, R, a, gamma, lam, o.k, o.boundaries, o.cap_c)
        c0: float | None = None
        if o.halting == "never":
            c = R + 1  # C <= R < c: no round can fail (Theorem Q)
        elif o.halting == "noisy":
            g_low = at.at_margin(o.eps_h, BETA_H_SHARE * b / R)  # premature halts (accuracy)
            c0 = float(c_util + g_low)  # a float: the cap is set from its exact value
            c = int(c0) + at.at_margin(o.eps_h, self.delta_cap)  # hard cap (Lemma T)
        else:
            c = c_util
        tops = min(c, R)
        k0: float | None = None
        k_max: int | None = None
        if o.restarts == "private" and o.block_bound == "lemma-s":
            eps0, delta0, theta, t_priv, k0, k_max = self._lemma_s_round(i, tops, R, E, Delta, gamma)
        elif o.restarts == "private":
            acc = (gamma * 8.0 / a * (math.log(R + 1.0) + math.log(1.0 / b))
                   if o.accuracy_floors else 0.0)  # Claim D.7 as gamma T eps' >= acc
            if exact:
                bc = blk.choose_blocks(tops, R, E, Delta, o.eps_r, acc)
            else:
                bc = blk.approx_blocks(tops, R, E, Delta, o.eps_r, acc)
            if not math.isfinite(bc.t_norm) or bc.eps_bt <= 0.0:
                raise _Infeasible(f"round {i}: no block parameters meet the composition budget")
            eps0, delta0, theta = bc.eps_bt, bc.delta_mu, math.nan
            k0, k_max = float(bc.k0), bc.k_max
            if exact:
                t_priv = blk.block_min_t(gamma, eps0, delta0, bc.x)
                eps0, t_priv = self._use_slack(gamma, eps0, delta0, bc.x, t_priv, min(k_max, tops),
                                               R, a, b)
            else:
                t_priv = math.ceil(min(bc.t_norm / gamma, 1e300))
        else:
            # per-top: the halt budget as declared (uncapped only to reproduce calibration (iii))
            count = R if o.restarts == "stateless" else (c if o.halting == "paper" else tops)
            if exact:
                ch = comp.choose_instance(count, E, Delta)
                if not math.isfinite(ch.t_norm):
                    raise _Infeasible(f"round {i}: no BT parameters meet the composition budget")
                eps0, delta0, theta = ch.eps0, ch.delta0, ch.theta
                t_priv = bt.min_t(gamma, eps0, delta0)
            else:
                t_norm, eps0 = comp.approx_t_norm(count, E, Delta)
                delta0, theta = math.nan, math.nan
                t_priv = math.ceil(min(t_norm / gamma, 1e300))
        t_acc = 1
        if o.accuracy_floors:
            t_acc = max(d2_floor(a), math.ceil(bt.accuracy_t(a, eps0, R, b)))
        return _RoundT(max(t_priv, t_acc), R, c, eps0, delta0, theta, t_priv, t_acc, c0, k0, k_max)

    def _use_slack(self, gamma: float, eps0: float, delta_mu: float, x: float, t_priv: int,
                   k_blk: int, R: int, a: float, b: float) -> tuple[float, int]:
        """When Claim D.7's accuracy floor makes T larger than Theorem B needs, the band slack x
        at that T is larger than planned, so the same block epsilon allows a larger eps', which
        lowers the floor: iterate (each step keeps x >= the slack used, so the block epsilon
        never exceeds the planned one)."""
        if not self.o.accuracy_floors:
            return eps0, t_priv
        eps_block = eps0 / 2.0 + k_blk * blk.eta_plus(eps0, x)
        for _ in range(6):
            T = max(t_priv, math.ceil(bt.accuracy_t(a, eps0, R, b)))
            x_eff = blk.band_slack(eps0, T, gamma, delta_mu)
            if x_eff <= x * (1.0 + 1e-9):
                break
            e_new = blk.eps_bt_for(eps_block, k_blk, x_eff)
            if e_new <= eps0:
                break
            eps0, x = e_new, x_eff
            t_priv = blk.block_min_t(gamma, eps0, delta_mu, x)
        return eps0, t_priv

    def _lemma_s_round(self, i: int, tops: int, R: int, E: float, Delta: float,
                       gamma: float) -> tuple[float, float, float, int, float, int]:
        """Conditional design (Lemma S, unreviewed): one block per round. Lemma N with
        k_low = tops + 1 (the restart test never fires except w.p. delta_fail); the block's delta
        3 delta_mu and Lemma N's charge share Delta; eps' makes Lemma S's epsilon equal E."""
        phi = blk.plan_phi(E, 1e-3)
        d_fail = phi * Delta
        budget = Delta - at.cap_charge(E, d_fail)
        d_mu = budget / 3.0 * (1.0 - 1e-9)
        eps0 = lemma_s.eps_bt_for(E, tops, d_mu)
        if eps0 <= 0.0:
            raise _Infeasible(f"round {i}: Lemma S cannot meet the budget")
        t_priv = blk.block_min_t(gamma, eps0, d_mu, lemma_s.MIN_SLACK)
        g_f = blk.restart_margin(R, LEMMA_S_EPS_R, d_fail * (1.0 - 1e-6))
        k0 = float(tops + g_f)  # k_low = tops + 1: one block (k0 rounded up as a float)
        while Fraction(k0) < tops + g_f:
            k0 = math.nextafter(k0, math.inf)
        return eps0, d_mu, math.nan, t_priv, k0, math.ceil(k0) + 1

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
        rD = amp.bbg_rate(self.eps_query, LABELBOOST_EPS + E2 + res)
        Delta1 = min(DELTA_CAP, self.delta / r1)
        Delta2 = min(DELTA_CAP, self.delta_query / (LABELBOOST_DELTA_FACTOR * rD))
        return r1, rD, Delta1, Delta2


class _Infeasible(Exception):
    pass


def _fixed_point(f: Callable[[int], _RoundT]) -> _RoundT:
    """Smallest-ish integer T with f(T).T <= T for a monotone f growing like sqrt(T): a secant
    search in log T, then bisection keeping the invariant f(hi).T <= hi (so the returned round
    meets its own constraints)."""
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
    while hi - lo > max(1, int(hi * 1e-7)):
        mid = (lo + hi) // 2
        rm = f(mid)
        if mid >= rm.T:
            hi, r = mid, rm
        else:
            lo = mid
    return r


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
        P = _Problem(epsilon, delta, alpha, beta, vc_dim, o)
        for _ in range(8):
            sol = _solve_with_reserve(P, res)
            worst = max(r.eps_ls for r in sol.rounds)
            if worst <= res:
                return sol
            res = worst * 1.5
            if res >= epsilon:
                break
    except _Infeasible as exc:
        raise ValueError(f"targets cannot be met: {exc}") from None
    raise ValueError("targets cannot be met: LabelBoost's subsample needs more than the budget")


def estimate_n(epsilon: float, delta: float, alpha: float, beta: float = 0.05, vc_dim: int = 1,
               opts: TightOptions | None = None) -> float:
    """The search phase of :func:`solve` alone (Gaussian-DP estimates, no exact pass): an estimate
    of n_required, used to choose design parameters (e.g. eps_r). +inf if infeasible. Never used
    to certify."""
    o = opts or TightOptions()
    res = min(1e-4, epsilon / 100.0)
    try:
        P = _Problem(epsilon, delta, alpha, beta, vc_dim, o)
        E2 = _argmin(lambda e: _obj2(P, e, res), max(1e-4, P.eps_query - LABELBOOST_EPS - res),
                     max(1e-4, P.eps_query - LABELBOOST_EPS - res) + 8.0)
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
    lo2 = max(1e-4, P.eps_query - LABELBOOST_EPS - res)  # below this r_D = 1: more budget is free

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
        m_S = min(S_size, max(labelboost_size(m_D, a_n, b_n, P.vc), lam_n))
        eps_ls, _ = amp.bbg(min(1.0, math.nextafter(m_S / S_size, math.inf)), LABELBOOST_EPS, 0.0)
        o = P.o
        specs.append(RoundSpec(
            T=rt.T, lam=P.lam[i - 1], R=rt.R, c=rt.c, eps_bt=rt.eps0, delta_bt=rt.delta0,
            alpha=P.a[i - 1], m_S=m_S, m_D=m_D, gamma=None, beta=P.b[i - 1],
            halt_eps=o.eps_h if o.halting == "noisy" else None, halt_threshold=rt.c0,
            restart_eps=o.restart_eps if o.restarts == "private" else None,
            restart_threshold=rt.k0, block_cap=rt.k_max,
        ))
        binding = "privacy (Lemma C.3)" if rt.t_priv >= rt.t_acc else "accuracy (Claims D.2/D.7)"
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
