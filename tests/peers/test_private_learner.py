"""The generic private learner: its exponential mechanism's output distribution computed by brute
force on small grids, its privacy over every substitution, the exact sampler, domain errors,
answering forever, accuracy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from everlast.engine.concepts import from_spec
from everlast.peers import evaluate, registry, sample_complexity
from everlast.peers.base import Grid, InfiniteDomain, OutsideDomain, UnsupportedConcept
from everlast.peers.private_learner import PrivateLearner, hypothesis_distribution, sample_hypothesis
from tests.peers.helpers import THRESHOLDS, task


def brute_force(k: np.ndarray, y: np.ndarray, size: int, eps: float) -> np.ndarray:
    """P[h_j] ∝ exp(-eps errors(h_j) / 2), h_j(x) = 1[index >= j], every j in 0..size, directly."""
    err = np.array([int(np.sum((k >= j).astype(int) != y)) for j in range(size + 1)], dtype=float)
    w = np.exp(-eps * err / 2)
    out: np.ndarray = w / w.sum()
    return out


CASES = [
    (np.array([0, 3, 3, 5, 7]), np.array([0, 0, 1, 1, 1]), 8),
    (np.array([2, 2, 2]), np.array([1, 0, 1]), 5),
    (np.array([0, 9]), np.array([1, 0]), 10),
    (np.array([4, 1, 6, 6, 0, 3]), np.array([1, 0, 1, 1, 0, 0]), 7),
]


@pytest.mark.parametrize("eps", [0.1, 1.0, 4.0])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_output_distribution_matches_brute_force(case: int, eps: float) -> None:
    k, y, size = CASES[case]
    np.testing.assert_allclose(hypothesis_distribution(k, y.astype(np.int8), size, eps),
                               brute_force(k, y, size, eps), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
def test_eps_dp_over_every_substitution(eps: float) -> None:
    """Replace each example by every (grid point, label): every hypothesis' probability moves by at
    most e^eps (brute-force distributions, independent of the sampler's block algorithm)."""
    size = 6
    k, y = np.array([0, 2, 2, 5]), np.array([0, 1, 0, 1])
    base = brute_force(k, y, size, eps)
    worst = 0.0
    for i, kk, yy in itertools.product(range(k.size), range(size), (0, 1)):
        k2, y2 = k.copy(), y.copy()
        k2[i], y2[i] = kk, yy
        worst = max(worst, float(np.max(np.abs(np.log(base / brute_force(k2, y2, size, eps))))))
    assert worst <= eps * (1 + 1e-12)
    assert worst >= 0.5 * eps  # the bound is not vacuous here


@pytest.mark.statistical
def test_sampler_frequencies_match_the_distribution() -> None:
    k, y, size = CASES[3]
    p = hypothesis_distribution(k, y.astype(np.int8), size, 1.0)
    g = np.random.default_rng(11)
    draws = np.array([sample_hypothesis(k, y.astype(np.int8), size, 1.0, g) for _ in range(20_000)])
    counts = np.bincount(draws, minlength=size + 1)
    assert stats.chisquare(counts, p * counts.sum()).pvalue > 1e-6


def test_huge_grid_is_sampled_exactly_by_blocks() -> None:
    grid = Grid(0.0, 1.0, 2**60)
    x = grid.snap(np.random.default_rng(0).random(2000))
    peer = PrivateLearner(THRESHOLDS, x, (x >= 0.5).astype(int), grid=grid, epsilon=1.0, seed=0)
    assert 0 <= peer.j <= 2**60
    assert abs(peer.threshold - 0.5) < 0.02


def test_domain_errors_say_where_not_what() -> None:
    grid = Grid(0.0, 1.0, 11)
    x = grid.points(np.arange(11))
    peer = PrivateLearner(THRESHOLDS, x, (x >= 0.5).astype(int), grid=grid, epsilon=1.0, seed=0)
    with pytest.raises(OutsideDomain) as e:
        peer.answer([0.1, 0.123456789])
    assert "position 1" in str(e.value) and "0.123" not in str(e.value)
    with pytest.raises(InfiniteDomain):
        PrivateLearner(THRESHOLDS, x, (x >= 0.5).astype(int), grid=None, epsilon=1.0)
    with pytest.raises(UnsupportedConcept):
        PrivateLearner(from_spec({"name": "intervals"}), x, (x >= 0.5).astype(int), grid=grid, epsilon=1.0)
    assert sample_complexity.private_learner_n(None, 1.0, 0.1) is None


def test_answers_forever_with_one_guarantee() -> None:
    t = task()
    peer = registry.build("private_learner", "thresholds", 3000, 1.0, 1e-6, 0.1, seed=4, task=t, grid_size=1001)
    r = evaluate.run_peer(peer, t, 300_000, seed=5)
    assert r["refused"] == 0 and not peer.exhausted
    assert peer.privacy.epsilon == 1.0 and peer.privacy.delta == 0.0 and peer.privacy.protects_queries
    assert peer.privacy.max_queries is None


def test_accuracy_at_n_required() -> None:
    """At the n the bound asks for, the released hypothesis' true error (exact on the uniform grid)
    is within alpha for every seed tried (the bound is on the expectation; it is loose)."""
    size, alpha = 2**16, 0.1
    n = sample_complexity.private_learner_n(size, 1.0, alpha)
    assert n is not None
    t = task()
    for seed in range(5):
        peer = registry.build("private_learner", "thresholds", n, 1.0, 0.0, alpha, seed=seed, task=t, grid_size=size)
        assert isinstance(peer, PrivateLearner)
        err = abs(min(peer.threshold, 1.0) - t.target["t"])  # uniform: error = mass between thresholds
        assert err <= alpha


def test_sample_need_grows_with_log_domain() -> None:
    ns = [sample_complexity.private_learner_n(2**b, 1.0, 0.1) or 0 for b in (8, 16, 32, 62)]
    assert ns == sorted(ns) and ns[0] > 0 and ns[-1] > 2 * ns[0]
    # linear in ln|X| for large |X|: the increments per doubling of the exponent are near equal
    d1, d2 = ns[2] - ns[1], (ns[3] - ns[2]) * 16 / 30
    assert math.isclose(d1, d2, rel_tol=0.05)
