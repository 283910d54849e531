"""The composition accountants against independent computations: brute-force sums of the
randomized-response privacy profile, dp_accounting's PLD and RDP accountants."""

from __future__ import annotations

import math

import dp_accounting
import pytest

from everlast.peers import accounting as acc


def brute_force_rr_delta(k: int, eps0: float, eps: float) -> float:
    """delta(eps) of RR(eps0)^k summed term by term with exact binomial weights."""
    q = math.exp(eps0) / (1 + math.exp(eps0))
    total = 0.0
    for x in range(k + 1):
        loss = eps0 * (2 * x - k)
        if loss > eps:
            p = math.comb(k, x) * q**x * (1 - q) ** (k - x)
            total += p * (1 - math.exp(eps - loss))
    return total


@pytest.mark.parametrize("k,eps0", [(1, 0.5), (5, 0.3), (20, 0.1), (37, 0.05), (60, 0.2)])
@pytest.mark.parametrize("eps", [0.0, 0.1, 0.5, 1.0])
def test_optimal_delta_matches_brute_force(k: int, eps0: float, eps: float) -> None:
    assert acc.optimal_delta(k, eps0, eps) == pytest.approx(brute_force_rr_delta(k, eps0, eps), rel=1e-9, abs=1e-15)


@pytest.mark.parametrize("k,eps0", [(50, 0.05), (500, 0.02), (3000, 0.01)])
def test_optimal_epsilon_matches_dp_accounting_rr_pld(k: int, eps0: float) -> None:
    ours = acc.optimal_epsilon(k, eps0, 1e-6)
    theirs = acc.rr_pld_epsilon(k, eps0, 1e-6)  # pessimistic discretization: an upper bound
    assert ours <= theirs + 1e-9
    assert theirs - ours < 0.01 * ours


@pytest.mark.parametrize("k,eps0", [(100, 0.05), (2000, 0.01)])
def test_laplace_pld_is_tighter_than_generic_and_below_rdp(k: int, eps0: float) -> None:
    pld = acc.laplace_pld_epsilon(k, eps0, 1e-6)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(dp_accounting.LaplaceDpEvent(1.0 / eps0), k)
    assert pld <= acc.optimal_epsilon(k, eps0, 1e-6) + 1e-9
    assert pld <= rdp.get_epsilon(1e-6) + 1e-9
    assert pld <= acc.advanced_epsilon(k, eps0, 1e-6)


@pytest.mark.parametrize("k", [1, 10, 1000, 10**6, 10**9])
@pytest.mark.parametrize("eps0", [1e-5, 1e-3, 0.1])
def test_optimal_is_never_worse_than_basic_or_advanced(k: int, eps0: float) -> None:
    c = acc.compose(k, eps0, 1e-6)
    assert c.optimal <= c.basic + 1e-9
    assert c.optimal <= c.advanced + 1e-9
    assert acc.optimal_delta(k, eps0, c.optimal) <= 1e-6


def test_advanced_formula() -> None:
    k, e0, d = 400, 0.02, 1e-5
    expected = e0 * math.sqrt(2 * k * math.log(1 / d)) + k * e0 * math.expm1(e0)
    assert acc.advanced_epsilon(k, e0, d) == pytest.approx(expected)
    assert acc.advanced_epsilon(k, e0, 0.0) == math.inf


@pytest.mark.parametrize("mechanism", ["generic", "laplace"])
@pytest.mark.parametrize("eps0", [0.3, 0.02, 0.004, 2e-5])
def test_max_queries_is_exactly_where_the_best_accountant_stops(mechanism: acc.Mechanism, eps0: float) -> None:
    eps, delta = 1.0, 1e-6
    k, used = acc.max_queries(eps0, eps, delta, mechanism)
    assert acc.compose(k, eps0, delta, mechanism).epsilon <= eps
    assert acc.compose(k + 1, eps0, delta, mechanism).epsilon > eps
    assert used in acc.ACCOUNTANTS


def test_max_queries_pure_delta_zero_is_basic() -> None:
    assert acc.max_queries(0.1, 1.0, 0.0) == (10, "basic")
    assert acc.max_queries(0.3, 1.0, 0.0) == (3, "basic")


@pytest.mark.parametrize("k", [1, 30, 10**4, 10**8])
def test_max_eps0_is_the_largest_fitting(k: int) -> None:
    e0 = acc.max_eps0(k, 1.0, 1e-6)
    assert acc.compose(k, e0, 1e-6).epsilon <= 1.0
    assert acc.compose(k, e0 * (1 + 1e-6), 1e-6).epsilon > 1.0
