"""Intervals on the reals: c_{a,b}(x) = 1[a <= x <= b], plus the empty concept (VC dimension 2).

On l distinct points the class has l(l+1)/2 + 1 dichotomies: every contiguous range of the
sorted points, and the all-zero labeling. LabelBoost (paper, Appendix C.1) samples among them
exactly (``exact_em.sample_range``) in O(m log m + q) for q distinct labeled points, given D-hat sorted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts import exact_em
from everlast.engine.concepts.base import (
    F64,
    I8,
    I64,
    Array,
    ConceptClass,
    Ensemble,
    LabelBoostResult,
    RoundStart,
    distinct_of_sorted,
    sort_chunks,
)
from everlast.engine.concepts.line import LabeledRanks
from everlast.engine.concepts.random_order import OrderSource, order_job
from everlast.engine.concepts.thresholds import (
    SORTED_SEARCH_MIN_T_SHARED,
    midpoint_above,
    midpoint_below,
    search_order,
    search_sorted_needles,
    sorted_search,
)
from everlast.engine.errors import CorruptState
from everlast.engine.learner.exact import BitSource


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
        xs = np.asarray(x)
        order = search_order(self.a.size, xs, SORTED_SEARCH_MIN_T_SHARED)
        if order is None:
            return sorted_search(self.a, xs, "right") - sorted_search(self.b, xs, "left")
        sx = xs.ravel()[order]  # one sort serves both endpoint searches
        out = np.empty(xs.size, dtype=np.int64)
        out[order] = search_sorted_needles(self.a, sx, "right") - search_sorted_needles(self.b, sx, "left")
        return out.reshape(xs.shape)

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
        r = interval_em(x_lab, y_lab, distinct_of_sorted(np.sort(x_unlab)), exact_em.bits_of(rng))
        return LabelBoostResult(
            labels_labeled=r.labels(x_lab),
            labels_unlabeled=r.labels(x_unlab),
            n_dichotomies=r.n_dichotomies,
            score=r.score,
        )

    def arrange_order(self, d_hat: F64) -> I64:
        return np.argsort(d_hat, kind="stable").astype(np.int64)

    def next_round(
        self, x_lab: F64, y_lab: I8, d_hat: F64, T: int, lam: int, m_S: int, rng: np.random.Generator,
        order_rng: OrderSource,
    ) -> RoundStart:
        """``ConceptClass.next_round`` from the same draws, in O(n log n) with two SIMD sorts that
        run side by side (``engine.overlap``, as in ``Thresholds.next_round``).

        S_{i+1} is labeled by an interval [lo, hi] (or all 0), so every chunk is realizable and
        its ERM (``interval_erm``: the first best right end, then the first best left end) is
        [midpoint(largest zero left of the ones, smallest one), midpoint(largest one, smallest
        zero right of them)], open-ended where a side has no zeros, empty without ones. With
        D-hat sorted (s) and the ones at positions [P1, P2), the wrapped positions
        f = pos - P1 and g = pos - P2 (mod 2^32) give all four per chunk from a column min and
        max each (as ``Thresholds.next_round`` does with one).
        """
        if type(self).labelboost is not Intervals.labelboost:  # a subclass's own LabelBoost (audit variants)
            return super().next_round(x_lab, y_lab, d_hat, T, lam, m_S, rng, order_rng)
        n, L = d_hat.shape[0], T * lam
        with order_job(n, L, order_rng) as order:  # S_{i+1}'s positions, beside the sort
            s = np.sort(d_hat)
            s += 0.0  # -0.0 -> +0.0, as the definition's canonical D-hat (the sort leaves +-0 in any order)
            r = interval_em(x_lab, y_lab, distinct_of_sorted(s), exact_em.bits_of(rng))
            P1 = int(np.searchsorted(s, r.lo, side="left"))
            P2 = int(np.searchsorted(s, r.hi, side="right")) if r.lo <= r.hi else P1  # empty: no ones
            f = order.result()
        f -= np.uint32(P1 % (1 << 32))  # S_{i+1} as (position - P1) mod 2^32, in place (uint32 wraps)
        hat = rng.choice(L, size=m_S, replace=False)
        hx = s.take((f[hat].astype(np.int64) + P1) % (1 << 32))
        a, b = _chunk_intervals(s, f.reshape(lam, T), P1, P2)
        return RoundStart(IntervalEnsemble(a, b), hx, r.labels(hx))


def _chunk_intervals(s: F64, f: NDArray[np.uint32], P1: int, P2: int) -> tuple[F64, F64]:
    """The ERM interval of each chunk (column) of f = (pos - P1) mod 2^32, the positions into
    sorted ``s`` of S_{i+1}, whose points at positions [P1, P2) are labeled 1."""
    n, T = s.size, f.shape[1]
    a, b = np.full(T, np.inf), np.full(T, np.inf)
    if P2 == P1:
        return a, b  # no ones anywhere: the empty concept everywhere
    W = 1 << 32
    D = P2 - P1
    g = np.subtract(f, np.uint32(D))  # (pos - P2) mod 2^32
    fmin, fmax, gmin, gmax = f.min(axis=0), f.max(axis=0), g.min(axis=0), g.max(axis=0)
    has_one = fmin < D  # ones: f in [0, D); zeros right: [D, n - P1); zeros left: [W - P1, W)
    has_left = fmax >= W - P1 if P1 else np.zeros(T, dtype=bool)
    has_right = gmin < n - P2  # zeros right: g in [0, n - P2); ones: g in [W - D, W)

    def at(w: NDArray[np.uint32], shift: int) -> F64:
        return s.take((w + np.uint32(shift % W)).astype(np.intp))

    min_one, max_one = at(fmin, P1), at(gmax, P2)
    left = np.where(has_left, midpoint_above(at(fmax, P1), min_one), -np.inf)
    right = np.where(has_right, midpoint_below(max_one, at(gmin, P2)), np.inf)
    a[has_one] = left[has_one]
    b[has_one] = right[has_one]
    return a, b


@dataclass(frozen=True, slots=True)
class Range:
    """The interval dichotomy LabelBoost chose: points in [lo, hi] are labeled 1 (lo > hi: none)."""

    lo: float
    hi: float
    n_dichotomies: int
    score: int

    def labels(self, x: F64) -> I8:
        return ((x >= self.lo) & (x <= self.hi)).astype(np.int8)


def interval_em(x_lab: F64, y_lab: I8, values: F64, bits: BitSource) -> Range:
    """LabelBoost's exponential mechanism for intervals (paper, Appendix C.1, step 4), exactly, in
    O(m log m + q) given ``values`` (the sorted distinct unlabeled points).

    The l + 1 cuts k = 0..l between the l distinct points (cut k: ranks < k / >= k) fall into the
    groups a of ``line`` (cuts bounds[a] + 1 .. bounds[a + 1], s_a >= 1 of them). The dichotomies are
    the ranges of ranks [i, j) for cuts i < j -- distinct ranges are distinct labelings, and every
    nonempty labeling by an interval is the contiguous range of ranks it covers -- and the all-zero
    labeling, once: l (l + 1) / 2 + 1 in all. With w_k = (#label 1) - (#label 0) at the k-th distinct
    point and W its prefix sums, [i, j) scores N0 + W_j - W_i and the empty labeling N0; W is
    constant (V_a) on the cuts of group a, so a range with i in group a and j in group b scores
    N0 + V_b - V_a: exactly the setting of ``exact_em.sample_range``, which returns the empty
    labeling or (group, offset) of both cuts with the exponential mechanism's law.
    """
    lr = LabeledRanks.of(x_lab, y_lab, values)
    bounds = lr.bounds()
    size = np.diff(bounds)  # group a: cuts start_a = bounds[a] + 1 .. bounds[a + 1]
    V = np.concatenate([[0], np.cumsum(lr.ones - lr.zeros)]).astype(np.int64)  # W on group a
    N0 = int(lr.zeros.sum())
    n_dich = lr.ell * (lr.ell + 1) // 2 + 1
    got = exact_em.sample_range(size.astype(np.int64), V, bits)
    if got is None:
        return Range(np.inf, -np.inf, n_dich, N0)
    i = int(bounds[got.a]) + 1 + got.i_off
    j = int(bounds[got.b]) + 1 + got.j_off  # the range is ranks i .. j - 1
    return Range(lr.value(i), lr.value(j - 1), n_dich, N0 + int(V[got.b] - V[got.a]))
