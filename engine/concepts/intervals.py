"""Intervals on the reals: c_{a,b}(x) = 1[a <= x <= b], plus the empty concept (VC dimension 2).

On l distinct points the class has l(l+1)/2 + 1 dichotomies: every contiguous range of the
sorted points, and the all-zero labeling. LabelBoost (paper, Appendix C.1) samples among them
exactly in O(l log l) by factoring the exponential mechanism over the range's right end.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from engine.concepts.base import (
    F64,
    I8,
    I64,
    Array,
    ConceptClass,
    Ensemble,
    LabelBoostResult,
    distinct_sorted,
    logcumsumexp,
    sample_log_weights,
    sort_chunks,
)
from engine.concepts.thresholds import midpoint_above, midpoint_below
from engine.errors import CorruptState


class IntervalEnsemble(Ensemble):
    """T intervals as two sorted endpoint arrays.

    votes(x) = #{a_k <= x} - #{b_k < x}: an interval with a_k <= b_k that has b_k < x also has
    a_k <= x, so the difference counts exactly the intervals containing x. The empty concept is
    stored as (+inf, +inf) and adds 0 to both counts. O(log T) per query.
    """

    __slots__ = ("a", "b")

    def __init__(self, a: F64, b: F64) -> None:
        a = np.sort(np.asarray(a, dtype=np.float64).ravel())
        b = np.sort(np.asarray(b, dtype=np.float64).ravel())
        if a.shape != b.shape:
            raise CorruptState("interval ensemble: endpoint arrays differ in length")
        self.a = a
        self.b = b

    @property
    def size(self) -> int:
        return int(self.a.size)

    def votes(self, x: Array) -> I64:
        inside_or_right = np.searchsorted(self.a, x, side="right")
        right = np.searchsorted(self.b, x, side="left")
        return (inside_or_right - right).astype(np.int64)

    def to_arrays(self) -> dict[str, Array]:
        return {"a": self.a, "b": self.b}


def interval_erm(xs: F64, ys: I8) -> tuple[F64, F64]:
    """Vectorized interval ERM over rows of sorted ``xs`` (labels ``ys`` in the same order).

    An interval covering sorted positions i..j-1 gains S_j - S_i over the empty concept, where
    S is the prefix sum of (+1 for label 1, -1 for label 0); the best j maximizes S_j minus the
    running minimum of S_i (i < j), i.e. a max-subarray per row. Cuts are only allowed between
    distinct values so tied points are all in or all out. Returns endpoints (a, b); the empty
    concept (chosen when no interval has positive gain) is (+inf, +inf).
    """
    rows, lam = xs.shape
    a = np.full(rows, np.inf)
    b = np.full(rows, np.inf)
    if lam == 0:
        return a, b
    big = np.iinfo(np.int64).max
    s = 2 * ys.astype(np.int64) - 1
    S = np.zeros((rows, lam + 1), dtype=np.int64)
    np.cumsum(s, axis=1, out=S[:, 1:])
    valid = np.ones((rows, lam + 1), dtype=bool)  # cut k: between sorted positions k-1 and k
    valid[:, 1:lam] = xs[:, 1:] > xs[:, :-1]
    s_masked = np.where(valid, S, big)
    run_min = np.minimum.accumulate(s_masked, axis=1)  # finite: cut 0 is always valid
    gain = np.where(valid[:, 1:], S[:, 1:] - run_min[:, :-1], np.iinfo(np.int64).min)
    r = np.arange(rows)
    j = np.argmax(gain, axis=1) + 1  # interval ends before sorted position j
    best = gain[r, j - 1]
    # first start i < j attaining the running minimum
    at_min = (np.arange(lam + 1)[None, :] < j[:, None]) & (s_masked == run_min[r, j - 1][:, None])
    i = np.argmax(at_min, axis=1)
    lo_a = xs[r, np.maximum(i - 1, 0)]
    a_int = np.where(i == 0, -np.inf, midpoint_above(lo_a, xs[r, np.minimum(i, lam - 1)]))
    hi_b = xs[r, np.minimum(j, lam - 1)]
    b_int = np.where(j == lam, np.inf, midpoint_below(xs[r, j - 1], hi_b))
    use = best > 0  # ties with the empty concept keep the empty concept (both are ERMs)
    a[use] = a_int[use]
    b[use] = b_int[use]
    return a, b


class Intervals(ConceptClass):
    """c_{a,b}(x) = 1[a <= x <= b], a <= b, and the empty concept."""

    name: ClassVar[str] = "intervals"
    vc_dim: int = 2

    def fit(self, x: F64, y: I8) -> IntervalEnsemble:
        xs, ys = sort_chunks(x, y)
        a, b = interval_erm(xs, ys)
        return IntervalEnsemble(a, b)

    def ensemble_from_arrays(self, arrays: dict[str, Array]) -> IntervalEnsemble:
        return IntervalEnsemble(arrays["a"], arrays["b"])

    def label(self, params: dict[str, Any], x: F64) -> I8:
        a, b = float(params["a"]), float(params["b"])
        return ((x >= a) & (x <= b)).astype(np.int8)

    def labelboost(
        self, x_lab: F64, y_lab: I8, x_unlab: F64, rng: np.random.Generator
    ) -> LabelBoostResult:
        """Exponential mechanism over the l(l+1)/2 + 1 dichotomies (paper, Appendix C.1, step 4).

        With w_k = (#label 1) - (#label 0) at the k-th distinct point and W its prefix sums
        (W_0 = 0), the range [i..j] scores N0 + W_j - W_{i-1} and the empty labeling scores N0.
        Dropping the common N0: P[j] ∝ exp(W_j/2) * sum_{i<=j} exp(-W_{i-1}/2) (empty: ∝ 1),
        then P[i | j] ∝ exp(-W_{i-1}/2). Exact, in log space, and always two rng draws.
        """
        n_lab = x_lab.size
        values, rank = distinct_sorted(np.concatenate([x_lab, x_unlab]))
        ell = values.size
        r_lab = rank[:n_lab]
        n1 = np.bincount(r_lab[y_lab == 1], minlength=ell)
        n0 = np.bincount(r_lab[y_lab == 0], minlength=ell)
        W = np.zeros(ell + 1, dtype=np.int64)
        np.cumsum(n1 - n0, out=W[1:])
        N0 = int(n0.sum())
        half = W.astype(np.float64) / 2.0
        log_right = np.concatenate([[0.0], half[1:] + logcumsumexp(-half[:ell])])
        j = sample_log_weights(log_right, rng)  # 0: the empty labeling
        if j == 0:
            sample_log_weights(np.zeros(1), rng)  # keep the number of draws fixed (replay)
            labels = np.zeros(rank.size, dtype=np.int8)
            score = N0
        else:
            i = sample_log_weights(-half[:j], rng)  # range covers sorted positions i..j-1
            labels = ((rank >= i) & (rank < j)).astype(np.int8)
            score = N0 + int(W[j] - W[i])
        return LabelBoostResult(
            labels_labeled=labels[:n_lab],
            labels_unlabeled=labels[n_lab:],
            n_dichotomies=ell * (ell + 1) // 2 + 1,
            score=score,
        )
