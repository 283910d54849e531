"""Decision stumps on R^d: c_{j,s,t}(x) = 1[s * x_j >= t], j in [d], s in {+1, -1}, t in R.

t = -inf gives the all-ones concept and t = +inf the all-zeros one. LabelBoost (paper,
Appendix C.1) needs the *distinct* dichotomies on the distinct points: per (j, s) they are the
suffixes of the points sorted by s * x_j (cut only between distinct values), and the same set
often arises from several (j, s) (always the empty and full sets). Repeated points need no
deduplication: a cut between distinct values never separates two copies of a point (nor two
points tied in x_j), so sets of points (copies included) stand for sets of distinct points one to
one. Two candidate sets can only be equal if they have the same size m, and then one contains the
other iff they are equal: "the last m in coordinate j' order are the last m in coordinate j order"
iff the least j-position among them is >= n - m, a suffix minimum. So four prefix/suffix min/max
scans per pair of coordinates decide every equality exactly (``_equal_sets``): O(d n log n) to sort,
O(d^2 n) to compare (beyond ``EXACT_PAIRS_MAX_D`` coordinates, a hash first picks the pairs of
coordinates worth comparing; it only saves time, every equality is still decided exactly).
"""

from __future__ import annotations

import math
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
)
from everlast.engine.concepts.random_order import OrderSource, order_job
from everlast.engine.concepts.thresholds import cut_to_threshold, midpoint_above, threshold_cuts
from everlast.engine.errors import CorruptState, InvalidInput

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
        self, x_lab: F64, y_lab: I8, d_hat: F64, T: int, lam: int, m_S: int, rng: np.random.Generator,
        order_rng: OrderSource,
    ) -> RoundStart:
        """``ConceptClass.next_round`` from the same draws, without sorting any chunk (S_{i+1}'s
        order is drawn beside LabelBoost, ``engine.overlap``).

        S_{i+1} is labeled by a stump, so every chunk is realizable and ``fit``'s ERM (the first
        (j, s) with the fewest errors) is the first (j, s) that separates the chunk: s = +1 when
        its largest x_j among zeros is below its smallest x_j among ones, s = -1 the other way,
        with the midpoint threshold (all ones / all zeros: group 0, -inf / +inf). Four masked
        column reductions per coordinate give every chunk's extremes at once.
        """
        if type(self).labelboost is not Stumps.labelboost:  # a subclass's own LabelBoost
            return super().next_round(x_lab, y_lab, d_hat, T, lam, m_S, rng, order_rng)
        n = self._rows(d_hat).shape[0]
        with order_job(n, T * lam, order_rng) as order:
            lb = self.labelboost(x_lab, y_lab, d_hat, rng)
            o = order.result()
        sx, sy = self._rows(d_hat)[o], lb.labels_unlabeled[o]
        sx += 0.0  # -0.0 -> +0.0, as the definition's canonical D-hat
        hat = rng.choice(T * lam, size=m_S, replace=False)
        ensemble = self._fit_realizable(sx.reshape(lam, T, self.d), sy.reshape(lam, T))
        return RoundStart(ensemble, d_hat[o[hat]] + 0.0, sy[hat])

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
        """Exponential mechanism over the distinct stump dichotomies (paper, Appendix C.1, step 4),
        exactly.

        Per coordinate, sort the n points once; s = +1 labels the suffix at a valid cut as 1,
        s = -1 the prefix. Candidates are laid out by set size m (row) and (j, s) (column 2j + k):
        the suffix of size m sits at cut n - m, the prefix at cut m. Every dichotomy of a stump is
        a valid candidate, and ``_first_of_each_set`` keeps exactly one candidate of each distinct
        set (the first valid column of its row), so the kept candidates are the distinct
        dichotomies one to one. Scores come from prefix sums of label counts; the kept candidates
        are grouped by score (in flat order within a group) and ``exact_em.sample_group`` draws a
        group, then a uniform member: each dichotomy has probability exp(score / 2) / Z.
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
        lab = np.full(n, -1, dtype=np.int8)
        lab[:n_lab] = y_lab
        N1, N0 = int((y_lab == 1).sum()), int((y_lab == 0).sum())

        G = 2 * d  # candidates: (size m = 0..n, column 2j + k)
        score = np.empty((n + 1, G), dtype=np.int64)
        ok = np.empty((n + 1, G), dtype=bool)
        cnt = np.zeros(n + 1, dtype=np.int64)
        for j in range(d):
            o = order[:, j]
            np.cumsum(lab[o] == 1, out=cnt[1:])
            c1 = cnt.copy()
            np.cumsum(lab[o] == 0, out=cnt[1:])
            c0 = cnt
            score[:, 2 * j] = (c0 + (N1 - c1))[::-1]
            score[:, 2 * j + 1] = c1 + (N0 - c0)
            ok[:, 2 * j] = valid[::-1, j]
            ok[:, 2 * j + 1] = valid[:, j]
        keep = _first_of_each_set(order, ok)
        flat_s, flat_k = score.reshape(-1), keep.reshape(-1)
        kept = flat_s[flat_k]
        lo = int(kept.min())
        counts = np.bincount(kept - lo).astype(np.uint64)
        g, r = exact_em.sample_group(counts, lo + np.arange(counts.size, dtype=np.int64), exact_em.bits_of(rng))
        c = int(np.flatnonzero(flat_k & (flat_s == lo + g))[r])
        m, col = divmod(c, G)
        j, k_sign = divmod(col, 2)
        members = order[n - m :, j] if k_sign == 0 else order[:m, j]
        labels = np.zeros(n, dtype=np.int8)
        labels[members] = 1
        return LabelBoostResult(
            labels_labeled=labels[:n_lab],
            labels_unlabeled=labels[n_lab:],
            n_dichotomies=int(np.count_nonzero(keep)),
            score=lo + g,
        )


EXACT_PAIRS_MAX_D = 16
"""Up to this many coordinates every pair of coordinates is compared; beyond, a hash picks the pairs."""


def _equal_sets(pos_j: I64, order_jp: I64) -> NDArray[np.bool_]:
    """For coordinates j, j' and every size m = 0..n: eq[m, k, k'] says whether the size-m candidate
    of column 2j + k equals that of column 2j' + k' (k, k' = 0: the suffix, the last m points of
    the coordinate's order; 1: the prefix, the first m), as sets of point ids.

    ``pos_j[p]``: point p's position in coordinate j's order; ``order_jp``: coordinate j''s order.
    With P = pos_j[order_jp] (the j-positions of the points in j' order), two sets of the same size
    are equal iff one contains the other: j''s suffix of size m lies in j's suffix iff
    min P[n-m:] >= n - m, in j's prefix iff max P[n-m:] < m; j''s prefix likewise with P[:m]. Exact
    for any positions; only meaningful (a statement about dichotomies) at valid cuts of both."""
    n = pos_j.size
    P = pos_j[order_jp]
    m = np.arange(n + 1, dtype=np.int64)
    big = np.iinfo(np.int64).max
    pmin = np.concatenate([[big], np.minimum.accumulate(P)])  # pmin[m] = min P[:m]
    pmax = np.concatenate([[-1], np.maximum.accumulate(P)])
    smin = np.concatenate([[big], np.minimum.accumulate(P[::-1])])  # smin[m] = min P[n-m:]
    smax = np.concatenate([[-1], np.maximum.accumulate(P[::-1])])
    eq = np.empty((n + 1, 2, 2), dtype=bool)
    eq[:, 0, 0] = smin >= n - m  # suffix' = suffix
    eq[:, 0, 1] = pmin >= n - m  # prefix' = suffix
    eq[:, 1, 0] = smax < m  # suffix' = prefix
    eq[:, 1, 1] = pmax < m  # prefix' = prefix
    return eq


def _first_of_each_set(order: I64, ok: NDArray[np.bool_], keys: U64 | None = None) -> NDArray[np.bool_]:
    """Per row m, the valid columns whose set no earlier valid column of the row has: exactly one
    candidate of each distinct set. ``order`` (n, d): each coordinate's order of the point ids;
    ``ok`` (n + 1, 2d): which candidates are valid cuts. Rows 0 and n hold only the empty and the
    full set (column 0 is valid there). Pairs of coordinates: all of them up to
    ``EXACT_PAIRS_MAX_D`` coordinates, else those ``_hashed_pairs`` picks (``keys`` for tests)."""
    n, d = order.shape
    keep = ok.copy()
    keep[0, 1:] = False
    keep[n, 1:] = False
    if d == 1 or n < 2:  # a coordinate's suffix and prefix of size 0 < m < n always differ
        return keep
    pos = np.empty((n, d), dtype=np.int64)
    np.put_along_axis(pos, order, np.arange(n, dtype=np.int64)[:, None], axis=0)
    if d <= EXACT_PAIRS_MAX_D:
        pairs = [(j, jp) for jp in range(d) for j in range(jp)]
    else:
        pairs = _hashed_pairs(order, ok, pos, _splitmix64(np.arange(n, dtype=np.uint64)) if keys is None else keys)
    inner = slice(1, n)
    for j, jp in pairs:
        eq = _equal_sets(pos[:, j], order[:, jp])[inner]
        for k in (0, 1):
            for kp in (0, 1):
                keep[inner, 2 * jp + kp] &= ~(ok[inner, 2 * j + k] & eq[:, k, kp])
    return keep


def _hashed_pairs(order: I64, ok: NDArray[np.bool_], pos: I64, keys: U64) -> list[tuple[int, int]]:
    """The pairs (j, j'), j < j', that ``_first_of_each_set`` must compare, found by hashing.

    A set's hash is the XOR of its points' keys, so equal sets have equal hashes. In each row, sort
    the valid columns by (hash, column); every column whose hash equals the first column of its
    run is checked exactly against that first column (``_equal_sets``). If every such check holds,
    each run is one set, so the pairs (first column's coordinate, coordinate) are all that need
    comparing; if one fails (a collision of distinct sets: hashes only pick pairs, they never
    decide), every pair is returned."""
    n, d = order.shape
    G = 2 * d
    h = np.empty((n + 1, G), dtype=np.uint64)
    pre = np.zeros(n + 1, dtype=np.uint64)
    for j in range(d):
        np.bitwise_xor.accumulate(keys[order[:, j]], out=pre[1:])
        h[:, 2 * j] = pre[::-1] ^ pre[-1]
        h[:, 2 * j + 1] = pre
    h, okr = h[1:n], ok[1:n]
    cols = np.broadcast_to(np.arange(G), h.shape)
    srt = np.lexsort((cols, h, ~okr), axis=1)
    sh = np.take_along_axis(h, srt, axis=1)
    sok = np.take_along_axis(okr, srt, axis=1)
    same = np.zeros(h.shape, dtype=bool)
    same[:, 1:] = sok[:, 1:] & sok[:, :-1] & (sh[:, 1:] == sh[:, :-1])
    start = np.where(same, 0, np.arange(G))
    first = np.take_along_axis(srt, np.maximum.accumulate(start, axis=1), axis=1)
    rows, where = np.nonzero(same)
    a, b = first[rows, where], srt[rows, where]  # a < b: sorted by column within a run
    m = rows + 1
    everything = [(j, jp) for jp in range(d) for j in range(jp)]
    if np.any(a // 2 == b // 2):
        return everything  # a coordinate's suffix and prefix never coincide inside: a collision
    found = sorted({(int(x), int(y)) for x, y in zip((a // 2).tolist(), (b // 2).tolist(), strict=True)})
    for j, jp in found:
        sel = (a // 2 == j) & (b // 2 == jp)
        eq = _equal_sets(pos[:, j], order[:, jp])
        if not eq[m[sel], a[sel] % 2, b[sel] % 2].all():
            return everything
    return found
