"""Dwork-Feldman noisy majority: the per-answer ratio bound evaluated exactly, the budget and the
refusal point, determinism, accuracy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from everlast.peers import accounting, design, evaluate, registry
from everlast.peers.dwork_feldman import DworkFeldman
from tests.peers.helpers import THRESHOLDS, data, in_batches, queries, task


def p_label(v: int, T: int, eps0: float, label: int = 1) -> float:
    """P[1[v + Lap(1/eps0) > T/2] = label], exactly (Laplace tails, no cancellation)."""
    s = T / 2 - v
    if (label == 1) == (s >= 0):
        return 0.5 * math.exp(-eps0 * abs(s))
    return 1 - 0.5 * math.exp(-eps0 * abs(s))


@pytest.mark.parametrize("T,eps0", [(11, 0.3), (50, 0.05), (201, 1.0)])
def test_released_label_is_eps0_dp_by_exact_ratios(T: int, eps0: float) -> None:
    """Neighbouring training sets move the vote count by at most 1: every label's probability ratio
    between v and v + 1 is within e^eps0, and the bound is attained (in the tails)."""
    worst = 0.0
    for v in range(T):
        for label in (0, 1):
            a, b = p_label(v, T, eps0, label), p_label(v + 1, T, eps0, label)
            worst = max(worst, abs(math.log(a / b)))
    assert worst <= eps0 * (1 + 1e-12)
    assert worst >= eps0 * (1 - 1e-9)


def make(n: int = 20_000, T: int = 100, eps_query: float = 0.05, epsilon: float = 1.0, delta: float = 1e-6,
         seed: int = 3) -> DworkFeldman:
    x, y = data(n)
    return DworkFeldman(THRESHOLDS, x, y, T=T, lam=n // T, eps_query=eps_query, epsilon=epsilon, delta=delta, seed=seed)


def test_budget_is_where_the_tightest_accountant_stops() -> None:
    p = make()
    k = p.privacy.max_queries
    assert k is not None and k == p.budget > 0
    assert accounting.compose(k, 0.05, 1e-6, "laplace").epsilon <= 1.0
    assert accounting.compose(k + 1, 0.05, 1e-6, "laplace").epsilon > 1.0
    assert p.privacy.epsilon <= 1.0
    assert dict(p.privacy.accountants)[p.privacy.accountant_used or ""] == pytest.approx(p.privacy.epsilon)
    assert p.privacy.protects_queries


def test_refuses_exactly_after_the_budget_whatever_the_batches() -> None:
    p = make()
    k = p.budget
    xq = queries(k + 50)
    out = in_batches(p.answer, xq, [7, k - 1, k + 3])
    assert set(np.unique(out[:k])) <= {0, 1}
    assert (out[k:] == -1).all()
    assert p.exhausted and p.answered == k
    assert (p.answer(queries(10, 5)) == -1).all()


def test_deterministic_and_batch_invariant() -> None:
    xq = queries(300)
    a = make().answer(xq)
    b = in_batches(make().answer, xq, [1, 2, 100, 299])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, make(seed=4).answer(xq))


@pytest.mark.statistical
def test_noise_matches_the_laplace_probability() -> None:
    """Frequencies of label 1 on one query, against P[v + Lap(1/eps0) > T/2] (binomial 6 sigma)."""
    p = make(n=10_000, T=100, eps_query=0.05, epsilon=1e9)
    q = np.full(20_000, 0.5)
    v = int(p.ensemble.votes(q[:1])[0])
    f = float(p.answer(q).mean())
    pr = p_label(v, 100, 0.05)
    assert abs(f - pr) <= 6 * math.sqrt(pr * (1 - pr) / q.size)


def test_accuracy_at_large_n() -> None:
    """Designed for alpha = 0.1 by the registry: the measured error is within the design's bound
    (plus 4 binomial sigmas of the number of answers)."""
    t = task()
    peer = registry.build("dwork_feldman", "thresholds", 200_000, 4.0, 1e-6, 0.1, seed=1, task=t)
    assert isinstance(peer, DworkFeldman)
    r = evaluate.run_peer(peer, t, 20_000, seed=2)
    bound = registry.error_bound(peer, 0.1)
    assert bound <= 0.1 + 1e-12
    assert r["answered"] == r["answered_before_refusal"] == peer.privacy.max_queries
    assert r["error_rate"] <= bound + 4 * math.sqrt(bound / r["answered"])
    assert design.noisy_majority_error_bound(peer.lam, peer.T, peer.eps_query) == bound
