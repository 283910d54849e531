"""Thresholds and stumps by the exponential mechanism, one coordinate at a time, in O(n) memory per
coordinate (docs/privacy/learner.md 3, Lemma X7).

The law is that of Lemma X5 over the cells (coordinate, sign, j) of every coordinate; only the
proposal is drawn in two stages, so that no array of all 2 d (n + 1) cells is ever held:

1. a *block* (coordinate, sign) with probability W_b / Z, W_b the block's total dyadic weight
   sum_j s_j 2^-m_j (Lemma X7: float block sums under Lemma X2's bound, exact integer bounds when
   they cannot decide);
2. a cell of the block with probability s_j 2^-m_j / W_b (``DyadicSampler``, Lemmas X1, X2);

then the acceptance of Lemma X5 (``bernoulli_exp``) and, on acceptance, a uniform cut in the cell.
The exponents m_j = ``exponents(eps, E_j - E_min)`` use the least error over *all* blocks (pass 1),
so the proposal is the same as ``sampler.sample_cell``'s and the accepted cell has the same law.

Each coordinate's cells come from sorting its column (``column_cells``); they are recomputed, not
kept: two passes over the coordinates and one more sort of the proposed block's column per round
(cached while it is proposed again). Peak memory: a few arrays of n + 2 integers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from everlast.engine.errors import InvalidInput
from everlast.engine.learner.exact import (
    DROP_EXP,
    BitSource,
    DyadicSampler,
    LazyUniform,
    _float_rho,
    below,
    bernoulli_exp,
    float_decide,
    invert,
)
from everlast.engine.learner.exponents import exponents
from everlast.engine.learner.hypothesis import Hypothesis

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]
Column = Callable[[int], I64]
"""The training positions of coordinate k (one per record, in a fixed record order)."""


SPLIT = 0
"""The block variant of a split score (``ColumnCells.score``): no orientation, one block per coordinate."""
SPLIT_SCALE = 256
"""A of the split score Q = floor(A o_L z_L / n_L) + floor(A o_R z_R / n_R), whose sensitivity is A
(docs/privacy/learner.md 8)."""
MAX_SPLIT_RECORDS = 3 * 10**8
"""Q is computed in int64: A o z <= A (m / 2)^2 = 64 m^2 < 2^63 for m < 2^28.5 ~ 3.797e8 records at a
node. A tree scored by Q refuses n >= this (``InvalidInput``); errors (thresholds, stumps, the trees'
last level) have no such limit."""


@dataclass(frozen=True, slots=True)
class ColumnCells:
    """The cells of one coordinate (``engine.learner.cells``), shape (n + 1,)."""

    edges: I64
    """p_0 = lo - 1, the sorted positions, p_{n+1} = hi + 1: cell j holds the cuts (p_j, p_{j+1}]."""
    sizes: U64
    ones: I64
    """ones_j: ones among the first j sorted points."""

    @property
    def n(self) -> int:
        return int(self.sizes.size) - 1

    def score(self, variant: int) -> I64:
        """The integer score of every cell. variant +1: E+_j, the errors of the sign +1 threshold
        (label 1 at positions >= the cut) = ones_j + (zeros after j) = 2 ones_j - j + (n - n1);
        -1: n - E+_j; ``SPLIT``: Q_j = floor(A o_L z_L / n_L) + floor(A o_R z_R / n_R) with (o, z) the
        ones and zeros left (j points) and right of the cut (a term is 0 on an empty side)."""
        n, n1 = self.n, int(self.ones[-1])
        j = np.arange(n + 1, dtype=np.int64)
        if variant == SPLIT:
            check_split_records(n)
            zl = j - self.ones
            out = _half(self.ones, zl, j)
            out += _half(n1 - self.ones, (n - n1) - zl, n - j)
            return out
        e = 2 * self.ones
        e -= j
        e += n - n1
        return e if variant > 0 else n - e


def check_split_records(n: int) -> None:
    """Refuse a node too large for Q's int64 arithmetic (``MAX_SPLIT_RECORDS``): n is public."""
    if n >= MAX_SPLIT_RECORDS:
        raise InvalidInput(f"the split score of depth-k trees is exact for "
                           f"fewer than {MAX_SPLIT_RECORDS:.0e} training records; this training set has {n} "
                           "(use fewer records, or stumps)")


def _half(o: I64, z: I64, m: I64) -> I64:
    """floor(A o z / m), 0 where m = 0 (exact in int64: A o z <= 64 m^2 < 2^63 for m < 2^28.5 ~ 3.797e8;
    ``MAX_SPLIT_RECORDS`` keeps m below 3e8)."""
    num = o * z
    num *= SPLIT_SCALE
    np.floor_divide(num, np.maximum(m, 1), out=num)
    return num


def column_cells(col: I64, y: NDArray[np.int8], lo_pos: int, hi_pos: int) -> ColumnCells:
    """Cells of one coordinate from its positions ``col`` (n,) and labels ``y`` (n,): exact integers."""
    n = int(col.size)
    order = np.argsort(col, kind="stable")
    edges = np.empty(n + 2, dtype=np.int64)
    edges[0] = lo_pos - 1
    np.take(col, order, out=edges[1:-1])
    edges[-1] = hi_pos + 1
    ys = np.take(y, order)
    del order
    ev = edges.view(np.uint64)
    sizes = ev[1:] - ev[:-1]  # modulo 2^64: exact, the true difference lies in [0, 2^64)
    ones = np.empty(n + 1, dtype=np.int64)
    ones[0] = 0
    np.cumsum(ys, dtype=np.int64, out=ones[1:])
    return ColumnCells(edges, sizes, ones)


def _min_score(c: ColumnCells, variants: tuple[int, ...]) -> int:
    """The least score over the cells with s > 0 (at least one: the sizes sum to |X| + 1)."""
    pos = c.sizes > 0
    return min(int(c.score(v)[pos].min()) for v in variants)


def _block(c: ColumnCells, variant: int, e_min: int, eps: float) -> tuple[I64, I64]:
    """(de, m) of one block: de = score - E_min on non-empty cells (0 elsewhere), m of Lemma X3."""
    de = c.score(variant) - e_min
    de[c.sizes == 0] = 0
    return de, exponents(eps, de)


def _float_sum(sizes: U64, m: I64) -> float:
    """The block's float weight: sequential binary64 sum of w^_j = ldexp(fl(s_j), -m_j) (0 when
    m_j > DROP_EXP), as in ``DyadicSampler`` (Lemma X2's w^)."""
    w = sizes.astype(np.float64)
    keep = m <= DROP_EXP
    np.ldexp(w, -np.minimum(m, DROP_EXP).astype(np.int32), out=w)
    w[~keep] = 0.0
    return float(np.cumsum(w, out=w)[-1]) if w.size else 0.0


def dyadic_sum_bounds(sizes: U64, m: I64, p: int) -> tuple[int, int]:
    """Integers lo <= 2^p sum_j s_j 2^-m_j <= hi (floor / ceil of each term, summed)."""
    lo = hi = 0
    for s, mk in zip(sizes.tolist(), m.tolist(), strict=True):
        if mk <= p:
            v = s << (p - mk)
            lo += v
            hi += v
        else:
            sh = mk - p
            v = s >> sh
            lo += v
            hi += v + (1 if v << sh != s else 0)
    return lo, hi


class _Blocks:
    """Stage 1 of Lemma X7: the block (coordinate, sign) with probability W_b / Z, exactly."""

    def __init__(self, cells_of: Callable[[int], ColumnCells], d: int, n: int, e_min: int, eps: float,
                 variants: tuple[int, ...]) -> None:
        self.cells_of, self.d, self.e_min, self.eps, self.variants = cells_of, d, e_min, eps, variants
        sums = []
        for k in range(d):
            c = cells_of(k)
            for v in variants:
                _, m = _block(c, v, e_min, eps)
                sums.append(_float_sum(c.sizes, m))
        self._c = np.cumsum(np.array(sums, dtype=np.float64))
        K = len(variants) * d * (n + 1)  # every cell of every block: K terms added in some order (Lemma X2)
        self._rho = _float_rho(K)
        self._theta = Fraction(2 * K, 1 << (DROP_EXP + 1 - 64))
        self._exact: dict[int, tuple[list[int], list[int]]] = {}

    def _bounds(self, p: int) -> tuple[list[int], list[int]]:
        got = self._exact.get(p)
        if got is None:
            lo, hi, clo, chi = 0, 0, [], []
            for k in range(self.d):
                c = self.cells_of(k)
                for v in self.variants:
                    _, m = _block(c, v, self.e_min, self.eps)
                    a, b = dyadic_sum_bounds(c.sizes, m, p)
                    lo, hi = lo + a, hi + b
                    clo.append(lo)
                    chi.append(hi)
            got = self._exact[p] = (clo, chi)
        return got

    def draw(self, bits: BitSource, fast: bool = True) -> int:
        u = LazyUniform(bits)
        if fast:
            k = float_decide(self._c, self._rho, self._theta, u)
            if k is not None:
                return k
        return invert(self._bounds, u)


def sample_columns(column: Column, y: NDArray[np.int8], d: int, lo_pos: int, hi_pos: int, eps: float,
                   bits: BitSource, concept: str = "stumps", fast: bool = True,
                   variants: tuple[int, ...] = (1, -1)) -> Hypothesis:
    """A threshold (d = 1) or stump with probability exp(-eps E(h) / 2) / Z over (coordinate, sign,
    cut), exactly (Lemmas X5, X7); ``column(k)`` gives coordinate k's positions of the n records.
    ``variants = (SPLIT,)``: a split (coordinate, cut) with probability exp(-eps Q / 2) / Z instead
    (the caller passes eps already divided by the score's sensitivity; the sign returned is +1)."""
    n = int(y.size)
    cache: dict[int, ColumnCells] = {}

    def cells_of(k: int) -> ColumnCells:
        got = cache.get(k)
        if got is None:
            cache.clear()  # one coordinate at a time: O(n) memory
            got = cache[k] = column_cells(column(k), y, lo_pos, hi_pos)
        return got

    e_min = min(_min_score(cells_of(k), variants) for k in range(d))
    blocks = _Blocks(cells_of, d, n, e_min, eps, variants)
    while True:
        b = blocks.draw(bits, fast)
        k, which = divmod(b, len(variants))
        variant = variants[which]
        sgn = -1 if variant < 0 else 1
        c = cells_of(k)
        de, m = _block(c, variant, e_min, eps)
        j = DyadicSampler(c.sizes, m, fast=fast).draw(bits)
        if bernoulli_exp(bits, _g(eps, int(de[j])), int(m[j])):
            cut = int(c.edges[j]) + 1 + below(bits, int(c.sizes[j]))
            return Hypothesis(concept, cut, cut, sgn, k)


def _g(eps: float, de: int) -> Fraction:
    num, den = float(eps).as_integer_ratio()
    return Fraction(num * de, 2 * den)


def sample_stump_rows(pos: I64, rows: I64 | None, y: NDArray[np.int8], lo_pos: int, hi_pos: int, eps: float,
                      bits: BitSource, concept: str = "stumps", fast: bool = True,
                      variants: tuple[int, ...] = (1, -1)) -> Hypothesis:
    """``sample_columns`` on the records ``rows`` of ``pos`` ((n,) or (n, d); None: every record)."""
    p = pos if pos.ndim == 2 else pos[:, None]
    ys = y if rows is None else y[rows]

    def column(k: int) -> I64:
        return p[:, k] if rows is None else p[rows, k]

    return sample_columns(column, ys, int(p.shape[1]), lo_pos, hi_pos, eps, bits, concept, fast, variants)
