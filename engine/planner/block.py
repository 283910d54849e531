"""Private restarts, training side: blocks of BetweenThresholds sharing one threshold noise
(docs/PRIVACY.md section 6; issue 8).

With restarts "private" a round is a sequence of *blocks*. A block draws one threshold noise
mu ~ Lap(b_mu), b_mu = 2/(eps' T), answers queries with per-query noise Lap(b_nu), b_nu = 6/(eps' T),
and ends when the restart test fires (no hard cap; k_max = ``block_cap`` is the most tops a block
is charged for, exceeded only on Lemma K's / K''s event). The results (all proven in
docs/PRIVACY.md):

* **Lemma I** (interval mass). For nu ~ Lap(b), an interval J of length w' > 0 and an interval I
  containing J with |I| = |J| + 2 Delta: P[nu in I] <= (1 + (e^{2 Delta/b} - 1)/(1 - e^{-w'/b}))
  P[nu in J].
* **Theorem B** (one threshold noise, pure bound, linear in the tops). A block with at most k tops
  is (eps'/2 + k eta_plus, delta_mu)-DP with respect to F (substitution, sensitivity Delta = 1/T,
  adaptive queries, any number of queries, any stopping rule that depends only on the answers and
  independent randomness), where, for any mu* with x := (2 gamma - 2 mu* - 2 Delta)/b_nu > 0,

      eta = 2 Delta / b_nu = eps'/3,   eta_plus = ln(1 + (e^eta - 1)/(1 - e^{-x})),
      delta_mu = P[mu > mu*] = e^{-mu*/b_mu} / 2.

  In terms of the declared delta_mu (``delta_bt`` of the schedule):
  x = (gamma T - 1) eps'/3 - (2/3) ln(1/(2 delta_mu)); the gap condition is x > 0, i.e.
  T > (1 + 2 ln(1/(2 delta_mu))/eps')/gamma.
* **Lemma N** (number of blocks). Let k_low <= k0 + 1. Except with probability
  delta_fail = R * at_tail(k0 - k_low + 1, eps_r), every block that is followed by another holds at
  least k_low tops, so a round with at most c tops has at most min(R, floor(c/k_low) + 1) blocks
  that answer anything. The failure is charged as in Lemma Cap: (E, Delta) becomes
  (E, Delta + (1 + e^E) delta_fail).
* **Lemma N'** (the same count, failure on the test noise alone). Except with probability
  delta_fail = R/2 (e^{-a eps_r/4} + e^{-(g - a) eps_r/2}), g = k0 - k_low + 1, any a in [0, g] --
  an event on the restart test's noise, which is independent of the data -- no run can fire the
  test early, so (E, Delta) becomes (E, Delta + delta_fail): no e^E factor. It wins whenever
  e^E is larger than R's share of the margin (small schedules, one block per round).
* **Lemma K / K'** (late restarts; the engine has no hard cap). A block passes k_max tops with its
  test silent except w.p. N tau(k_max - k0) (Lemma K: union over the block indices, charged by Lemma
  Cap with Lemma N's failure) or p(k_max - k0) (Lemma K': a noise-only event, charged once with N').

The blocks of a round are then composed with KOV (Kairouz-Oh-Viswanath 2015, Thm 3.3).

The planner's choice of the block parameters (``choose_blocks``) and the certifier's evaluation
(``certify_blocks``) share every formula, so a planned schedule re-certifies at its budget.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import expit

from engine.planner import above_threshold as at
from engine.planner import composition as comp

FAIL_GRID: tuple[float, ...] = tuple(10.0 ** -k for k in range(2, 19))
"""Fractions phi of the round's Delta the certifier may spend on Lemma N's failure event
(delta_fail = phi * Delta); it reports the best certificate over this grid (each is valid)."""
FAIL_SHARES = (0.05, 0.005)
"""The planner tries, for each share s, the largest phi in FAIL_GRID with (1 + e^E) phi <= s."""
EPS_BLOCK_CAP = 60.0
"""Largest per-block epsilon the search considers (a block's epsilon may exceed 1)."""
MAX_FIXED_POINT = 60


# ---------------------------------------------------------------------------------------------
# Theorem B


def eta_plus(eps_bt: float, x: float) -> float:
    """Theorem B's cost of one top: ln(1 + (e^{eps'/3} - 1)/(1 - e^{-x})) (Lemma I with
    2 Delta/b_nu = eps'/3); +inf when x <= 0 (the band may collapse)."""
    if x <= 0.0 or math.isnan(x) or eps_bt < 0.0:
        return math.inf
    if math.isinf(x):
        return eps_bt / 3.0
    return math.log1p(math.expm1(eps_bt / 3.0) / -math.expm1(-x))


def band_slack(eps_bt: float, T: int, gamma: float, delta_mu: float) -> float:
    """x = (2 gamma - 2 mu* - 2/T)/b_nu with mu* = b_mu ln(1/(2 delta_mu)):
    (gamma T - 1) eps'/3 - (2/3) ln(1/(2 delta_mu)). Theorem B needs x > 0."""
    if not (0.0 < delta_mu < 0.5 and eps_bt > 0.0 and T >= 1 and 0.0 < gamma < 0.5):
        return -math.inf
    return (gamma * T - 1.0) * eps_bt / 3.0 - (2.0 / 3.0) * math.log(1.0 / (2.0 * delta_mu))


def block_epsilon(eps_bt: float, T: int, gamma: float, delta_mu: float, tops: int) -> float:
    """Theorem B: epsilon of one block with at most ``tops`` tops (its delta is delta_mu);
    +inf if the gap condition fails."""
    x = band_slack(eps_bt, T, gamma, delta_mu)
    ep = eta_plus(eps_bt, x)
    if not math.isfinite(ep):
        return math.inf
    return eps_bt / 2.0 + tops * ep


def block_min_t(gamma: float, eps_bt: float, delta_mu: float, x: float) -> int:
    """Smallest integer T whose band slack (:func:`band_slack`) is at least x > 0:
    T = ceil((1 + (3x + 2 ln(1/(2 delta_mu)))/eps')/gamma), re-checked in floating point."""
    if not (x > 0.0 and eps_bt > 0.0 and 0.0 < delta_mu < 0.5 and 0.0 < gamma < 0.5):
        raise ValueError("Theorem B needs x > 0, eps' > 0, delta_mu in (0, 1/2), gamma in (0, 1/2)")
    T = max(1, math.ceil((1.0 + (3.0 * x + 2.0 * math.log(1.0 / (2.0 * delta_mu))) / eps_bt)
                         / gamma * (1.0 + 1e-12)))
    while band_slack(eps_bt, T, gamma, delta_mu) < x:
        T = max(T + 1, math.ceil(T * (1.0 + 1e-12)))
    return T


def eps_bt_for(eps_block: float, tops: int, x: float) -> float:
    """Largest eps' whose Theorem B epsilon at slack x and ``tops`` tops is <= eps_block."""
    if eps_block <= 0.0 or x <= 0.0:
        return 0.0

    def f(e: float) -> float:
        return e / 2.0 + tops * eta_plus(e, x) - eps_block

    hi = 2.0 * eps_block  # f(2 eps_block) >= 0
    if not f(hi) >= 0.0:
        return 0.0
    e = float(brentq(f, 0.0, hi, xtol=1e-300, rtol=1e-13))
    while e > 0.0 and f(e) > 0.0:
        e *= 1.0 - 1e-12
    return e


# ---------------------------------------------------------------------------------------------
# Lemma N


def restart_margin(queries: int, eps_r: float, delta_fail: float) -> int:
    """Smallest g with queries * at_tail(g, eps_r) <= delta_fail (Lemma N: k0 - k_low + 1 >= g)."""
    return at.at_margin(eps_r, min(0.49, delta_fail / max(1, queries)))


def k_low_for(queries: int, k0: float, eps_r: float, delta_fail: float, k_max: int | None = None) -> int:
    """Largest integer k_low >= 0 with queries * at_tail(k0 - k_low + 1, eps_r) <= delta_fail
    and k_low <= k_max (in the analysis device M~ a block ended at k_max holds k_max tops); 0: no
    k_low >= 1 works."""
    g = restart_margin(queries, eps_r, delta_fail)
    k_low = max(0, math.floor(Fraction(k0) + 1 - g))  # exact: k0 may exceed float precision
    return k_low if k_max is None else min(k_low, k_max)


NOISE_FAIL_CONST = 0.75 * 2.0 ** (1.0 / 3.0)
"""min over a of (1/2)(e^{-a e/4} + e^{-(g-a) e/2}) = (3/4) 2^{1/3} e^{-g e/6} (at a = 2g/3 - 4 ln 2/(3e))."""


def noise_fail_probability(queries: int, g: float, eps_r: float) -> float:
    """Lemma N' (docs/PRIVACY.md 6.4): P[zeta_j - rho_b >= g for some query j <= R and block
    b <= R] <= R/2 (e^{-a eps_r/4} + e^{-(g - a) eps_r/2}) for every a in [0, g] (zeta ~ Lap(4/eps_r),
    rho ~ Lap(2/eps_r); a union bound on max zeta >= a and max(-rho) >= g - a). Evaluated at the
    best a, clipped to [0, g]; capped at 1."""
    if queries <= 0:
        return 0.0
    if g <= 0.0 or eps_r <= 0.0:
        return 1.0
    a = min(g, max(0.0, 2.0 * g / 3.0 - 4.0 * math.log(2.0) / (3.0 * eps_r)))
    return min(1.0, 0.5 * queries * (math.exp(-a * eps_r / 4.0) + math.exp(-(g - a) * eps_r / 2.0)))


def noise_margin(queries: int, eps_r: float, delta_fail: float) -> int:
    """Smallest integer g with :func:`noise_fail_probability` (queries, g, eps_r) <= delta_fail."""
    if not 0.0 < delta_fail < 1.0 or eps_r <= 0.0:
        raise ValueError("Lemma N' needs delta_fail in (0, 1) and eps_r > 0")
    g = max(1, math.ceil(6.0 / eps_r * math.log(NOISE_FAIL_CONST * max(1, queries) / delta_fail)))
    while g > 1 and noise_fail_probability(queries, g - 1, eps_r) <= delta_fail:
        g -= 1
    while noise_fail_probability(queries, g, eps_r) > delta_fail:
        g += 1
    return g


def k_low_noise(queries: int, k0: float, eps_r: float, delta_fail: float, k_max: int | None = None) -> int:
    """Lemma N': the largest integer k_low >= 0 with noise_fail_probability(R, k0 - k_low + 1) <=
    delta_fail and k_low <= k_max; 0: no k_low >= 1 works."""
    g = noise_margin(queries, eps_r, delta_fail)
    k_low = max(0, math.floor(Fraction(k0) + 1 - g))
    return k_low if k_max is None else min(k_low, k_max)


def blocks_bound(tops: int, queries: int, k_low: int) -> int:
    """Lemma N: blocks that answer something <= min(R, floor(c/k_low) + 1) (c = the round's
    largest number of tops)."""
    if k_low < 1:
        return queries
    return max(1, min(queries, tops // k_low + 1))


def compose_blocks(eps_block: float, delta_mu: float, blocks: int, Delta: float,
             delta_fail: float) -> float:
    """Smallest E with KOV(blocks x (eps_block, delta_mu)) + (1 + e^E) delta_fail <= Delta
    (a fixed point in E, iterated from below; each iterate is computed at a budget that is valid
    for a larger E, so the returned value is certified)."""
    if not math.isfinite(eps_block):
        return math.inf
    guess = 0.0
    for _ in range(MAX_FIXED_POINT):
        budget = Delta - at.cap_charge(guess, delta_fail)
        if budget <= 0.0:
            return math.inf
        E = comp.kov_epsilon(eps_block, delta_mu, blocks, budget)
        if not math.isfinite(E):
            return math.inf
        if guess >= E:
            return guess
        guess = E * (1.0 + 1e-9) + 1e-12
    return math.inf


@dataclass(frozen=True, slots=True)
class BlockCertificate:
    """What Theorem B + Lemma N + KOV certify for one round with private restarts."""

    E: float
    """Epsilon of the round's BT (all its blocks) at the round's Delta; +inf if not certified."""
    eps_block: float
    delta_mu: float
    tops_per_block: int
    """min(k_max, c): the most tops a block is charged for."""
    x: float
    """Band slack in units of b_nu (Theorem B)."""
    k_low: int
    blocks: int
    delta_fail: float
    """Everything the certificate charges for failures: Lemma N (or N') plus Lemma K (or K')."""
    phi: float
    reason: str = ""
    lemma: str = "N"
    """Which count lemma the certificate uses: "N" (failure charged (1 + e^E) delta_fail by Lemma
    Cap) or "N'" (a noise-only failure event, charged delta_fail)."""


def certify_blocks(eps_bt: float, T: int, gamma: float, delta_mu: float, tops: int, queries: int,
                   k0: float, k_max: int, eps_r: float, Delta: float) -> BlockCertificate:
    """The round's BT epsilon at ``Delta`` under private restarts: Theorem B per block (with the
    declared delta_mu), Lemma N for the number of blocks (best phi in :data:`FAIL_GRID`), KOV.

    ``tops`` is the round's largest number of tops, min(c, R)."""
    k_blk = max(1, min(k_max, tops))
    x = band_slack(eps_bt, T, gamma, delta_mu)
    e_b = block_epsilon(eps_bt, T, gamma, delta_mu, k_blk)
    if not math.isfinite(e_b):
        return BlockCertificate(math.inf, math.inf, delta_mu, k_blk, x, 0, queries, 0.0, 0.0,
                                "Theorem B's gap condition fails (band slack x <= 0)")
    best = BlockCertificate(math.inf, e_b, delta_mu, k_blk, x, 0, queries, 0.0, 0.0,
                            "no failure budget phi gives a valid block count")
    capped = k_max < tops  # a block can hold more than k_max tops only if k_max < min(c, R)
    for phi in FAIL_GRID:
        d_fail = phi * Delta
        k_low = k_low_for(queries, k0, eps_r, d_fail, k_max)
        if k_low >= 1:  # Lemma N + Lemma K (union over the block indices) + Lemma Cap
            blocks = blocks_bound(tops, queries, k_low)
            d_all = d_fail + (blocks * at.at_tail(k_max - k0, eps_r) if capped else 0.0)
            E = compose_blocks(e_b, delta_mu, blocks, Delta, d_all)
            if E < best.E:
                best = BlockCertificate(E, e_b, delta_mu, k_blk, x, k_low, blocks, d_all, phi)
        k_low = k_low_noise(queries, k0, eps_r, d_fail, k_max)
        if k_low >= 1:  # Lemmas N' and K': failures are events on the test noise alone, charged once
            blocks = blocks_bound(tops, queries, k_low)
            d_all = d_fail + (noise_fail_probability(queries, k_max - k0, eps_r) if capped else 0.0)
            if d_all < Delta:
                E = comp.kov_epsilon(e_b, delta_mu, blocks, Delta - d_all)
                if E < best.E:
                    best = BlockCertificate(E, e_b, delta_mu, k_blk, x, k_low, blocks, d_all, phi, lemma="N'")
    return best


# ---------------------------------------------------------------------------------------------
# The planner's choice


def plan_phi(E: float, share: float = 1e-3) -> float:
    """The largest phi in :data:`FAIL_GRID` with (1 + e^E) phi <= share."""
    for phi in FAIL_GRID:
        if at.cap_charge(E, phi) <= share:
            return phi
    return FAIL_GRID[-1]


@dataclass(frozen=True, slots=True)
class BlockChoice:
    """Block parameters for a round (private restarts), and Lemma C.3-style t_norm = gamma T."""

    eps_bt: float
    delta_mu: float
    x: float
    k_low: int
    k0: int
    k_max: int
    blocks: int
    phi: float
    t_norm: float


_THETAS = expit(np.linspace(-9.0, 9.0, 25))
_XS = np.geomspace(0.5, 24.0, 11)


def _margins(queries: int, tops: int, phi: float, Delta: float, eps_r: float) -> tuple[float, float, int, int]:
    """Lemma N's margin g_f at delta_fail = phi Delta, and Lemma K's g_c with N_max tau(g_c) <= delta_fail
    (N_max = min(R, c + 1) blocks at most): the round's failures total <= 2 delta_fail."""
    d_fail = phi * Delta
    g_f = restart_margin(queries, eps_r, d_fail)
    g_c = at.at_margin(eps_r, d_fail / max(1, min(queries, tops + 1)))
    return phi, d_fail, g_f, g_c


@functools.lru_cache(maxsize=512)
def _gdp_mus(E: float, budget: float) -> tuple[np.ndarray, np.ndarray]:
    th, mus = [], []
    for theta in _THETAS:
        b = budget * (1.0 - theta) / (1.0 - theta * budget)
        if b > 0.0:
            th.append(float(theta))
            mus.append(comp.gdp_mu(E, float(b)))
    return np.asarray(th), np.asarray(mus)


def approx_blocks(tops: int, queries: int, E: float, Delta: float, eps_r: float,
                  acc_norm: float = 0.0) -> BlockChoice:
    """Fast search-only estimate of the best block parameters (Gaussian-DP approximation of the
    composition, small-eps' approximation of eta_plus); never used to certify.

    ``acc_norm`` is an accuracy floor in the same units, gamma T >= acc_norm/eps' (Claim D.7):
    the objective is max(Theorem B's gamma T, acc_norm/eps'); Lemma N's phi is searched over
    :data:`FAIL_SHARES`."""
    best: BlockChoice | None = None
    for phi in dict.fromkeys(plan_phi(E, sh / 2.0) for sh in FAIL_SHARES):
        cand = _approx_at_phi(tops, queries, E, Delta, eps_r, acc_norm, phi)
        if best is None or cand.t_norm < best.t_norm:
            best = cand
    assert best is not None
    return best


def _approx_at_phi(tops: int, queries: int, E: float, Delta: float, eps_r: float,
                   acc_norm: float, phi: float) -> BlockChoice:
    phi, d_fail, g_f, g_c = _margins(queries, tops, phi, Delta, eps_r)
    budget = Delta - at.cap_charge(E, 2.0 * d_fail)
    thetas, mus = _gdp_mus(round(E, 12), float(budget))
    ftops, fq = float(tops), float(queries)
    # the optimum sits near k_low ~ k_max - k_low = g_f - 1 + g_c (it minimises k_max/sqrt(k_low))
    m = max(1.0, float(g_f - 1 + g_c))
    lows = np.unique(np.clip(np.round(np.r_[1.0, m * np.geomspace(0.05, 20.0, 29)]), 1.0,
                             max(1.0, ftops)))
    k_low = lows[:, None, None]
    x = _XS[None, :, None]
    theta = thetas[None, None, :]
    mu = mus[None, None, :]
    blocks = np.minimum(fq, np.floor(ftops / k_low) + 1.0)
    k_blk = np.minimum(k_low + (g_f - 1) + g_c, ftops)
    delta_mu = theta * budget / blocks
    L = np.log(1.0 / (2.0 * delta_mu))
    a = 1.0 / -np.expm1(-x)
    eps_b = mu / np.sqrt(blocks)
    eps_bt = eps_b / (0.5 + k_blk * a / 3.0)
    t = np.maximum(1.0 + (3.0 * x + 2.0 * L) / eps_bt, acc_norm / eps_bt)
    j = np.unravel_index(int(np.argmin(t)), t.shape)
    kl = int(lows[j[0]])
    k0 = kl + g_f - 1
    return BlockChoice(eps_bt=float(eps_bt[j]), delta_mu=float(delta_mu[j[0], 0, j[2]]),
                       x=float(_XS[j[1]]), k_low=kl, k0=k0, k_max=k0 + g_c,
                       blocks=int(blocks[j[0], 0, 0]), phi=phi, t_norm=float(t[j]))


def choose_blocks(tops: int, queries: int, E: float, Delta: float, eps_r: float,
                  acc_norm: float = 0.0) -> BlockChoice:
    """Exact block parameters: (k_low, x) from :func:`approx_blocks`, then the delta split theta
    optimised with the exact KOV composition (as ``composition.choose_instance``) so that the round's
    blocks meet (E, Delta) including Lemma N's failure charge. t_norm = +inf if nothing works."""
    guess = approx_blocks(tops, queries, E, Delta, eps_r, acc_norm)
    phi, d_fail, g_f, g_c = _margins(queries, tops, guess.phi, Delta, eps_r)
    budget = Delta - at.cap_charge(E, 2.0 * d_fail)

    def at_choice(kl: int, x: float, u: float) -> BlockChoice:
        theta = float(expit(u))
        blocks = blocks_bound(tops, queries, kl)
        k0 = kl + g_f - 1
        k_max = k0 + g_c
        k_blk = max(1, min(k_max, tops))
        delta_mu = -math.expm1(math.log1p(-theta * budget) / blocks)
        rr = budget * (1.0 - theta) / (1.0 - theta * budget)
        bad = BlockChoice(0.0, 0.5, x, kl, k0, k_max, blocks, phi, math.inf)
        if not (0.0 < delta_mu < 0.5) or rr <= 0.0:
            return bad
        e_b = comp.kov_max_eps0(blocks, E, rr, cap=EPS_BLOCK_CAP)
        e_bt = eps_bt_for(e_b, k_blk, x)
        if e_bt <= 0.0:
            return bad
        t = max(1.0 + (3.0 * x + 2.0 * math.log(1.0 / (2.0 * delta_mu))) / e_bt, acc_norm / e_bt)
        return BlockChoice(e_bt, delta_mu, x, kl, k0, k_max, blocks, phi, t)

    def best_theta(kl: int, x: float) -> BlockChoice:
        res = minimize_scalar(lambda u: at_choice(kl, x, u).t_norm, bounds=(-12.0, 12.0),
                              method="bounded", options={"xatol": 0.1})
        out = at_choice(kl, x, float(res.x))
        cand = at_choice(kl, x, 0.0)  # guard against a poor local search
        return cand if cand.t_norm < out.t_norm else out

    return best_theta(guess.k_low, guess.x)
