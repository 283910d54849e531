"""The exact primitives: uniform integers, inversion (float fast path and integer fallback),
Bernoulli(exp(-g) 2^m) -- each checked against exact rational / 60-digit references."""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from everlast.engine.learner.exact import (
    Bits,
    DyadicSampler,
    LazyUniform,
    below,
    bernoulli_exp,
    exp_bounds,
    float_decide,
    gamma,
    ln2_bounds,
)
from everlast.engine.learner.exponents import INV_2LN2, exponents
from tests.engine.learner.helpers import ScriptedBits, dyadic, exact_index

TWO64 = 1 << 64


def _dec(f: Fraction) -> Decimal:
    return Decimal(f.numerator) / Decimal(f.denominator)


def test_ln2_and_the_float_constant() -> None:
    with localcontext() as ctx:
        ctx.prec = 400
        ln2 = Decimal(2).ln()
        for p in (64, 200, 1000):
            lo, hi = ln2_bounds(p)
            assert Decimal(lo) / Decimal(2) ** p <= ln2 <= Decimal(hi) / Decimal(2) ** p
            assert hi - lo <= p + 4
        exact = 1 / (2 * ln2)
        # INV_2LN2 is the double nearest 1/(2 ln 2): within half an ulp
        assert abs(Decimal(INV_2LN2) - exact) <= Decimal(math.ulp(INV_2LN2)) / 2


def test_exponents_never_exceed_g_over_ln2() -> None:
    rng = np.random.default_rng(3)
    eps = np.concatenate([[1.0, 0.1, 1e-6, 3.0, 2.0**-30], rng.uniform(1e-3, 20.0, 40)])
    de = np.concatenate([[0, 1, 2, 10**6, 2**40], rng.integers(0, 10**7, 40)]).astype(np.int64)
    with localcontext() as ctx:
        ctx.prec = 60
        ln2 = Decimal(2).ln()
        for e in eps:
            m = exponents(float(e), de)
            for k in range(de.size):
                t = Decimal(float(e)) * Decimal(int(de[k])) / 2 / ln2
                if t > 2**46:
                    continue
                assert 0 <= m[k] <= t, (e, de[k])
                # acceptance exp(-(t - m) ln 2) >= 2^-(1 + t 2^-46): about 1/2 for any realistic t
                assert t - m[k] < 1 + t / 2**46


def test_exp_bounds_enclose_the_true_value() -> None:
    rng = np.random.default_rng(4)
    cases = [(Fraction(0), 0), (Fraction(1, 2), 0), (Fraction(7, 8), 1), (Fraction(1), 1)]
    for _ in range(40):
        eps = float(rng.uniform(0.01, 5.0))
        de = int(rng.integers(0, 10**6))
        g = Fraction(eps) * de / 2
        m = int(exponents(eps, np.array([de]))[0])
        cases.append((g, m))
    with localcontext() as ctx:
        ctx.prec = 400
        for g, m in cases:
            true = (-_dec(g)).exp() * (Decimal(2) ** m)
            for p in (64, 256):
                lo, hi, q = exp_bounds(g.numerator, g.denominator.bit_length() - 1, m, p)
                scale = Decimal(2) ** q
                assert Decimal(lo) / scale <= true <= Decimal(hi) / scale
                assert (hi - lo) <= (m + 1) * (q + 8) + 4 * q  # ln 2's width times m, plus the series


def test_bernoulli_decisions_are_consistent_with_the_exact_probability() -> None:
    """Every decision must hold for the whole interval of U the drawn bits leave open."""
    rng = np.random.default_rng(5)
    with localcontext() as ctx:
        ctx.prec = 200
        for i in range(300):
            eps = float(rng.uniform(0.05, 3.0))
            de = int(rng.integers(0, 5000))
            g = Fraction(eps) * de / 2
            m = int(exponents(eps, np.array([de]))[0])
            p = (-_dec(g)).exp() * Decimal(2) ** m
            # half the cases: a first word within 2^-40 of p, forcing refinement
            src = ScriptedBits([int(p * TWO64) + int(rng.integers(-8, 8)) % TWO64] if i % 2 else [], seed=i)
            out = bernoulli_exp(src, g, m)
            r = 0
            for w in src.drawn:
                r = (r << 64) | w
            b = 64 * len(src.drawn)
            if out:
                assert Decimal(r + 1) / Decimal(2) ** b <= p
            else:
                assert Decimal(r) / Decimal(2) ** b >= p


@pytest.mark.parametrize("p_exact", [(Fraction(3, 8), 0), (Fraction(5, 2), 3)])
def test_bernoulli_frequency(p_exact: tuple[Fraction, int]) -> None:
    g, m = p_exact
    p = math.exp(-float(g)) * 2**m
    bits = Bits(np.random.default_rng(11))
    n = 4000
    k = sum(bernoulli_exp(bits, g, m) for _ in range(n))
    assert stats.binomtest(k, n, p).pvalue > 1e-6


def test_below_is_uniform_and_handles_huge_ranges() -> None:
    bits = Bits(np.random.default_rng(12))
    counts = np.bincount([below(bits, 3) for _ in range(6000)], minlength=3)
    assert stats.chisquare(counts).pvalue > 1e-6
    assert below(bits, 1) == 0
    big = 2**127 + 12345
    assert all(0 <= below(bits, big) < big for _ in range(50))
    # rejection: with n = 3 (2 bits), a word whose top two bits are 11 is rejected
    src = ScriptedBits([(3 << 62) | 5, (2 << 62)])
    assert below(src, 3) == 2 and len(src.drawn) == 2


def _check_decision(weights: list[Fraction], k: int, src: ScriptedBits) -> None:
    """k must be the inverse-CDF index of every U in the interval the drawn bits leave open."""
    r = 0
    for w in src.drawn:
        r = (r << 64) | w
    b = 64 * len(src.drawn)
    u_lo = Fraction(r, 1 << b)
    u_hi = Fraction(r + 1, 1 << b)
    z = sum(weights)
    c_prev = sum(weights[:k])
    assert c_prev <= u_lo * z and u_hi * z <= c_prev + weights[k]


def _random_dyadic(rng: np.random.Generator, K: int, spread: int) -> tuple[list[int], list[int]]:
    sizes = [int(v) for v in rng.integers(0, 1 << 63, K, dtype=np.uint64)]
    sizes = [s * 2 + int(rng.integers(0, 2)) if rng.random() < 0.7 else int(rng.integers(0, 4)) for s in sizes]
    sizes[int(rng.integers(0, K))] = TWO64 - 2**53 - 1  # a count float64 cannot hold
    m = [int(v) for v in rng.integers(-spread, spread, K)]
    return sizes, m


def test_dyadic_sampler_fast_path_and_fallback_agree_with_the_exact_inverse() -> None:
    rng = np.random.default_rng(6)
    for trial in range(60):
        K = int(rng.integers(1, 40))
        sizes, m = _random_dyadic(rng, K, [3, 70, 1500][trial % 3])
        if not any(sizes):
            sizes[0] = 1
        w = dyadic(sizes, m)
        sz = np.array(sizes, dtype=np.uint64)
        ex = np.array(m, dtype=np.int64)
        for seed in range(5):
            outs = []
            for fast in (True, False):
                src = ScriptedBits(seed=1000 * trial + seed)
                k = DyadicSampler(sz, ex, fast=fast).draw(src)
                _check_decision(w, k, src)
                outs.append(k)
            assert outs[0] == outs[1]


def test_near_boundary_uniforms_fall_back_and_stay_exact() -> None:
    """U placed within 2^-60 of a cumulative boundary: the float path must refuse, the fallback
    must draw more bits and decide exactly."""
    sizes = [3, TWO64 - 2**53 - 1, 1, 2**53 + 1, 7]
    m = [0, 62, 0, 51, 2]
    w = dyadic(sizes, m)
    z = sum(w)
    sampler = DyadicSampler(np.array(sizes, dtype=np.uint64), np.array(m, dtype=np.int64))
    for j in range(1, len(w)):
        boundary = sum(w[:j]) / z
        for off in (-3, -1, 0, 1, 2):
            first = int(boundary * TWO64) + off
            src = ScriptedBits([first], seed=j * 10 + off + 5)
            u = LazyUniform(src)
            fast = float_decide(sampler._c, sampler._rho, sampler._theta, u)
            assert fast is None  # the float path never decides this close to a boundary
            src2 = ScriptedBits([first], seed=j * 10 + off + 5)
            k = sampler.draw(src2)
            assert len(src2.drawn) > 1
            _check_decision(w, k, src2)
            assert k == exact_index(w, Fraction(first, TWO64) + Fraction(1, 2**65))


def test_float_bound_constants() -> None:
    assert gamma(1) == Fraction(1, 2**53 - 1)
    with pytest.raises(ValueError):
        gamma(2**52)


def _float_decide_fractions(c: np.ndarray, rho: Fraction, theta_sum: Fraction, u: LazyUniform) -> int | None:
    """``float_decide`` as first written, with ``fractions.Fraction``: the oracle of its integer form."""
    K = c.size
    if K == 0 or not c[-1] > 0.0:
        return None
    ulo = Fraction(u.r, 1 << u.b)
    uhi = Fraction(u.r + 1, 1 << u.b)
    k = min(int(np.searchsorted(c, float(ulo) * float(c[-1]), side="right")), K - 1)

    def lo(v: float) -> Fraction:
        return (Fraction(v) - theta_sum) / (1 + rho)

    def hi(v: float) -> Fraction:
        return (Fraction(v) + theta_sum) / (1 - rho)

    zlo, zhi = lo(float(c[-1])), hi(float(c[-1]))
    if zlo <= 0:
        return None
    if k > 0 and hi(float(c[k - 1])) > ulo * zlo:
        return None
    if uhi * zhi > lo(float(c[k])):
        return None
    return k


def test_float_decide_integer_form_agrees_with_fractions() -> None:
    """The integer comparisons decide exactly as the Fraction ones: random sums, uniforms near and
    far from the boundaries, tiny and large (rho, theta), zero weights, one and many words of U."""
    rng = np.random.default_rng(2026)
    decided = undecided = 0
    for trial in range(3000):
        K = int(rng.integers(1, 12))
        w = rng.random(K) * 2.0 ** rng.integers(-40, 40, K)
        w[rng.random(K) < 0.2] = 0.0
        c = np.cumsum(w)
        rho = [gamma(K) * 2, Fraction(1, 3), Fraction(0), Fraction(7, 2**20)][trial % 4]
        theta = [Fraction(0), Fraction(2 * K, 1 << 897), Fraction(1, 2**30), Fraction(3, 1000)][trial // 4 % 4]
        words = [int(x) for x in rng.integers(0, 2**63, 1 + trial % 3, dtype=np.int64) * 2 + int(rng.integers(2))]
        if trial % 5 == 0 and c[-1] > 0:  # a uniform right at a cumulative boundary
            j = int(rng.integers(K))
            words[0] = min(int(float(c[j] / c[-1]) * TWO64), TWO64 - 1)
        u1, u2 = LazyUniform(ScriptedBits(list(words), seed=1)), LazyUniform(ScriptedBits(list(words), seed=1))
        for _ in range(len(words) - 1):
            u1.refine()
            u2.refine()
        got, want = float_decide(c, rho, theta, u1), _float_decide_fractions(c, rho, theta, u2)
        assert got == want, (trial, got, want)
        decided += want is not None
        undecided += want is None
    assert decided > 1000 and undecided > 300  # both outcomes exercised
    with pytest.raises(ValueError):
        float_decide(np.array([1.0]), Fraction(1), Fraction(0), LazyUniform(ScriptedBits([5], seed=1)))


def test_gamma_matches_its_definition() -> None:
    u = Fraction(1, 1 << 53)
    for k in (0, 1, 2, 3, 1000, 2**40, 2**52 - 1):
        assert gamma(k) == k * u / (1 - k * u)


def test_dyadic_sampler_float_pass_is_the_same_on_its_short_path() -> None:
    """All sizes positive and every exponent within DROP_EXP takes fewer numpy calls; the float
    cumulative sums and (rho, theta) are those of the general path (a zero size appended forces it)."""
    from everlast.engine.learner.exact import DROP_EXP, U53

    rng = np.random.default_rng(9)
    for K in (1, 2, 17, 1000):
        sizes = rng.integers(1, 2**40, K).astype(np.uint64)
        m = rng.integers(-50, DROP_EXP + 40, K).astype(np.int64)
        short = DyadicSampler(sizes, m)
        general = DyadicSampler(np.append(sizes, np.uint64(0)), np.append(m, np.int64(7)))
        assert np.array_equal(short._c, general._c[:K]) and general._c[K] == general._c[K - 1]
        assert short._rho == 2 * U53 + 2 * gamma(K)
        assert general._rho == 2 * U53 + 2 * gamma(K + 1)
