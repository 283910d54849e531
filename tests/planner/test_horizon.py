"""Theorem A-infinity's accuracy horizon (engine.planner.accuracy.accuracy_horizon;
docs/privacy/genericbbl.md 6.3) against a brute-force walk over the rounds: round K + j carries the
labels' error a_K + 2 j alpha_K and adds round K's failure budget plus Claim E.1's 2 beta_K, and the
horizon is the last round with every bound <= alpha and the failure <= beta. A variant that forgets
the repetitions' relabelling error (the even schedule's old reading, "repetitions are covered") is
caught."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from everlast.engine.design import DEFAULT
from everlast.engine.planner.accuracy import Horizon, RoundAccuracy, accuracy_horizon, labels_error
from everlast.engine.schedule import RoundSpec


def _spec(R: int, alpha: float, beta: float, m_S: int = 10**9) -> RoundSpec:
    """A round whose S-hat meets Claim E.1's size unless ``m_S`` is set small."""
    return RoundSpec(T=100, lam=10, R=R, c=10, eps_bt=0.1, delta_bt=None, alpha=alpha, m_S=m_S, m_D=10**6,
                     gamma=0.01, beta=beta, halt_eps=0.1, halt_threshold=5)


def _accs(rounds: list[RoundSpec], own: list[float]) -> list[RoundAccuracy]:
    a = labels_error([r.alpha for r in rounds])
    return [RoundAccuracy(i, "per-query", a[i - 1] + o, a[i - 1], o / 4, 3 * o / 4, 0.0, 0.0, 1, r.beta)
            for i, (r, o) in enumerate(zip(rounds, own, strict=True), start=1)]


def _brute(rounds: list[RoundSpec], accs: list[RoundAccuracy], alpha: float, beta: float,
           forget_relabelling: bool = False) -> tuple[int, int]:
    """(last round covered, its queries) by walking round after round (10^6 rounds at most)."""
    fail, queries, labels = Fraction(0), 0, Fraction(0)
    K = len(rounds)
    for i in range(1, 10**6):
        r, acc = (rounds[i - 1], accs[i - 1]) if i <= K else (rounds[-1], accs[-1])
        if i >= 2:
            labels += 0 if (forget_relabelling and i > K) else 2 * Fraction(r.alpha)
        own = Fraction(acc.flips) + Fraction(acc.ensemble)
        fail += Fraction(acc.failure) + (2 * Fraction(r.beta) if i >= 2 else 0)
        if labels + own > Fraction(alpha) or fail > Fraction(beta):
            return i - 1, queries
        queries += r.R
    return 10**6, queries


@pytest.mark.parametrize("alpha_K, beta_K, own", [(1e-4, 1e-6, 0.05), (2e-3, 1e-6, 0.07), (1e-5, 1e-3, 0.02),
                                                  (1e-3, 1e-5, 0.0995)])
def test_horizon_is_the_brute_force_walk(alpha_K: float, beta_K: float, own: float) -> None:
    rounds = [_spec(1000, 2e-3, 1e-3), _spec(2000, 1e-3, 1e-3), _spec(5000, alpha_K, beta_K)]
    accs = _accs(rounds, [0.05, 0.06, own])
    h = accuracy_horizon(rounds, DEFAULT, 1, 0.1, 0.05, accs=accs)
    last, queries = _brute(rounds, accs, 0.1, 0.05)
    assert (h.rounds, h.queries) == (last, queries)
    assert h.repetitions == max(0, last - len(rounds)) and h.failure <= 0.05
    # the broken variant (repetitions carry no relabelling error) claims more than is proven
    if h.rounds >= len(rounds) and "below alpha" in h.limit:
        assert _brute(rounds, accs, 0.1, 0.05, forget_relabelling=True)[0] > h.rounds


def test_a_listed_round_over_alpha_ends_the_horizon_before_it() -> None:
    rounds = [_spec(1000, 2e-3, 1e-3), _spec(2000, 1e-3, 1e-3), _spec(5000, 1e-4, 1e-6)]
    accs = _accs(rounds, [0.05, 0.1, 0.05])  # round 2: a_2 + 0.1 > alpha
    h = accuracy_horizon(rounds, DEFAULT, 1, 0.1, 0.05, accs=accs)
    assert (h.rounds, h.queries, h.repetitions) == (1, 1000, 0) and "round 2" in h.limit


@pytest.mark.parametrize("small", [0, 1, 2])
def test_a_relabelling_below_claim_e1s_size_ends_the_horizon(small: int) -> None:
    """The reviewer's case: m_S = 10 (Claim E.1 asks 10^5 or more) for the relabelling out of round
    ``small + 1``. The horizon ends before the round those labels feed (no repetition when it is the
    last round's own); the broken variant that skips the check claims repetitions."""
    rounds = [_spec(1000, 2e-3, 1e-3, 10 if i == small else 10**9) for i, _ in enumerate(range(3))]
    rounds[2] = dataclasses.replace(rounds[2], alpha=1e-4, beta=1e-6)
    accs = _accs(rounds, [0.05, 0.06, 0.05])
    h = accuracy_horizon(rounds, DEFAULT, 1, 0.1, 0.05, accs=accs)
    assert (h.rounds, h.queries, h.repetitions) == (small + 1, 1000 * (small + 1), 0)
    assert "Claim E.1" in h.limit and "(10)" in h.limit
    fixed = [dataclasses.replace(r, m_S=10**9) for r in rounds]
    assert accuracy_horizon(fixed, DEFAULT, 1, 0.1, 0.05, accs=accs).repetitions > 0


def test_a_round_over_beta_is_not_counted_in_the_failure() -> None:
    """The reviewer's example: failures (0.04, 0), beta_2 = 0.01, beta = 0.05: round 2 would bring
    the failure to 0.06, so the horizon is round 1 with failure 0.04 (not 0.06, which subtracted only
    round 2's Theorem A events and kept its 2 beta_2)."""
    rounds = [_spec(1000, 2e-3, 0.01), _spec(2000, 1e-3, 0.01)]
    accs = _accs(rounds, [0.05, 0.05])
    accs = [dataclasses.replace(accs[0], failure=0.04), dataclasses.replace(accs[1], failure=0.0)]
    h = accuracy_horizon(rounds, DEFAULT, 1, 0.1, 0.05, accs=accs)
    assert (h.rounds, h.queries) == (1, 1000) and "failure" in h.limit
    assert h.failure == pytest.approx(0.04) and h.failure <= 0.05


def test_a_schedule_that_ends_covers_every_answer() -> None:
    rounds = [_spec(1000, 2e-3, 1e-3), _spec(2000, 1e-3, 1e-3)]
    h = accuracy_horizon(rounds, DEFAULT, 1, 0.1, 0.05, repeat_last=False, accs=_accs(rounds, [0.05, 0.05]))
    assert h == Horizon(None, 2, None, h.failure, "")


def test_an_even_schedule_is_covered_only_for_its_listed_rounds() -> None:
    """The previous allocation (a_K = theta alpha, round K sized for alpha - a_K) leaves no room for
    a repetition once its bound is at alpha: the horizon is the listed rounds' queries."""
    K = 12
    rounds = [_spec(10**9, 0.05 / (2 * (K - 1)), 0.05 / 2 ** (i + 2)) for i in range(1, K + 1)]
    accs = _accs(rounds, [0.0967 - 0.05 * min(1, (i - 1) / (K - 1)) for i in range(1, K + 1)])
    accs = [dataclasses.replace(a, bound=a.labels + a.flips + a.ensemble) for a in accs]
    h = accuracy_horizon(rounds, DEFAULT, 1, 0.1, 0.05, accs=accs)
    assert h.repetitions == 0 and h.queries == K * 10**9


@pytest.mark.slow
@pytest.mark.parametrize(("eps", "reading", "n_max"), [(8.0, "per-query", 5.3e6), (1.0, "every-answer", 3.9e8),
                                                       (8.0, "every-answer", 1.2e7)])
def test_the_planned_schedules_prove_every_answer_of_a_trillion_queries(eps: float, reading: str,
                                                                         n_max: float) -> None:
    """The growing relabelling's targets (epsilon = 1 per query is test_cli's): n within the targets,
    both chains within (eps, 1e-6), query privacy proven, every accuracy check of the plan holding, and
    Theorem A-infinity's horizon at 10^12 queries or more."""
    from everlast.engine.planner.api import Targets, plan
    from everlast.engine.planner.report import accuracy_json

    p = plan(Targets(epsilon=eps, accuracy=reading))  # type: ignore[arg-type]
    c = p.certificate
    assert p.meets_targets and c.query_private and c.delta_training <= 1e-6 and c.delta_queries <= 1e-6
    assert p.n_required <= n_max
    assert all(x.holds for x in (*c.checks, *p.checks)), [x.name for x in (*c.checks, *p.checks) if not x.holds]
    acc = accuracy_json(p)
    assert acc is not None and acc["reading"] == reading
    assert acc["horizon_queries"] is None or acc["horizon_queries"] >= 1e12
    assert acc["horizon_failure"] <= 0.05 and acc["horizon_repetitions"] >= 1


def test_the_plan_text_states_the_horizon_in_one_line() -> None:
    from types import SimpleNamespace

    from everlast.engine.planner.report import horizon_line

    p = SimpleNamespace(rounds=(None,) * 12)
    acc = {"horizon_queries": 6421026611014, "horizon_rounds": 2743, "horizon_repetitions": 2731,
           "horizon_failure": 0.04999}
    line = horizon_line(p, acc)  # type: ignore[arg-type]
    assert "\n" not in line and "6.42e12 queries" in line and "2731 repetitions of round 12" in line
    inside = horizon_line(p, {**acc, "horizon_queries": 1000, "horizon_rounds": 3, "horizon_repetitions": 0})  # type: ignore[arg-type]
    assert "rounds 1-3," in inside and "repetitions" not in inside
    assert "every round" in horizon_line(p, {**acc, "horizon_queries": None})  # type: ignore[arg-type]


def test_the_growing_relabelling_needs_more_rounds_than_growth_from() -> None:
    """K <= GROWTH_FROM: no round would grow (and K = 3 once divided by K - GROWTH_FROM = 0), so
    the solver uses the even split; ``growing_chunks`` refuses such K by name. K = 1 is refused by
    the tight planner; K = 2, 3, 4 plan and meet the targets."""
    from everlast.engine.planner.api import Targets, plan
    from everlast.engine.planner.round_solvers import GROWTH_FROM, growing_chunks

    T = [1000] * 5
    for K in range(1, GROWTH_FROM + 1):
        with pytest.raises(ValueError, match="rounds"):
            growing_chunks(0.1, 0.5, K, 1, "per-query", [1e-3] * K, T[:K])
    a, _labels, lam, left, r = growing_chunks(0.1, 0.5, GROWTH_FROM + 1, 1, "per-query", [1e-3] * 4, T[:4])
    assert len(a) == len(lam) == len(left) == 4 and 0 < r <= 1
    with pytest.raises(ValueError, match="at least 2 rounds"):
        plan(Targets(epsilon=1.0, rounds=1))
    for K in (2, 3, 4):
        p = plan(Targets(epsilon=1.0, rounds=K))
        assert p.meets_targets and len(p.rounds) == K
