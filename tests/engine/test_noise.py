"""engine.noise: the discrete Laplace law of the CKS sampler, and NoiseStream as a replayable value."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everlast.engine import codec, noise
from everlast.engine.errors import CorruptState, InvalidSchedule
from everlast.engine.noise import MAX_SCALE, NoiseStream
from tests.engine.stats import (
    check_binomial,
    check_chisquare,
    check_mean,
    dlap_cdf,
    dlap_pmf,
    dlap_ratio,
    dlap_upper,
)

I64 = np.ndarray[Any, np.dtype[np.int64]]


def draws(scale: Fraction, n: int, seed: int, block: int = 8192) -> I64:
    """n draws through the serving path (a NoiseStream of canonical blocks)."""
    out, _ = NoiseStream.fresh(np.random.default_rng(seed), scale, block).take(n)
    return out


# -- the law ------------------------------------------------------------------------------------

SMALL_SCALES = [Fraction(1), Fraction(7, 3), noise.exact_scale(0.3), noise.exact_scale(12.5),
                noise.exact_scale(2 / 0.7)]


@pytest.mark.statistical
@pytest.mark.parametrize("scale", SMALL_SCALES, ids=str)
def test_pmf_and_both_tails_match_the_exact_law(scale: Fraction) -> None:
    """Every z in [-K, K] (K where the expected count falls to ~50) and the two tails beyond it:
    one binomial test per cell and one chi-square over all cells."""
    n = 300_000
    t = float(scale)
    check_cells(draws(scale, n, seed=int(t * 1000)), scale)


def check_cells(z: I64, scale: Fraction) -> None:
    """A binomial test per cell z in [-K, K] (K where the expected count falls to ~50) and for each
    tail beyond it, then one chi-square over all cells, against the exact DLap(scale) law."""
    n, t = z.size, float(scale)
    p = dlap_ratio(t)
    k = max(1, int(math.log(n * (1 - p) / (1 + p) / 50) * t))  # P[Z = K] n ~ 50
    cells = list(range(-k, k + 1))
    probs = [dlap_pmf(c, t) for c in cells] + [dlap_upper(k + 1, t), dlap_upper(k + 1, t)]
    counts = [int(np.count_nonzero(z == c)) for c in cells] + [int(np.count_nonzero(z < -k)),
                                                                int(np.count_nonzero(z > k))]
    m = len(cells) + 3
    for c, cnt, pr in zip([*cells, "<-K", ">K"], counts, probs, strict=True):
        check_binomial(cnt, n, pr, m, f"scale {scale}, cell {c}")
    check_chisquare(counts, probs, m, f"scale {scale}")


@pytest.mark.statistical
@pytest.mark.parametrize("scale", SMALL_SCALES[:3], ids=str)
def test_the_scalar_path_has_the_exact_law(scale: Fraction) -> None:
    """Requests of at most noise.SMALL draws go through the scalar sampler (noise._one): the same
    per-cell binomial tests and chi-square as the vectorized path."""
    n = 160_000
    t = float(scale)
    g = np.random.default_rng(int(t * 977) + 5)
    z = np.concatenate([noise.sample(g, scale, noise.SMALL) for _ in range(n // noise.SMALL)])
    check_cells(z, scale)


@pytest.mark.statistical
@pytest.mark.parametrize("scale", [noise.exact_scale(6e7), noise.exact_scale(123456.75), MAX_SCALE], ids=str)
def test_large_scales_moments_tails_and_low_bits(scale: Fraction) -> None:
    """Where single values are too rare to count: the mean, E[Z^2] (CLT, with the exact fourth
    moment), the tails P[Z >= k t] and P[Z <= -k t], and residues mod 2 and mod 7 (an arithmetic
    slip in X // den would bias the low bits)."""
    n = 200_000
    t = float(scale)
    z = draws(scale, n, seed=7).astype(np.float64)
    p = dlap_ratio(t)
    q = -math.expm1(-1.0 / t)  # 1 - p without cancellation
    m2 = 2 * p / q**2
    m4 = 2 * p * (1 + 11 * p + 11 * p**2 + p**3) / ((1 + p) * q**4)
    ks = [1, 2, 4]
    m = 2 + 2 * len(ks) + 2
    check_mean(float(z.mean()), 0.0, math.sqrt(m2), n, m, "mean")
    check_mean(float((z * z).mean()), m2, math.sqrt(m4 - m2 * m2), n, m, "E[Z^2]")
    for k in ks:
        kk = math.ceil(k * t)
        check_binomial(int(np.count_nonzero(z >= kk)), n, dlap_upper(kk, t), m, f"P[Z >= {k} t]")
        check_binomial(int(np.count_nonzero(z <= -kk)), n, dlap_upper(kk, t), m, f"P[Z <= -{k} t]")
    zi = draws(scale, n, seed=7)
    for mod in (2, 7):
        # P[Z = r mod M] differs from 1/M by O(1/t^2): far below what n draws resolve
        check_chisquare(np.bincount(zi % mod, minlength=mod), np.full(mod, 1 / mod), m, f"mod {mod}")


@pytest.mark.statistical
@pytest.mark.parametrize(("u", "den"), [(0, 7), (1, 7), (1, 2), (3, 5), (5, 5), (1 << 50, 3 << 50), (1, 1)])
def test_bernoulli_exp_minus_gamma(u: int, den: int) -> None:
    """CKS Algorithm 1: P[True] = exp(-u/den), exactly, for gamma = u/den in [0, 1]."""
    n = 200_000
    g = np.random.default_rng(u % 1000 + den % 1000)
    hits = noise._bernoulli_exp_frac(g, np.full(n, u, dtype=np.int64), den)
    check_binomial(int(hits.sum()), n, math.exp(-u / den), 1, f"gamma = {u}/{den}")


@pytest.mark.statistical
def test_bernoulli_exp_with_mixed_gammas_in_one_call() -> None:
    """The vectorized helper shares its round counter K across entries: each entry still gets
    its own exp(-u/den)."""
    den, n = 10, 100_000
    us = np.arange(den + 1, dtype=np.int64)
    u = np.repeat(us, n)
    np.random.default_rng(3).shuffle(u)
    hits = noise._bernoulli_exp_frac(np.random.default_rng(4), u, den)
    for v in us:
        sel = u == v
        check_binomial(int(hits[sel].sum()), int(sel.sum()), math.exp(-v / den), us.size, f"u = {v}")


@pytest.mark.statistical
def test_bernoulli_exp_one_and_the_geometric() -> None:
    n = 300_000
    g = np.random.default_rng(11)
    check_binomial(int(noise._bernoulli_exp_one(g, n).sum()), n, math.exp(-1), 2, "Bernoulli(exp(-1))")
    v = noise._geometric_e(g, n)
    k = 10  # P[V >= 10] n ~ 14
    probs = [(1 - math.exp(-1)) * math.exp(-i) for i in range(k)] + [math.exp(-k)]
    check_chisquare(np.bincount(np.minimum(v, k), minlength=k + 1), probs, 2, "V ~ Geom(1 - 1/e)")


def test_the_float_helpers_agree_with_the_exact_law() -> None:
    s = noise.exact_scale(12.5)
    assert float(noise.pmf(np.arange(-2000, 2001), s).sum()) == pytest.approx(1.0, abs=1e-12)
    assert noise.tail(5, s) == pytest.approx(dlap_upper(5, 12.5), rel=1e-12)
    assert 1 - dlap_cdf(4, 12.5) == pytest.approx(noise.tail(5, s), rel=1e-12)


# -- representation -----------------------------------------------------------------------------


@pytest.mark.parametrize("x", [2.0**-20, 2.0**40, 0.3, 12.5, 6e7, 1 / 3, 1e-6])
def test_exact_scale_is_the_float_itself(x: float) -> None:
    s = noise.exact_scale(x)
    assert s == Fraction(x) and float(s) == x
    assert s.numerator < 1 << 53  # what the sampler's int64 arithmetic relies on


@pytest.mark.parametrize("x", [0.0, -1.0, math.nan, math.inf, -math.inf, 2.0**-21, 2.0**-20 * (1 - 2**-53),
                               2.0**40 * (1 + 2**-52), 1e300])
def test_exact_scale_refuses_what_it_cannot_run(x: float) -> None:
    with pytest.raises(InvalidSchedule, match="noise scale"):
        noise.exact_scale(x)


def test_scales_whose_denominator_exceeds_int64_sample() -> None:
    """Regression: 1e-6 is inside [2^-20, 2^40] but its denominator is 2^72; the sampler raised
    OverflowError. P[Z != 0] = 2p/(1+p) with p = e^-10^6: every draw is 0."""
    for x in (1e-6, 9.57650787728715e-07, 0.0009731821631765758):
        s = noise.exact_scale(x)
        assert s.denominator >= 1 << 63
        assert not draws(s, 20_000, seed=1).any()


def test_saturation_bound() -> None:
    """P[|Z| > 2^62] underflows for every scale the engine runs, and the cap is applied on both
    paths (numpy int64 and the Python-integer path for V > 1023)."""
    assert noise.saturation_tv(MAX_SCALE) == 0.0
    assert noise.saturation_tv(Fraction(1 << 62)) == pytest.approx(2 * math.exp(-1))
    assert noise.saturation_tv(Fraction(1 << 61)) < noise.saturation_tv(Fraction(1 << 62))
    z = draws(MAX_SCALE, 100_000, seed=2)
    assert int(np.abs(z).max()) < noise.SATURATION


def test_saturation_caps_both_signs(monkeypatch: pytest.MonkeyPatch) -> None:
    scale = noise.exact_scale(12.5)
    monkeypatch.setattr(noise, "SATURATION", 3)
    z = noise.sample(np.random.default_rng(5), scale, 20_000)
    assert set(np.unique(z)) == {-3, -2, -1, 0, 1, 2, 3}
    monkeypatch.setattr(noise, "_V_FAST", -1)  # every draw through the Python-integer path
    assert np.array_equal(noise.sample(np.random.default_rng(5), scale, 20_000), z)


@pytest.mark.parametrize("scale", [noise.exact_scale(0.3), noise.exact_scale(12.5), noise.exact_scale(6e7),
                                   MAX_SCALE, noise.exact_scale(1e-6)], ids=str)
def test_python_integer_path_computes_the_same_draws(monkeypatch: pytest.MonkeyPatch, scale: Fraction) -> None:
    fast = noise.sample(np.random.default_rng(9), scale, 5000)
    monkeypatch.setattr(noise, "_V_FAST", -1)
    assert np.array_equal(noise.sample(np.random.default_rng(9), scale, 5000), fast)


# -- NoiseStream --------------------------------------------------------------------------------

SCALE = noise.exact_scale(12.5)


def test_stream_is_canonical_blocks_of_one_generator() -> None:
    """The specification: block after block of ``sample(g, scale, block)`` on one generator."""
    g = np.random.default_rng(21)
    want = np.concatenate([noise.sample(g, SCALE, 7) for _ in range(5)])
    got, _ = NoiseStream.fresh(np.random.default_rng(21), SCALE, 7).take(35)
    assert np.array_equal(got, want)


def test_fresh_does_not_advance_the_generator() -> None:
    g = np.random.default_rng(3)
    before = g.bit_generator.state
    NoiseStream.fresh(g, SCALE, 4).take(10)
    assert g.bit_generator.state == before


def test_take_never_mutates_the_stream() -> None:
    s = NoiseStream.fresh(np.random.default_rng(1), SCALE, 5)
    d0 = s.to_dict()
    a, s2 = s.take(12)
    assert s.to_dict() == d0 and s.pos == 0
    b, _ = s.take(12)
    assert np.array_equal(a, b)
    c, s3 = s2.take(3)
    assert np.array_equal(s.take(15)[0], np.r_[a, c])
    assert s2.to_dict() == s.take(12)[1].to_dict() and s3.pos == 5  # 15 = 3 whole blocks: at the end of the third


def test_take_edge_cases() -> None:
    s = NoiseStream.fresh(np.random.default_rng(1), SCALE, 5)
    out, same = s.take(0)
    assert out.size == 0 and out.dtype == np.int64 and same is s
    with pytest.raises(ValueError, match="negative"):
        s.take(-1)
    with pytest.raises(ValueError, match="at least one"):
        NoiseStream.fresh(np.random.default_rng(1), SCALE, 0)


@settings(max_examples=60, deadline=None)
@given(block=st.integers(1, 12), sizes=st.lists(st.integers(0, 30), max_size=12),
       scale=st.sampled_from([SCALE, noise.exact_scale(0.3), noise.exact_scale(6e7)]))
def test_any_split_of_n_draws_gives_the_same_draws(block: int, sizes: list[int], scale: Fraction) -> None:
    s = NoiseStream.fresh(np.random.default_rng(block), scale, block)
    whole, end = s.take(sum(sizes))
    parts = []
    for k in sizes:
        d, s = s.take(k)
        parts.append(d)
    got = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    assert np.array_equal(got, whole)
    assert s.to_dict() == end.to_dict()


@settings(max_examples=40, deadline=None)
@given(block=st.integers(1, 10), first=st.integers(0, 40), later=st.integers(0, 40),
       via=st.sampled_from(["json", "msgpack"]))
def test_to_dict_from_dict_gives_identical_future_draws(block: int, first: int, later: int, via: str) -> None:
    _, s = NoiseStream.fresh(np.random.default_rng(77), SCALE, block).take(first)
    d = s.to_dict()
    d2 = json.loads(json.dumps(d)) if via == "json" else codec.unpack(codec.pack(d))
    r = NoiseStream.from_dict(d2)
    a, sa = s.take(later)
    b, sb = r.take(later)
    assert np.array_equal(a, b) and sa.to_dict() == sb.to_dict()
    assert r.scale == SCALE and r.pos == s.pos


def _good() -> dict[str, Any]:
    return NoiseStream.fresh(np.random.default_rng(1), SCALE, 5).take(3)[1].to_dict()


@pytest.mark.parametrize("corrupt", [
    lambda d: d.pop("scale"),
    lambda d: d.update(scale=[1, 0]),
    lambda d: d.update(scale=[-1, 2]),
    lambda d: d.update(scale="x"),
    lambda d: d.update(block=0),
    lambda d: d.update(pos=6),
    lambda d: d.update(pos=-1),
    lambda d: d.update(pos="many"),
    lambda d: d["start"].update(bit_generator="MT19937"),
    lambda d: d["start"].update(state="not hex"),
    lambda d: d["start"].pop("inc"),
    lambda d: d.update(start=None),
])
def test_corrupt_stream_state_is_refused(corrupt: Any) -> None:
    d = _good()
    NoiseStream.from_dict(d)
    corrupt(d)
    with pytest.raises(CorruptState):
        NoiseStream.from_dict(d)


def test_scale_bounds_are_the_documented_ones() -> None:
    running = (noise.MIN_SCALE, noise.MAX_SCALE, noise.SATURATION)
    assert running == (Fraction(1, 1 << 20), Fraction(1 << 40), 1 << 62)  # [2^-20, 2^40], 2^62
