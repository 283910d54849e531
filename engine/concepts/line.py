"""The distinct points of S-hat o D-hat on the real line, as LabelBoost for thresholds and intervals
sees them: only the (at most m_S) labeled ones change a dichotomy's score.

With the l distinct points in increasing order and r_0 < ... < r_{q-1} the ranks of the q distinct
labeled ones, the cuts (or range ends) k = 0..l fall into q + 1 *groups* of equal score: group a
is (r_{a-1}, r_a] with r_{-1} = -1 and r_q = l. Sampling a group, then a cut inside it, costs
O(q) instead of O(l), and needs D-hat only sorted (``np.sort``), never ranked point by point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
I8 = NDArray[np.int8]


@dataclass(frozen=True, slots=True)
class LabeledRanks:
    values: F64
    """The distinct unlabeled points, increasing."""
    points: F64
    """The q distinct labeled points, increasing."""
    zeros: I64
    """How many labeled points at each of ``points`` carry label 0 ..."""
    ones: I64
    """... and label 1."""
    rank: I64
    """Rank of each of ``points`` among all l distinct points."""
    ell: int
    """l, the number of distinct points of S-hat o D-hat."""
    own: NDArray[np.bool_]
    """Which of ``points`` are not also unlabeled points."""

    @classmethod
    def of(cls, x_lab: F64, y_lab: I8, values: F64) -> LabeledRanks:
        """``values``: the sorted distinct points of D-hat (``base.distinct_of_sorted``)."""
        points, inv = np.unique(x_lab, return_inverse=True)
        inv = inv.reshape(-1)
        zeros = np.bincount(inv[y_lab == 0], minlength=points.size)
        ones = np.bincount(inv[y_lab == 1], minlength=points.size)
        below = np.searchsorted(values, points, side="left")  # distinct unlabeled points below
        shared = np.zeros(points.size, dtype=bool)
        inside = below < values.size
        shared[inside] = values[below[inside]] == points[inside]
        own = ~shared
        n_own = own.astype(np.int64)
        rank = below + np.cumsum(n_own) - n_own
        return cls(values, points, zeros, ones, rank, int(values.size + n_own.sum()), own)

    def bounds(self) -> I64:
        """[-1, r_0, ..., r_{q-1}, l]: group a is (bounds[a], bounds[a + 1]]."""
        return np.concatenate([[-1], self.rank, [self.ell]]).astype(np.int64)

    def value(self, k: int) -> float:
        """The k-th smallest distinct point (0-based); +inf for k = l."""
        return kth_distinct(k, self.rank[self.own], self.points[self.own], self.values)


def kth_distinct(k: int, own_rank: I64, own_points: F64, values: F64) -> float:
    """The k-th smallest (0-based) of the distinct points ``values`` o ``own_points`` (+inf for k = l),
    given the increasing ranks ``own_rank`` of the labeled-only points among all of them."""
    j = int(np.searchsorted(own_rank, k, side="left"))  # labeled-only points ranked below k
    if j < own_rank.size and own_rank[j] == k:
        return float(own_points[j])
    return float(values[k - j]) if k - j < values.size else np.inf
