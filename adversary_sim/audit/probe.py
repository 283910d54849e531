"""The adversary's statistic when it probes one point of a round over and over.

A game's view of such a round is a string of labels: 0 (L), 1 (top or R), -1 (refused: the round
failed). The probe's vote count is v0 in world 0 and v1 = v0 + 1 in world 1 (one training example
flipped); the score is the log-likelihood ratio of the view, log P1/P0: the Neyman-Pearson statistic
for these two hypotheses (Jagielski et al. 2020 argue for such optimal tests when auditing). Every
law below is the engine's exactly: integer counts, integer thresholds lo/hi and discrete Laplace noise
DLap(t) at the exact scales of ``engine.design.noise_plan``, P[Z = z] = (1 - p)/(1 + p) p^{|z|},
p = e^{-1/t}.

**target-charged** (:class:`TctLLR`): every query draws its own noise and the round has no other
data-dependent state, so each answered label contributes log P1(label) - log P0(label), with
P(L) = P[v + z < lo] = P[z <= lo - v - 1]. The halting time depends on the data only through the
labels already shown (the test reads the top count and independent noise), so refusals contribute
nothing. With the vote on a band edge (v0 = lo - 1, v1 = lo) each query is randomized response at
level eps0 = 1/t, and the round ends at about c tops: the view of docs/notes/target_charging.md 3.3.
:func:`edge_law` gives the exact law of that view when the round ends at the hard cap c, from which
:func:`preregistered_test` picks the audit's test before any game is played, and
:func:`exact_epsilon` the epsilon the view attains at a given delta (what infinitely many games
would show).

**paper** (:class:`PaperLLR`): the threshold noise mu ~ DLap(t_mu) is redrawn after every top, so the
view splits into independent *segments* "m zeros, then a 1" plus, unless the round failed, a final
censored segment of m zeros, with F(mu) = P(L | mu) = P[nu <= lo + mu - v - 1]:

    P(m zeros then a 1)  = sum over mu of P[mu] F(mu)^m (1 - F(mu)),
    P(m zeros, censored) = sum over mu of P[mu] F(mu)^m

(an R answer needs v + nu above hi - mu, hundreds of noise scales away in the audit's rounds, so a 1
is a top). The sums run over |mu| <= 40 t_mu + 2: the rest has mass below e^-40.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import stats
from scipy.special import logsumexp

from everlast.adversary_sim.audit.stats import clopper_pearson_upper, epsilon_from_rates
from everlast.engine import roots
from everlast.engine.design import NoisePlan

_SPAN = 40.0


def log_cdf(k: NDArray[np.float64] | float, scale: Fraction) -> NDArray[np.float64]:
    """log P[Z <= k] for Z ~ DLap(scale) and integer k: p^{-k}/(1+p) for k < 0, 1 - p^{k+1}/(1+p)
    for k >= 0."""
    kk = np.asarray(k, dtype=np.float64)
    a = 1.0 / float(scale)
    lp1 = math.log1p(math.exp(-a))
    neg = kk * a - lp1  # k < 0
    pos = np.log1p(-np.exp(-(np.maximum(kk, 0.0) + 1.0) * a - lp1))
    return np.asarray(np.where(kk < 0, neg, pos), dtype=np.float64)


def log_sf(k: NDArray[np.float64] | float, scale: Fraction) -> NDArray[np.float64]:
    """log P[Z > k] = log P[Z <= -k - 1] (the law is symmetric)."""
    return log_cdf(-np.asarray(k, dtype=np.float64) - 1.0, scale)


class Scorer:
    """Scores a matrix of labels (games x queries; -1 = refused, only as a suffix)."""

    def scores(self, labels: NDArray[np.int8]) -> NDArray[np.float64]:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class TctLLR(Scorer):
    """target-charged: per label, log P1 - log P0 (module docstring)."""

    zero: float
    """log P1(L) - log P0(L)."""
    one: float
    """log P1(top or R) - log P0(top or R)."""

    @classmethod
    def build(cls, v0: int, v1: int, plan: NoisePlan) -> TctLLR:
        f0, f1 = (float(log_cdf(plan.lo - v - 1, plan.query)) for v in (v0, v1))
        g0, g1 = (float(log_sf(plan.lo - v - 1, plan.query)) for v in (v0, v1))
        return cls(f1 - f0, g1 - g0)

    def scores(self, labels: NDArray[np.int8]) -> NDArray[np.float64]:
        n0 = np.count_nonzero(labels == 0, axis=1)
        n1 = np.count_nonzero(labels == 1, axis=1)
        return np.asarray(n0 * self.zero + n1 * self.one, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class PaperLLR(Scorer):
    """paper: log-likelihood-ratio tables of the segments (module docstring)."""

    top: NDArray[np.float64]
    """log P1 - log P0 of "m zeros then a 1", indexed by m."""
    censored: NDArray[np.float64]
    """log P1 - log P0 of "m zeros" at the end of the view (the round did not fail)."""

    @classmethod
    def build(cls, v0: int, v1: int, plan: NoisePlan, queries: int) -> PaperLLR:
        assert plan.threshold is not None
        return _paper(v0, v1, plan.lo, plan.threshold, plan.query, queries)

    def scores(self, labels: NDArray[np.int8]) -> NDArray[np.float64]:
        n, k = labels.shape
        ones = labels == 1
        pos = np.arange(k, dtype=np.int64)
        last = np.maximum.accumulate(np.where(ones, pos, -1), axis=1)
        prev = np.concatenate([np.full((n, 1), -1, dtype=np.int64), last[:, :-1]], axis=1)
        seg = np.where(ones, pos - prev - 1, 0)
        s = np.where(ones, self.top[np.clip(seg, 0, self.top.size - 1)], 0.0).sum(axis=1)
        answered = (labels >= 0).sum(axis=1)
        failed = answered < k
        tail = answered - (last[:, -1] + 1)
        s += np.where(failed, 0.0, self.censored[np.clip(tail, 0, self.censored.size - 1)])
        return np.asarray(s, dtype=np.float64)


def segment_tables(d: int, t_mu: Fraction, t_nu: Fraction, m_max: int) -> tuple[NDArray[np.float64],
                                                                                NDArray[np.float64]]:
    """log P(m zeros then a 1) and log P(m zeros, censored), m = 0..m_max, for a probe whose count
    is d above the lower threshold (v = lo + d)."""
    span = math.ceil(_SPAN * float(t_mu)) + 2
    mu = np.arange(-span, span + 1, dtype=np.float64)
    a = 1.0 / float(t_mu)
    log_w = math.log(-math.expm1(-a)) - math.log1p(math.exp(-a)) - np.abs(mu) * a
    k = mu - d - 1.0  # L iff nu <= lo + mu - v - 1
    lf, l1 = log_cdf(k, t_nu), log_sf(k, t_nu)
    m = np.arange(m_max + 1, dtype=np.float64)[:, None]
    base = log_w[None, :] + m * lf[None, :]
    return logsumexp(base + l1[None, :], axis=1), logsumexp(base, axis=1)


@lru_cache(maxsize=8)
def _paper(v0: int, v1: int, lo: int, t_mu: Fraction, t_nu: Fraction, queries: int) -> PaperLLR:
    top0, cen0 = segment_tables(v0 - lo, t_mu, t_nu, queries)
    top1, cen1 = segment_tables(v1 - lo, t_mu, t_nu, queries)
    return PaperLLR(top1 - top0, cen1 - cen0)


# -- the band-edge view of a target-charged round, exactly -----------------------------------------


@dataclass(frozen=True, slots=True)
class EdgeLaw:
    """The band-edge view of a target-charged round that ends at its c-th top (the hard cap), as the
    number N of L answers before it: N ~ NegativeBinomial(c, P_w(top)) in world w."""

    c: int
    p_top: tuple[float, float]
    """P(label 1) per query in world 0 and world 1."""
    llr: TctLLR

    def pmf(self, world: int, n_max: int) -> NDArray[np.float64]:
        return np.asarray(stats.nbinom.pmf(np.arange(n_max + 1), self.c, self.p_top[world]), dtype=np.float64)

    def score(self, n_zeros: NDArray[np.int64] | int) -> NDArray[np.float64]:
        """The LLR of the view with c ones and ``n_zeros`` zeros."""
        return np.asarray(self.c * self.llr.one + np.asarray(n_zeros) * self.llr.zero, dtype=np.float64)


def edge_law(plan: NoisePlan, v0: int, v1: int) -> EdgeLaw:
    llr = TctLLR.build(v0, v1, plan)
    p = tuple(float(np.exp(log_sf(plan.lo - v - 1, plan.query))) for v in (v0, v1))
    return EdgeLaw(plan.c, (p[0], p[1]), llr)


def _n_max(law: EdgeLaw) -> int:
    p = min(law.p_top)
    return int(law.c / p * 4 + 60 / p) + 10


def exact_epsilon(law: EdgeLaw, delta: float) -> float:
    """The smallest E with P_a[S] <= e^E P_b[S] + delta for every event S of the view and both
    orders of the worlds: what infinitely many games of this adversary would show."""
    n = _n_max(law)
    p0, p1 = law.pmf(0, n), law.pmf(1, n)

    def excess(E: float) -> float:
        return max(float(np.maximum(p0 - math.exp(E) * p1, 0.0).sum()),
                   float(np.maximum(p1 - math.exp(E) * p0, 0.0).sum()))

    def within(E: float) -> bool:
        return not excess(E) > delta

    _, hi = roots.grow_until(within, 0.0, 1.0)  # doubling hi; the search keeps lo = 0
    return roots.smallest_float(within, 0.0, hi, steps=60)


def preregistered_test(law: EdgeLaw, n_eval: int, delta: float, alpha: float) -> tuple[float, int, float]:
    """The test "fewer than k L answers" (guess world 1) with the k that maximizes the bound expected
    from n_eval games per world at miscoverage alpha, chosen from the law alone, before any game, so
    that every game counts. Returns the score threshold (guess world 1 iff score >= threshold:
    the score falls by |llr.zero| per L answer), k and the expected bound."""
    n = _n_max(law)
    s0 = np.cumsum(law.pmf(0, n)[::-1])[::-1]  # P0[N >= k]
    s1 = np.cumsum(law.pmf(1, n)[::-1])[::-1]
    ks = np.arange(1, n)
    fpr = clopper_pearson_upper(np.round((1.0 - s0[ks]) * n_eval).astype(np.int64), n_eval, alpha / 2.0)
    fnr = clopper_pearson_upper(np.round(s1[ks] * n_eval).astype(np.int64), n_eval, alpha / 2.0)
    e = epsilon_from_rates(fpr, fnr, delta)
    i = int(np.argmax(e))
    k = int(ks[i])
    return float(law.score(k)) - 0.5 * law.llr.zero, k, float(e[i])
