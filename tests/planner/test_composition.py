"""Composition: Observation 2 / Claim D.1, exact optimal (KOV) composition, its numerics, and
cross-checks against dp-accounting's PLD and an independent high-precision evaluation."""

from __future__ import annotations

import math

import pytest
from dp_accounting.pld import common, privacy_loss_distribution
from scipy.special import expit

from everlast.engine.planner import composition as comp

# ---------------------------------------------------------------------------- the paper's


@pytest.mark.parametrize("c", [10**3, 10**9, 6.25e26])
def test_observation_2_at_the_papers_parameters_claim_d1(c: float) -> None:
    delta = 1e-6
    eps0 = 1.0 / (3.0 * math.sqrt(c * math.log(2.0 / delta)))
    delta0 = delta / (2.0 * c)
    e, d = comp.observation_2(eps0, delta0, c)
    assert d == pytest.approx(delta)
    # exact value sqrt(2)/3 + c eps0 (e^eps0 - 1) ~ sqrt(2)/3 + 1/(9 ln(2/delta)) = 0.479
    assert e == pytest.approx(math.sqrt(2) / 3 + 1 / (9 * math.log(2 / delta)), rel=1e-4)
    assert e == pytest.approx(0.4790, abs=1e-4)
    # Claim D.1's bound (e^x - 1 < 2x): 0.487, not 1
    assert comp.claim_d1_bound(delta) == pytest.approx(0.4867, abs=1e-4)
    assert e <= comp.claim_d1_bound(delta) <= 1.0


def test_observation_2_needs_c_delta_below_one() -> None:
    assert math.isinf(comp.observation_2(0.1, 0.5, 4)[0])


# ---------------------------------------------------------------------------- KOV vs PLD


def _pld_delta(eps0: float, delta0: float, c: int, E: float) -> float:
    pld = privacy_loss_distribution.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps0, delta0), value_discretization_interval=1e-4)
    return float(pld.self_compose(c).get_delta_for_epsilon(E))


@pytest.mark.parametrize(("eps0", "delta0", "c", "E"), [
    (0.1, 0.0, 100, 1.0), (0.1, 1e-9, 100, 1.5), (0.02, 1e-10, 1000, 0.5), (0.01, 0.0, 10_000, 1.0),
    (0.5, 1e-8, 20, 3.0),
])
def test_kov_matches_dp_accounting_pld(eps0: float, delta0: float, c: int, E: float) -> None:
    ours = comp.kov_delta(eps0, delta0, c, E)
    pld = _pld_delta(eps0, delta0, c, E)
    assert ours == pytest.approx(pld, rel=2e-2)  # PLD discretises (pessimistically)
    assert pld >= ours * (1 - 1e-6) - 1e-15  # PLD is an upper bound on the exact (optimal) value


def test_kov_is_linear_in_count_for_tiny_delta() -> None:
    # c-fold pure eps0: as Delta -> 0 the epsilon tends to c eps0 (an accountant that drops the
    # count, like RDP's exponential-mechanism event, would fail this)
    for c in (10, 20, 40):
        assert comp.kov_epsilon(1.0, 0.0, c, 1e-300) == pytest.approx(c * 1.0, rel=1e-6)
    assert comp.kov_delta_rr(0.3, 7, 7 * 0.3) == 0.0


@pytest.mark.parametrize(("eps0", "delta0", "c", "Delta"), [
    (0.01, 1e-12, 10_000, 1e-6), (2.7e-7, 3.4e-19, 743_889_757_662, 1e-6), (1e-11, 1e-35, 10**20, 1e-6),
])
def test_kov_epsilon_inverts_kov_delta(eps0: float, delta0: float, c: int, Delta: float) -> None:
    E = comp.kov_epsilon(eps0, delta0, c, Delta)
    assert comp.kov_delta(eps0, delta0, c, E) <= Delta
    assert comp.kov_delta(eps0, delta0, c, E * 0.999) > Delta


def test_kov_epsilon_infeasible_when_instances_spend_delta() -> None:
    assert math.isinf(comp.kov_epsilon(0.1, 1e-6, 10**6, 1e-6))


# ---------------------------------------------------------------------------- numerics


@pytest.mark.parametrize("c", [10**12, 10**13, 10**14])
@pytest.mark.parametrize(("mu", "E"), [(0.233, 1.0), (2.0, 8.0)])
def test_berry_esseen_bound_is_above_the_exact_value(c: int, mu: float, E: float) -> None:
    eps0 = mu / math.sqrt(c)
    exact = comp._delta_rr_exact(eps0, c, E)
    be = comp._delta_rr_berry_esseen(eps0, c, E)
    assert be >= exact
    assert be - exact <= 1.1 * comp.BERRY_ESSEEN * 2.0 / math.sqrt(c) + 1e-12


def test_switch_to_berry_esseen_above_exact_range() -> None:
    c = comp.EXACT_MAX_C + 1
    eps0 = 0.233 / math.sqrt(c)
    assert comp.kov_delta_rr(eps0, c, 1.0) == comp._delta_rr_berry_esseen(eps0, c, 1.0)
    assert comp.gdp_delta(0.233, 1.0) <= comp.kov_delta_rr(eps0, c, 1.0)
    assert float(expit(0.0)) == 0.5


# ---------------------------------------------------------------------------- the delta split


@pytest.mark.parametrize(("c", "E", "Delta"), [(1, 1.0, 1e-6), (50, 1.0, 1e-6), (743_889_757_662, 1.0, 1e-6),
                                              (10**21, 0.98, 2.8e-6), (3 * 10**7, 8.0, 1e-6)])
def test_choose_instance_meets_its_budget(c: int, E: float, Delta: float) -> None:
    ch = comp.choose_instance(c, E, Delta)
    assert 0.0 < ch.eps0 < 1.0 and 0.0 < ch.delta0 < 1.0
    assert comp.kov_delta(ch.eps0, ch.delta0, c, E) <= Delta
    # the search estimate is close to the exact choice for large c
    if c >= 10**7:
        approx, _ = comp.approx_t_norm(c, E, Delta)
        assert approx == pytest.approx(ch.t_norm, rel=0.03)
