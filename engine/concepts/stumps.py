"""Decision stumps on R^d: c_{j,s,t}(x) = 1[s * x_j >= t], j in [d], s in {+1, -1}, t in R.

t = -inf gives the all-ones concept and t = +inf the all-zeros one. LabelBoost (paper,
Appendix C.1) needs the *distinct* dichotomies on the distinct points: per (j, s) they are the
suffixes of the points sorted by s * x_j (cut only between distinct values), and the same set
often arises from several (j, s) (always the empty and full sets). Sets are deduplicated by a
128-bit XOR hash in O(d l log l) overall.
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
    sample_log_weights,
)
from engine.concepts.thresholds import cut_to_threshold, threshold_cuts
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
    """Two 64-bit keys per distinct point index, derived deterministically (no rng draws, so the
    mechanism's draw count stays fixed). A set's hash is the XOR of its members' keys, 128 bits in
    all: two given distinct sets collide with probability 2^-128 (keys modeled as random), so
    among N candidate sets some pair collides with probability <= N^2 / 2^129. The keys are
    indexed by rank among the distinct points of a random subsample, which the adversary does
    not see."""
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

    def labelboost(
        self, x_lab: F64, y_lab: I8, x_unlab: F64, rng: np.random.Generator
    ) -> LabelBoostResult:
        """Exponential mechanism over the distinct stump dichotomies (paper, Appendix C.1, step 4).

        Per coordinate, sort the l distinct points once; s = +1 labels the suffix at a valid cut
        k as 1, s = -1 the prefix. Suffix/prefix hashes come from an XOR-accumulate, scores from
        prefix sums of per-point label counts; candidates are deduplicated by hash and one is
        drawn with P ∝ exp(score / 2). One rng draw.
        """
        n_lab = self._rows(x_lab).shape[0]
        pts = np.concatenate([self._rows(x_lab), self._rows(x_unlab)]) + 0.0  # -0.0 -> 0.0
        P, rank = np.unique(pts, axis=0, return_inverse=True)
        rank = rank.reshape(-1)
        ell, d = P.shape
        r_lab = rank[:n_lab]
        n1 = np.bincount(r_lab[y_lab == 1], minlength=ell)
        n0 = np.bincount(r_lab[y_lab == 0], minlength=ell)
        N1, N0 = int(n1.sum()), int(n0.sum())

        order = np.argsort(P, axis=0, kind="stable")  # (ell, d): point ids by increasing x_j
        vs = np.take_along_axis(P, order, axis=0)
        valid = np.ones((ell + 1, d), dtype=bool)  # cut k splits sorted positions < k / >= k
        valid[1:ell] = vs[1:] > vs[:-1]

        k1, k2 = _point_keys(ell)
        pre1 = np.zeros((ell + 1, d), dtype=np.uint64)
        pre2 = np.zeros((ell + 1, d), dtype=np.uint64)
        np.bitwise_xor.accumulate(k1[order], axis=0, out=pre1[1:])
        np.bitwise_xor.accumulate(k2[order], axis=0, out=pre2[1:])
        all1 = np.bitwise_xor.reduce(k1) if ell else np.uint64(0)
        all2 = np.bitwise_xor.reduce(k2) if ell else np.uint64(0)
        c1 = np.zeros((ell + 1, d), dtype=np.int64)
        c0 = np.zeros((ell + 1, d), dtype=np.int64)
        np.cumsum(n1[order], axis=0, out=c1[1:])
        np.cumsum(n0[order], axis=0, out=c0[1:])

        # candidates indexed (k_sign, cut, j); k_sign 0: suffix is positive, 1: prefix is positive
        h1 = np.stack([pre1 ^ all1, pre1])
        h2 = np.stack([pre2 ^ all2, pre2])
        score = np.stack([c0 + (N1 - c1), c1 + (N0 - c0)])
        cand = np.flatnonzero(np.broadcast_to(valid, h1.shape))
        f1, f2 = h1.reshape(-1)[cand], h2.reshape(-1)[cand]
        srt = np.lexsort((f2, f1))  # stable: the first candidate of each set represents it
        first = np.ones(cand.size, dtype=bool)
        first[1:] = (f1[srt][1:] != f1[srt][:-1]) | (f2[srt][1:] != f2[srt][:-1])
        reps = cand[srt[first]]
        rep_score = score.reshape(-1)[reps]

        c = reps[sample_log_weights(rep_score.astype(np.float64) / 2.0, rng)]
        k_sign, cut, j = np.unravel_index(c, h1.shape)
        members = order[cut:, j] if k_sign == 0 else order[:cut, j]
        lab_d = np.zeros(ell, dtype=np.int8)
        lab_d[members] = 1
        labels = lab_d[rank]
        return LabelBoostResult(
            labels_labeled=labels[:n_lab],
            labels_unlabeled=labels[n_lab:],
            n_dichotomies=int(reps.size),
            score=int(score.reshape(-1)[c]),
        )
