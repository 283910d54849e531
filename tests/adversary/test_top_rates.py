"""The per-concept top-rate rule (docs/halt_budget.md) against the repo's own ERMs.

Pure tests check the formulas; the ``statistical`` ones measure p_top with fixed seeds and compare it
with the rule through one-sided 1 - 1e-6 binomial bounds (``adversary_sim.top_rates``)."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from everlast.adversary_sim.top_rates import binomial_upper, measure
from everlast.engine.planner.fill import EARLY_SHARE, SAMPLE_K, halt_budget_of, hand_round, sample_eps0
from everlast.engine.planner.learning import (
    boundaries,
    p_top,
    p_top_any_erm,
    split_votes_failure,
    spurious_share,
    top_rate,
)
from everlast.engine.schedule import Schedule

MISS = 1e-6


def lower_bound(k: int, n: int) -> float:
    """Clopper-Pearson one-sided lower bound (miss probability 1e-6)."""
    return 0.0 if k == 0 else float(stats.beta.ppf(MISS, k, n - k + 1))


# -- the formulas -----------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [0.01, 0.05, 0.1, 0.2, 0.3, 0.45])
@pytest.mark.parametrize("lam", [1, 2, 10, 50, 1000])
def test_rule_bounds_the_exact_uniform_rate(gamma: float, lam: int) -> None:
    # uniform data, midpoint ERM: a query at quantile distance u is voted across by (1 - 2u)^lam / 2
    # of the classifiers, in the band on a width 1 - (1 - 2 gamma)^(1/lam) per boundary
    exact = 1.0 - (1.0 - 2.0 * gamma) ** (1.0 / lam)
    assert exact <= p_top(gamma, lam) * (1.0 + 1e-12)
    assert p_top(gamma, lam) <= p_top_any_erm(gamma, lam)


def test_per_concept_rule() -> None:
    g, lam = 0.1, 50
    assert p_top(g, lam) == pytest.approx(-math.log(0.8) / 50, rel=1e-12)
    assert top_rate("thresholds", g, lam) == p_top(g, lam)
    assert top_rate("intervals", g, lam) == pytest.approx(2 * p_top(g, lam), rel=1e-12)
    assert top_rate("stumps", g, lam, d=1) == p_top(g, lam)
    assert boundaries("finite") == 1
    # stumps: 2 (lam - 1)/2^lam per irrelevant coordinate; nothing at planned lambdas
    assert spurious_share("stumps", 2, 10) == pytest.approx(18 / 1024)
    assert spurious_share("stumps", 10**9, 300) < 1e-70
    assert spurious_share("thresholds", 50, 10) == 0.0
    assert top_rate("stumps", g, 10, d=20) > top_rate("stumps", g, 10, d=2) > top_rate("thresholds", g, 10)
    # the band widens to [(1/2 - g - s)/(1 - s), (1/2 + g)/(1 - s)]; no bound once s >= 1/2 - g
    assert p_top(g, lam, spurious=0.05) == pytest.approx(math.log(0.95 / 0.7) / lam)
    assert p_top(g, lam, spurious=0.4) == 1.0


@pytest.mark.parametrize("concept", ["thresholds", "intervals", "stumps"])
def test_hand_round_absorbs_its_budget(concept: str) -> None:
    T, lam, R, beta = 20_000, 10, 200_000, 0.05
    r = hand_round(T=T, lam=lam, R=R, alpha=0.1, m_S=500, m_D=R, concept=concept, d=3, beta=beta)
    Schedule((r,))  # runnable by the engine
    rate = top_rate(concept, 0.1, lam, 3)
    budget = math.ceil(SAMPLE_K * R * rate)
    assert halt_budget_of(r, EARLY_SHARE * beta) >= budget
    assert r.eps_bt >= sample_eps0(T, 0.1, 0.1)  # Theorem A's flip share of alpha at lo, rounded up
    assert r.eps_bt <= sample_eps0(T, 0.1, 0.1) * 1.01
    assert split_votes_failure(budget, R, rate) < 1e-10
    # and it is the smallest such c, up to the filled test's margin steps
    assert r.c <= budget * 1.5


# -- measured ---------------------------------------------------------------------------------

SMOOTH = [(c, dist) for c in ("thresholds", "intervals") for dist in ("uniform", "normal", "heavy", "mixture")]


@pytest.mark.statistical
@pytest.mark.parametrize(("concept", "dist"), SMOOTH)
@pytest.mark.parametrize("lam", [10, 50])
def test_k_times_rule_holds_on_continuous_data(concept: str, dist: str, lam: int) -> None:
    """Continuous data without mass piled up at a boundary: p_top <= k rule (k = 2), with room;
    measured ratios are 0.6-1.2 (docs/halt_budget.md)."""
    m = measure(concept, dist, 0.1, lam, T=2000, queries=100_000, reps=3, seed=11)
    assert m.upper <= SAMPLE_K * m.rule
    assert m.upper <= 1.5 * m.rule


@pytest.mark.statistical
@pytest.mark.parametrize("concept", ["thresholds", "intervals", "stumps"])
@pytest.mark.parametrize("gamma", [0.05, 0.2])
def test_rule_is_tight_on_uniform_data(concept: str, gamma: float) -> None:
    """Uniform data: the rule's own (k = 1) bound holds, and is within 10% of what is measured."""
    m = measure(concept, "uniform", gamma, 30, d=2, T=4000, queries=200_000, reps=3, seed=12)
    assert lower_bound(m.tops, m.queries) <= m.rule <= binomial_upper(m.tops, m.queries) * 1.1


@pytest.mark.statistical
def test_stumps_target_on_the_last_coordinate() -> None:
    """Ties in the stump ERM go to the lowest coordinate; with lam = 10 an irrelevant coordinate
    sometimes wins, and the d-term of the rule covers it."""
    m = measure("stumps", "uniform", 0.1, 10, d=20, target_coordinate=19, T=2000, queries=100_000, reps=3, seed=13)
    plain = p_top(0.1, 10)
    assert lower_bound(m.tops, m.queries) > plain  # the effect is real
    assert m.upper <= m.rule  # and bounded by the rule with its d-term


@pytest.mark.statistical
def test_mass_at_the_boundary_breaks_the_rule_not_the_any_erm_bound() -> None:
    m = measure("thresholds", "spike", 0.1, 20, T=2000, queries=100_000, reps=3, seed=14)
    assert lower_bound(m.tops, m.queries) > SAMPLE_K * m.rule
    assert m.upper <= p_top_any_erm(0.1, 20)


@pytest.mark.statistical
def test_atoms_in_the_band_break_the_rule() -> None:
    # 21 equally likely atoms: at lam = 15 an atom's vote share lands in the band of gamma = 0.2,
    # and every query at it is a top
    m = measure("thresholds", "ties", 0.2, 15, T=2000, queries=100_000, reps=3, seed=15)
    assert lower_bound(m.tops, m.queries) > m.rule
    assert m.p_top == pytest.approx(1 / 21, rel=0.1)


@pytest.mark.statistical
def test_label_noise_inflates_the_rate_like_one_over_one_minus_two_eta_squared() -> None:
    m = measure("thresholds", "uniform", 0.1, 50, T=2000, queries=100_000, reps=3, seed=16, label_noise=0.2)
    assert lower_bound(m.tops, m.queries) > SAMPLE_K * m.rule
    assert m.upper <= 1.25 * m.rule / (1 - 0.4) ** 2


@pytest.mark.slow  # a plan per concept
def test_the_planner_budgets_each_concept_by_the_rule() -> None:
    """The planner's split-votes budget is ceil(k R top_rate) per concept: b from
    ``boundaries``, and the stump d-term vanishes at the lambdas it plans (hundreds of points)."""
    from everlast.engine.planner import Targets, plan
    from everlast.engine.planner.learning import halt_budget

    for concept, d in (("intervals", 1), ("stumps", 10**6)):
        p = plan(Targets(epsilon=8, halt_budget="split-votes", concept=concept, d=d))
        for r in p.rounds:
            assert spurious_share(concept, d, r.lam) < 1e-100
            budget = halt_budget("split-votes", r.R, r.alpha, r.band, r.lam, 2.0, boundaries(concept))
            assert budget == min(r.R, math.ceil(2.0 * r.R * top_rate(concept, r.band, r.lam, d)))
