"""Lemma C.3 (P1/P2) and Lemma C.4 as the planner evaluates them (natural logs)."""

from __future__ import annotations

import math

import pytest

from everlast.engine.planner import bt


def test_gap_formula_by_hand() -> None:
    eps, delta, T = 0.5, 1e-10, 10_000
    by_hand = 12.0 / (eps * T) * (math.log(10.0 / eps) + math.log(1.0 / delta) + 1.0)
    assert bt.gap_required(eps, delta, T) == pytest.approx(by_hand, rel=1e-15)
    # log base 2 reading (not used) is ~1.44x larger on the log terms
    assert bt.gap_required(eps, delta, T, log_base=2) > by_hand


@pytest.mark.parametrize(("gamma", "eps", "delta"), [(0.05, 2.7e-7, 3.4e-19), (0.1, 0.5, 1e-8),
                                                    (0.2, 0.99, 0.5), (1e-4, 1e-12, 1e-40)])
def test_min_t_is_the_smallest_passing_integer(gamma: float, eps: float, delta: float) -> None:
    T = bt.min_t(gamma, eps, delta)
    assert bt.gap_holds(gamma, eps, delta, T)
    below = T - 1 if T < 2**50 else math.floor(T * (1 - 1e-8))  # T - 1 == T in floating point
    assert not bt.gap_holds(gamma, eps, delta, below)
    assert pytest.approx(6.0 / (gamma * eps) * bt.bt_log_factor(eps, delta), rel=1e-6, abs=2) == T


def test_min_delta_is_consistent_with_min_t() -> None:
    gamma, eps, delta = 0.05, 1e-6, 1e-15
    T = bt.min_t(gamma, eps, delta)
    d = bt.min_delta(gamma, eps, T)
    assert d <= delta * (1 + 1e-5)
    assert bt.gap_holds(gamma, eps, d, T)
    assert not bt.gap_holds(gamma, eps, d * 0.99, T)


def test_ranges_p2() -> None:
    assert not bt.gap_holds(0.1, 1.0, 1e-6, 10**9)  # eps' must be < 1
    assert not bt.gap_holds(0.1, 0.5, 1.0, 10**9)
    assert not bt.gap_holds(0.5, 0.5, 1e-6, 10**9)  # thresholds 1/2 -+ gamma inside (0, 1)
    assert bt.min_delta(0.1, 0.5, 10) == 1.0  # nothing certifiable
    with pytest.raises(ValueError):
        bt.min_t(0.1, 1.5, 1e-6)


def test_lemma_c4_by_hand() -> None:
    assert bt.accuracy_t(0.05, 0.01, 1e6, 0.025) == pytest.approx(
        8 / (0.05 * 0.01) * (math.log(1e6 + 1) + math.log(40)))
