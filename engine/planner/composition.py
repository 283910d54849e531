"""Composition of the (at most c_i) BetweenThresholds instances of one round.

BT halts at its first top; GenericBBL restarts it (fresh threshold noise) until c_i tops have been
seen (Observation 2). A round therefore runs at most min(c_i, R_i) instances that answer anything
(an instance started after the last query answers nothing), each (eps', delta')-DP by Lemma C.3,
composed adaptively. Privacy holds for any c_i: halting only truncates the run.

Three composition theorems:

* :func:`observation_2` -- the paper's (advanced composition, Dwork-Rothblum-Vadhan 2010, with the
  slack set to c delta'):  eps = sqrt(2 c ln(1/(c delta'))) eps' + c eps' (e^{eps'} - 1),
  delta = 2 c delta'.  With the paper's eps' = 1/(3 sqrt(c ln(2/delta))), delta' = delta/(2c),
  Claim D.1 bounds this by sqrt(2)/3 + 2/(9 ln(2/delta)) (0.487 at delta = 1e-6), not 1.
* :func:`advanced_composition` -- the same theorem with a free slack.
* :func:`kov_delta` -- the exact optimal homogeneous composition (Kairouz, Oh, Viswanath 2015,
  Thm 3.3; Murtagh-Vadhan 2016 for arbitrary E): for c mechanisms, each (eps0, delta0)-DP,
  the best delta at level E is

      delta(E) = 1 - (1 - delta0)^c (1 - delta_RR(E)),
      delta_RR(E) = F_{Bin(c,q)}(l*) - e^E F_{Bin(c,1-q)}(l*),
      q = 1/(1 + e^{eps0}),   l* = ceil((c - E/eps0)/2) - 1,

  the hockey-stick divergence of c-fold eps0-randomised response (the dominating pair).

Numerics of delta_RR. For c <= ``EXACT_MAX_C`` = 1e14 the binomial CDFs are regularised incomplete
beta functions, F_{Bin(c,x)}(l) = I_{1-x}(c - l, l + 1) (``scipy.special.betainc``, Boost). We
compared them with an independent 50-digit evaluation (mpmath anchor at l*, exact log-ratio
recursion; six (mu, E) settings per decade of c from 1e2 to 1e14; a subset is re-run in
tests/planner/test_composition_precision.py): the error of delta_RR relative to the first CDF
term grows from ~1e-14 (c = 1e2) to <= 5e-9 (c = 1e14). :func:`term_margin` adds ~10x that, so
the returned value is an upper bound. For c > 1e14 (the paper's halt budget gets there) we use a
rigorous bound instead. Write L = eps0 (c - 2B), B ~ Bin(c, q), for
the privacy loss under P; then delta_RR(E) = integral_0^inf e^{-u} P[L > E + u] du, and the
Berry-Esseen theorem (Shevtsova 2011, constant 0.4748; for Bernoulli summands rho/sigma^3 =
(p^2 + q^2)/sqrt(pq)) bounds every tail P[L > x] by Phi((m - x)/s) + BE, with m = E_P[L] =
c eps0 tanh(eps0/2), s^2 = Var_P[L] = 4 eps0^2 c p q and BE = 0.4748 (p^2 + q^2)/sqrt(c p q). As the
weights e^{-u} integrate to 1,

      delta_RR(E) <= Phi((m - E)/s) - e^{E - m + s^2/2} Phi((m - E)/s - s) + BE,

(the first two terms are E[(1 - e^{E - X})_+] for X ~ N(m, s^2)). BE <= 1e-7 for c >= 1e14.
No Gaussian-DP limit is used for certification.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import betainc, expit, log_ndtr, ndtr

from everlast.engine import roots

EXACT_MAX_C = 10**14
TERM_MARGINS = ((10**3, 1e-12), (10**5, 4e-12), (10**6, 1e-11), (10**8, 1e-10), (10**10, 1e-9),
                (EXACT_MAX_C, 5e-8))
"""(largest c, margin): added to delta_RR as margin * (first CDF term). Each is ~10x the largest
error of betainc we measured in that range against an independent 50-digit evaluation (six
(mu, E) settings per decade of c, 1e2..1e14; docs/privacy/genericbbl.md section 2)."""


def term_margin(c: int) -> float:
    """The relative (to the first CDF term) safety margin for :func:`kov_delta_rr` at c."""
    for top, m in TERM_MARGINS:
        if c <= top:
            return m
    return TERM_MARGINS[-1][1]

BERRY_ESSEEN = 0.4748
EPS_CAP = 1.0 - 1e-9
"""Lemma C.3 needs eps' < 1 (condition P2)."""


# ---------------------------------------------------------------------------------------------
# The paper's composition


def observation_2(eps0: float, delta0: float, c: float) -> tuple[float, float]:
    """Observation 2: c-fold BT is (sqrt(2c ln(1/(c delta0))) eps0 + c eps0 (e^{eps0} - 1), 2 c delta0)-DP.

    Requires c delta0 < 1 (otherwise the log is not positive); returns (+inf, min(1, 2 c delta0))
    when it fails.
    """
    if c * delta0 >= 1.0 or delta0 <= 0.0:
        return math.inf, min(1.0, 2.0 * c * delta0)
    eps = math.sqrt(2.0 * c * math.log(1.0 / (c * delta0))) * eps0 + c * eps0 * math.expm1(eps0)
    return eps, 2.0 * c * delta0


def claim_d1_bound(delta: float) -> float:
    """Claim D.1's bound on Observation 2 at the paper's parameters: sqrt(2)/3 + 2/(9 ln(2/delta))."""
    return math.sqrt(2.0) / 3.0 + 2.0 / (9.0 * math.log(2.0 / delta))


def advanced_composition(eps0: float, delta0: float, c: float, slack: float) -> tuple[float, float]:
    """Dwork-Rothblum-Vadhan 2010: (sqrt(2c ln(1/slack)) eps0 + c eps0 (e^{eps0} - 1), c delta0 + slack)."""
    eps = math.sqrt(2.0 * c * math.log(1.0 / slack)) * eps0 + c * eps0 * math.expm1(eps0)
    return eps, c * delta0 + slack


# ---------------------------------------------------------------------------------------------
# Exact optimal composition (KOV)


def _lstar(eps0: float, c: int, E: float) -> int:
    return math.ceil((c - E / eps0) / 2.0) - 1


def _delta_rr_exact(eps0: float, c: int, E: float) -> float:
    lstar = _lstar(eps0, c, E)
    if lstar < 0:
        return 0.0
    p = float(expit(eps0))  # P[no flip]; F_{Bin(c,q)}(l) = I_p(c - l, l + 1)
    q = float(expit(-eps0))
    a, b = float(c - lstar), float(lstar + 1)
    t1 = float(betainc(a, b, p))
    f2 = float(betainc(a, b, q))
    t2 = math.exp(E + math.log(f2)) if f2 > 0.0 else 0.0
    return min(1.0, max(0.0, t1 - t2) + term_margin(c) * t1)


def _delta_rr_berry_esseen(eps0: float, c: int, E: float) -> float:
    d = math.tanh(eps0 / 2.0) / 2.0  # p - 1/2 = 1/2 - q
    pq = 0.25 - d * d
    if pq <= 1e-300:  # eps0 so large that the normal approximation is meaningless: no bound
        return 1.0
    m = c * eps0 * math.tanh(eps0 / 2.0)  # E_P[L]
    s = 2.0 * eps0 * math.sqrt(c * pq)  # sd_P[L]
    z = (m - E) / s
    log_t2 = E - m + s * s / 2.0 + float(log_ndtr(z - s))
    gauss = float(ndtr(z)) - (math.exp(log_t2) if log_t2 > -745.0 else 0.0)
    be = BERRY_ESSEEN * (0.5 + 2.0 * d * d) / math.sqrt(c * pq)
    return min(1.0, max(0.0, gauss) + be)


def kov_delta_rr(eps0: float, c: int, E: float) -> float:
    """Upper bound on delta_RR(E), the hockey-stick divergence at level E of c-fold
    eps0-randomised response (exact up to :func:`term_margin` for c <= 1e14; Berry-Esseen above)."""
    if c < 1 or eps0 <= 0.0 or c * eps0 <= E:
        return 0.0
    if c <= EXACT_MAX_C:
        return _delta_rr_exact(eps0, c, E)
    return _delta_rr_berry_esseen(eps0, c, E)


def _slack(delta0: float, c: int) -> float:
    """1 - (1 - delta0)^c, evaluated without cancellation."""
    return -math.expm1(c * math.log1p(-delta0)) if delta0 < 1.0 else 1.0


def kov_delta(eps0: float, delta0: float, c: int, E: float) -> float:
    """KOV Thm 3.3: delta(E) = 1 - (1 - delta0)^c (1 - delta_RR(E)) for c-fold (eps0, delta0)."""
    a = _slack(delta0, c)
    return min(1.0, a + (1.0 - a) * kov_delta_rr(eps0, c, E))


def kov_epsilon(eps0: float, delta0: float, c: int, Delta: float) -> float:
    """Smallest E with :func:`kov_delta` <= Delta (rounded up), or +inf if Delta <= 1-(1-delta0)^c."""
    a = _slack(delta0, c)
    if a >= Delta:
        return math.inf
    budget = (Delta - a) / (1.0 - a)
    if kov_delta_rr(eps0, c, 0.0) <= budget:
        return 0.0
    hi = c * eps0
    def g(e: float) -> float:
        return kov_delta_rr(eps0, c, e) - budget

    E = float(brentq(g, 0.0, hi, xtol=1e-14, rtol=1e-13))
    E = min(hi, E * (1.0 + 1e-10) + 1e-13)
    while kov_delta_rr(eps0, c, E) > budget and hi > E:
        E = min(hi, E * (1.0 + 1e-8) + 1e-12)
    return E


def gdp_delta(mu: float, E: float) -> float:
    """mu-GDP's delta at level E: Phi(-E/mu + mu/2) - e^E Phi(-E/mu - mu/2) (used only as a
    starting guess and in the planner's search, never to certify)."""
    return float(ndtr(-E / mu + mu / 2.0) - math.exp(E) * ndtr(-E / mu - mu / 2.0))


@functools.lru_cache(maxsize=4096)
def gdp_mu(E: float, budget: float) -> float:
    """mu with gdp_delta(mu, E) = budget (search guess only)."""
    def f(m: float) -> float:
        return math.log(max(gdp_delta(m, E), 1e-320)) - math.log(budget)

    lo, hi = 1e-6, 60.0
    if f(hi) < 0:
        return hi
    if f(lo) > 0:
        return lo
    return float(brentq(f, lo, hi, xtol=1e-12, rtol=1e-10))


def kov_max_eps0(c: int, E: float, budget: float, cap: float = EPS_CAP) -> float:
    """Largest eps0 <= cap with delta_RR(E; eps0, c) <= budget (so c-fold eps0-RR meets it)."""
    def h(e: float) -> float:
        return kov_delta_rr(e, c, E) - budget

    if h(cap) <= 0.0:
        return cap
    lo = min(cap, E / c)  # delta_RR = 0 here, up to the safety margin
    while h(lo) > 0.0:
        lo /= 2.0
        if lo < 1e-300:
            return 0.0  # the margin alone exceeds the budget: nothing certifiable
    guess = gdp_mu(E, budget) / math.sqrt(c)
    hi = cap
    for x in (guess * 0.7, guess * 0.9):
        if lo < x < hi and h(x) <= 0.0:
            lo = x
    for x in (guess * 1.5, guess * 1.1):
        if lo < x < hi and h(x) > 0.0:
            hi = x
    x = float(brentq(h, lo, hi, xtol=hi * 1e-13, rtol=1e-12))
    for cand in (x, x * (1.0 - 1e-9), x * (1.0 - 1e-6)):
        if lo <= cand and h(cand) <= 0.0:
            return cand
    # Fall back to bisection keeping the invariant h(lo) <= 0.
    return roots.largest_float(lambda e: h(e) <= 0.0, lo, x, steps=200, rel_tol=1e-12)


# ---------------------------------------------------------------------------------------------
# Choosing one BT instance's (eps', delta') for a round budget (E, Delta): the delta split


@dataclass(frozen=True, slots=True)
class InstanceChoice:
    """Per-instance parameters for a round whose c-fold BT composition must meet (E, Delta)."""

    eps0: float
    delta0: float
    theta: float
    """Share of Delta spent on the instances' own delta: 1 - (1 - delta0)^c = theta Delta."""
    t_norm: float
    """6/eps0 * (ln(10/eps0) + ln(1/delta0) + 1): Lemma C.3's minimal T times gamma."""


def _split(theta: float, Delta: float, c: int) -> tuple[float, float]:
    """delta0 with 1-(1-delta0)^c = theta Delta, and the RR budget Delta(1-theta)/(1-theta Delta)."""
    delta0 = -math.expm1(math.log1p(-theta * Delta) / c)
    return delta0, Delta * (1.0 - theta) / (1.0 - theta * Delta)


def _t_norm(eps0: float, delta0: float) -> float:
    if not (0.0 < eps0 < 1.0 and 0.0 < delta0 < 1.0):
        return math.inf
    return 6.0 / eps0 * (math.log(10.0 / eps0) + math.log(1.0 / delta0) + 1.0)


def choose_instance(c: int, E: float, Delta: float) -> InstanceChoice:
    """Exact: maximise nothing, minimise Lemma C.3's T over the delta split theta, where for each
    theta eps0 is the largest value whose c-fold KOV composition meets (E, Delta).

    Returns t_norm = +inf if no split works."""
    if c < 1 or E <= 0.0 or not 0.0 < Delta < 1.0:
        return InstanceChoice(0.0, 1.0, 0.0, math.inf)

    def at(u: float) -> tuple[float, float, float, float]:
        theta = float(expit(u))
        delta0, budget = _split(theta, Delta, c)
        if delta0 <= 0.0 or budget <= 0.0:
            return math.inf, 0.0, 1.0, theta
        eps0 = kov_max_eps0(c, E, budget)
        return _t_norm(eps0, delta0), eps0, delta0, theta

    def t_of(u: float) -> float:
        return at(u)[0]

    res = minimize_scalar(t_of, bounds=(-12.0, 12.0), method="bounded", options={"xatol": 0.02})
    t, eps0, delta0, theta = at(float(res.x))
    for u in (-4.0, 0.0, 4.0):  # guard against a poor local search
        cand = at(u)
        if cand[0] < t:
            t, eps0, delta0, theta = cand
    return InstanceChoice(eps0=eps0, delta0=delta0, theta=theta, t_norm=t)


_THETAS = expit(np.linspace(-10.0, 10.0, 81))


@functools.lru_cache(maxsize=256)
def _gdp_grid(E: float, Delta: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    mus, thetas = [], []
    for theta in _THETAS:
        budget = Delta * (1.0 - theta) / (1.0 - theta * Delta)
        if budget > 0.0:
            mus.append(gdp_mu(E, float(budget)))
            thetas.append(float(theta))
    return tuple(thetas), tuple(mus)


def approx_t_norm(c: int, E: float, Delta: float) -> tuple[float, float]:
    """Fast search-only estimate of :func:`choose_instance`'s (t_norm, eps0) (Gaussian-DP
    approximation eps0 ~ mu/sqrt(c) of the composition). Never used to certify: the planner
    recomputes every round exactly with :func:`choose_instance` once its search is done."""
    thetas, mus = _gdp_grid(E, Delta)
    th = np.asarray(thetas)
    eps0 = np.minimum(np.asarray(mus) / math.sqrt(c), EPS_CAP)
    delta0 = th * Delta / c
    t = 6.0 / eps0 * (np.log(10.0 / eps0) + np.log(1.0 / delta0) + 1.0)
    j = int(np.argmin(t))
    return float(t[j]), float(eps0[j])
