"""How often honest traffic lands in a target-charged round's band when the per-query noise is as
wide as the band (accuracy only: it sizes the halt budget; docs/halt_budget.md 3b).

The split-votes rule (``learning.p_top``) counts the queries whose vote share lies in the band. A
target-charged round sized by Theorem A has noise of scale t ~ T/30 on the count, several times
the band's width, so a query is a top when its count *plus its noise* lands in the band. Under the
rule's model (docs/halt_budget.md 2: continuous data with a density at each of the b boundaries,
realizable labels, midpoint ERM on lambda points), a query at quantile distance u from the nearest
boundary has vote share S = (1 - 2u)^lambda/2 on one side (1 - S on the other; the thresholds are
symmetric, T - hi = lo, so both sides give the same top probability), u having density 2b near 0
(b boundaries, two sides each). With y = 2 lambda u (density b/lambda):

    p_top = E_z[P(T S + z in [lo, hi])]
          = g0 + (b/lambda) integral_0^{lambda/b} (P_z([lo, hi] - T S(y)) - g0) dy,
    S(y) = (1 - y/lambda)^lambda/2,   g0 = P[z in [lo, hi]]  (a query every classifier agrees on).

g0 is the queries far from every boundary (almost all of them) turned into tops by their noise
alone; the integral is the split-votes share, smeared by the noise. Without noise the integral is
-ln(1 - 2 gamma) (the rule); with it, the far queries' g0 can exceed the rule several times when
eps0 T is below ~30, which is why the planner chooses eps0 T and the band together.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

_Y_MAX = 60.0
"""Beyond y = 60 the share S(y) < e^-60/2: the query counts as far (its term is g0)."""
_GRID = 6000


@functools.lru_cache(maxsize=1)
def _ygrid() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Quadrature nodes on [0, 60], dense near 0 where S(y) moves fastest (quadratic spacing), and
    trapezoid weights."""
    s = np.linspace(0.0, 1.0, _GRID)
    y = _Y_MAX * s * s
    w = np.empty_like(y)
    w[1:-1] = (y[2:] - y[:-2]) / 2.0
    w[0], w[-1] = (y[1] - y[0]) / 2.0, (y[-1] - y[-2]) / 2.0
    return y, w


def _share(y: NDArray[np.float64], lam: int) -> NDArray[np.float64]:
    return np.asarray(0.5 * np.exp(lam * np.log1p(-np.minimum(y / lam, 1.0 - 1e-15))), dtype=np.float64)


def top_rate(gamma: float, sigma: float, lam: int, boundaries: int = 1) -> float:
    """The planner's estimate: band [1/2 - gamma, 1/2 + gamma] in shares, per-query noise a
    (continuous) Laplace of scale ``sigma`` in shares (sigma = 1/(eps0 T)).

    The window's ends, their signs and -|end| depend on (gamma, lambda, b) alone and are kept
    (``_window_ends``); per sigma the same element-wise operations as ``_laplace_cdf`` remain."""
    wk = _kept_shares(lam, boundaries)[1]
    g0 = _far_rate(gamma, sigma)
    a_neg, a_abs, b_neg, b_abs = _window_ends(gamma, lam, boundaries)
    inside = _cdf_from(b_neg, b_abs, sigma) - _cdf_from(a_neg, a_abs, sigma)
    return min(1.0, g0 + boundaries / lam * float(np.dot(inside - g0, wk)))


@functools.lru_cache(maxsize=1 << 14, typed=True)
def _far_rate(gamma: float, sigma: float) -> float:
    """g0 = P[z in [1/2 - gamma, 1/2 + gamma]], a far query's top rate (cached: the rounds' lambdas share it)."""
    return float(np.asarray(_laplace_cdf(0.5 + gamma, sigma) - _laplace_cdf(0.5 - gamma, sigma), dtype=np.float64))


@functools.lru_cache(maxsize=256, typed=True)
def _window_ends(gamma: float, lam: int, boundaries: int) -> tuple[int | NDArray[np.bool_], NDArray[np.float64],
                                                                   int | NDArray[np.bool_], NDArray[np.float64]]:
    """For the window [1/2 - gamma - S, 1/2 + gamma - S] on the kept nodes: where each end is < 0
    (the count k of a prefix, as the ends grow along the nodes; else the mask) and -|end| (a pure
    function of gamma, lambda and b: cached)."""
    s = _kept_shares(lam, boundaries)[0]
    out: list[int | NDArray[np.bool_] | NDArray[np.float64]] = []
    for end in (0.5 - gamma - s, 0.5 + gamma - s):
        neg, nabs = end < 0, -np.abs(end)
        k = int(np.count_nonzero(neg))
        nabs.flags.writeable = neg.flags.writeable = False
        out += [k if bool(np.all(neg[:k])) else neg, nabs]
    return out[0], out[1], out[2], out[3]  # type: ignore[return-value]


def _cdf_from(neg: int | NDArray[np.bool_], nabs: NDArray[np.float64], sigma: float) -> NDArray[np.float64]:
    """``_laplace_cdf`` at points given by where they are < 0 and -|x|: the same operations on the
    same values (0.5 e^{-|x|/sigma} below 0, 1 minus it above)."""
    e = np.exp(nabs / sigma)
    e *= 0.5
    if not isinstance(neg, int):
        return np.where(neg, e, 1.0 - e)
    out = 1.0 - e
    out[:neg] = e[:neg]
    return out


@functools.lru_cache(maxsize=64)
def _kept_shares(lam: int, boundaries: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """S(y) and the weights on the nodes y <= lambda/b (a pure function of lambda and b: cached)."""
    y, w = _ygrid()
    keep = y <= lam / boundaries
    s, wk = _share(y[keep], lam), w[keep]
    s.flags.writeable = wk.flags.writeable = False
    return s, wk


def _laplace_cdf(x: NDArray[np.float64] | float, sigma: float) -> NDArray[np.float64]:
    """P[Z <= x], Z ~ Laplace(sigma): 0.5 e^{-|x|/sigma} below 0, 1 minus it above (one exp per
    point: -|x| is x below 0 and -x above, so the values are those of the two-sided form)."""
    x = np.asarray(x, dtype=np.float64)
    e = 0.5 * np.exp(-np.abs(x) / sigma)
    return np.where(x < 0, e, 1.0 - e)


def top_rate_exact(T: int, lo: int, hi: int, t: Fraction, lam: int, boundaries: int = 1) -> float:
    """The same for a round the engine runs: integer counts, thresholds lo, hi and DLap(t) noise on
    the count (``engine.design.noise_plan``); the count of a query at share S is T S rounded down
    on the lower side (the side counted; its mirror gives the same by symmetry)."""
    y, w = _ygrid()
    keep = y <= lam / boundaries
    v = np.floor(T * _share(y[keep], lam))
    p = math.exp(-1.0 / float(t))

    def window(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray(_dlap_cdf(b, p) - _dlap_cdf(a - 1, p), dtype=np.float64)

    g0 = float(window(np.asarray([lo], float), np.asarray([hi], float))[0])
    inside = window(lo - v, hi - v)
    return min(1.0, g0 + boundaries / lam * float(np.dot(inside - g0, w[keep])))


def _dlap_cdf(k: NDArray[np.float64], p: float) -> NDArray[np.float64]:
    """P[Z <= k] for Z ~ DLap with p = e^{-1/t} (Lemma DL(ii)), vectorized over integer k."""
    k = np.asarray(k, dtype=np.float64)
    return np.where(k >= 0, 1.0 - np.power(p, np.maximum(k, 0.0) + 1.0) / (1.0 + p),
                    np.power(p, -np.minimum(k, 0.0)) / (1.0 + p))
