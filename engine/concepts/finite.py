"""A finite class given explicitly: a boolean matrix M of shape (|C|, |X|), concept c labels
domain point v as M[c, v]. Points are domain indices 0..|X|-1 carried as floats.

LabelBoost (paper, Appendix C.1) enumerates the dichotomies explicitly: restrict M to the
distinct points, deduplicate rows, score each and sample. Cost O(|C| l), fine for the small
classes this is meant for.
"""

from __future__ import annotations

import itertools
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
)
from everlast.engine.errors import CorruptState, InvalidInput

B = NDArray[np.bool_]

_VC_BRUTE_FORCE_BUDGET = 1_000_000
"""Max |C| * (subsets of X examined) for the exact VC computation; above it, an upper bound."""

_FIT_BLOCK_ELEMENTS = 1 << 22
"""Bound on the (chunks x lambda x |C|) gather per ERM block (memory, not correctness)."""


def vc_dimension(M: B) -> int:
    """VC dimension of the rows of M, by brute force when affordable, else floor(log2 |C|).

    Shattering m points takes 2^m distinct concepts, so the VC dimension is at most
    cap = min(|X|, floor(log2 |C|)); it is exact when the C(|X|, 1..cap) subsets fit the budget.
    Sizes are tried upward and the search stops at the first size with no shattered subset
    (subsets of shattered sets are shattered).
    """
    n_c, n_x = int(M.shape[0]), int(M.shape[1])
    cap = min(n_x, math.floor(math.log2(n_c)))
    if n_c * sum(math.comb(n_x, m) for m in range(1, cap + 1)) > _VC_BRUTE_FORCE_BUDGET:
        return cap
    vc = 0
    for m in range(1, cap + 1):
        subsets = np.array(list(itertools.combinations(range(n_x), m)), dtype=np.int64)
        codes = np.zeros((n_c, subsets.shape[0]), dtype=np.int64)  # row pattern on each subset
        for k in range(m):
            codes |= M[:, subsets[:, k]].astype(np.int64) << k
        codes.sort(axis=0)
        n_patterns = 1 + (codes[1:] != codes[:-1]).sum(axis=0)
        if not (n_patterns == 1 << m).any():
            break
        vc = m
    return vc


class FiniteEnsemble(Ensemble):
    """T concept indices; votes come from a precomputed table over the domain (O(1) per query)."""

    __slots__ = ("index", "table")

    def __init__(self, index: I64, M: B) -> None:
        index = np.asarray(index).ravel()
        in_range = index.size == 0 or (index.min() >= 0 and index.max() < M.shape[0])
        if index.dtype.kind not in "iu" or not in_range:
            raise CorruptState("finite ensemble: concept index out of range")
        self.index = index.astype(np.int64)
        self.table = np.bincount(self.index, minlength=M.shape[0]) @ M.astype(np.int64)

    @property
    def size(self) -> int:
        return int(self.index.size)

    def votes(self, x: Array) -> I64:
        return self.table[np.asarray(x).astype(np.int64)].astype(np.int64)

    def to_arrays(self) -> dict[str, Array]:
        return {"index": self.index}


class FiniteClass(ConceptClass):
    """An explicit finite class over X = {0, ..., |X|-1}."""

    name: ClassVar[str] = "finite"
    vc_dim: int = 0
    """Placeholder; each instance sets ``vc_dimension(M)``."""

    def __init__(self, matrix: Any) -> None:
        try:
            M = np.asarray(matrix)
        except (TypeError, ValueError):
            raise InvalidInput("finite class: matrix is not an array of 0/1") from None
        if M.ndim != 2 or M.shape[0] < 1 or M.shape[1] < 1:
            raise InvalidInput(
                "finite class: matrix must be 2-D with at least one concept and one point"
            )
        if M.dtype.kind not in "biuf" or not np.isin(M, (0, 1)).all():
            raise InvalidInput("finite class: matrix entries must be 0 or 1")
        self.M: B = M.astype(bool)
        self.vc_dim = vc_dimension(self.M)

    @property
    def n_points(self) -> int:
        return int(self.M.shape[1])

    def to_spec(self) -> dict[str, Any]:
        return {"name": self.name, "matrix": self.M.astype(int).tolist()}

    def _check_domain(self, x: F64, what: str) -> None:
        bad = (x != np.floor(x)) | (x < 0) | (x >= self.n_points)
        if bad.any():
            raise InvalidInput(
                f"{what} point at position {int(np.argmax(bad))} is not a domain index "
                f"(an integer in [0, {self.n_points}))"
            )

    def fit(self, x: F64, y: I8) -> FiniteEnsemble:
        """Per chunk, the first concept with the fewest disagreements. errors[t, c] =
        #ones_t + sum_i M[c, x_ti] (1 - 2 y_ti), computed as a batched product in chunk blocks."""
        T, lam = y.shape
        n_c = self.M.shape[0]
        Mt = self.M.T.astype(np.float64)  # (|X|, |C|); small integer sums are exact in float64
        xi = np.asarray(x).astype(np.int64).reshape(T, lam)
        sign = 1.0 - 2.0 * y.astype(np.float64)
        ones = y.astype(np.int64).sum(axis=1)
        best = np.empty(T, dtype=np.int64)
        block = max(1, _FIT_BLOCK_ELEMENTS // max(1, lam * n_c))
        for lo in range(0, T, block):
            hi = min(T, lo + block)
            dis = np.matmul(sign[lo:hi, None, :], Mt[xi[lo:hi]])[:, 0, :]  # (B, |C|)
            best[lo:hi] = np.argmin(ones[lo:hi, None] + np.rint(dis).astype(np.int64), axis=1)
        return FiniteEnsemble(best, self.M)

    def ensemble_from_arrays(self, arrays: dict[str, Array]) -> FiniteEnsemble:
        return FiniteEnsemble(arrays["index"], self.M)

    def label(self, params: dict[str, Any], x: F64) -> I8:
        c = int(params["index"])
        if not 0 <= c < self.M.shape[0]:
            raise InvalidInput("finite class: concept index out of range")
        out: I8 = self.M[c, np.asarray(x).astype(np.int64)].astype(np.int8)
        return out

    def labelboost(
        self, x_lab: F64, y_lab: I8, x_unlab: F64, rng: np.random.Generator
    ) -> LabelBoostResult:
        """Exponential mechanism over the distinct rows of M restricted to the distinct points
        (paper, Appendix C.1, steps 2-4), exactly: the distinct rows are the distinct dichotomies,
        grouped by score (``exact_em.sample_group``: a score group, then a uniform row of it, the
        rows of a group in increasing row order)."""
        n_lab = x_lab.size
        stacked = np.concatenate([x_lab, x_unlab]).astype(np.int64)
        pts, rank = np.unique(stacked, return_inverse=True)
        rank = rank.reshape(-1)
        ell = pts.size
        r_lab = rank[:n_lab]
        n1 = np.bincount(r_lab[y_lab == 1], minlength=ell)
        n0 = np.bincount(r_lab[y_lab == 0], minlength=ell)
        D = np.unique(self.M[:, pts], axis=0) if ell else np.zeros((1, 0), dtype=bool)
        score = D.astype(np.int64) @ n1 + (~D).astype(np.int64) @ n0
        values, group = np.unique(score, return_inverse=True)
        group = group.reshape(-1)
        counts = np.bincount(group, minlength=values.size).astype(np.uint64)
        g, r = exact_em.sample_group(counts, values.astype(np.int64), exact_em.bits_of(rng))
        c = int(np.flatnonzero(group == g)[r])
        labels = D[c].astype(np.int8)[rank]
        return LabelBoostResult(
            labels_labeled=labels[:n_lab],
            labels_unlabeled=labels[n_lab:],
            n_dichotomies=int(D.shape[0]),
            score=int(score[c]),
        )
