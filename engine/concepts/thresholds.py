"""Thresholds on the reals: c_t(x) = 1[x >= t] (VC dimension 1)."""

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
    sample_log_weights,
    sort_chunks,
)


class ThresholdEnsemble(Ensemble):
    """T thresholds kept sorted: the vote on x is the number of thresholds <= x (binary search,
    O(log T) per query)."""

    __slots__ = ("t",)

    def __init__(self, t: F64) -> None:
        self.t = np.sort(np.asarray(t, dtype=np.float64))

    @property
    def size(self) -> int:
        return int(self.t.size)

    def votes(self, x: Array) -> I64:
        return np.searchsorted(self.t, x, side="right").astype(np.int64)

    def to_arrays(self) -> dict[str, Array]:
        return {"t": self.t}


def threshold_cuts(xs: F64, ys: I8) -> tuple[I64, F64]:
    """Vectorized 1-D threshold ERM over rows.

    ``xs`` (rows, lam) sorted along axis 1, ``ys`` the labels in the same order. Cut k labels the
    points at sorted positions >= k as 1 (k = 0: all ones; k = lam: all zeros). A cut is valid
    only between distinct values. Returns the first minimizing cut per row and its error count.
    """
    rows, lam = xs.shape
    ones = np.zeros((rows, lam + 1), dtype=np.int64)
    np.cumsum(ys, axis=1, out=ones[:, 1:])
    k = np.arange(lam + 1, dtype=np.int64)
    total1 = ones[:, -1:]
    # errors: ones left of the cut + zeros right of it
    err = ones + (lam - k)[None, :] - (total1 - ones)
    valid = np.ones((rows, lam + 1), dtype=bool)
    valid[:, 1:lam] = xs[:, 1:] > xs[:, :-1]
    err = np.where(valid, err, np.iinfo(np.int64).max)
    cut = np.argmin(err, axis=1).astype(np.int64)
    return cut, err[np.arange(rows), cut].astype(np.float64)


def midpoint_above(lo: F64, hi: F64) -> F64:
    """A point in (lo, hi] for lo < hi: the midpoint, or hi when lo and hi are adjacent floats.

    Halves are added (not ``lo + (hi - lo) / 2``) so that finite inputs near +-1.8e308 cannot
    overflow to inf; rounding is monotone, so lo <= result <= hi always holds.
    """
    mid = lo * 0.5 + hi * 0.5
    return np.where(mid > lo, mid, hi)


def midpoint_below(lo: F64, hi: F64) -> F64:
    """A point in [lo, hi) for lo < hi: the midpoint, or lo when lo and hi are adjacent floats."""
    mid = lo * 0.5 + hi * 0.5
    return np.where(mid < hi, mid, lo)


def cut_to_threshold(xs: F64, cut: I64) -> F64:
    """The midpoint threshold for each row's cut (-inf for "all ones", +inf for "all zeros")."""
    rows, lam = xs.shape
    if lam == 0:
        return np.full(rows, np.inf)
    lo_idx = np.clip(cut - 1, 0, lam - 1)
    hi_idx = np.clip(cut, 0, lam - 1)
    lo = xs[np.arange(rows), lo_idx]
    hi = xs[np.arange(rows), hi_idx]
    t = midpoint_above(lo, hi)  # 1[x >= t] must include hi and exclude lo
    t[cut == 0] = -np.inf
    t[cut == lam] = np.inf
    return t


class Thresholds(ConceptClass):
    """c_t(x) = 1[x >= t], t in R. Dichotomies on l distinct points: the l + 1 suffixes."""

    name: ClassVar[str] = "thresholds"
    vc_dim: int = 1

    def fit(self, x: F64, y: I8) -> ThresholdEnsemble:
        xs, ys = sort_chunks(x, y)
        cut, _ = threshold_cuts(xs, ys)
        return ThresholdEnsemble(cut_to_threshold(xs, cut))

    def ensemble_from_arrays(self, arrays: dict[str, Array]) -> ThresholdEnsemble:
        return ThresholdEnsemble(arrays["t"])

    def label(self, params: dict[str, Any], x: F64) -> I8:
        return (x >= float(params["t"])).astype(np.int8)

    def labelboost(
        self, x_lab: F64, y_lab: I8, x_unlab: F64, rng: np.random.Generator
    ) -> LabelBoostResult:
        # O(l log l): sort the distinct points once, then prefix sums give every suffix's score.
        values, rank = distinct_sorted(np.concatenate([x_lab, x_unlab]))
        ell = values.size
        r_lab = rank[: x_lab.size]
        n1 = np.bincount(r_lab[y_lab == 1], minlength=ell)
        n0 = np.bincount(r_lab[y_lab == 0], minlength=ell)
        c0 = np.concatenate([[0], np.cumsum(n0)])  # zeros strictly left of cut k
        c1 = np.concatenate([[0], np.cumsum(n1)])
        score = c0 + (c1[-1] - c1)  # cut k = 0..l labels positions >= k as 1
        k = sample_log_weights(score.astype(np.float64) / 2.0, rng)
        labels = (rank >= k).astype(np.int8)
        return LabelBoostResult(
            labels_labeled=labels[: x_lab.size],
            labels_unlabeled=labels[x_lab.size :],
            n_dichotomies=ell + 1,
            score=int(score[k]),
        )
