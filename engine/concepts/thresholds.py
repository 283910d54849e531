"""Thresholds on the reals: c_t(x) = 1[x >= t] (VC dimension 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

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
from everlast.engine.concepts.line import kth_distinct
from everlast.engine.concepts.random_order import OrderSource, order_job
from everlast.engine.learner.exact import BitSource

SORTED_SEARCH_MIN_T = 20_000
"""From this many classifiers (and a batch of SORTED_SEARCH_MIN_BATCH) a batch searched once is sorted
before the binary search: consecutive needles then walk nearby thresholds (cache hits, predictable
branches) instead of each missing on its own path; the counts are the same integers, and the choice
depends on the public T and batch size only. What the sort buys depends on the table (``python -m
bench.search``, plain / engine ns per needle, batches of 65,536): on the tables the engine fits (T
chunks of 10 points, thresholds bunched at the boundary, where a plain search's branches repeat for
every needle on one side) 0.87 / 0.96 / 1.30 at T = 3·10^4 / 10^5 / 10^6, and 0.60 at T = 10^4 (a run
with the sort from 5,000); on uniform random tables (a plain search's worst case) 1.60 / 1.83 / 2.56,
and 1.45 at 10^4. So at 10^4 the sort could lose 1.7x and win 1.45x, from 3·10^4 it loses at most
1.15x and wins 1.6-2.6x: it starts between the two. Timing one batch over and over hides all this:
the branch predictor learns the batch."""
SORTED_SEARCH_MIN_T_SHARED = 64
"""The same for a batch whose one sort serves two searches (the interval ensemble's endpoints), which
pays for the sort sooner: kept where the single search's rule was before (bench.search measures the
thresholds' single search only)."""
SORTED_SEARCH_MIN_BATCH = 256


def search_order(t_size: int, xs: NDArray[Any], min_t: int = SORTED_SEARCH_MIN_T) -> I64 | None:
    """The order to search ``xs`` in against ``t_size`` sorted values, or None where the plain
    search is as cheap (tables below ``min_t`` values, small batches)."""
    if t_size < min_t or xs.size < SORTED_SEARCH_MIN_BATCH:
        return None
    return np.argsort(xs.ravel())  # any order: equal needles get equal counts


def sorted_search(t: F64, x: Array, side: Literal["left", "right"]) -> I64:
    """``np.searchsorted(t, x, side)`` as int64, through a sort of x where that is cheaper."""
    xs = np.asarray(x)
    order = search_order(t.size, xs)
    if order is None:
        return np.asarray(np.searchsorted(t, xs, side=side), dtype=np.int64)
    flat = xs.ravel()  # any shape, as np.searchsorted takes
    out = np.empty(flat.size, dtype=np.int64)
    out[order] = search_sorted_needles(t, flat[order], side)
    return out.reshape(xs.shape)


def search_sorted_needles(t: F64, sx: F64, side: Literal["left", "right"]) -> I64:
    """``np.searchsorted(t, sx, side)`` for sorted needles ``sx``. With at most half as many
    values as needles the values are placed among the needles instead (T binary searches, not n):
    #{t <= sx_i} counts the t whose first needle >= t is at or before i, and #{t < sx_i} those
    whose first needle > t is (a bincount of those positions, summed up to i)."""
    if 2 * t.size > sx.size:
        return np.asarray(np.searchsorted(t, sx, side=side), dtype=np.int64)
    pos = np.searchsorted(sx, t, side="left" if side == "right" else "right")
    return np.cumsum(np.bincount(pos, minlength=sx.size + 1)[: sx.size], dtype=np.int64)


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
        return sorted_search(self.t, x, "right")

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
        cut = threshold_em(x_lab, y_lab, distinct_of_sorted(np.sort(x_unlab)), exact_em.bits_of(rng))
        return LabelBoostResult(
            labels_labeled=(x_lab >= cut.t).astype(np.int8),
            labels_unlabeled=(x_unlab >= cut.t).astype(np.int8),
            n_dichotomies=cut.n_dichotomies,
            score=cut.score,
        )

    def arrange_order(self, d_hat: F64) -> I64:
        return np.argsort(d_hat, kind="stable").astype(np.int64)

    def next_round(
        self, x_lab: F64, y_lab: I8, d_hat: F64, T: int, lam: int, m_S: int, rng: np.random.Generator,
        order_rng: OrderSource,
    ) -> RoundStart:
        """``ConceptClass.next_round`` from the same draws, in O(n log n) with two SIMD sorts that
        run side by side (``engine.overlap``): S_{i+1}'s order needs nothing from D-hat's sort.

        S_{i+1} is labeled by a threshold t*, so every chunk is realizable and its ERM (the first
        cut with the fewest errors, ``threshold_cuts``) is the one cut with none: the midpoint
        between the chunk's largest point below t* and its smallest point at or above t*
        (-inf / +inf when one side is empty). With D-hat sorted once (s) and S_{i+1} kept as
        positions into s, those are the largest position < K and the smallest >= K of each
        chunk, K = #{s < t*}. With the order relabeled as f = pos - K (mod 2^32, uint32 wrap-around),
        a min and a max over each chunk give both: no per-chunk sort, no gather of D-hat, and no
        more than two sorts of n numbers in all.
        """
        if type(self).labelboost is not Thresholds.labelboost:  # a subclass's own LabelBoost (audit variants)
            return super().next_round(x_lab, y_lab, d_hat, T, lam, m_S, rng, order_rng)
        n, L = d_hat.shape[0], T * lam
        with order_job(n, L, order_rng) as order:  # S_{i+1}'s positions, beside the sort
            s = np.sort(d_hat)
            s += 0.0  # -0.0 -> +0.0, as the definition's canonical D-hat (the sort leaves +-0 in any order)
            cut = threshold_em(x_lab, y_lab, distinct_of_sorted(s), exact_em.bits_of(rng))
            K = int(np.searchsorted(s, cut.t, side="left"))  # positions >= K are labeled 1
            f = order.result()
        f -= np.uint32(K % (1 << 32))  # S_{i+1} as (position - K) mod 2^32, in place (uint32 wraps)
        hat = rng.choice(L, size=m_S, replace=False)
        hx = s.take(f[hat] + np.uint32(K % (1 << 32)))  # back to positions (uint32 wraps again)
        ensemble = ThresholdEnsemble(_chunk_thresholds(s, f.reshape(lam, T), K))
        return RoundStart(ensemble, hx, (hx >= cut.t).astype(np.int8))


def _chunk_thresholds(s: F64, f: NDArray[np.uint32], K: int) -> F64:
    """The ERM threshold of each chunk (column) of f, the wrapped positions (pos - K) mod 2^32
    into sorted ``s`` of S_{i+1}, whose points at positions >= K are labeled 1: ones have
    f in [0, n - K), zeros f in [2^32 - K, 2^32), so the column min is the smallest one and the
    column max the largest zero whenever the chunk has both (``Thresholds.next_round``)."""
    n, T = s.size, f.shape[1]
    if K in (0, n):  # every chunk is one-sided: cut 0 (all ones) or cut lam (all zeros)
        return np.full(T, -np.inf if K == 0 else np.inf)
    fmin, fmax = f.min(axis=0), f.max(axis=0)
    k32 = np.uint32(K)
    t = midpoint_above(s.take(fmax + k32), s.take(fmin + k32))  # uint32 sums wrap back to positions
    t[fmax < n - K] = -np.inf  # no zeros: the chunk's largest "zero" was a one
    t[fmin >= n - K] = np.inf  # no ones
    return t


@dataclass(frozen=True, slots=True)
class Cut:
    """The threshold dichotomy LabelBoost chose: points x >= t are labeled 1."""

    t: float
    n_dichotomies: int
    score: int


def threshold_em(x_lab: F64, y_lab: I8, values: F64, bits: BitSource) -> Cut:
    """LabelBoost's exponential mechanism for thresholds, exactly, in O(m log m) given ``values``
    (the sorted distinct unlabeled points).

    On the l distinct points of x_lab o values, cut k = 0..l labels the points of rank >= k as 1:
    the l + 1 cuts are the l + 1 distinct dichotomies, one to one (the all-ones cut 0 and the
    all-zeros cut l included). score(k) = labeled zeros of rank < k + labeled ones of rank >= k only
    changes where k passes a labeled point, so every cut of group a (``line``: cuts bounds[a] + 1 ..
    bounds[a + 1]) has the same score s_a. ``exact_em.sample_group`` draws group a with probability
    size_a exp(s_a / 2) / Z and a uniform cut inside it: each cut has probability exp(score / 2) / Z.

    Computed from the labeled points sorted (with repeats) rather than through
    ``line.LabeledRanks``: the same groups, sizes and scores, in about half the numpy calls (a
    transition's LabelBoost is call-bound at 10^5 points). With the q labeled points sorted, xs,
    and cz_a the labeled zeros among the first a of them, the cut after the first a points (those
    of rank <= rank(xs_{a-1})) scores cz_a + (ones) - (a - cz_a) = 2 cz_a - a + n_1. A labeled value
    repeated r times gives r - 1 empty groups; they are dropped, leaving one group per distinct
    labeled value, in the order ``LabeledRanks`` lists them. Labels must be 0/1 (``check_labels``;
    every caller's are): a non-zero label counts as a one.
    """
    q, nv = x_lab.size, values.size
    order = np.argsort(x_lab, kind="stable")
    xs = x_lab.take(order)
    below = np.searchsorted(values, xs, side="left")  # distinct unlabeled points below each labeled one
    if nv:
        shared = values.take(np.minimum(below, nv - 1)) == xs
        shared &= below < nv
    else:
        shared = np.zeros(q, dtype=bool)
    first = np.ones(q, dtype=bool)  # the first labeled point of its value
    np.not_equal(xs[1:], xs[:-1], out=first[1:])
    alone = ~shared  # a value only the labeled part has
    own = first & alone  # ... counted at its first labeled point
    n_own = np.cumsum(own)
    rank = below + n_own - alone  # rank of each labeled point's value among all l distinct points
    ell = nv + (int(n_own[-1]) if q else 0)
    bounds = np.concatenate([[-1], rank, [ell]])
    cz = np.concatenate([[0], np.cumsum(y_lab.take(order) == 0)])
    score = 2 * cz - np.arange(q + 1) + (q - int(cz[-1]))
    size = np.diff(bounds)
    lo = bounds[:-1]
    if not first.all():  # drop the empty groups of repeated labeled values
        keep = np.append(first, True)
        size, score, lo = size[keep], score[keep], lo[keep]
    a, r = exact_em.sample_group(size.astype(np.uint64), score, bits)
    k = int(lo[a]) + 1 + r
    t = kth_distinct(k, rank[own], xs[own], values) + 0.0  # +0.0 for a labeled zero of either sign (only compared)
    return Cut(t=t, n_dichotomies=ell + 1, score=int(score[a]))
