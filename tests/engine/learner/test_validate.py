"""The validated certificate (docs/privacy/learner.md 10, Theorem V), the bins domain (1) and the
constant-model check. Tolerances from the math: a count's binomial spread at fixed seeds."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from everlast.engine.errors import CorruptState, InvalidInput
from everlast.engine.learner import Domain, PrivateLearner
from everlast.engine.learner.model import _bits
from everlast.engine.learner.validate import (
    MIN_HOLDOUT,
    Validation,
    discrete_laplace,
    holdout_size,
    noise_cdf,
    observed_cdf,
    split,
    upper_bound,
)
from tests.engine.learner.test_tree import restore


def test_discrete_laplace_has_its_law() -> None:
    """20,000 draws at epsilon 1 (and 3, beyond one exp(-1) factor): every frequency of |z| <= 2 within 4.5
    binomial standard deviations of (1 - q) / (1 + q) q^|z|."""
    for eps in (1.0, 3.0):
        bits, q, k = _bits(7), math.exp(-eps), 20_000
        z = np.array([discrete_laplace(bits, eps) for _ in range(k)])
        for v in range(-2, 3):
            p = (1 - q) / (1 + q) * q ** abs(v)
            assert abs(np.mean(z == v) - p) <= 4.5 * math.sqrt(p * (1 - p) / k) + 1e-12, (eps, v)


def test_noise_cdf_sums_the_law() -> None:
    q = math.exp(-0.7)
    pmf = {z: (1 - q) / (1 + q) * q ** abs(z) for z in range(-80, 81)}
    for j in (-5, -1, 0, 1, 4):
        assert noise_cdf(np.array([j]), 0.7)[0] == pytest.approx(sum(p for z, p in pmf.items() if z <= j), rel=1e-12)


def test_upper_bound_inverts_the_cdf() -> None:
    """U is where P_p[E + Z <= c] crosses beta, and it grows with c."""
    u = upper_bound(30, 200, 1.0, 0.05)
    assert observed_cdf(30, 200, u, 1.0) <= 0.05 < observed_cdf(30, 200, u - 1e-6, 1.0)
    assert upper_bound(-3, 200, 1.0, 0.05) < upper_bound(0, 200, 1.0, 0.05) < u < upper_bound(31, 200, 1.0, 0.05)
    assert upper_bound(250, 200, 1.0, 0.05) == 1.0


def test_a_huge_epsilon_is_exact_noise_free_counting() -> None:
    """epsilon >= 745.2 makes exp(-epsilon) 0.0: the noise is 0 (its law's mass off 0 is below 2^-1074),
    the CDF is the step at 0 (no log of 0: lq = -epsilon exactly), and the bound is the binomial one.
    (A mutant computing lq = log(exp(-epsilon)) raises ValueError here.)"""
    assert all(discrete_laplace(_bits(s), 800.0) == 0 for s in range(3))
    assert noise_cdf(np.array([-2, -1, 0, 3]), 800.0).tolist() == [0.0, 0.0, 1.0, 1.0]
    u = upper_bound(30, 200, 800.0, 0.05)
    from scipy.stats import binom

    assert binom.cdf(30, 200, u) <= 0.05 < binom.cdf(30, 200, u - 1e-6)
    assert u == pytest.approx(upper_bound(30, 200, 700.0, 0.05), abs=1e-9)


def test_the_bound_covers_the_true_error() -> None:
    """Lemma V1: P[U < p] <= beta. 2,000 trials at p = 0.15, m = 200, epsilon 0.5, beta = 0.1: the
    misses are Binomial(2000, <= 0.1); 4.5 sd above 200 is 290."""
    rng, bits = np.random.default_rng(3), _bits(3)
    miss = sum(upper_bound(int(rng.binomial(200, 0.15)) + discrete_laplace(bits, 0.5), 200, 0.5, 0.1) < 0.15
               for _ in range(2000))
    assert miss <= 200 + 4.5 * math.sqrt(2000 * 0.1 * 0.9)


def test_the_split_is_a_uniform_subset_of_the_indices() -> None:
    bits = _bits(1)
    hits = np.zeros(10)
    for _ in range(3000):
        s = split(10, 3, bits)
        assert s.sum() == 3
        hits += s
    assert np.all(np.abs(hits / 3000 - 0.3) <= 4.5 * math.sqrt(0.3 * 0.7 / 3000))


def test_holdout_size() -> None:
    assert holdout_size(1000, 0.25) == 250
    assert holdout_size(4 * MIN_HOLDOUT - 1, 0.25) == 0
    assert holdout_size(1000, 0.0) == 0
    with pytest.raises(InvalidInput):
        holdout_size(10, 1.0)


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).random((n, 2))
    y = ((x[:, 0] >= 0.6) ^ (np.random.default_rng(seed + 1).random(n) < 0.1)).astype(np.int8)
    return x, y


def test_fit_with_a_holdout_certifies_and_checkpoints() -> None:
    x, y = _data(2000)
    m = PrivateLearner.fit({"name": "trees", "d": 2, "depth": 3}, x, y, epsilon=1.0, seed=4, holdout=0.25,
                           beta=0.01, domain=Domain.bins([0, 0], [1, 1], 64))
    v = m.validation
    assert v is not None and v.m == 500 and m.n_fit == 1500 and v.beta == 0.01
    assert 0.1 <= v.bound <= 0.2  # the labels' noise is 10%; the margin at m = 500, beta = 0.01 is ~4 points
    c = m.certificate()["validated"]
    assert c["bound"] == v.bound and c["sentence"].startswith("validated: error <= ")
    m2 = restore(m.round_part(), m.live_part(), None)
    assert isinstance(m2, PrivateLearner) and m2.validation == v and m2.hypothesis == m.hypothesis
    bad = {**m.round_part(), "validation": {**v.to_dict(), "m": 2000}}
    with pytest.raises(CorruptState):
        restore(bad, m.live_part(), None)
    with pytest.raises(CorruptState):
        Validation.from_dict({"m": 1})


def test_no_holdout_no_certificate() -> None:
    x, y = _data(300)
    m = PrivateLearner.fit("stumps", x, y, epsilon=1.0, d=2, seed=1)
    assert m.validation is None and "validated" not in m.certificate() and m.n_fit == 300


def test_bins_positions_and_refusals() -> None:
    d = Domain.bins([0.0, -1.0], [1.0, 1.0], 4)
    pos = d.positions(np.array([[0.0, -1.0], [0.26, 0.0], [1.0, 5.0], [-3.0, 0.99]]))
    assert pos.tolist() == [[0, 0], [1, 2], [3, 3], [0, 3]]
    assert d.size == 4 and Domain.from_spec(d.to_spec()) == d and not d.outside(np.array([[9.0, 9.0]])).any()
    with pytest.raises(InvalidInput, match="2 features"):
        d.positions(np.zeros((2, 3)))
    for bad in ({"lo": [1.0], "hi": [0.0]}, {"lo": [0.0, 1.0], "hi": [1.0]}, {"lo": [0.0], "hi": [1.0], "bins": 1}):
        with pytest.raises(InvalidInput):
            Domain.from_spec({"kind": "bins", **bad})


def test_bins_stop_the_collapse() -> None:
    """10% positives in a corner, n = 1,000, epsilon 1, depth 3: on all of float64 the cuts outside the data
    hold nearly every parameter; on public ranges cut into 64 bins the fits are not constant."""
    rng = np.random.default_rng(5)
    x = rng.random((1000, 2))
    y = ((x[:, 0] > 0.68) & (x[:, 1] > 0.68)).astype(np.int8)
    spec = {"name": "trees", "d": 2, "depth": 3}
    binned = [PrivateLearner.fit(spec, x, y, epsilon=1.0, seed=s, domain=Domain.bins([0, 0], [1, 1], 64)).constant()
              for s in range(10)]
    assert sum(binned) <= 1


def test_constant_models() -> None:
    from everlast.engine.learner.hypothesis import Hypothesis
    from everlast.engine.learner.tree import Tree

    assert Hypothesis("stumps", 0, 0, 1, 0).constant(0, 9)
    assert Hypothesis("stumps", 10, 10, -1, 1).constant(0, 9)
    assert not Hypothesis("stumps", 5, 5, 1, 0).constant(0, 9)
    assert Hypothesis("intervals", 3, 3).constant(0, 9) and not Hypothesis("intervals", 3, 5).constant(0, 9)
    # depth 2: the root splits at 5; both leaves cut outside their boxes with the same label
    t = Tree(2, (0, 0, 0), (5, 0, 10), (1, 1, -1))
    assert t.constant(0, 9, 1)  # left: all >= 0 -> 1; right: all < 10 with sign -1 -> 1
    assert not Tree(2, (0, 0, 0), (5, 0, 10), (1, 1, 1)).constant(0, 9, 1)
    # an unreachable leaf does not count: the root sends everything right
    assert Tree(2, (0, 1, 0), (0, 3, 10), (1, 1, -1)).constant(0, 9, 2)


def test_a_fit_at_epsilon_800_is_certified() -> None:
    """The crash the review found: a fit with a holdout at epsilon 800 (exp(-800) = 0.0) used to raise in
    the bound, after the fit."""
    x, y = _data(400)
    m = PrivateLearner.fit("stumps", x, y, epsilon=800.0, d=2, seed=2, holdout=0.25, beta=0.01)
    v = m.validation
    assert v is not None and v.m == 100 and 0.0 < v.bound < 1.0


def test_the_float_cdf_matches_a_40_digit_computation() -> None:
    """The slack of ``upper_bound`` (relative 10^-9) assumes the float CDF is that close: checked against
    mpmath at 40 digits (the binomial pmf by its recurrence over a 60-sd window) for m from 200 to 10^5,
    epsilon 0.01 to 2, CDF values from 10^-20 to 0.93 (measured error below 2 10^-14)."""
    import mpmath as mp

    def exact(c: int, m: int, p: float, eps: float) -> float:
        with mp.workdps(40):
            q, pp = mp.e ** (-mp.mpf(eps)), mp.mpf(p)
            sd = math.sqrt(m * p * (1 - p))
            lo, hi = max(0, math.floor(m * p - 60 * sd - 80)), min(m, math.ceil(m * p + 60 * sd + 80))
            tot, pmf = mp.mpf(0), mp.binomial(m, lo) * pp**lo * (1 - pp) ** (m - lo)
            for k in range(lo, hi + 1):
                j = c - k
                tot += pmf * (q ** (-j) / (1 + q) if j < 0 else 1 - q ** (j + 1) / (1 + q))
                pmf = pmf * (m - k) / (k + 1) * pp / (1 - pp)
            return float(tot)

    for c, m, p, eps in ((30, 200, 0.2, 1.0), (30, 200, 0.05, 0.1), (2600, 20000, 0.15, 0.5),
                         (13000, 100000, 0.14, 2.0), (10, 100000, 0.0003, 0.01)):
        assert observed_cdf(c, m, p, eps) == pytest.approx(exact(c, m, p, eps), rel=1e-12), (c, m, p, eps)


def test_bins_are_the_documented_float_computation() -> None:
    """learner.md 1's formula, floor(fl(fl(x - lo) * fl(B / fl(hi - lo)))) clipped, is the code's, bit for
    bit (including on the bin edges, where it differs from the real-number formula), and an overflow
    goes to the end bins."""
    lo, hi, b = np.array([0.0, -1.0]), np.array([0.3, 7.0]), 10
    d = Domain.bins(lo.tolist(), hi.tolist(), b)
    x = np.random.default_rng(8).uniform(-1.0, 8.0, (5000, 2))
    x[:200] = (np.arange(200)[:, None] % 11) * ((hi - lo) / b) + lo  # the edges
    w = b / (hi - lo)
    want = np.clip(np.floor((x - lo) * w), 0, b - 1).astype(np.int64)
    assert (d.positions(x) == want).all()
    assert d.positions(np.array([[1.7e308, -1.7e308]])).tolist() == [[b - 1, 0]]


def test_a_beta_below_the_floor_is_refused() -> None:
    """The review's case (c = 800, m = 1000, epsilon = 50, beta = 1e-200): the window's omitted tail
    (up to 2 e^-75) dwarfs beta there, and the bound came out 0.98826 where the true CDF is ~5e-175.
    Below MIN_BETA the bound refuses; at MIN_BETA the omitted mass is inside the slack."""
    from everlast.engine.learner.validate import MIN_BETA, SLACK, upper_bound

    with pytest.raises(ValueError, match="validation_beta"):
        upper_bound(800, 1000, 50.0, 1e-200)
    assert 2 * math.exp(-75) < MIN_BETA * SLACK * 1e-9  # the tail, far inside the slack at the floor
    assert 0.0 < upper_bound(800, 1000, 50.0, MIN_BETA) <= 1.0


def test_the_daemon_refuses_a_validation_beta_below_the_floor() -> None:
    import pydantic

    from everlast.daemon.config import LearnerConfig

    with pytest.raises(pydantic.ValidationError, match="validation_beta"):
        LearnerConfig(epsilon=1.0, validation_beta=1e-13)
    assert LearnerConfig(epsilon=1.0, validation_beta=1e-12).validation_beta == 1e-12


def test_the_sentence_never_prints_the_bound_below_its_value() -> None:
    from everlast.engine.learner.validate import Validation

    v = Validation(m=1000, noisy_errors=90, epsilon=1.0, beta=1e-4, bound=0.10044)
    s = v.sentence()
    assert "error <= 0.101 " in s and "w.p. >= 1 - 0.0001" in s


def _true_error_misses(bound_of: Any, fits: int = 300, beta: float = 0.1) -> int:
    """Fits (n = 400, holdout 0.25, epsilon 1) whose true error exceeds ``bound_of(validation)``."""
    eta, n = 0.15, 400
    grid = (np.arange(2**16) + 0.5) / 2**16
    truth = grid >= 0.5
    miss = 0
    for k in range(fits):
        rng = np.random.default_rng(1000 + k)
        x = rng.random(n)
        y = ((x >= 0.5) ^ (rng.random(n) < eta)).astype(np.int8)
        m = PrivateLearner.fit("thresholds", x, y, epsilon=1.0, seed=5000 + k, holdout=0.25, beta=beta)
        v = m.validation
        assert v is not None and v.m == 100
        wrong = float(np.mean(m.answer(grid).labels.astype(bool) != truth))
        miss += bound_of(v) < eta + (1 - 2 * eta) * wrong - 2.0**-15
    return miss


def test_the_served_models_true_error_is_covered_end_to_end() -> None:
    """Lemma V1 end to end, on a distribution whose error is known: x ~ U[0, 1), y = [x >= 0.5]
    flipped with probability eta = 0.15; a threshold hypothesis h errs with exactly
    eta + (1 - 2 eta) P[h(x) != c(x)], P[...] read on a uniform grid of 2^16 points (an error below
    2^-15 per boundary). 300 fits of n = 400 (m = 100 held out), epsilon 1, beta = 0.1: the fits
    whose true error exceeds their bound are Binomial(300, <= 0.1) (independent: own data, own seed);
    4.5 sd above 30 is 53. The bound is checked against the *true* error, not a test split's estimate
    of it (bench.accuracy's `covered`). The mutant -- the measured holdout error as the bound, no
    margin -- misses about half the time, and the same check catches it."""
    limit = 300 * 0.1 + 4.5 * math.sqrt(300 * 0.1 * 0.9)
    assert _true_error_misses(lambda v: v.bound) <= limit
    assert _true_error_misses(lambda v: max(v.noisy_errors, 0) / v.m) > limit
