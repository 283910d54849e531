"""Dagan-Feldman (Corollary 1): the per-query privacy bound checked against the exact output
distribution on tiny training sets (enumerating every index tuple, every substitution), the
implementation's frequencies against that distribution, budget and refusal, accuracy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from everlast.peers import accounting, design, evaluate, registry, sample_complexity
from everlast.peers.dagan_feldman import (
    DaganFeldman,
    DFParams,
    answer_probability,
    index_inclusion,
    paper_per_query_epsilon,
    per_query_epsilon,
)
from tests.peers.helpers import THRESHOLDS, data, in_batches, queries, task


def exact_p_one(x: np.ndarray, y: np.ndarray, n0: int, gamma: float, rho: float, q: float) -> float:
    """P[answer = 1] for query q: average over all n^n0 equally likely index tuples, then the flip."""
    order = np.argsort(x, kind="stable")
    xs = x[order].astype(float)
    prefix = np.concatenate([[0], np.cumsum(y[order])]).astype(np.int64)
    n = x.size
    a = np.mean([answer_probability(xs, prefix, np.array(t), gamma, q) for t in itertools.product(range(n), repeat=n0)])
    return rho + (1 - 2 * rho) * float(a)


@pytest.mark.parametrize("gamma,rho,tight", [(0.3, 0.1, 0.0), (1.5, 0.25, 0.0), (0.05, 0.02, 0.0), (50.0, 0.1, 0.5)])
def test_per_query_bound_holds_on_every_substitution(gamma: float, rho: float, tight: float) -> None:
    """Exact |log P_S[label] - log P_S'[label]| over every substitution and label is at most eps0;
    with a sharp exponential mechanism (gamma = 50) one substitution moves the answer from about rho
    to about 1 - rho on many subsets and the bound is within a factor 2 (small gamma: the bound is loose, as the
    paper's argument is)."""
    n, n0 = 4, 2  # n a power of two: the implementation's index draw is exactly uniform
    x, y = np.array([0.1, 0.4, 0.6, 0.9]), np.array([0, 0, 1, 1])
    eps0 = per_query_epsilon(gamma, index_inclusion(n, n0), rho)
    assert eps0 <= paper_per_query_epsilon(gamma, index_inclusion(n, n0), rho)
    points = [0.05, 0.1, 0.5, 0.6, 0.95]
    qs = [0.0, 0.35, 0.55, 1.0]
    worst = 0.0
    for q in qs:
        p = exact_p_one(x, y, n0, gamma, rho, q)
        for i, xx, yy in itertools.product(range(n), points, (0, 1)):
            x2, y2 = x.copy(), y.copy()
            x2[i], y2[i] = xx, yy
            p2 = exact_p_one(x2, y2, n0, gamma, rho, q)
            worst = max(worst, abs(math.log(p / p2)), abs(math.log((1 - p) / (1 - p2))))
    assert worst <= eps0 * (1 + 1e-12)
    assert worst >= tight * eps0


def test_index_inclusion() -> None:
    assert index_inclusion(4, 2) == pytest.approx(1 - 0.75**2, rel=1e-12)
    assert index_inclusion(10**6, 100) >= 1 - (1 - 1e-6) ** 100
    assert index_inclusion(10**6, 100) <= 100 / 10**6 * (1 + 1e-6)


def test_per_query_epsilon_limits() -> None:
    assert per_query_epsilon(1e-12, 1e-12, 0.05) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError):
        per_query_epsilon(0.1, 0.1, 0.5)


@pytest.mark.statistical
def test_implementation_matches_exact_distribution() -> None:
    x, y = np.array([0.1, 0.4, 0.6, 0.9]), np.array([0, 0, 1, 1])
    params = DFParams(n0=2, gamma=0.8, rho=0.1)
    peer = DaganFeldman(THRESHOLDS, x, y, params=params, epsilon=1e6, delta=1e-6, seed=8)
    m = 40_000
    for q in (0.35, 0.5, 0.8):
        f = float(peer.answer(np.full(m, q)).mean())
        p = exact_p_one(x, y, 2, 0.8, 0.1, q)
        assert abs(f - p) <= 5 * math.sqrt(p * (1 - p) / m)


def make(seed: int = 3) -> DaganFeldman:
    x, y = data(50_000)
    params = DFParams(n0=119, gamma=design.df_gamma(50_000, 119, 0.1), rho=0.05)
    return DaganFeldman(THRESHOLDS, x, y, params=params, epsilon=2.0, delta=1e-6, seed=seed)


def test_budget_and_refusal() -> None:
    p = make()
    k = p.budget
    assert k == p.privacy.max_queries and k > 0
    assert accounting.compose(k, p.eps0, 1e-6).epsilon <= 2.0 < accounting.compose(k + 1, p.eps0, 1e-6).epsilon
    out = in_batches(p.answer, queries(k + 30), [5, k, k + 1])
    assert (out[:k] >= 0).all() and (out[k:] == -1).all()
    assert p.exhausted and (p.answer(queries(3)) == -1).all()
    assert p.privacy.protects_queries


def test_deterministic_and_batch_invariant() -> None:
    xq = queries(500)
    np.testing.assert_array_equal(make().answer(xq), in_batches(make().answer, xq, [1, 77, 300]))


def test_accuracy_at_large_n() -> None:
    t = task()
    peer = registry.build("dagan_feldman", "thresholds", 400_000, 4.0, 1e-6, 0.1, seed=1, task=t)
    r = evaluate.run_peer(peer, t, 20_000, seed=2)
    bound = registry.error_bound(peer, 0.1)
    assert bound <= 0.1
    assert r["answered"] >= 5000
    assert r["error_rate"] <= bound + 4 * math.sqrt(bound / r["answered"])
    assert r["error_rate"] >= 0.05 - 4 * math.sqrt(0.05 / r["answered"])  # the flip alone costs rho = alpha/2


def test_n_required_gives_the_horizon() -> None:
    q = 2000
    n = sample_complexity.dagan_feldman_n(q, 1.0, 1e-6, 0.1)
    peer = registry.build("dagan_feldman", "thresholds", n, 1.0, 1e-6, 0.1, seed=0)
    assert peer.privacy.max_queries is not None and peer.privacy.max_queries >= q
