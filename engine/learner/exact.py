"""Exact sampling primitives for the private learner (docs/privacy/learner.md section 3).

Every distribution here is sampled *exactly*: the output has the ideal probability, computed from
the real numbers the mechanism is defined by, not from their floating-point approximations. The
only assumption is that the bit source emits independent fair bits (PCG64's raw 64-bit outputs).

  * ``Bits``: fair bits from a numpy ``Generator``; ``below(n)``: a uniform integer in [0, n) by
    rejection (any n, e.g. 2^127).
  * ``DyadicSampler``: index k with probability w_k / sum(w) for dyadic weights w_k = s_k 2^(-m_k)
    (s_k a non-negative integer < 2^64, m_k an integer), by *inversion of one uniform real U*
    whose bits are drawn lazily. Fast path: float64 cumulative sums with a proven error bound
    (Lemma X2); the index is returned only when every real number consistent with the bound puts
    U in the same cell. Otherwise: exact integer bounds at increasing precision and more bits of
    U (Lemma X1). Both paths return the ideal inverse-CDF index of the same U.
  * ``invert``: the same decision from integer bounds on cumulative sums (any weights).
  * ``bernoulli_exp``: True with probability exp(-g) 2^m for a dyadic rational g >= 0 and an
    integer m with exp(-g) 2^m <= 1, by comparing a lazily drawn uniform with rigorous rational
    bounds (ln 2 from its series, exp from its alternating Taylor series; integer arithmetic with
    directed rounding, no floating point; Lemma X4).

No function here looks at data beyond its arguments; the number of bits drawn depends on them
(a timing side channel the docs discuss).
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Callable
from fractions import Fraction
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

U53 = Fraction(1, 1 << 53)
"""Unit roundoff of binary64 (round to nearest)."""
DROP_EXP = 960
"""Float weights 2^(-m) with m > DROP_EXP are set to 0 (their true value is charged to theta), so
every non-zero float weight is a normal number and ldexp is exact."""
START_PRECISION = 128
"""Bits of the first exact (integer) pass."""


class BitSource(Protocol):
    def word(self) -> int:
        """64 fresh fair bits as a Python int in [0, 2^64)."""


class Bits:
    """Fair bits: raw 64-bit outputs of a numpy Generator's bit generator (PCG64)."""

    __slots__ = ("_bg", "words")

    def __init__(self, g: np.random.Generator) -> None:
        self._bg = g.bit_generator
        self.words = 0

    def word(self) -> int:
        self.words += 1
        return int(self._bg.random_raw())


def below(bits: BitSource, n: int) -> int:
    """A uniform integer in [0, n), exactly: draw bitlength(n - 1) bits, reject values >= n."""
    if n < 1:
        raise ValueError("below() needs n >= 1")
    k = (n - 1).bit_length()
    if k == 0:
        return 0
    while True:
        r, got = 0, 0
        while got < k:
            r = (r << 64) | bits.word()
            got += 64
        r >>= got - k
        if r < n:
            return r


class LazyUniform:
    """A uniform real U in [0, 1) known to b bits: U lies in [r / 2^b, (r + 1) / 2^b)."""

    __slots__ = ("b", "bits", "r")

    def __init__(self, bits: BitSource) -> None:
        self.bits = bits
        self.r = bits.word()
        self.b = 64

    def refine(self) -> None:
        self.r = (self.r << 64) | self.bits.word()
        self.b += 64


# -- inversion ----------------------------------------------------------------------------------------


def decide(clo: list[int], chi: list[int], u: LazyUniform) -> int | None:
    """The index k with C_{k-1} <= U Z < C_k, if the bounds prove it; else None.

    ``clo[k] <= s C_k <= chi[k]`` for an unknown common scale s > 0, where C_k = w_0 + ... + w_k
    and Z = C_{K-1} > 0. Proof that a returned k is right: U Z >= (r/2^b) clo[-1]/s >= chi[k-1]/s
    >= C_{k-1}, and U Z < ((r+1)/2^b) chi[-1]/s <= clo[k]/s <= C_k (Lemma X1)."""
    zlo, zhi = clo[-1], chi[-1]
    if zlo <= 0:
        return None
    need = -(-((u.r + 1) * zhi) >> u.b)  # ceil((r+1) zhi / 2^b): the least clo[k] that works
    k = bisect.bisect_left(clo, need)
    if k >= len(clo):
        return None
    prev = chi[k - 1] if k > 0 else 0
    if (prev << u.b) <= u.r * zlo:
        return k
    return None


def invert(bounds: Callable[[int], tuple[list[int], list[int]]], u: LazyUniform) -> int:
    """Inverse-CDF index of U from cumulative bounds ``bounds(P)`` that tighten as P grows
    (relative width O(K 2^-P)); doubles P and draws 64 more bits of U until ``decide`` answers.
    Terminates with probability 1 (U hits a cell boundary with probability 0)."""
    p = START_PRECISION
    while True:
        clo, chi = bounds(p)
        while u.b < p + 64:
            u.refine()
        k = decide(clo, chi, u)
        if k is not None:
            return k
        p *= 2
        u.refine()


def _float_rho(k: int) -> Fraction:
    """rho = 2u + 2 gamma_k of ``DyadicSampler``'s float pass, in one construction:
    2^-52 + 2k / (2^53 - k) = (2^53 - k + 2^53 k) / (2^52 (2^53 - k))."""
    gamma(k)  # its range check
    d = (1 << 53) - k
    return Fraction(d + (k << 53), d << 52)


def gamma(k: int) -> Fraction:
    """Higham's gamma_k = k u / (1 - k u) (u = 2^-53), exactly."""
    if 2 * k >= 1 << 53:  # k u >= 1/2
        raise ValueError("too many terms for the float bound")
    return Fraction(k, (1 << 53) - k)  # k u / (1 - k u) with u = 2^-53


def float_decide(c: NDArray[np.float64], rho: Fraction, theta_sum: Fraction, u: LazyUniform) -> int | None:
    """``decide`` from float cumulative sums ``c`` with |c_k - C_k| <= rho C_k + theta_sum for all k
    (Lemma X2), i.e. C_k in [lo(c_k), hi(c_k)] = [(c_k - theta_sum)/(1 + rho), (c_k + theta_sum)/(1 - rho)].
    Checks only the candidate the float search finds, exactly. Needs 0 <= rho < 1, theta_sum >= 0.

    The two checks of Lemma X1, hi(c_{k-1}) <= (r / 2^b) lo(Z) and ((r + 1) / 2^b) hi(Z) <= lo(c_k)
    with Z = c_{K-1}, are compared as integers: every float is n / d exactly (``as_integer_ratio``),
    rho = pn / pd and theta_sum = tn / td, and both sides are multiplied by the same positive
    integer (2^b, the floats' and theta's denominators, pd + pn and pd - pn). That is the same
    comparison of the same rationals as with ``fractions.Fraction``, at a fraction of its cost
    (tests/engine/learner/test_exact.py checks the two agree)."""
    K = c.size
    if K == 0 or not c[-1] > 0.0:
        return None
    pn, pd = rho.numerator, rho.denominator
    tn, td = theta_sum.numerator, theta_sum.denominator
    if not (0 <= pn < pd and tn >= 0):
        raise ValueError("float_decide needs 0 <= rho < 1 and theta_sum >= 0")
    r, b = u.r, u.b
    z = float(c[-1])
    k = min(int(np.searchsorted(c, (r / (1 << b)) * z, side="right")), K - 1)
    zn, zd = z.as_integer_ratio()
    zlo = zn * td - tn * zd  # sign and numerator of lo(Z) (times zd td (1 + rho) / 1 > 0)
    if zlo <= 0:
        return None
    up, down = pd + pn, pd - pn  # (1 + rho) pd, (1 - rho) pd: both > 0
    if k > 0:  # hi(c_{k-1}) > (r / 2^b) lo(Z): U Z might lie below C_{k-1}
        an, ad = float(c[k - 1]).as_integer_ratio()
        if ((an * td + tn * ad) * zd * up) << b > r * zlo * ad * down:
            return None
    bn, bd = float(c[k]).as_integer_ratio()  # ((r + 1) / 2^b) hi(Z) > lo(c_k): U Z might reach C_k
    if (r + 1) * (zn * td + tn * zd) * bd * up > ((bn * td - tn * bd) * zd * down) << b:
        return None
    return k


# -- dyadic weights -------------------------------------------------------------------------------------


class DyadicSampler:
    """Sample k with probability w_k / sum(w), w_k = s_k 2^(-m_k), exactly.

    ``sizes``: uint64 (s_k < 2^64), ``m``: int64, same length; at least one s_k > 0. The float
    pass is computed once; the integer bounds are computed only when the float pass cannot decide
    (probability about 2 rho + 2^-64 per draw, rho ~ K 2^-52) and cached per precision.
    """

    __slots__ = ("_c", "_exact", "_m", "_rho", "_sizes", "_theta", "fast")

    def __init__(self, sizes: NDArray[np.uint64], m: NDArray[np.int64], fast: bool = True) -> None:
        sizes = np.asarray(sizes, dtype=np.uint64)
        m = np.asarray(m, dtype=np.int64)
        if sizes.shape != m.shape or sizes.ndim != 1 or sizes.size == 0:
            raise ValueError("sizes and exponents must be equal-length vectors")
        # shift so the largest-exponent positive weight has m = 0: Z >= 1, no overflow
        pos = sizes > 0
        if pos.all():  # the common case, in fewer numpy calls (the same values)
            mm = m - m.min()
        elif pos.any():
            mm = np.where(pos, m - m[pos].min(), 0)
        else:
            raise ValueError("cannot sample from all-zero weights")
        self._sizes = sizes
        self._m = mm
        self.fast = fast
        # Lemma X2, float pass: w_hat = fl(s) 2^-m (exact ldexp: fl(s) >= 1, m <= DROP_EXP keeps it
        # normal), or 0 when m > DROP_EXP. |w_hat - w| <= 2u w + theta, theta = 2^64 2^-(DROP_EXP+1)
        # (2u: the uint64 -> double conversion is only assumed faithful, within one ulp).
        f = sizes.astype(np.float64)
        if int(mm.max()) <= DROP_EXP:
            w = np.ldexp(f, (-mm).astype(np.int32))
        else:
            w = np.where(mm <= DROP_EXP, np.ldexp(f, -np.minimum(mm, DROP_EXP).astype(np.int32)), 0.0)
        self._c = np.cumsum(w)
        K = int(sizes.size)
        self._rho = _float_rho(K)
        self._theta = Fraction(2 * K, 1 << (DROP_EXP + 1 - 64))
        self._exact: dict[int, tuple[list[int], list[int]]] = {}

    def _bounds(self, p: int) -> tuple[list[int], list[int]]:
        """Cumulative integer bounds at scale 2^p: floor / ceil of s_k 2^(p - m_k), summed."""
        got = self._exact.get(p)
        if got is not None:
            return got
        lo: list[int] = []
        hi: list[int] = []
        for s, mk in zip(self._sizes.tolist(), self._m.tolist(), strict=True):
            if mk <= p:
                v = s << (p - mk)
                lo.append(v)
                hi.append(v)
            else:
                sh = mk - p
                v = s >> sh
                lo.append(v)
                hi.append(v + (1 if v << sh != s else 0))
        out = (list(itertools.accumulate(lo)), list(itertools.accumulate(hi)))
        self._exact[p] = out
        return out

    def draw(self, bits: BitSource) -> int:
        u = LazyUniform(bits)
        if self.fast:
            k = float_decide(self._c, self._rho, self._theta, u)
            if k is not None:
                return k
        return invert(self._bounds, u)


# -- Bernoulli(exp(-g) 2^m) -----------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def ln2_bounds(p: int) -> tuple[int, int]:
    """Integers lo <= 2^p ln 2 <= hi from ln 2 = sum_{k>=1} 1/(k 2^k): the first p + 2 terms rounded
    down (lo) or up plus the tail bound sum_{k>K} 1/(k 2^k) <= 1/((K+1) 2^K) (hi)."""
    one = 1 << p
    K = p + 2
    lo = hi = 0
    for k in range(1, K + 1):
        den = k << k
        lo += one // den
        hi += -(-one // den)
    hi += -(-one // ((K + 1) << K))
    return lo, hi


def _exp_series(Y: int, q: int, lower: bool) -> int:
    """A bound on 2^q exp(-y) for y = Y / 2^q in [0, 1]: a lower bound from the partial sum ending at
    an odd power, an upper bound from one ending at an even power (alternating series whose terms
    y^k/k! decrease for y <= 1), each term rounded in the safe direction."""
    one = 1 << q
    tl = th = one  # floor / ceil of 2^q y^k / k!
    total = one
    k = 0
    while True:
        k += 1
        tl = (tl * Y) // (k << q)
        th = -(-(th * Y) // (k << q))
        if k % 2 == 1:
            total -= th if lower else tl
        else:
            total += tl if lower else th
        if th <= 1 and (k % 2 == 1) == lower:
            return total


def exp_bounds(g_num: int, g_log2den: int, m: int, p: int) -> tuple[int, int, int]:
    """(lo, hi, q) with lo <= 2^q exp(-g) 2^m <= hi for g = g_num / 2^g_log2den >= 0, assuming
    y = g - m ln 2 lies in [0, 1] (checked: raises ``ArithmeticError`` when the bounds show it
    does not). Width O(p) units at scale 2^q, q >= p."""
    q = p + max(m, 1).bit_length() + 8
    ln_lo, ln_hi = ln2_bounds(q)
    if g_log2den <= q:
        g_lo = g_hi = g_num << (q - g_log2den)
    else:
        sh = g_log2den - q
        g_lo = g_num >> sh
        g_hi = -(-g_num >> sh)
    y_lo = g_lo - m * ln_hi
    y_hi = g_hi - m * ln_lo
    if y_hi < 0 or y_lo > (1 << q):
        raise ArithmeticError("acceptance exponent outside [0, 1]: the sampler's precondition failed")
    y_lo = max(y_lo, 0)
    y_hi = min(y_hi, 1 << q)
    return _exp_series(y_hi, q, lower=True), _exp_series(y_lo, q, lower=False), q


def bernoulli_exp(bits: BitSource, g: Fraction, m: int) -> bool:
    """True with probability exactly exp(-g) 2^m (g a dyadic rational >= 0, m >= 0 an integer with
    m ln 2 <= g <= m ln 2 + 1): compare a lazy uniform with bounds of growing precision."""
    num, den = g.numerator, g.denominator
    if num < 0 or den & (den - 1):
        raise ValueError("g must be a non-negative dyadic rational")
    log2den = den.bit_length() - 1
    u = LazyUniform(bits)
    p = 64
    while True:
        try:
            lo, hi, q = exp_bounds(num, log2den, m, p)
        except ArithmeticError:
            if p > 4096:
                raise
            p *= 2
            continue
        if lo < 0:
            lo = 0
        while u.b < q:
            u.refine()
        if ((u.r + 1) << q) <= (lo << u.b):
            return True
        if (u.r << q) >= (hi << u.b):
            return False
        p *= 2
        u.refine()


__all__ = [
    "BitSource",
    "Bits",
    "DyadicSampler",
    "LazyUniform",
    "below",
    "bernoulli_exp",
    "decide",
    "exp_bounds",
    "float_decide",
    "gamma",
    "invert",
    "ln2_bounds",
]
