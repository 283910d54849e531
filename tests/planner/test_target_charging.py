"""Lemma TC (target charging) checked independently of the planner's arithmetic:

* the Chernoff-KL tail the certifier uses is an upper bound on the exact binomial tail (scipy), and
  its number of charged steps K is at least the exact minimum (and not far above it);
* a round's certificate (E, Delta) is re-derived with an independent exact evaluation of the K-fold
  composition of eps0-DP steps (the binomial form of randomized response) and the exact tail;
* the edge adversary (every vote on a band edge, the worst case of Lemma Q's q ~ 1/2): the exact
  hockey-stick divergence of the round's transcript law, and a Monte Carlo estimate with
  Clopper-Pearson bounds, stay below the certified Delta at the certified E, in both directions,
  while a broken accounting that charges only the c tops is caught.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from everlast.engine.planner import composition as comp
from everlast.engine.planner import target_charging as tc

# ---------------------------------------------------------------------------- the binomial tail


@pytest.mark.parametrize("seed", range(6))
def test_tail_bound_is_above_the_exact_binomial_tail(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(200):
        K = int(10 ** rng.uniform(0.5, 7))
        q = float(rng.uniform(0.05, 0.95))
        a = int(rng.integers(0, K + 1))
        exact = float(stats.binom.cdf(a, K, q))
        assert tc.binom_lower_tail(K, q, a) >= exact * (1 - 1e-12)


@pytest.mark.parametrize(("c", "q", "target"), [(1, 0.5, 1e-3), (20, 0.4999, 1e-6), (200, 0.49, 1e-9),
                                                (5000, 0.4999997, 1e-12), (10**5, 0.3, 1e-15),
                                                (10**6, 0.4999999, 1e-10)])
def test_charged_steps_against_the_exact_tail(c: int, q: float, target: float) -> None:
    k_cert = tc.charged_steps(c, q, target)
    assert stats.binom.cdf(c - 1, k_cert, q) <= tc.binom_lower_tail(k_cert, q, c - 1) <= target
    # the exact minimum: the smallest K whose exact tail meets the target
    lo, hi = c, k_cert
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if stats.binom.cdf(c - 1, mid, q) <= target else (mid, hi)
    k_exact = hi if stats.binom.cdf(c - 1, lo, q) > target else lo
    assert k_cert >= k_exact
    if c >= 5000:  # the Chernoff bound costs ~ln sqrt(K) in the exponent: a ~1% larger K
        assert k_cert <= 1.02 * k_exact


# ---------------------------------------------------------------------------- the round's (E, Delta)


def _rr_delta(eps0: float, K: int, E: float) -> float:
    """Exact hockey-stick divergence of the K-fold composition of randomized response RR(eps0)
    (Kairouz-Oh-Viswanath: the worst eps0-DP step), in log space:
    sum over l of Bin(K, p)(l) max(0, 1 - e^{E - eps0 (2l - K)}), p = e^eps0/(1 + e^eps0)."""
    l = np.arange(K + 1)  # noqa: E741
    p = math.exp(eps0) / (1 + math.exp(eps0))
    logpmf = stats.binom.logpmf(l, K, p)
    loss = eps0 * (2 * l - K)
    terms = np.where(loss > E, np.exp(logpmf) * -np.expm1(E - loss), 0.0)
    return float(np.sum(terms))


@pytest.mark.parametrize(("eps0", "m", "c", "R", "Delta"), [
    (0.05, 60, 40, 10**6, 1e-6), (0.01, 500, 300, 10**8, 1e-6), (0.2, 30, 10, 10**4, 1e-3),
    (0.1, 40, 50, 120, 1e-4),  # R below the tail's K: every query charged
])
def test_round_certificate_rederived(eps0: float, m: int, c: int, R: int, Delta: float) -> None:
    r = tc.round_epsilon(eps0, m, c, R, Delta)
    assert math.isfinite(r.E) and r.K <= R
    tail = 0.0 if r.K >= R else float(stats.binom.cdf(c - 1, r.K, r.q))
    assert tail <= r.delta_tail
    assert _rr_delta(eps0, r.K, r.E) + tail <= Delta * (1 + 1e-9)  # Lemma TC: delta_K + delta_tail
    assert r.q <= (1 - math.exp(-eps0 * m)) / (1 + math.exp(eps0)) * (1 + 1e-12)


# ---------------------------------------------------------------------------- the edge adversary


def _edge_laws(eps0: float, m: int) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """(L, TOP, R) laws of one query whose count sits on the upper band edge (count = hi) in world 0
    and just above it (hi + 1) in world 1; the band holds m counts. Noise: two-sided geometric."""
    r = math.exp(-eps0)

    def le(x: int) -> float:  # P[Z <= x]
        return r ** (-x) / (1 + r) if x < 0 else 1 - r ** (x + 1) / (1 + r)

    def law(v: int) -> tuple[float, float, float]:
        lo, hi = -(m - 1), 0  # TOP iff lo <= v + z <= hi
        p_l, p_r = le(lo - v - 1), le(-(hi - v + 1))
        return p_l, 1.0 - p_l - p_r, p_r

    return law(0), law(1)


class _Transcripts:
    """The exact law of the transcript of a round stopped at its c-th top (R large enough never to
    bind), in both worlds. A transcript's probability depends only on (n_L, n_R) before the c-th
    top: negative binomial times binomial. Transcripts with more than f_max non-tops are dropped
    (their mass is checked to be below 1e-12)."""

    def __init__(self, eps0: float, m: int, c: int, f_max: int) -> None:
        P0, P1 = _edge_laws(eps0, m)
        F = np.arange(f_max)[:, None]
        nl = np.arange(f_max)[None, :]
        self.ok = nl <= F
        log_c = special.gammaln(c + F) - special.gammaln(c) - special.gammaln(F + 1)

        def logp(P: tuple[float, float, float]) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                v = (log_c + c * math.log(P[1]) + special.gammaln(F + 1) - special.gammaln(nl + 1)
                     - special.gammaln(F - nl + 1) + nl * math.log(P[0]) + (F - nl) * math.log(P[2]))
            out: np.ndarray = np.where(self.ok, v, -np.inf)
            return out

        self.logp = (logp(P0), logp(P1))
        for lp in self.logp:
            assert 1.0 - float(np.sum(np.exp(lp[self.ok]))) < 1e-12
        with np.errstate(invalid="ignore"):
            self.loss = np.where(self.ok, self.logp[0] - self.logp[1], 0.0)

    def deltas(self, E: float) -> tuple[float, float]:
        """Exact hockey-stick divergences (P0 || P1, P1 || P0) at E."""
        out = []
        for a, b, sign in ((self.logp[0], self.logp[1], 1.0), (self.logp[1], self.logp[0], -1.0)):
            s = self.ok & (sign * self.loss > E)
            out.append(float(np.sum(np.exp(a[s])) - math.exp(E) * np.sum(np.exp(b[s]))))
        return out[0], out[1]


EDGE = [(0.1, 40, 50, 0.05), (0.2, 30, 30, 0.05), (0.05, 200, 200, 0.02)]


@pytest.mark.parametrize(("eps0", "m", "c", "Delta"), EDGE)
def test_edge_adversary_exact(eps0: float, m: int, c: int, Delta: float) -> None:
    cert = tc.round_epsilon(eps0, m, c, 10**9, Delta)
    law = _Transcripts(eps0, m, c, f_max=4 * c + 200)
    assert max(law.deltas(cert.E)) <= Delta
    # charging only the c tops (c-fold composition) is not a valid bound: it is caught
    broken = comp.kov_epsilon(eps0, 0.0, c, Delta)
    assert max(law.deltas(broken)) > 2 * Delta
    # and Lemma TC is not loose at the edge: the true E at Delta is within 40% of the certificate
    lo, hi = broken, cert.E
    for _ in range(20):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if max(law.deltas(mid)) > Delta else (lo, mid)
    assert hi >= 0.6 * cert.E


def _clopper_pearson(k: int, n: int, alpha: float) -> tuple[float, float]:
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - alpha, k + 1, n - k))
    return lo, hi


@pytest.mark.statistical
@pytest.mark.parametrize(("eps0", "m", "c", "Delta"), EDGE[:2])
def test_edge_adversary_monte_carlo(eps0: float, m: int, c: int, Delta: float) -> None:
    """Transcripts sampled from both worlds (fixed seed): the hockey-stick divergence at E,
    P_b[S] - e^E P_{1-b}[S] with S = {privacy loss > E}, bounded below with Clopper-Pearson
    (each bound at confidence 1 - 1e-9): below the certified Delta, above it for c-only charging."""
    n = 400_000
    rng = np.random.default_rng(20261124)
    laws = _edge_laws(eps0, m)
    ell = [math.log(laws[0][i] / laws[1][i]) for i in range(3)]

    def losses(P: tuple[float, float, float]) -> np.ndarray:
        f = rng.negative_binomial(c, P[1], size=n)  # non-tops before the c-th top
        n_l = rng.binomial(f, P[0] / (P[0] + P[2]))
        out: np.ndarray = c * ell[1] + n_l * ell[0] + (f - n_l) * ell[2]
        return out

    loss0, loss1 = losses(laws[0]), losses(laws[1])  # log P0/P1 of transcripts of each world

    def lower_delta(E: float) -> float:
        worst = -1.0
        for mine, other, sign in ((loss0, loss1, 1.0), (loss1, loss0, -1.0)):
            k_mine = int(np.sum(sign * mine > E))
            k_other = int(np.sum(sign * other > E))
            lo, _ = _clopper_pearson(k_mine, n, 1e-9)
            _, hi = _clopper_pearson(k_other, n, 1e-9)
            worst = max(worst, lo - math.exp(E) * hi)
        return worst

    cert = tc.round_epsilon(eps0, m, c, 10**9, Delta)
    assert lower_delta(cert.E) <= Delta
    assert lower_delta(comp.kov_epsilon(eps0, 0.0, c, Delta)) > Delta
