"""The noisy halting test: AboveThreshold on the round's top count, with discrete Laplace noise
(docs/privacy/genericbbl.md section 5).

The engine's test (engine.between_thresholds.run_tct) is Dwork-Roth's AboveThreshold (Algorithm
1, Theorem 3.23) on integers: threshold noise rho ~ DLap(t_r) once per round, per-query noise
xi_j ~ DLap(t_x), "fire" at the first query j with C_j + xi_j >= c0 + rho, where C_j (the tops so
far) moves by 0 or 1 per query. With t_r = 2/e and t_x = 4/e it is e-DP (Lemma AT, discrete form);
for the exact scales the engine runs, :func:`at_epsilon` = 1/t_r + 2/t_x.

Every probability bound below has the form "xi - rho >= g" for independent xi ~ DLap(t_x),
rho ~ DLap(t_r) and an integer g, because the count path of an auxiliary run *without* the test
does not depend on the test's noise (Lemma T). By symmetry xi - rho has the law of xi + rho, whose
tail :func:`dlap_sum_tail` evaluates in closed form (derivation in docs/privacy/genericbbl.md 5.2), in 60-digit
arithmetic, rounded up.

Pure functions; all logarithms natural.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath

QUERY_SCALE = 4.0
"""AboveThreshold's per-query noise is DLap(QUERY_SCALE / e)."""
THRESHOLD_SCALE = 2.0
"""AboveThreshold's threshold noise is DLap(THRESHOLD_SCALE / e)."""
_DPS = 60


def up(x: mpmath.mpf | float | Fraction) -> float:
    """A float >= x (privacy-safe rounding of a probability or an epsilon): exact for an mpf or a
    Fraction argument; a float argument is returned as is (it already is the value)."""
    f = float(x)
    return f if f >= x else math.nextafter(f, math.inf)


def up_sum(*xs: float) -> float:
    """A float >= the exact sum of floats (each addition may round down by half an ulp)."""
    return up(sum(Fraction(x) for x in xs))


def down_diff(a: float, b: float) -> float:
    """A float <= the exact difference a - b of floats (privacy-safe for what is left of a delta
    once a part of it is spent: the remainder may only be understated)."""
    exact = Fraction(a) - Fraction(b)
    f = float(exact)
    return f if Fraction(f) <= exact else math.nextafter(f, -math.inf)


def dlap_sum_tail(g: int, a: float | Fraction, b: float | Fraction) -> float:
    """P[X + Y >= g] for independent X ~ DLap(a), Y ~ DLap(b) and an integer g (rounded up).

    With p = e^{-1/a}, r = e^{-1/b}, c_r = (1 - r)/(1 + r) and g >= 1:
      sum over y <= g-1 of P[Y=y] P[X >= g-y]  =  c_r/(1+p) (p^g r p/(1 - r p) + S),
          S = p (r^g - p^g)/(r - p)   (S = g p^g when r = p);
      sum over y >= g of P[Y=y] P[X >= g-y]    =  c_r (r^g/(1 - r) - p r^g/((1 + p)(1 - r p))),
    using P[X >= k] = p^k/(1+p) for k >= 1 and 1 - p^{1-k}/(1+p) for k <= 0. For g <= 0 the
    symmetric law gives 1 - P[X + Y >= 1 - g].
    """
    g = int(g)
    with mpmath.workdps(_DPS):
        v = 1 - _sum_tail(1 - g, a, b) if g <= 0 else _sum_tail(g, a, b)
        return up(v * (1 + mpmath.mpf(10) ** -45))  # covers the 60-digit evaluation's error


def _mp(x: float | Fraction) -> mpmath.mpf:
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


def _sum_tail(g: int, a: float | Fraction, b: float | Fraction) -> mpmath.mpf:
    with mpmath.workdps(_DPS):
        aa, bb = _mp(a), _mp(b)
        if aa <= 0 or bb <= 0:
            raise ValueError("scales must be positive")
        p, r = mpmath.exp(-1 / aa), mpmath.exp(-1 / bb)
        cr = (1 - r) / (1 + r)
        s = g * p**g if abs(r - p) < mpmath.mpf(10) ** (-_DPS // 2) else p * (r**g - p**g) / (r - p)
        low = cr / (1 + p) * (p**g * r * p / (1 - r * p) + s)
        high = cr * (r**g / (1 - r) - p * r**g / ((1 + p) * (1 - r * p)))
        return low + high


def at_epsilon(t_threshold: float | Fraction, t_query: float | Fraction) -> float:
    """Lemma AT's epsilon for threshold noise DLap(t_threshold) and query noise DLap(t_query):
    1/t_threshold + 2/t_query (rounded up)."""
    with mpmath.workdps(_DPS):
        return up((1 / _mp(t_threshold) + 2 / _mp(t_query)) * (1 + mpmath.mpf(10) ** -45))


def at_tail(g: int, t_query: float | Fraction, t_threshold: float | Fraction) -> float:
    """P[xi - rho >= g] for xi ~ DLap(t_query), rho ~ DLap(t_threshold) (Lemma T)."""
    return dlap_sum_tail(g, t_query, t_threshold)


def scales(eps: float) -> tuple[Fraction, Fraction]:
    """The (query, threshold) scales the engine runs for a test with parameter ``eps``: the floats
    4/eps and 2/eps as exact rationals (engine.design.noise_plan does the same)."""
    return Fraction(QUERY_SCALE / eps), Fraction(THRESHOLD_SCALE / eps)


@functools.lru_cache(maxsize=4096)
def at_margin(eps: float, p: float) -> int:
    """Smallest integer g >= 0 with P[xi - rho >= g] <= p at the scales of ``scales(eps)`` (cached:
    the planner asks for the same margins many times)."""
    if not 0.0 < p < 1.0:
        raise ValueError("a probability bound lies in (0, 1)")
    tq, tr = scales(eps)
    # continuous guide: (2/3) e^{-eps g/4} ~ p; then step to the exact integer
    g = max(0, math.ceil(QUERY_SCALE / eps * math.log(2.0 / (3.0 * p))))
    step = max(1, g // 64)
    while g > 0 and at_tail(g - step, tq, tr) <= p:
        g -= step
    while at_tail(g, tq, tr) > p:
        g += 1
    while g > 0 and at_tail(g - 1, tq, tr) <= p:
        g -= 1
    return g


def cap_probability(c: int, c0: int, eps: float) -> float:
    """P[the hard cap c binds before the test (threshold c0) fires] <= P[xi - rho >= c - c0]
    (Lemma T(ii); the law of xi - rho is symmetric)."""
    tq, tr = scales(eps)
    return at_tail(c - c0, tq, tr)


def cap_charge(eps: float, delta_cap: float) -> float:
    """Lemma Cap: a mechanism that agrees with an (eps, d)-DP one except on an event of probability
    <= delta_cap under either input is (eps, d + (1 + e^eps) delta_cap)-DP; this returns the
    added delta."""
    if delta_cap <= 0.0:
        return 0.0
    with mpmath.workdps(_DPS):  # its own precision: never mpmath's global one, which callers may set
        return up((1 + mpmath.exp(min(eps, 700.0))) * mpmath.mpf(delta_cap) * (1 + mpmath.mpf(10) ** -45))
