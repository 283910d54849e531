"""Theorem L2 (docs/privacy/learner.md 4): the private learner's sample size, its pieces and its targets."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from everlast.engine.learner import hypothesis_count
from everlast.engine.learner.ordinals import FLOAT64_POINTS
from everlast.engine.planner import learner as pl

TARGETS = {("thresholds", 1): 5000, ("intervals", 1): 10_000, ("stumps", 10): 10_000}


def test_hypothesis_counts_are_exact() -> None:
    N = 2**64 - 2**53 - 1
    assert FLOAT64_POINTS == N
    assert hypothesis_count("thresholds", N) == 2 * (N + 1)
    assert hypothesis_count("intervals", N) == (N + 1) * (N + 2) // 2
    assert hypothesis_count("stumps", N, 10) == 20 * (N + 1)
    assert hypothesis_count("thresholds", 5) == 12 and hypothesis_count("intervals", 5) == 21
    assert pl.ln_hypotheses("thresholds") == pytest.approx(math.log(2) + math.log(2**64 - 2**53), rel=1e-15)
    assert pl.ln_hypotheses("intervals") == pytest.approx(2 * math.log(2**64 - 2**53) - math.log(2), rel=1e-12)
    with pytest.raises(ValueError):
        hypothesis_count("finite", 5)


@pytest.mark.parametrize(("concept", "d"), list(TARGETS))
def test_issue_targets_at_eps_1(concept: str, d: int) -> None:
    b = pl.n_required(1.0, 0.1, 0.05, pl.ln_hypotheses(concept, d=d))
    assert b.n_required is not None and b.n_required <= TARGETS[(concept, d)]
    # the split proves it, and one example fewer does not (for that split)
    assert pl.holds(b.n_required, 1.0, 0.1, 0.05, b.ln_h, b.beta_em)
    assert not pl.holds(b.n_required - 1, 1.0, 0.1, 0.05, b.ln_h, b.beta_em)
    assert b.beta_em + b.beta_uc == pytest.approx(0.05)
    assert b.t_errors <= b.n_required * 0.1


def test_the_two_requirements_by_hand() -> None:
    """Re-derive one instance from the theorem's statement, with the exact binomial tail beside the
    Chernoff-Hoeffding bound the planner uses."""
    ln_h = pl.ln_hypotheses("thresholds")
    b = pl.n_required(1.0, 0.1, 0.05, ln_h)
    n, t = b.n_required, b.t_errors
    assert n is not None
    # (a) the mechanism: |H| e^{-eps t / 2} = beta_em
    assert math.exp(ln_h - 1.0 * t / 2) == pytest.approx(b.beta_em, rel=1e-9)
    # (b) uniform convergence: |H| P[Bin(n, alpha) <= t] <= |H| e^{-n KL(t/n || alpha)} <= beta_uc
    chernoff = math.exp(ln_h - n * pl.kl(t / n, 0.1))
    exact = math.exp(ln_h) * stats.binom.cdf(math.floor(t), n, 0.1)
    assert exact <= chernoff <= b.beta_uc * (1 + 1e-6)


def test_monotone_in_the_targets() -> None:
    ln_h = pl.ln_hypotheses("intervals")
    ns = [pl.n_required(e, 0.1, 0.05, ln_h).n_required or 0 for e in (0.1, 0.5, 1.0, 4.0)]
    assert ns == sorted(ns, reverse=True)
    ns = [pl.n_required(1.0, a, 0.05, ln_h).n_required or 0 for a in (0.01, 0.05, 0.1, 0.3)]
    assert ns == sorted(ns, reverse=True)
    ns = [pl.n_required(1.0, 0.1, b, ln_h).n_required or 0 for b in (1e-6, 1e-3, 0.05, 0.5)]
    assert ns == sorted(ns, reverse=True)


@pytest.mark.parametrize("concept", ["thresholds", "intervals"])
def test_best_epsilon_and_alpha_invert_n_required(concept: str) -> None:
    ln_h = pl.ln_hypotheses(concept)
    for eps in (0.2, 1.0, 3.0):
        n = pl.n_required(eps, 0.1, 0.05, ln_h).n_required
        assert n is not None
        assert pl.epsilon_for_n(n, 0.1, 0.05, ln_h) <= eps * (1 + 1e-6)
        assert pl.epsilon_for_n(n - 50, 0.1, 0.05, ln_h) > eps * 0.99
        assert pl.best_alpha(n, eps, 0.05, ln_h) <= 0.1
    # too little data for any epsilon: even t -> 0 fails the union bound
    assert math.isinf(pl.epsilon_for_n(100, 0.1, 0.05, ln_h))
    assert pl.best_alpha(3, 1.0, 0.05, ln_h) == 1.0


def test_bad_targets() -> None:
    with pytest.raises(ValueError):
        pl.n_required(0.0, 0.1, 0.05, 10.0)
    with pytest.raises(ValueError):
        pl.n_required(1.0, 1.0, 0.05, 10.0)
    with pytest.raises(ValueError):
        pl.n_required(1.0, 0.1, 0.0, 10.0)
