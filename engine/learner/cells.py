"""The cells of the exponential mechanism: runs of cuts with equal training error.

Sort the n training positions p_1 <= ... <= p_n of one coordinate and put p_0 = lo_pos - 1,
p_{n+1} = hi_pos + 1. A cut c (positions < c on one side, >= c on the other) lies in cell j
(j = 0..n) iff exactly j sorted points are left of it: p_j < c <= p_{j+1}. Cell j holds the cuts
[p_j + 1, p_{j+1}], s_j = p_{j+1} - p_j of them (0 between tied points; sum = |X| + 1), and every
cut of a cell has the same errors:

  * threshold, sign +1 (label 1 iff position >= c):  E+_j = ones among the first j + zeros after;
    sign -1 (label 1 iff position < c):               E-_j = n - E+_j;
  * interval [c_a, c_b) with c_a in cell a <= cell b of c_b (label 1 iff c_a <= position < c_b):
    errors = A_a + B_b with A_j = ones_j - zeros_j, B_j = (n1 - ones_j) + zeros_j, where ones_j /
    zeros_j count the first j sorted points. (Left of c_a all are labeled 0: ones_a errors; inside,
    labeled 1: zeros_b - zeros_a; right of c_b, labeled 0: n1 - ones_b.) A_j + B_j = n1: an empty
    interval mislabels exactly the ones.

Everything is exact integer arithmetic; sizes are uint64 (a difference of int64 positions taken
modulo 2^64 is exact because the true difference lies in [0, 2^64)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]


@dataclass(frozen=True, slots=True)
class Cells:
    """Cells of one or more coordinates: arrays of shape (d, n + 1)."""

    starts: I64
    """First cut of each cell (p_j + 1)."""
    sizes: U64
    """Number of cuts in each cell."""
    ones: I64
    """ones_j: ones among the first j sorted points."""
    n: int
    n1: int

    @property
    def zeros(self) -> I64:
        j = np.arange(self.n + 1, dtype=np.int64)
        return j[None, :] - self.ones

    @property
    def err_up(self) -> I64:
        """E+_j (sign +1: label 1 at positions >= cut)."""
        return self.ones + ((self.n - self.n1) - self.zeros)

    @property
    def a(self) -> I64:
        return self.ones - self.zeros

    @property
    def b(self) -> I64:
        return (self.n1 - self.ones) + self.zeros


def cells(pos: I64, y: NDArray[np.int8], lo_pos: int, hi_pos: int) -> Cells:
    """Cells per coordinate. ``pos``: (n,) or (n, d) training positions; ``y``: (n,) labels in {0, 1}."""
    p = np.asarray(pos, dtype=np.int64)
    if p.ndim == 1:
        p = p[:, None]
    n, d = p.shape
    order = np.argsort(p, axis=0, kind="stable")
    ps = np.take_along_axis(p, order, axis=0).T  # (d, n)
    ys = np.asarray(y, dtype=np.int64)[order].T  # (d, n)
    edges = np.empty((d, n + 2), dtype=np.int64)
    edges[:, 0] = lo_pos - 1
    edges[:, 1:-1] = ps
    edges[:, -1] = hi_pos + 1
    sizes = edges[:, 1:].astype(np.uint64) - edges[:, :-1].astype(np.uint64)
    ones = np.zeros((d, n + 1), dtype=np.int64)
    np.cumsum(ys, axis=1, out=ones[:, 1:])
    return Cells(starts=edges[:, :-1] + 1, sizes=sizes, ones=ones, n=n, n1=int(np.asarray(y).sum()))
