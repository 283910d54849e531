"""Theorem A's numerical pieces (engine.planner.accuracy; docs/privacy/genericbbl.md 6.3) against
independent evaluations: mu(lambda) is an upper bound on the integral of Lemma A2's tail (40-digit
quadrature), ensemble_error meets Hoeffding's relative-entropy bound at 40 digits, relabel_size is
the smallest m meeting Lemma R's inequality, labels_error is 2 sum alpha_j, and the relabelling
failure counts 2 beta_j for every relabelling into a listed round."""

from __future__ import annotations

import math

import mpmath
import pytest

from everlast.engine.planner.accuracy import (
    ensemble_error,
    labels_error,
    log_pairs_growth,
    mean_error_bound,
    relabel_failure,
    relabel_size,
    tail_bound,
)
from everlast.engine.schedule import RoundSpec


@pytest.mark.parametrize("d", [1, 2, 3, 10])
@pytest.mark.parametrize("lam", [10, 100, 2833, 20000])
def test_mean_error_bound_is_above_the_integral_of_the_tail(lam: int, d: int) -> None:
    with mpmath.workdps(40):
        C = mpmath.log(2) + log_pairs_growth(2 * lam, d)
        k = lam * mpmath.log(2) / 2
        a0 = mpmath.mpf(8) / lam
        if a0 >= 1:
            assert mean_error_bound(lam, d) == 1.0
            return
        s = max(a0, min(mpmath.mpf(1), C / k))
        integral = a0 + (s - a0) + mpmath.quad(lambda a: min(1, mpmath.exp(C - k * a)), [s, 1])
    mu = mean_error_bound(lam, d)
    assert mu >= float(min(1, integral))
    assert mu <= float(integral) * (1 + 1e-6) or mu == 1.0  # and it is the integral, not a looser bound


def test_tail_bound_is_the_epsilon_net_bound_and_one_below_its_range() -> None:
    lam, d = 2833, 1
    assert tail_bound(lam, d, 7.9 / lam) == 1.0  # a lambda < 8: Thm A2.1 says nothing
    a = 0.01
    expected = 2 * math.exp(log_pairs_growth(2 * lam, d)) * 2 ** (-a * lam / 2)
    assert tail_bound(lam, d, a) == pytest.approx(min(1.0, expected), rel=1e-12)
    assert log_pairs_growth(5, 0) == 0.0 and log_pairs_growth(3, 4) == pytest.approx(3 * math.log(2))


@pytest.mark.parametrize(("mu", "T", "beta"), [(0.01, 1000, 1e-6), (0.02, 25000, 0.0125), (1e-4, 10, 0.5),
                                               (0.3, 100000, 1e-9), (0.021, 3, 1e-3)])
def test_ensemble_error_meets_hoeffding_at_40_digits(mu: float, T: int, beta: float) -> None:
    x = ensemble_error(mu, T, beta)
    if x >= 1.0:
        return
    with mpmath.workdps(40):
        U, M = mpmath.mpf(x), mpmath.mpf(mu)
        kl = U * mpmath.log(U / M) + (1 - U) * mpmath.log((1 - U) / (1 - M))
        assert mpmath.exp(-T * kl) <= beta
    assert x > mu


@pytest.mark.parametrize("d", [1, 2, 5])
@pytest.mark.parametrize(("alpha", "beta"), [(0.1, 0.05), (0.0023, 1e-3), (1e-4, 1e-6)])
def test_relabel_size_is_the_smallest_m_meeting_lemma_r(alpha: float, beta: float, d: int) -> None:
    def holds(m: int) -> bool:
        with mpmath.workdps(40):
            lhs = mpmath.log(4) + log_pairs_growth(2 * m, d) - mpmath.mpf(alpha) * m / 8
            return bool(lhs <= mpmath.log(beta))

    m = relabel_size(alpha, beta, d)
    assert holds(m) and not holds(m - 1)


def test_labels_and_relabel_failure_count_every_relabelling_twice() -> None:
    assert labels_error([0.01, 0.02, 0.03]) == [0.0, pytest.approx(0.04), pytest.approx(0.1)]
    rounds = [RoundSpec(T=1, lam=1, R=1, c=1, eps_bt=1.0, delta_bt=None, alpha=0.1, m_S=1, m_D=1, beta=b)
              for b in (0.01, 0.005, 0.0025)]
    assert relabel_failure(rounds) >= 2 * (0.005 + 0.0025)
    assert relabel_failure(rounds) == pytest.approx(0.015, rel=1e-12)
