"""Exact discrete Laplace noise on the integers, replayable and batch-invariant.

**The law.** DLap(t), t > 0 a rational scale: P[Z = z] = (1 - p)/(1 + p) p^{|z|}, p = e^{-1/t}, for
every integer z. For an integer-valued query of sensitivity 1 (a vote count), adding Z is
(1/t)-DP with no delta: P[Z = z]/P[Z = z + k] <= e^{|k|/t} (docs/privacy/genericbbl.md section 2).

**The sampler** is Canonne, Kamath, Steinke, "The discrete Gaussian for differential privacy"
(NeurIPS 2020), Algorithm 2 (discrete Laplace with scale num/den) on top of their Algorithm 1
(Bernoulli(exp(-gamma)) for rational gamma in [0, 1]): integer arithmetic and uniform integers only,
so the output law is *exactly* DLap(t) -- no floating point anywhere, nothing for a Mironov-style
attack to exploit. The only approximation is the representation: draws with |Z| >= 2^62 are
saturated at +-2^62 (so that int64 arithmetic never overflows); ``saturation_tv`` bounds the
total-variation cost and the certifier charges it (it is below 10^-10^6 per draw for every scale the
certifier accepts, ``MAX_SCALE``).

Uniform integers come from numpy's PCG64 ``Generator.integers``, whose bounded draws are exact
(rejection sampling, no modulo bias).

**Replay.** Rejection sampling consumes a data-dependent number of raw draws, so a vectorized
sampler is batch-invariant only if the *order* in which samples are produced does not depend on
how callers batch their requests. ``NoiseStream`` therefore produces samples in canonical blocks
of ``block`` samples from the generator state at the block's start; a caller taking n samples
takes them from the current block and from whole new blocks. Its state is (generator state at the
current block's start, position in the block): restoring regenerates the block. Streams are
values: ``take`` returns the samples *and a new stream*, leaving the old one untouched, so a caller
can compute a whole batch and commit it only if everything succeeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.errors import CorruptState, InvalidSchedule
from everlast.engine.rng import decode_pcg64, encode_pcg64

I64 = NDArray[np.int64]

SATURATION = 1 << 62
"""|Z| is capped here so that sums of a noise, a count and a threshold fit in int64."""
MAX_SCALE = Fraction(1 << 40)
"""The largest scale the engine runs (the certifier refuses larger ones): keeps num < 2^53 and
makes the saturation's total-variation cost below 10^-10^6 per draw."""
MIN_SCALE = Fraction(1, 1 << 20)
_I64_MAX = (1 << 63) - 1
_V_FAST = 1023
"""A geometric V above this (probability e^-1023) is handled with Python integers."""


def exact_scale(x: float) -> Fraction:
    """The rational scale the engine runs for a planned float scale ``x``: exactly the float
    (every float is a dyadic rational). Raises ``InvalidSchedule`` outside [MIN_SCALE, MAX_SCALE]."""
    if not (math.isfinite(x) and x > 0):
        raise InvalidSchedule("a noise scale must be a positive finite number")
    s = Fraction(x)
    if not MIN_SCALE <= s <= MAX_SCALE:
        raise InvalidSchedule(f"a noise scale of {x:.6g} counts is outside what the engine runs exactly "
                              f"([2^-20, 2^40])")
    return s


def pmf(z: int | I64, scale: Fraction) -> Any:
    """P[Z = z] for Z ~ DLap(scale) (float; for tests and the planner's numerics)."""
    p = math.exp(-1.0 / float(scale))
    return (1.0 - p) / (1.0 + p) * np.power(p, np.abs(z))


def tail(k: int, scale: Fraction) -> float:
    """P[Z >= k] for integer k >= 1: p^k/(1 + p)."""
    p = math.exp(-1.0 / float(scale))
    return float(p**k / (1.0 + p))


def saturation_tv(scale: Fraction) -> float:
    """Total-variation distance between one saturated draw and DLap(scale): P[|Z| > 2^62]
    = 2 p^{2^62+1}/(1+p) <= 2 exp(-2^62/scale); 0.0 when that underflows (it does for every
    scale <= MAX_SCALE: exp(-2^22))."""
    return 2.0 * math.exp(-float(SATURATION) / float(scale))


# -- Canonne-Kamath-Steinke, vectorized -------------------------------------------------------


def _bernoulli_exp_frac(g: np.random.Generator, u: I64, den: int | I64) -> NDArray[np.bool_]:
    """Bernoulli(exp(-u/den)) for each u in [0, den], exactly (CKS Algorithm 1, gamma = u/den).

    K = 1; while Bernoulli(gamma/K): K += 1; return K odd. All still-active draws share the same K
    (they all started at 1), so round K draws Bernoulli(u/(den K)) as [W < u] with W ~ U{0..den K - 1}
    when den K fits int64 (always, in practice: den < 2^53 and K < 2^10), else as [W2 == 0 and W < u]
    with W ~ U{0..den-1}, W2 ~ U{0..K-1} (W2 den + W is uniform on [0, den K) and is < u <= den iff
    W2 = 0 and W < u).

    Round 1 (every draw active) runs on the whole arrays; later rounds on the survivors' indices.
    Only K's parity is kept (a bool per draw): the working set stays small enough for the cache.
    """
    d = np.asarray(den, dtype=np.int64)
    big = int(d.max()) if d.size else 0
    odd = np.ones(u.size, dtype=bool)
    active = np.flatnonzero(g.integers(0, d, size=u.size, dtype=np.int64) < u)  # K = 1
    odd[active] = False  # K = 2
    k = 2
    while active.size:
        da = d if d.ndim == 0 else d[active]
        if big <= _I64_MAX // k:
            hit = g.integers(0, da * k, size=active.size, dtype=np.int64) < u[active]
        else:
            hit = g.integers(0, da, size=active.size, dtype=np.int64) < u[active]
            hit &= g.integers(0, k, size=active.size, dtype=np.int64) == 0
        active = active[hit]
        k += 1
        odd[active] = k % 2 == 1
    return odd


_FACT = 2432902008176640000  # 20!
_FACT_STEPS = np.array([_FACT // math.factorial(s + 1) for s in range(1, 20)], dtype=np.int64)
"""20!/(s+1)! for s = 1..19, decreasing: S >= s iff U < 20!/(s+1)! for U ~ U{0..20!-1}."""
_FACT_ASC = _FACT_STEPS[::-1].copy()
"""The same, increasing: the number of them above U is 19 - searchsorted(_FACT_ASC, U, 'right')."""


def _bernoulli_exp_one(g: np.random.Generator, n: int) -> NDArray[np.bool_]:
    """n draws of Bernoulli(exp(-1)) (CKS Algorithm 1 with gamma = 1).

    Round 1 always succeeds; then S counts the successes of Bernoulli(1/2), Bernoulli(1/3), ...
    before the first failure and the output is [S odd]. P[S >= s] = 1/(s+1)!, a rational with
    denominator dividing 20! for s <= 19, so one uniform U in {0..20!-1} gives S exactly
    (S >= s iff U < 20!/(s+1)!); the event S >= 19 (probability 1/20!) continues with fresh
    Bernoulli(1/K) draws for K = 21, 22, ...

    S >= 1 is one comparison; only the draws with S >= 2 (probability 1/6) are located exactly."""
    u = g.integers(0, _FACT, size=n, dtype=np.int64)
    odd: NDArray[np.bool_] = u < _FACT_STEPS[0]  # S >= 1
    deep = np.flatnonzero(u < _FACT_STEPS[1])  # S >= 2
    if deep.size:
        s = (19 - np.searchsorted(_FACT_ASC, u[deep], side="right")).astype(np.int64)
        tail = np.flatnonzero(s == 19)
        k = 21
        while tail.size:
            hit = g.integers(0, k, size=tail.size, dtype=np.int64) == 0
            tail = tail[hit]
            s[tail] += 1
            k += 1
        odd[deep] = s % 2 == 1
    return odd


def _geometric_e(g: np.random.Generator, n: int) -> I64:
    """V with P[V = v] = (1 - e^-1) e^-v: count Bernoulli(exp(-1)) successes before a failure."""
    v = np.zeros(n, dtype=np.int64)
    active = np.flatnonzero(_bernoulli_exp_one(g, n))
    while active.size:
        v[active] += 1
        active = active[_bernoulli_exp_one(g, active.size)]
    return v


def _attempts(g: np.random.Generator, m: int, num: int, den: int) -> I64:
    """m attempts of CKS Algorithm 2 (scale num/den): the accepted outputs, in attempt order.

    U ~ U{0..num-1}; accept w.p. exp(-U/num); V ~ Geom(1 - e^-1); X = U + num V is geometric with
    P[X = x] proportional to e^{-x/num}; Y = X // den is then geometric with ratio e^{-den/num};
    a fair sign B; reject (B = 1, Y = 0) so that 0 is not counted twice; Z = (1 - 2B) Y.
    """
    u = g.integers(0, num, size=m, dtype=np.int64)
    u = u[_bernoulli_exp_frac(g, u, num)]
    v = _geometric_e(g, u.size)
    sign = g.integers(0, 2, size=u.size, dtype=np.int64)
    slow = np.flatnonzero(v > _V_FAST)
    v_slow = [int(x) for x in v[slow]]
    # X = U + num V < num (V + 1) <= 2^63 - 2^10 where V <= _V_FAST; a scale below ~2^-11 can have
    # den >= 2^63 (no int64), and then Y = X // den = 0 exactly.
    if den > _I64_MAX:
        y = np.zeros(u.size, dtype=np.int64)
    else:
        v[slow] = 0  # computed below; keeps the int64 arithmetic in range
        y = v
        y *= num
        y += u
        y //= den
    for j, vj in zip(slow, v_slow, strict=True):  # probability e^-1023 each: exact Python integers, saturated
        y[j] = min((int(u[j]) + num * vj) // den, SATURATION)
    np.minimum(y, SATURATION, out=y)
    keep = (y != 0) | (sign == 0)
    np.negative(sign, out=sign)  # -1 where B = 1, else 0
    y ^= sign  # two's complement: (y ^ -1) + 1 = -y; y ^ 0 - 0 = y
    y -= sign
    out: I64 = y[keep]
    return out


def _one(g: np.random.Generator, num: int, den: int) -> int:
    """One DLap(num/den) draw by CKS Algorithm 2 with Python integers (for a handful of draws, where
    the vectorized passes' fixed cost dominates): the same law, exactly."""

    def bern_exp(u: int, d: int) -> bool:  # Bernoulli(exp(-u/d)), u <= d (Algorithm 1)
        k = 1
        while int(g.integers(0, d)) < u and (k == 1 or int(g.integers(0, k)) == 0):
            k += 1
        return k % 2 == 1

    while True:
        u = int(g.integers(0, num))
        if not bern_exp(u, num):
            continue
        v = 0
        while bern_exp(1, 1):
            v += 1
        y = min((u + num * v) // den, SATURATION)
        b = int(g.integers(0, 2))
        if b == 1 and y == 0:
            continue
        return -y if b == 1 else y


SMALL = 8
"""Requests of at most this many draws go through the scalar sampler (``_one``)."""


def sample(g: np.random.Generator, scale: Fraction, n: int) -> I64:
    """n independent DLap(scale) draws (exact law, saturated at +-2^62), in a canonical order
    that depends only on ``g``'s state and n."""
    num, den = scale.numerator, scale.denominator
    if n <= SMALL:
        return np.array([_one(g, num, den) for _ in range(n)], dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    got = 0
    while got < n:
        need = n - got
        m = need * 5 // 3 + 32  # acceptance ~0.63 at large scales, ~0.33 at the smallest: one or a few passes
        z = _attempts(g, m, num, den)[:need]
        out[got : got + z.size] = z
        got += z.size
    return out


# -- replayable streams -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NoiseStream:
    """DLap(scale) draws in canonical blocks (module docstring). Immutable: ``take`` returns the
    draws and the stream after them, so a failed batch leaves the stream as it was."""

    scale: Fraction
    block: int
    start_state: dict[str, Any]
    """PCG64 state (``engine.rng.encode_pcg64``) at the start of the current block."""
    pos: int = 0
    """Draws of the current block already taken (0..block)."""
    _cache: tuple[I64, dict[str, Any]] | None = field(default=None, compare=False, repr=False)
    """The current block's draws and the generator state after them (recomputed when absent)."""

    @classmethod
    def fresh(cls, g: np.random.Generator, scale: Fraction, block: int) -> NoiseStream:
        """A stream whose first block starts at ``g``'s current state (``g`` is not advanced)."""
        if block < 1:
            raise ValueError("a block holds at least one draw")
        return cls(scale, block, encode_pcg64(g))

    def _materialize(self) -> tuple[I64, dict[str, Any]]:
        if self._cache is not None:
            return self._cache
        g = decode_pcg64(self.start_state)
        draws = sample(g, self.scale, self.block)
        return draws, encode_pcg64(g)

    def take(self, n: int) -> tuple[I64, NoiseStream]:
        """The next n draws and the stream after them (``self`` is unchanged)."""
        if n < 0:
            raise ValueError("cannot take a negative number of draws")
        parts: list[I64] = []
        s, left = self, n
        while left > 0:
            cache = s._materialize()
            if s.pos < s.block:
                k = min(left, s.block - s.pos)
                parts.append(cache[0][s.pos : s.pos + k])
                s = NoiseStream(s.scale, s.block, s.start_state, s.pos + k, cache)
                left -= k
            else:
                s = NoiseStream(s.scale, s.block, cache[1], 0)
        out = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return out, s

    def to_dict(self) -> dict[str, Any]:
        return {"scale": [self.scale.numerator, self.scale.denominator], "block": self.block,
                "start": self.start_state, "pos": self.pos}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NoiseStream:
        try:
            num, den = (int(v) for v in d["scale"])
            s = cls(Fraction(num, den), int(d["block"]), dict(d["start"]), int(d["pos"]))
            decode_pcg64(s.start_state)
        except CorruptState:
            raise
        except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
            raise CorruptState(f"noise stream state is malformed ({type(exc).__name__})") from None
        if not (0 <= s.pos <= s.block and s.block >= 1 and s.scale > 0):
            raise CorruptState("noise stream state is out of range")
        return s
