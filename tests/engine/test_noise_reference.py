"""engine.noise's vectorized CKS sampler against its first form, kept here as the oracle: the
rewrites that shrank its working set must make the same generator calls, in the same order, and so
give the same draws (the known-answer vectors depend on them)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from everlast.engine import noise

I64 = NDArray[np.int64]


def _bernoulli_exp_frac_reference(g: np.random.Generator, u: I64, den: int | I64) -> NDArray[np.bool_]:
    """Bernoulli(exp(-u/den)) for each u in [0, den], exactly (CKS Algorithm 1, gamma = u/den).

    K = 1; while Bernoulli(gamma/K): K += 1; return K odd. All still-active draws share the same K
    (they all started at 1), so round K draws Bernoulli(u/(den K)) as [W < u] with W ~ U{0..den K - 1}
    when den K fits int64 (always, in practice: den < 2^53 and K < 2^10), else as [W2 == 0 and W < u]
    with W ~ U{0..den-1}, W2 ~ U{0..K-1} (W2 den + W is uniform on [0, den K) and is < u <= den iff
    W2 = 0 and W < u).
    """
    k_final = np.ones(u.size, dtype=np.int64)
    active = np.arange(u.size)
    d = np.asarray(den, dtype=np.int64)
    big = int(d.max()) if d.size else 0
    k = 1
    while active.size:
        da = d if d.ndim == 0 else d[active]
        if big <= noise._I64_MAX // k:
            hit = g.integers(0, da * k, size=active.size, dtype=np.int64) < u[active]
        else:
            hit = g.integers(0, da, size=active.size, dtype=np.int64) < u[active]
            hit &= g.integers(0, k, size=active.size, dtype=np.int64) == 0
        active = active[hit]
        k += 1
        k_final[active] = k
    return np.asarray(k_final % 2 == 1)


def _bernoulli_exp_one_reference(g: np.random.Generator, n: int) -> NDArray[np.bool_]:
    """n draws of Bernoulli(exp(-1)) (CKS Algorithm 1 with gamma = 1).

    Round 1 always succeeds; then S counts the successes of Bernoulli(1/2), Bernoulli(1/3), ...
    before the first failure and the output is [S odd]. P[S >= s] = 1/(s+1)!, a rational with
    denominator dividing 20! for s <= 19, so one uniform U in {0..20!-1} gives S exactly
    (S >= s iff U < 20!/(s+1)!); the event S >= 19 (probability 1/20!) continues with fresh
    Bernoulli(1/K) draws for K = 21, 22, ..."""
    u = g.integers(0, noise._FACT, size=n, dtype=np.int64)
    s = (19 - np.searchsorted(noise._FACT_ASC, u, side="right")).astype(np.int64)
    tail = np.flatnonzero(s == 19)
    k = 21
    while tail.size:
        hit = g.integers(0, k, size=tail.size, dtype=np.int64) == 0
        tail = tail[hit]
        s[tail] += 1
        k += 1
    return np.asarray(s % 2 == 1)


def _geometric_e_reference(g: np.random.Generator, n: int) -> I64:
    """V with P[V = v] = (1 - e^-1) e^-v: count Bernoulli(exp(-1)) successes before a failure."""
    v = np.zeros(n, dtype=np.int64)
    active = np.arange(n)
    while active.size:
        ok = _bernoulli_exp_one_reference(g, active.size)
        v[active[ok]] += 1
        active = active[ok]
    return v


def _attempts_reference(g: np.random.Generator, m: int, num: int, den: int) -> tuple[I64, NDArray[np.bool_]]:
    """m attempts of CKS Algorithm 2 (scale num/den): the candidate outputs and which were accepted.

    U ~ U{0..num-1}; accept w.p. exp(-U/num); V ~ Geom(1 - e^-1); X = U + num V is geometric with
    P[X = x] proportional to e^{-x/num}; Y = X // den is then geometric with ratio e^{-den/num};
    a fair sign B; reject (B = 1, Y = 0) so that 0 is not counted twice; Z = (1 - 2B) Y.
    """
    u = g.integers(0, num, size=m, dtype=np.int64)
    d = _bernoulli_exp_frac_reference(g, u, num)
    idx = np.flatnonzero(d)
    v = _geometric_e_reference(g, idx.size)
    sign = g.integers(0, 2, size=idx.size, dtype=np.int64)
    y = np.empty(idx.size, dtype=np.int64)
    fast = v <= noise._V_FAST
    # X = U + num V < num (V + 1) <= 2^63 - 2^10 here; a scale below ~2^-11 can have den >= 2^63
    # (no int64), and then Y = X // den = 0 exactly.
    y[fast] = (u[idx[fast]] + num * v[fast]) // den if den <= noise._I64_MAX else 0
    for j in np.flatnonzero(~fast):  # probability e^-1023 each: exact Python integers, saturated
        y[j] = min((int(u[idx[j]]) + num * int(v[j])) // den, noise.SATURATION)
    np.minimum(y, noise.SATURATION, out=y)
    keep = ~((sign == 1) & (y == 0))
    z = np.zeros(m, dtype=np.int64)
    acc = np.zeros(m, dtype=bool)
    z[idx] = np.where(sign == 1, -y, y)
    acc[idx] = keep
    return z, acc


def _state(g: np.random.Generator) -> Any:
    return g.bit_generator.state


class _DeepS:
    """A generator whose uniforms on {0..20!-1} are forced to 0 (S = 19, the tail path) at every
    ``every``-th position: the path has probability 1/20! otherwise. Both forms make the same
    calls, so both see the same forced values."""

    def __init__(self, g: np.random.Generator, every: int) -> None:
        self.g, self.every = g, every

    def integers(self, low: Any, high: Any, size: int, dtype: Any) -> Any:
        out = self.g.integers(low, high, size=size, dtype=dtype)
        if not isinstance(high, np.ndarray) and int(high) == noise._FACT:
            out[:: self.every] = 0
        return out


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 3000),
       den=st.one_of(st.integers(1, 50), st.integers(1, 2**53), st.integers(2**61, 2**63 - 1)))
def test_bernoulli_exp_frac_is_draw_for_draw_the_first_form(seed: int, n: int, den: int) -> None:
    """Including den K beyond int64 (the two-uniform branch)."""
    u = np.random.default_rng(seed ^ 1).integers(0, den, size=n, dtype=np.int64, endpoint=True)
    a, b = np.random.default_rng(seed), np.random.default_rng(seed)
    assert np.array_equal(noise._bernoulli_exp_frac(a, u, den), _bernoulli_exp_frac_reference(b, u, den))
    assert _state(a) == _state(b)


@settings(max_examples=100, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 3000), big=st.booleans())
def test_bernoulli_exp_frac_with_an_array_of_denominators(seed: int, n: int, big: bool) -> None:
    """Small denominators, and (``big``) some near 2^62 so that den K leaves int64 in round 2."""
    g = np.random.default_rng(seed ^ 2)
    den = g.integers(1, 1000, size=n, dtype=np.int64)
    if big and n:
        den[g.random(n) < 0.3] = (1 << 62) - 7
    u = np.minimum(g.integers(0, 1000, size=n, dtype=np.int64), den)
    if big and n:
        u[den > 1000] = den[den > 1000] // 2
    a, b = np.random.default_rng(seed), np.random.default_rng(seed)
    assert np.array_equal(noise._bernoulli_exp_frac(a, u, den), _bernoulli_exp_frac_reference(b, u, den))
    assert _state(a) == _state(b)


@pytest.mark.parametrize("every", [1, 2, 7, 1000, 10**9])
@pytest.mark.parametrize("n", [0, 1, 5, 4000])
def test_bernoulli_exp_one_and_the_geometric_are_the_first_form(every: int, n: int) -> None:
    pairs = ((noise._bernoulli_exp_one, _bernoulli_exp_one_reference), (noise._geometric_e, _geometric_e_reference))
    for fn, ref in pairs:
        a, b = np.random.default_rng(n + every), np.random.default_rng(n + every)
        assert np.array_equal(fn(_DeepS(a, every), n), ref(_DeepS(b, every), n))  # type: ignore[arg-type]
        assert _state(a) == _state(b)


SCALES = [Fraction(1), Fraction(2), Fraction(7, 3), Fraction(12), Fraction(400), noise.exact_scale(0.3),
          noise.exact_scale(12.5), noise.exact_scale(6e7), noise.MAX_SCALE, noise.exact_scale(1e-6),
          noise.MIN_SCALE]


@pytest.mark.parametrize("cap", [None, 5], ids=["cap 2^62", "cap 5"])
@pytest.mark.parametrize("v_fast", [noise._V_FAST, 2, -1])
@pytest.mark.parametrize("scale", SCALES, ids=str)
def test_attempts_and_sample_are_draw_for_draw_the_first_form(monkeypatch: pytest.MonkeyPatch, scale: Fraction,
                                                              v_fast: int, cap: int | None) -> None:
    """Every path: int64 and Python-integer Y (a patched ``_V_FAST``), a denominator beyond int64,
    saturation on either path (a patched cap), and the S >= 19 tail of Bernoulli(exp(-1)) forced
    inside the whole sampler."""
    monkeypatch.setattr(noise, "_V_FAST", v_fast)
    if cap is not None:
        monkeypatch.setattr(noise, "SATURATION", cap)
    num, den = scale.numerator, scale.denominator
    for m in (0, 1, 33, 5000):
        for every in (None, 3):
            a, b = np.random.default_rng(m), np.random.default_rng(m)
            ga, gb = (a, b) if every is None else (_DeepS(a, every), _DeepS(b, every))
            z, acc = _attempts_reference(gb, m, num, den)  # type: ignore[arg-type]
            assert np.array_equal(noise._attempts(ga, m, num, den), z[acc])  # type: ignore[arg-type]
            assert _state(a) == _state(b)
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    out = noise.sample(a, scale, 9000)
    ref = np.concatenate(list(_sample_reference(b, num, den, 9000)))
    assert np.array_equal(out, ref) and _state(a) == _state(b)


def _sample_reference(g: np.random.Generator, num: int, den: int, n: int) -> Any:
    got = 0
    while got < n:
        need = n - got
        z, acc = _attempts_reference(g, need * 5 // 3 + 32, num, den)
        z = z[acc][:need]
        got += z.size
        yield z
