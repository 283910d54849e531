"""Theorem B, discrete form: one BetweenThresholds instance of the paper's design on integer counts
(docs/privacy/genericbbl.md 7).

The engine's paper design (engine.between_thresholds.run_paper): threshold noise mu ~ DLap(t_mu),
per-query noise nu ~ DLap(t_nu), integer band [lo, hi] of width G = hi - lo, outcome TOP iff
lo + mu <= v + nu <= hi - mu; a substitution in the training set moves every count by at most 1.
An instance ends at its first top (per-top restarts), so it answers with at most k = 1 top.

**Theorem B (discrete).** For an integer mu* >= 0 with m* := G - 2 mu* - 1 >= 1, an instance that
ends by a rule depending only on its answers (and on noise independent of the data and of mu),
after at most k tops, is (eps_B, delta_mu)-DP, both directions, with

    eps_B = 1/t_mu + k eta_plus,   eta_plus = ln(1 + (e^{2/t_nu} - 1)/(1 - e^{-m*/t_nu})),
    delta_mu = P[mu > mu*] = p^{mu*+1}/(1 + p),  p = e^{-1/t_mu}.

It replaces Lemma C.3 (whose proof is for continuous Laplace noise on real vote shares) as the
per-instance bound of the tight accounting. With t_mu = 2/eps', t_nu = 6/eps': eps_B = eps'/2 +
k eta_plus, eta_plus ~ eps'/3.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
from scipy.optimize import brentq, minimize_scalar

from everlast.engine.planner.above_threshold import up

_DPS = 40


def _f(x: float | Fraction) -> mpmath.mpf:
    fr = Fraction(x)
    return mpmath.mpf(fr.numerator) / fr.denominator


def delta_mu_at(t_mu: float | Fraction, mu_star: int) -> float:
    """P[mu > mu*] for mu ~ DLap(t_mu): p^{mu*+1}/(1 + p) (rounded up)."""
    with mpmath.workdps(_DPS):
        p = mpmath.exp(-1 / _f(t_mu))
        return up(p ** (mu_star + 1) / (1 + p) * (1 + mpmath.mpf(10) ** -30))


def mu_star(t_mu: float | Fraction, delta_mu: float) -> int:
    """The smallest integer mu* >= 0 with P[mu > mu*] <= delta_mu."""
    if not 0.0 < delta_mu < 1.0:
        raise ValueError("delta_mu lies in (0, 1)")
    # closed form: p^{k+1}/(1+p) <= delta_mu  <=>  k + 1 >= t ln(1/(delta_mu (1+p))); then fix the
    # rounding with the exact (rounded-up) tail, a step or two at most (a linear search from the
    # guess t ln(1/delta_mu) took ~t ln 2 steps: minutes at t ~ 1e6)
    with mpmath.workdps(_DPS):
        t = _f(t_mu)
        p = mpmath.exp(-1 / t)
        k = max(0, int(mpmath.ceil(t * mpmath.log(1 / (mpmath.mpf(delta_mu) * (1 + p))))) - 1)
    while k > 0 and delta_mu_at(t_mu, k - 1) <= delta_mu:
        k -= 1
    while delta_mu_at(t_mu, k) > delta_mu:
        k += 1
    return k


def eta_plus(t_nu: float | Fraction, m_star: int) -> float:
    """ln(1 + (e^{2/t_nu} - 1)/(1 - e^{-m*/t_nu})): a top's cost (Lemma I, discrete; rounded up)."""
    if m_star < 1:
        return math.inf
    with mpmath.workdps(_DPS):
        t = _f(t_nu)
        v = mpmath.log(1 + mpmath.expm1(2 / t) / -mpmath.expm1(-m_star / t))
        return up(v * (1 + mpmath.mpf(10) ** -30))


def instance(t_mu: float | Fraction, t_nu: float | Fraction, G: int, delta_mu: float,
             tops: int) -> tuple[float, float, int]:
    """(eps_B, delta, m*) of one instance charged for ``tops`` tops, with mu* the smallest that
    meets ``delta_mu``; eps_B = +inf when the gap condition m* >= 1 fails."""
    ms = mu_star(t_mu, delta_mu)
    m = G - 2 * ms - 1
    if m < 1:
        return math.inf, delta_mu_at(t_mu, ms), m
    with mpmath.workdps(_DPS):
        eps = up((1 / _f(t_mu) + tops * _f(eta_plus(t_nu, m))) * (1 + mpmath.mpf(10) ** -30))
    return eps, delta_mu_at(t_mu, ms), m


# -- planning (search only; every schedule is re-certified by chain.certify) -----------------


def eps_bt_for(eps_inst: float, x: float, tops: int = 1) -> float:
    """The eps' with eps'/2 + tops * eta_plus(x) = eps_inst, at band slack x = m*/t_nu (continuous
    approximation of eta_plus: ln(1 + (e^{eps'/3} - 1)/(1 - e^{-x})))."""
    def g(e: float) -> float:
        return e / 2.0 + tops * math.log1p(math.expm1(e / 3.0) / -math.expm1(-x)) - eps_inst

    hi = 2.0 * eps_inst
    if g(hi) < 0:
        return hi
    return float(brentq(g, 0.0, hi, xtol=hi * 1e-12, rtol=1e-12))


def t_for(eps_bt: float, delta_mu: float, x: float, gamma: float) -> int:
    """The smallest T whose integer band (G >= 2 gamma T - 2) holds 2 mu* + 1 + m* with
    m* = ceil(x t_nu) (t_mu = 2/eps', t_nu = 6/eps')."""
    ms = mu_star(Fraction(2.0 / eps_bt), delta_mu)
    m = math.ceil(x * 6.0 / eps_bt)
    return math.ceil((2 * ms + 1 + m + 2) / (2.0 * gamma))


def plan_instance(eps_inst: float, delta_mu: float, gamma: float, tops: int = 1) -> tuple[float, float, int]:
    """(eps', x, T): the eps' and band slack x minimising T for an instance budget eps_inst."""
    def t_of(lx: float) -> float:
        x = math.exp(lx)
        e = eps_bt_for(eps_inst, x, tops)
        return (4.0 * math.log(1.0 / (2.0 * delta_mu)) + 6.0 * x + e) / e if e > 0 else math.inf

    res = minimize_scalar(t_of, bounds=(math.log(0.05), math.log(60.0)), method="bounded",
                          options={"xatol": 1e-3})
    x = math.exp(float(res.x))
    e = eps_bt_for(eps_inst, x, tops) * (1.0 - 1e-9)
    return e, x, t_for(e, delta_mu, x, gamma)
