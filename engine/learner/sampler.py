"""The exponential mechanism over the learner's classes, sampled exactly (docs/privacy/learner.md 3).

Target: P[h] = exp(-eps E(h) / 2) / Z over the parameter set H (``engine.learner.hypothesis``),
E(h) = training errors, eps the float64 value given. Two steps:

1. **A cell** (a run of cuts with equal errors, ``engine.learner.cells``) with probability
   proportional to (cuts in the cell) * exp(-eps E / 2), by *rejection from a dyadic proposal*:
   with g = (eps / 2)(E - E_min) >= 0 and an integer m <= g / ln 2 (``exponents``), propose the
   cell with weight s 2^(-m) (exact dyadic weights: ``DyadicSampler``) and accept it with
   probability exp(-g) 2^m in [1/2 - tiny, 1] (``bernoulli_exp``). The accepted cell has exactly the
   target probability (Lemma X5); at most ~2 proposals are expected (~4 for intervals).
2. **A cut inside the cell**, uniformly (``below``: exact integer rejection).

Intervals: the pair of cells (a <= b) is proposed in two stages, the left cell from its exact
marginal (a suffix sum, computed with integer interval bounds in one O(n) pass) and the right one
from its conditional (Lemma X6); a = b draws a uniform pair c_lo <= c_hi inside the cell.
Thresholds and stumps: ``engine.learner.stumps`` (the same law, one coordinate at a time, Lemma X7),
O(d n log n); intervals: here, O(n log n). ``engine.learner.release.sample`` picks one by class.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from everlast.engine.learner.cells import Cells
from everlast.engine.learner.exact import (
    BitSource,
    DyadicSampler,
    LazyUniform,
    below,
    bernoulli_exp,
    invert,
)
from everlast.engine.learner.exponents import exponents
from everlast.engine.learner.hypothesis import Hypothesis

I64 = NDArray[np.int64]
U64 = NDArray[np.uint64]

MAX_EPS_ERRORS = 1e13
"""eps * n above this is refused: it keeps g / ln 2 <= 2^46, where Lemma X3 bounds the acceptance
exponent by 1."""


def _g(eps: float, de: int) -> Fraction:
    """g = eps de / 2 exactly (eps is a dyadic rational)."""
    num, den = float(eps).as_integer_ratio()
    return Fraction(num * de, 2 * den)


def _accept(bits: BitSource, eps: float, de: int, m: int) -> bool:
    return bernoulli_exp(bits, _g(eps, de), m)


def _uniform_cut(bits: BitSource, start: int, size: int) -> int:
    return start + below(bits, size)


def sample_cell(sizes: U64, err: I64, eps: float, bits: BitSource, fast: bool = True) -> int:
    """Index k (flat) with probability sizes_k exp(-eps err_k / 2) / Z, exactly."""
    s = sizes.ravel()
    e = err.ravel()
    pos = s > 0
    if pos.all():  # the common case, in fewer numpy calls (the same values)
        low = int(e.min())
        de = e - low if low else e
    else:
        de = np.where(pos, e - int(e[pos].min()), 0)
    m = exponents(eps, de)
    prop = DyadicSampler(s, m, fast=fast)
    while True:
        k = prop.draw(bits)
        if _accept(bits, eps, int(de[k]), int(m[k])):
            return k


# -- intervals ------------------------------------------------------------------------------------


def _norm(lo: int, hi: int, e: int, p: int) -> tuple[int, int, int]:
    """Rescale [lo, hi] 2^e so that hi has p + 1 bits: exact when shifting left; floor / ceil when
    shifting right (the enclosure stays valid)."""
    if hi == 0:
        return 0, 0, e
    sh = hi.bit_length() - (p + 1)
    if sh > 0:
        return lo >> sh, -(-hi >> sh), e + sh
    return lo << -sh, hi << -sh, e + sh


def _add(x: tuple[int, int, int], y: tuple[int, int, int], p: int) -> tuple[int, int, int]:
    """Enclosure of the sum of two normalized enclosures (coarser exponent wins; the finer term is
    rounded down for lo and up for hi)."""
    if x[1] == 0:
        return y
    if y[1] == 0:
        return x
    if x[2] < y[2]:
        x, y = y, x
    sh = x[2] - y[2]
    return _norm(x[0] + (y[0] >> sh), x[1] + (-(-y[1] >> sh)), x[2], p)


def interval_marginal_bounds(sizes: list[int], ma: list[int], mb: list[int], md: int,
                             p: int) -> tuple[list[int], list[int]]:
    """Cumulative integer bounds (common scale) on w_a = alpha_a G_{a+1} + d_a, where
    alpha_a = s_a 2^-ma_a, beta_b = s_b 2^-mb_b, G_{a+1} = sum_{b > a} beta_b, d_a = s_a(s_a+1)/2 2^-md:
    one right-to-left pass with p-bit interval mantissas (Lemma X6's stage 1). Relative width
    O(K 2^-p)."""
    K = len(sizes)
    g = (0, 0, 0)
    out: list[tuple[int, int, int]] = [(0, 0, 0)] * K
    for a in range(K - 1, -1, -1):
        s = sizes[a]
        if s == 0:
            continue
        w = _norm(s * (s + 1) // 2, s * (s + 1) // 2, -md, p)
        if g[1]:
            w = _add(w, _norm(s * g[0], s * g[1], g[2] - ma[a], p), p)
        out[a] = w
        g = _add(g, _norm(s, s, -mb[a], p), p)
    top = max(w[2] for w in out if w[1])
    lo = [w[0] >> (top - w[2]) if w[1] else 0 for w in out]
    hi = [-(-w[1] >> (top - w[2])) if w[1] else 0 for w in out]
    return list(itertools.accumulate(lo)), list(itertools.accumulate(hi))


def _triangle(bits: BitSource, size: int) -> tuple[int, int]:
    """A uniform pair (i, j), 0 <= i <= j < size: index t uniform in [0, size(size+1)/2), then
    j = max{j : j(j+1)/2 <= t}, i = t - j(j+1)/2 (exact integer square root)."""
    t = below(bits, size * (size + 1) // 2)
    j = (math.isqrt(8 * t + 1) - 1) // 2
    return t - j * (j + 1) // 2, j


def sample_interval(c: Cells, eps: float, bits: BitSource, fast: bool = True) -> Hypothesis:
    """Intervals: the pair of cells (a <= b) with weight s_a s_b exp(-eps (A_a + B_b) / 2) for a < b
    and s_a (s_a + 1)/2 exp(-eps n1 / 2) for a = b, exactly; then the cuts uniformly."""
    sizes = c.sizes[0]
    pos = sizes > 0
    A, B = c.a[0], c.b[0]
    amin, bmin = int(A[pos].min()), int(B[pos].min())
    dA = np.where(pos, A - amin, 0)
    dB = np.where(pos, B - bmin, 0)
    dD = c.n1 - amin - bmin
    mA, mB = exponents(eps, dA), exponents(eps, dB)
    mD = int(exponents(eps, np.array([dD], dtype=np.int64))[0])
    s_list = [int(v) for v in sizes.tolist()]
    ma_l, mb_l = mA.tolist(), mB.tolist()
    cache: dict[int, tuple[list[int], list[int]]] = {}

    def stage1(p: int) -> tuple[list[int], list[int]]:
        if p not in cache:
            cache[p] = interval_marginal_bounds(s_list, ma_l, mb_l, mD, p)
        return cache[p]

    while True:
        a = invert(stage1, LazyUniform(bits))
        # stage 2: b = a with weight d_a / alpha_a = (s_a + 1) 2^-(mD + 1 - mA_a); b > a with beta_b
        sz = np.concatenate([np.array([s_list[a] + 1], dtype=np.uint64), sizes[a + 1:]])
        ex = np.concatenate([np.array([mD + 1 - int(mA[a])], dtype=np.int64), mB[a + 1:]])
        j = DyadicSampler(sz, ex, fast=fast).draw(bits)
        if j == 0:
            if not _accept(bits, eps, dD, mD):
                continue
            i0, j0 = _triangle(bits, s_list[a])
            start = int(c.starts[0, a])
            return Hypothesis("intervals", start + i0, start + j0)
        b = a + j
        if not (_accept(bits, eps, int(dA[a]), int(mA[a])) and _accept(bits, eps, int(dB[b]), int(mB[b]))):
            continue
        lo = _uniform_cut(bits, int(c.starts[0, a]), s_list[a])
        hi = _uniform_cut(bits, int(c.starts[0, b]), s_list[b])
        return Hypothesis("intervals", lo, hi)

