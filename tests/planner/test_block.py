"""Private restarts, training side (docs/PRIVACY.md section 6): Lemma I on a grid, Theorem B
against the exact output distributions of a one-threshold-noise block (numerical integration over
mu, adaptive adversaries, both directions), Lemma N's early-fire bound, and the certifier's and
planner's block arithmetic."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate

from engine.planner import above_threshold as at
from engine.planner import block as blk


def _cdf(x: np.ndarray | float, b: float) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    out: np.ndarray = np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / b),
                               1.0 - 0.5 * np.exp(-np.maximum(x, 0) / b))
    return out


def _mass(lo: float, hi: float, b: float) -> float:
    """P[lo <= nu <= hi], accurate in both tails (no 1 - tiny cancellation)."""
    if lo >= 0:
        return 0.5 * (math.exp(-lo / b) - math.exp(-hi / b))
    if hi <= 0:
        return 0.5 * (math.exp(hi / b) - math.exp(lo / b))
    return 1.0 - 0.5 * math.exp(lo / b) - 0.5 * math.exp(-hi / b)


def test_lemma_i_interval_ratio_on_a_grid() -> None:
    """P[nu in I] <= (1 + (e^{2D/b} - 1)/(1 - e^{-w'/b})) P[nu in J], J of length w' inside I,
    |I| = |J| + 2D, every position (tails and straddling the mode), every split of the 2D."""
    b, D = 1.0, 0.05
    worst = 0.0
    for w in (0.05, 0.3, 1.0, 3.0, 10.0):
        bound = 1.0 + math.expm1(2 * D / b) / -math.expm1(-w / b)
        for a in np.linspace(-15, 15, 301):
            for s in np.linspace(0.0, 2 * D, 5):
                ratio = _mass(a - s, a + w + 2 * D - s, b) / _mass(a, a + w, b)
                assert ratio <= bound * (1 + 1e-9)
                worst = max(worst, ratio / bound)
    assert worst > 0.999  # attained in the tail


# ---------------------------------------------------------------------------- Theorem B, exactly

T_SMALL, GAMMA, EPS = 40, 0.45, 1.0
T_L, T_U = 0.5 - GAMMA, 0.5 + GAMMA
B_MU, B_NU, DELTA = 2.0 / (EPS * T_SMALL), 6.0 / (EPS * T_SMALL), 1.0 / T_SMALL
MU = np.linspace(-30 * B_MU, 30 * B_MU, 60_001)
W_MU = np.exp(-np.abs(MU) / B_MU) / (2 * B_MU)
QUERIES = (T_L - 0.1, T_L - 0.02, T_L, T_L + 0.03, 0.5, T_U - 0.03, T_U, T_U + 0.02, T_U + 0.1)


def _outcome_probs(q: float) -> dict[str, np.ndarray]:
    """P[L], P[TOP], P[R] given mu (the grid) for vote share q (the engine's rule)."""
    lo, hi = T_L + MU, T_U - MU
    p_l = _cdf(lo - q, B_NU)
    p_top = np.where(lo <= hi, _cdf(hi - q, B_NU) - _cdf(lo - q, B_NU), 0.0)
    return {"L": p_l, "T": np.clip(p_top, 0.0, 1.0), "R": np.clip(1.0 - p_l - p_top, 0.0, 1.0)}


def _block_distributions(seed: int, m: int, k_max: int) -> tuple[dict[str, float], dict[str, float]]:
    """Exact output distributions of one block (m queries, ends at its k_max-th top) under F and a
    neighbour F', for an adaptive adversary: the query and the neighbour's shift direction are
    functions of the answers so far (seeded)."""
    out_f: dict[str, float] = {}
    out_g: dict[str, float] = {}

    def walk(hist: str, lf: np.ndarray, lg: np.ndarray) -> None:
        if len(hist) == m or hist.count("T") == k_max:
            out_f[hist] = float(integrate.trapezoid(W_MU * lf, MU))
            out_g[hist] = float(integrate.trapezoid(W_MU * lg, MU))
            return
        r = np.random.default_rng([seed, len(hist), *map(ord, hist)])
        q = float(QUERIES[r.integers(len(QUERIES))])
        shift = DELTA * float(r.choice([-1.0, 1.0]))
        pf, pg = _outcome_probs(q), _outcome_probs(q + shift)
        for o in ("L", "T", "R"):
            walk(hist + o, lf * pf[o], lg * pg[o])

    walk("", np.ones_like(MU), np.ones_like(MU))
    return out_f, out_g


def _hockey(p: dict[str, float], q: dict[str, float], eps: float) -> float:
    return sum(max(0.0, p[o] - math.exp(eps) * q[o]) for o in p)


@pytest.mark.parametrize("seed", range(6))
def test_theorem_b_against_exact_block_distributions(seed: int) -> None:
    k_max, delta_mu = 2, 0.01
    eps_b = blk.block_epsilon(EPS, T_SMALL, GAMMA, delta_mu, k_max)
    x = blk.band_slack(EPS, T_SMALL, GAMMA, delta_mu)
    assert x > 0 and eps_b == pytest.approx(EPS / 2 + k_max * blk.eta_plus(EPS, x))
    p, q = _block_distributions(seed, m=4, k_max=k_max)
    assert sum(p.values()) == pytest.approx(1.0, abs=1e-6) and sum(q.values()) == pytest.approx(1.0, abs=1e-6)
    assert _hockey(p, q, eps_b) <= delta_mu + 1e-6  # both directions: Theorem B's (eps, delta_mu)
    assert _hockey(q, p, eps_b) <= delta_mu + 1e-6


def test_theorem_b_delta_is_the_band_collapse() -> None:
    """Bun-Steinke-Ullman's A/B adversary (votes at 1/2, the neighbour shifting them alternately
    up and down): when mu collapses the band the L-frequencies reveal the neighbour, so the block
    is NOT eps-pure for any eps -- a positive delta remains at 8 times Theorem B's epsilon -- and
    Theorem B's delta_mu covers it."""
    delta_mu = 0.01
    eps_b = blk.block_epsilon(EPS, T_SMALL, GAMMA, delta_mu, 1)
    out_f: dict[str, float] = {}
    out_g: dict[str, float] = {}

    def walk(hist: str, lf: np.ndarray, lg: np.ndarray) -> None:
        if len(hist) == 8 or "T" in hist:
            out_f[hist] = float(integrate.trapezoid(W_MU * lf, MU))
            out_g[hist] = float(integrate.trapezoid(W_MU * lg, MU))
            return
        shift = DELTA if len(hist) % 2 == 0 else -DELTA
        pf, pg = _outcome_probs(0.5), _outcome_probs(0.5 + shift)
        for o in ("L", "T", "R"):
            walk(hist + o, lf * pf[o], lg * pg[o])

    walk("", np.ones_like(MU), np.ones_like(MU))
    assert 0.0 < _hockey(out_f, out_g, eps_b) <= delta_mu
    assert _hockey(out_g, out_f, eps_b) <= delta_mu
    collapse = 0.5 * math.exp(-GAMMA / B_MU)  # P[mu > gamma]: the band is empty
    assert _hockey(out_f, out_g, eps_b) <= collapse


# ---------------------------------------------------------------------------- Lemma N


def test_lemma_n_early_fire_bound_by_integration() -> None:
    """m queries at block count k_low - 1 fire the restart test with probability
    <= m at_tail(k0 - k_low + 1) (exact integral over rho for one block)."""
    eps_r = 0.5
    b_rho, b_z = 2 / eps_r, 4 / eps_r
    rho = np.linspace(-60 * b_rho, 60 * b_rho, 200_001)
    w = np.exp(-np.abs(rho) / b_rho) / (2 * b_rho)
    for m, k0, k_low in ((10, 30.0, 5), (1000, 80.0, 20)):
        no_fire = integrate.trapezoid(w * _cdf(k0 + rho - (k_low - 1), b_z) ** m, rho)
        assert 1.0 - no_fire <= m * at.at_tail(k0 - k_low + 1, eps_r)


def test_k_low_and_block_count() -> None:
    R, eps_r, d_fail = 10**12, 0.5, 1e-9
    g = blk.restart_margin(R, eps_r, d_fail)
    assert R * at.at_tail(g, eps_r) <= d_fail < R * at.at_tail(g - 1, eps_r)
    k0 = 500.0 + g - 1
    assert blk.k_low_for(R, k0, eps_r, d_fail) == 500
    assert blk.k_low_for(R, k0, eps_r, d_fail, k_max=300) == 300  # a capped block holds k_max tops
    assert blk.k_low_for(R, float(g) - 5, eps_r, d_fail) == 0
    assert blk.blocks_bound(10_000, R, 500) == 21 and blk.blocks_bound(10_000, 5, 500) == 5


def test_block_min_t_and_inverse() -> None:
    gamma, eps_bt, d_mu, x = 0.05, 3e-10, 1e-20, 4.0
    T = blk.block_min_t(gamma, eps_bt, d_mu, x)
    assert blk.band_slack(eps_bt, T, gamma, d_mu) >= x > blk.band_slack(eps_bt, T - 10, gamma, d_mu)
    for k in (1, 50, 2000):
        e = blk.eps_bt_for(0.3, k, x)
        assert e / 2 + k * blk.eta_plus(e, x) <= 0.3
        assert e / 2 + k * blk.eta_plus(e * (1 + 1e-9), x) == pytest.approx(0.3, rel=1e-6)


def test_certify_blocks_by_hand() -> None:
    gamma, eps_bt, d_mu = 0.05, 1e-4, 1e-15
    x = 5.0
    T = blk.block_min_t(gamma, eps_bt, d_mu, x)
    tops, R, k0, k_max, eps_r, Delta = 10**6, 10**9, 700.0, 1000, 0.5, 1e-6
    cert = blk.certify_blocks(eps_bt, T, gamma, d_mu, tops, R, k0, k_max, eps_r, Delta)
    assert cert.lemma == "N" and math.isfinite(cert.E)
    assert cert.tops_per_block == k_max
    assert cert.eps_block == pytest.approx(blk.block_epsilon(eps_bt, T, gamma, d_mu, k_max))
    assert cert.k_low == blk.k_low_for(R, k0, eps_r, cert.phi * Delta, k_max)
    assert cert.blocks == tops // cert.k_low + 1
    # the failures charged: Lemma N's delta_fail plus Lemma K's union over the blocks
    assert cert.delta_fail == pytest.approx(cert.phi * Delta + cert.blocks * at.at_tail(k_max - k0, eps_r))
    # the reported E is a fixed point: KOV at what Lemma Cap's charge leaves of Delta
    from engine.planner import composition as comp

    left = Delta - at.cap_charge(cert.E, cert.delta_fail)
    assert comp.kov_delta(cert.eps_block, d_mu, cert.blocks, cert.E) <= left * (1 + 1e-9)
    # no worse than any single phi of the grid
    for phi in itertools.islice(blk.FAIL_GRID, 0, None, 4):
        kl = blk.k_low_for(R, k0, eps_r, phi * Delta, k_max)
        if kl >= 1:
            nb = blk.blocks_bound(tops, R, kl)
            e = blk.compose_blocks(cert.eps_block, d_mu, nb, Delta, phi * Delta + nb * at.at_tail(k_max - k0, eps_r))
            assert e >= cert.E
    # a cap the round cannot exceed (k_max >= min(c, R)) is charged nothing
    loose = blk.certify_blocks(eps_bt, T, gamma, d_mu, 850, R, k0, 850, eps_r, Delta)
    assert loose.delta_fail == pytest.approx(loose.phi * Delta)


def test_choose_blocks_recertifies_at_its_budget() -> None:
    tops, R, E, Delta, eps_r = 10**9, 10**13, 1.0, 1e-6, 0.4
    ch = blk.choose_blocks(tops, R, E, Delta, eps_r)
    assert math.isfinite(ch.t_norm) and ch.k_low <= ch.k0 < ch.k_max
    gamma = 0.05
    T = blk.block_min_t(gamma, ch.eps_bt, ch.delta_mu, ch.x)
    cert = blk.certify_blocks(ch.eps_bt, T, gamma, ch.delta_mu, tops, R, float(ch.k0), ch.k_max,
                              eps_r, Delta)
    assert cert.E <= E * (1 + 1e-9)
    # Lemma K's union over the round's blocks fits the failure share the planner reserved for it
    assert min(R, tops + 1) * at.at_tail(ch.k_max - ch.k0, eps_r) <= ch.phi * Delta * (1 + 1e-9)


@pytest.mark.parametrize(("R", "eps_r", "g"), [(1, 1.0, 20.0), (50, 0.5, 120.0), (1000, 1.0, 90.0), (10, 0.1, 900.0)])
def test_lemma_n_prime_bounds_the_noise_only_failure_event(R: int, eps_r: float, g: float) -> None:
    """P[max_j zeta_j - min_b rho_b >= g] over R queries and R blocks, by numerical integration over
    the independent extremes (zeta ~ Lap(4/eps_r), rho ~ Lap(2/eps_r)), is at most Lemma N''s bound."""
    b_z, b_r = 4.0 / eps_r, 2.0 / eps_r
    s = np.linspace(-60 * b_z, 60 * b_z + g, 400_001)
    # density of M = max zeta: d/ds F_z(s)^R; P[min rho > s - g] = (1 - F_r(s - g))^R
    F = _cdf(s, b_z)
    f = R * F ** (R - 1) * np.exp(-np.abs(s) / b_z) / (2 * b_z)
    survive = (1.0 - _cdf(s - g, b_r)) ** R
    exact = 1.0 - integrate.trapezoid(f * survive, s)
    bound = blk.noise_fail_probability(R, g, eps_r)
    assert exact <= bound * (1 + 1e-6)
    if 2 * g / 3 >= 4 * math.log(2) / (3 * eps_r):  # the optimal split a lies in [0, g]: closed form
        assert bound == pytest.approx(min(1.0, blk.NOISE_FAIL_CONST * R * math.exp(-g * eps_r / 6)), rel=1e-9)


def test_noise_margin_is_the_smallest_and_k_low_follows() -> None:
    R, eps_r, d_fail = 80_000, 1e-3, 1e-10
    g = blk.noise_margin(R, eps_r, d_fail)
    assert blk.noise_fail_probability(R, g, eps_r) <= d_fail < blk.noise_fail_probability(R, g - 1, eps_r)
    assert g == pytest.approx(6 / eps_r * math.log(blk.NOISE_FAIL_CONST * R / d_fail), abs=2)
    assert blk.k_low_noise(R, 2000.0 + g, eps_r, d_fail) == 2001
    assert blk.k_low_noise(R, 2000.0 + g, eps_r, d_fail, k_max=2001) == 2001
    assert blk.k_low_noise(R, float(g) - 3, eps_r, d_fail) == 0


def test_certifier_takes_lemma_n_prime_when_the_blocks_are_expensive() -> None:
    """One block of 2000 tops (eps ~ 334): Lemma N's charge (1 + e^334) delta_fail cannot fit any
    budget, Lemma N' charges delta_fail once; the certificate is one block's epsilon at Delta."""
    R, c, Delta = 80_000, 2000, 1e-7
    g = blk.noise_margin(R, 1e-3, 1e-2 * Delta)
    cert = blk.certify_blocks(0.5, 3000, 0.1, 1e-8, c, R, float(c + g), c + 1, 1e-3, Delta)
    assert cert.lemma == "N'" and cert.blocks == 1 and cert.k_low == c + 1
    assert pytest.approx(blk.block_epsilon(0.5, 3000, 0.1, 1e-8, c), rel=1e-9) == cert.E
    assert cert.delta_fail <= 1e-2 * Delta
