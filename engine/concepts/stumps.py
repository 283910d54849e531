"""Decision stumps on R^d: c_{j,s,t}(x) = 1[s * x_j >= t], j in [d], s in {+1, -1}, t in R.

t = -inf gives the all-ones concept and t = +inf the all-zeros one. LabelBoost (paper,
Appendix C.1) needs the *distinct* dichotomies on the distinct points: per (j, s) they are the
suffixes of the points sorted by s * x_j (cut only between distinct values), and the same set
often arises from several (j, s) (always the empty and full sets). Repeated points need no
deduplication: a cut between distinct values never separates two copies of a point, so sets of
points (copies included) stand for sets of distinct points one to one. Two candidate sets can
only be equal if they have the same size, so sets are compared only within each size, by a
128-bit XOR hash: O(d n log n) overall (d argsorts), O(d^2 n) for the comparisons.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from engine.concepts.base import (
    F64,
    I8,
    I64,
    Array,
    ConceptClass,
    Ensemble,
    LabelBoostResult,
    RoundStart,
    sample_by_score,
)
from engine.concepts.random_order import random_order
from engine.concepts.thresholds import cut_to_threshold, midpoint_above, threshold_cuts
from engine.errors import CorruptState, InvalidInput

U64 = NDArray[np.uint64]

_SIGNS = (1.0, -1.0)
"""Group g = 2 * j + k has sign _SIGNS[k]; this order is part of the ensemble array format."""


def stumps_vc_upper_bound(d: int) -> int:
    r"""An upper bound on the VC dimension of stumps on R^d: max{m : C(m, floor(m/2)) <= 2d}.

    Why: on a shattered m-set every complementary pair {A, X \ A} with |A| = floor(m/2) must be
    cut out by some (j, s). Coordinate j's s = -1 sets are the complements of its s = +1 sets, so
    it covers the pairs {suffix, prefix} of its order: two pairs of that size for odd m (cuts at
    floor(m/2) and ceil(m/2)) out of C(m, floor(m/2)), one for even m out of C(m, m/2) / 2.
    Either way 2d >= C(m, floor(m/2)). Exact for d <= 4 (d = 1..4 give 2, 3, 4, 4);
    log2 d + O(log log d) in general. Used only by planners, where an upper bound is the
    conservative choice. Note floor(log2 d) + 2 is NOT an upper bound: d = 3 already shatters 4
    points (see the tests).
    """
    m = 1
    while math.comb(m + 1, (m + 1) // 2) <= 2 * d:
        m += 1
    return m


def _splitmix64(x: U64) -> U64:
    """SplitMix64's finalizer (Steele et al. 2014): a fixed, well-mixed bijection on uint64."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _point_keys(ell: int) -> tuple[U64, U64]:
    """Two 64-bit keys per point index, derived deterministically (no rng draws, so the
    mechanism's draw count stays fixed). A set's hash is the XOR of its members' keys, 128 bits in
    all: two given distinct sets collide with probability 2^-128 (keys modeled as random); only
    sets of equal size are compared, (n + 1) d (2d - 1) pairs among n points, so some pair
    collides with probability <= (n + 1) d (2d - 1) / 2^128. The keys are indexed by position in
    S-hat o D-hat, a random subsample the adversary does not see."""
    idx = np.arange(ell, dtype=np.uint64)
    return _splitmix64(idx * np.uint64(2)), _splitmix64(idx * np.uint64(2) + np.uint64(1))


class StumpEnsemble(Ensemble):
    """T stumps grouped by (j, s), thresholds sorted within each group.

    For a query x, group g contributes #{t in g : t <= s_g * x_{j_g}}. All 2d binary searches of
    a batch run in two ``searchsorted`` calls: thresholds are replaced by their rank among all
    distinct thresholds, so key = g * (m + 1) + rank is sorted across groups and a query's key
    in group g falls inside g's block. O(d log T) per query.
    """

    __slots__ = ("_cols", "_distinct", "_keys", "_signs", "d", "offsets", "t")

    def __init__(self, d: int, t: F64, offsets: I64) -> None:
        t = np.asarray(t, dtype=np.float64).ravel()
        offsets = np.asarray(offsets, dtype=np.int64).ravel()
        G = 2 * d
        if (
            offsets.size != G + 1
            or offsets[0] != 0
            or offsets[-1] != t.size
            or np.any(np.diff(offsets) < 0)
            or np.isnan(t).any()
        ):
            raise CorruptState("stump ensemble: group offsets do not match the thresholds")
        group = np.repeat(np.arange(G, dtype=np.int64), np.diff(offsets))
        order = np.lexsort((t, group))  # sort within groups; a no-op for our own to_arrays
        self.d = d
        self.t = t[order]
        self.offsets = offsets
        self._distinct = np.unique(self.t)
        rank = np.searchsorted(self._distinct, self.t, side="left")
        self._keys = group * (self._distinct.size + 1) + rank
        self._cols = np.arange(G) // 2
        self._signs = np.tile(np.asarray(_SIGNS), d)

    @classmethod
    def from_groups(cls, d: int, group: I64, t: F64) -> StumpEnsemble:
        """Build from one (group, threshold) pair per classifier, in any order."""
        order = np.lexsort((t, group))
        counts = np.bincount(group, minlength=2 * d)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        return cls(d, t[order], offsets)

    @property
    def size(self) -> int:
        return int(self.t.size)

    def votes(self, x: Array) -> I64:
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.d)
        v = x[:, self._cols] * self._signs  # (n, 2d): the projection each group thresholds
        m1 = self._distinct.size + 1
        pos = np.searchsorted(self._distinct, v, side="right")  # distinct thresholds <= v
        qkey = np.arange(2 * self.d, dtype=np.int64) * m1 + pos
        below = np.searchsorted(self._keys, qkey, side="left") - self.offsets[:-1]
        out: I64 = below.sum(axis=1).astype(np.int64)
        return out

    def to_arrays(self) -> dict[str, Array]:
        return {"t": self.t, "offsets": self.offsets}


class Stumps(ConceptClass):
    """c_{j,s,t}(x) = 1[s * x_j >= t] on R^d."""

    name: ClassVar[str] = "stumps"
    vc_dim: int = 0
    """Placeholder; each instance sets ``stumps_vc_upper_bound(d)``."""

    def __init__(self, d: int) -> None:
        if isinstance(d, bool) or not isinstance(d, int | np.integer) or d < 1:
            raise InvalidInput("stumps: dimension d must be a positive integer")
        self.d = int(d)
        self.vc_dim = stumps_vc_upper_bound(self.d)

    @property
    def point_dim(self) -> int:
        return self.d

    def to_spec(self) -> dict[str, Any]:
        return {"name": self.name, "d": self.d}

    def _rows(self, x: F64) -> F64:
        """Points as (n, d); for d = 1 ``validate_points`` hands us shape (n,)."""
        return np.asarray(x, dtype=np.float64).reshape(-1, self.d)

    def fit(self, x: F64, y: I8) -> StumpEnsemble:
        """Threshold ERM on every projection s * x_j of every chunk at once, then the first (j, s)
        with the fewest errors per chunk (ties: lowest j, then s = +1 before -1)."""
        T, lam = y.shape
        d = self.d
        xt = np.moveaxis(np.asarray(x, dtype=np.float64).reshape(T, lam, d), 2, 1)
        proj = xt.reshape(T * d, lam)  # row t * d + j: chunk t projected on coordinate j
        y_rep = np.broadcast_to(y[:, None, :], (T, d, lam)).reshape(T * d, lam)
        order = np.argsort(proj, axis=1, kind="stable")
        xs = np.take_along_axis(proj, order, axis=1)
        ys = np.take_along_axis(y_rep, order, axis=1)
        err = np.empty((T, d, 2))
        thr = np.empty((T, d, 2))
        for k, s in enumerate(_SIGNS):
            # -x sorted is x sorted and reversed (the order within ties is irrelevant: cuts
            # fall only between distinct values), so one argsort serves both signs
            ps = xs if s > 0 else -xs[:, ::-1]
            cut, e = threshold_cuts(ps, ys if s > 0 else ys[:, ::-1])
            err[:, :, k] = e.reshape(T, d)
            thr[:, :, k] = cut_to_threshold(ps, cut).reshape(T, d)
        group = np.argmin(err.reshape(T, 2 * d), axis=1).astype(np.int64)  # = 2 j + k
        t = thr.reshape(T, 2 * d)[np.arange(T), group]
        return StumpEnsemble.from_groups(d, group, t)

    def ensemble_from_arrays(self, arrays: dict[str, Array]) -> StumpEnsemble:
        return StumpEnsemble(self.d, arrays["t"], arrays["offsets"])

    def label(self, params: dict[str, Any], x: F64) -> I8:
        j, s, t = int(params["j"]), float(params["s"]), float(params["t"])
        return (s * self._rows(x)[:, j] >= t).astype(np.int8)

    def next_round(
        self, x_lab: F64, y_lab: I8, d_hat: F64, T: int, lam: int, m_S: int, rng: np.random.Generator
    ) -> RoundStart:
        """``ConceptClass.next_round`` from the same draws, without sorting any chunk.

        S_{i+1} is labeled by a stump, so every chunk is realizable and ``fit``'s ERM (the first
        (j, s) with the fewest errors) is the first (j, s) that separates the chunk: s = +1 when
        its largest x_j among zeros is below its smallest x_j among ones, s = -1 the other way,
        with the midpoint threshold (all ones / all zeros: group 0, -inf / +inf). Four masked
        column reductions per coordinate give every chunk's extremes at once.
        """
        if type(self).labelboost is not Stumps.labelboost:  # a subclass's own LabelBoost
            return super().next_round(x_lab, y_lab, d_hat, T, lam, m_S, rng)
        lb = self.labelboost(x_lab, y_lab, d_hat, rng)
        o = random_order(lb.labels_unlabeled.size, T * lam, rng)
        sx, sy = self._rows(d_hat)[o], lb.labels_unlabeled[o]
        hat = rng.choice(T * lam, size=m_S, replace=False)
        ensemble = self._fit_realizable(sx.reshape(lam, T, self.d), sy.reshape(lam, T))
        return RoundStart(ensemble, d_hat[o[hat]], sy[hat])

    def _fit_realizable(self, x: F64, y: I8) -> StumpEnsemble:
        """``fit`` for chunks (columns: x (lam, T, d), y (lam, T)) that some stump labels."""
        one = (y == 1)[:, :, None]
        max0 = np.where(one, -np.inf, x).max(axis=0)  # (T, d); -inf: no zeros
        min0 = np.where(one, np.inf, x).min(axis=0)
        max1 = np.where(one, x, -np.inf).max(axis=0)
        min1 = np.where(one, x, np.inf).min(axis=0)
        T, d = max0.shape
        sep = np.empty((T, 2 * d), dtype=bool)  # group 2j + k separates the chunk
        sep[:, 0::2] = max0 < min1
        sep[:, 1::2] = max1 < min0
        group = np.argmax(sep, axis=1).astype(np.int64)
        r = np.arange(T)
        j = group // 2
        plus = group % 2 == 0
        lo = np.where(plus, max0[r, j], -min0[r, j])  # largest zero and smallest one of s * x_j
        hi = np.where(plus, min1[r, j], -max1[r, j])
        t = midpoint_above(lo, hi)  # +inf without ones (hi = +inf); never both sides empty
        t[np.isneginf(lo)] = -np.inf  # no zeros: cut 0
        return StumpEnsemble.from_groups(self.d, group, t)

    def labelboost(
        self, x_lab: F64, y_lab: I8, x_unlab: F64, rng: np.random.Generator
    ) -> LabelBoostResult:
        """Exponential mechanism over the distinct stump dichotomies (paper, Appendix C.1, step 4).

        Per coordinate, sort the n points once; s = +1 labels the suffix at a valid cut k as 1,
        s = -1 the prefix. Candidates are laid out by set size m (row) and (j, s) (column 2j + k):
        the suffix of size m sits at cut n - m, the prefix at cut m. Hashes come from an
        XOR-accumulate, scores from prefix sums of label counts; within a row, a column whose
        set equals an earlier valid column's is dropped, and one remaining candidate is drawn
        with P ∝ exp(score / 2) (``sample_by_score``). One rng draw.
        """
        xl, xu = self._rows(x_lab), self._rows(x_unlab)
        n_lab = xl.shape[0]
        pts = np.concatenate([xl, xu]) + 0.0  # -0.0 -> 0.0
        n, d = pts.shape
        order = np.argsort(pts, axis=0)  # (n, d): point ids by increasing x_j (ties: any order)
        vs = np.take_along_axis(pts, order, axis=0)
        valid = np.ones((n + 1, d), dtype=bool)  # cut k splits sorted positions < k / >= k
        valid[1:n] = vs[1:] > vs[:-1]
        del vs
        k1, k2 = _point_keys(n)
        lab = np.full(n, -1, dtype=np.int8)
        lab[:n_lab] = y_lab
        N1, N0 = int((y_lab == 1).sum()), int((y_lab == 0).sum())

        G = 2 * d  # candidates: (size m = 0..n, column 2j + k)
        h1 = np.empty((n + 1, G), dtype=np.uint64)
        h2 = np.empty((n + 1, G), dtype=np.uint64)
        score = np.empty((n + 1, G), dtype=np.int64)
        ok = np.empty((n + 1, G), dtype=bool)
        pre = np.zeros(n + 1, dtype=np.uint64)
        cnt = np.zeros(n + 1, dtype=np.int64)
        for j in range(d):
            o = order[:, j]
            for col, keys in ((h1, k1), (h2, k2)):
                np.bitwise_xor.accumulate(keys[o], out=pre[1:])
                col[:, 2 * j] = pre[::-1] ^ pre[-1]  # suffix of size m: cut n - m
                col[:, 2 * j + 1] = pre  # prefix of size m: cut m
            np.cumsum(lab[o] == 1, out=cnt[1:])
            c1 = cnt.copy()
            np.cumsum(lab[o] == 0, out=cnt[1:])
            c0 = cnt
            score[:, 2 * j] = (c0 + (N1 - c1))[::-1]
            score[:, 2 * j + 1] = c1 + (N0 - c0)
            ok[:, 2 * j] = valid[::-1, j]
            ok[:, 2 * j + 1] = valid[:, j]
        keep = _first_of_each_set(h1, h2, ok)
        c = sample_by_score(score, keep, rng)
        m, col = divmod(c, G)
        j, k_sign = divmod(col, 2)
        members = order[n - m :, j] if k_sign == 0 else order[:m, j]
        labels = np.zeros(n, dtype=np.int8)
        labels[members] = 1
        return LabelBoostResult(
            labels_labeled=labels[:n_lab],
            labels_unlabeled=labels[n_lab:],
            n_dichotomies=int(np.count_nonzero(keep)),
            score=int(score.reshape(-1)[c]),
        )


def _first_of_each_set(h1: U64, h2: U64, ok: NDArray[np.bool_], pairwise_upto: int = 16) -> NDArray[np.bool_]:
    """Per row, the valid columns whose (h1, h2) no earlier valid column of the row has: pairwise
    comparisons for up to ``pairwise_upto`` columns, a per-row sort beyond."""
    G = h1.shape[1]
    keep = ok.copy()
    if pairwise_upto >= G:
        for b in range(1, G):
            for a in range(b):
                keep[:, b] &= ~(ok[:, a] & (h1[:, a] == h1[:, b]) & (h2[:, a] == h2[:, b]))
        return keep
    cols = np.broadcast_to(np.arange(G), h1.shape)
    srt = np.lexsort((cols, h2, h1, ~ok), axis=1)  # valid first; equal sets by column
    s1: U64 = np.take_along_axis(h1, srt, axis=1)
    s2: U64 = np.take_along_axis(h2, srt, axis=1)
    sok: NDArray[np.bool_] = np.take_along_axis(ok, srt, axis=1)
    first = sok.copy()
    first[:, 1:] &= ~(sok[:, :-1] & (s1[:, 1:] == s1[:, :-1]) & (s2[:, 1:] == s2[:, :-1]))
    np.put_along_axis(keep, srt, first, axis=1)
    return keep
