"""BetweenThresholds (Appendix C.2, Observation 2) against its analytic outcome probabilities."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate

from engine import between_thresholds as bt
from engine.rng import laplace


def lap_cdf(x: float, b: float) -> float:
    return 0.5 * math.exp(x / b) if x < 0 else 1.0 - 0.5 * math.exp(-x / b)


def analytic(q: float, band: float, b_mu: float, b_nu: float) -> dict[int, float]:
    """P[L], P[R], P[top] for one query with fraction q, integrating over mu ~ Lap(b_mu)."""
    t_l, t_u = 0.5 - band, 0.5 + band

    def p_l(mu: float) -> float:
        return lap_cdf(t_l + mu - q, b_nu)

    def p_r(mu: float) -> float:  # R needs c >= t_l + mu (not L) and c > t_u - mu
        return 1.0 - lap_cdf(max(t_l + mu, t_u - mu) - q, b_nu)

    def dens(mu: float) -> float:
        return math.exp(-abs(mu) / b_mu) / (2 * b_mu)

    lim = 60 * b_mu
    pts = [0.0, band, q - t_l, t_u - q]
    out = {}
    for code, f in ((bt.L, p_l), (bt.R, p_r)):
        val, _ = integrate.quad(lambda m, f=f: f(m) * dens(m), -lim, lim, points=pts, limit=400, epsabs=1e-12)
        out[code] = val
    out[bt.TOP] = 1.0 - out[bt.L] - out[bt.R]
    return out


@pytest.mark.statistical
@pytest.mark.parametrize("q", [0.5, 0.46, 0.58, 0.35])
def test_outcome_frequencies_match_laplace_probabilities(q: float) -> None:
    T, eps, band = 100, 1.0, 0.05
    b_mu, b_nu = bt.threshold_noise_scale(eps, T), bt.query_noise_scale(eps, T)
    N = 40_000
    g = np.random.default_rng(12345 + int(q * 1000))
    mus = laplace(g, b_mu, N)
    nus = laplace(g, b_nu, N)
    counts = {bt.L: 0, bt.R: 0, bt.TOP: 0}
    for mu, nu in zip(mus, nus, strict=True):  # a fresh instance per trial: i.i.d. outcomes
        res = bt.run(np.array([q]), np.array([nu]), band=band, mu=float(mu), tops=0, c=1,
                     draw_mu=lambda: 0.0)
        counts[int(res.outcomes[0])] += 1
    p = analytic(q, band, b_mu, b_nu)
    z = 5.0  # 12 cells: Bonferroni-safe; fixed seed, cannot flake
    for code in counts:
        tol = z * math.sqrt(max(p[code] * (1 - p[code]), 1e-12) / N) + 1e-4
        assert abs(counts[code] / N - p[code]) <= tol, (q, code, counts[code] / N, p[code])


def test_fails_exactly_at_the_c_th_top() -> None:
    q = np.full(50, 0.5)  # every query sits mid-band; noise is negligible at this scale
    nu = np.zeros(50)
    draws = []

    def draw() -> float:
        draws.append(1)
        return 0.0

    res = bt.run(q, nu, band=0.1, mu=0.0, tops=0, c=7, draw_mu=draw)
    assert res.halted and res.answered == 7 and res.tops == 7
    assert (res.outcomes == bt.TOP).all()
    assert len(draws) == 6  # mu restarts after each top but the last


def test_restart_draws_a_fresh_threshold_after_each_top() -> None:
    # mu = 0.3 empties the band (band 0.1): nothing is top; a restart to 0 re-opens it.
    q = np.array([0.5, 0.5, 0.5])
    res = bt.run(q, np.zeros(3), band=0.1, mu=0.0, tops=0, c=10, draw_mu=lambda: 0.3)
    assert list(res.outcomes) == [bt.TOP, bt.L, bt.L]
    assert res.mu == 0.3 and res.tops == 1 and not res.halted


def test_window_search_matches_sequential_definition() -> None:
    g = np.random.default_rng(7)
    q = g.choice([0.1, 0.5, 0.9], size=5000, p=[0.45, 0.1, 0.45])
    nu = laplace(g, 0.01, 5000)
    mus = iter(laplace(g, 0.005, 10_000))
    res = bt.run(q, nu, band=0.1, mu=0.0, tops=0, c=10_000, draw_mu=lambda: float(next(mus)))
    # reference: one query at a time, replaying the same draws
    g2 = np.random.default_rng(7)
    g2.choice([0.1, 0.5, 0.9], size=5000, p=[0.45, 0.1, 0.45])
    laplace(g2, 0.01, 5000)
    mus2 = iter(laplace(g2, 0.005, 10_000))
    mu, out = 0.0, []
    for j in range(5000):
        c = q[j] + nu[j]
        o = bt.L if c < 0.4 + mu else (bt.R if c > 0.6 - mu else bt.TOP)
        out.append(o)
        if o == bt.TOP:
            mu = float(next(mus2))
    assert list(res.outcomes) == out
