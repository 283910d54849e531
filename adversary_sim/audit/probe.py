"""The adversary's statistic when it probes one point of a round over and over.

A trial's view of such a round is a string of labels: 0 (BetweenThresholds said L), 1 (top, or R),
-1 (refused: the round failed). With the paper's rules the threshold noise mu is redrawn after every
top, so the view splits into independent *segments* "m zeros, then a 1" plus, unless the round
failed, a final censored segment of m zeros. If the probe's vote share sits d below/above the lower
threshold t_l (in vote units 1/T), then with F the CDF of the query noise Lap(6/eps') and f the
density of mu ~ Lap(2/eps') (both in vote units; Appendix C.2 of the paper),

    P(m zeros then a 1)  = integral f(mu) F(mu - d)^m (1 - F(mu - d)) dmu,
    P(m zeros, censored) = integral f(mu) F(mu - d)^m dmu

(an R answer needs the vote share above the *upper* threshold, hundreds of noise scales away here, so
a 1 is a top). The adversary's score is the log-likelihood ratio of world 1 (vote share q1) against
world 0 (q0): the Neyman-Pearson test for these two hypotheses, so the most powerful statistic for
this probe (Jagielski et al. 2020 argue for such optimal tests when auditing). The tables are
computed once by quadrature on a fine grid of mu.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy.special import logsumexp

_GRID = 2001
_SPAN = 40.0  # in units of mu's scale: e^-40 of the mass lies outside


def _segment_tables(d: float, b_mu: float, b_nu: float, m_max: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """log P(m zeros then a 1) and log P(m zeros, censored) for m = 0..m_max (vote units)."""
    grid = np.linspace(-_SPAN * b_mu, _SPAN * b_mu, _GRID)
    logw = -np.abs(grid) / b_mu - np.log(2.0 * b_mu) + np.log(grid[1] - grid[0])
    x = grid - d
    log_f = np.where(x < 0, np.log(0.5) + x / b_nu, np.log1p(-0.5 * np.exp(-np.abs(x) / b_nu)))
    log_1mf = np.where(x < 0, np.log1p(-0.5 * np.exp(-np.abs(x) / b_nu)), np.log(0.5) - x / b_nu)
    m = np.arange(m_max + 1, dtype=np.float64)[:, None]
    base = logw[None, :] + m * log_f[None, :]
    return logsumexp(base + log_1mf[None, :], axis=1), logsumexp(base, axis=1)


@dataclass(frozen=True, slots=True)
class ProbeLLR:
    """Log-likelihood-ratio tables for a probe with vote share q0 (world 0) or q1 (world 1)."""

    top: NDArray[np.float64]
    """log P1 - log P0 of "m zeros then a 1", indexed by m."""
    censored: NDArray[np.float64]
    """log P1 - log P0 of "m zeros" at the end of the view (the round did not fail)."""

    @classmethod
    def build(cls, q0: float, q1: float, *, band: float, eps_bt: float, T: int, queries: int) -> ProbeLLR:
        return _build(q0, q1, band, eps_bt, T, queries)

    def scores(self, labels: NDArray[np.int8]) -> NDArray[np.float64]:
        """The LLR of each row of ``labels`` (trials x queries; -1 = refused, only as a suffix)."""
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


@lru_cache(maxsize=8)
def _build(q0: float, q1: float, band: float, eps_bt: float, T: int, queries: int) -> ProbeLLR:
    t_l = 0.5 - band
    b_mu, b_nu = 2.0 / eps_bt, 6.0 / eps_bt  # vote units (1/T)
    d0, d1 = (q0 - t_l) * T, (q1 - t_l) * T
    top0, cen0 = _segment_tables(d0, b_mu, b_nu, queries)
    top1, cen1 = _segment_tables(d1, b_mu, b_nu, queries)
    return ProbeLLR(top1 - top0, cen1 - cen0)
