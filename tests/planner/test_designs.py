"""The two designs (engine.design) in the planner: designs() plans both, the default
(target-charged) is query-private and the cheapest; planned schedules pass the engine's validation
for their design and re-certify from the schedule alone; retired designs are refused with the
reason; and the target-charged design's data-cost targets (n <= 1e8 at epsilon 1, 1e7 at 8, every
round on one engine at epsilon 1)."""

from __future__ import annotations

import math

import pytest

from everlast.engine.design import DEFAULT, MAX_D_HAT, RETIRED, Design
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import PlanInfeasible, Targets, best_epsilon, certify, cheapest_sound, designs, plan
from everlast.engine.planner import above_threshold as at
from everlast.engine.planner.accuracy import schedule_accuracy
from everlast.engine.planner.api import EPS_H_CHOICES, choose_eps_h
from everlast.engine.planner.design_rules import BETA_H_SHARE
from everlast.engine.schedule import RoundSpec, Schedule

EIGHT = Targets(epsilon=8.0, halt_budget="split-votes")
PAPER = {"halting": "paper", "restarts": "per-top"}


def test_designs_plans_both_and_the_default_is_the_cheapest_proven() -> None:
    ds = designs(EIGHT)
    assert [d.name for d in ds] == ["target-charged", "paper"]
    default, paper = ds
    assert default.is_default and default.query_private and math.isfinite(default.epsilon_queries)
    assert not paper.query_private and math.isinf(paper.epsilon_queries) and paper.reason
    assert all(not hasattr(d, "conditional_on") and not hasattr(d, "eps_r") for d in ds)  # retired fields
    best = cheapest_sound(ds)
    assert best is not None and best.name == "target-charged"
    assert default.n_required is not None and paper.n_required is not None
    assert default.n_required < paper.n_required
    assert default.n_required == plan(EIGHT).n_required
    # eps_h is the planner's choice (api.choose_eps_h); the in-round step charges exactly it
    assert default.in_round_epsilon == pytest.approx(choose_eps_h(EIGHT)) and "Theorem Q" in default.in_round_lemma
    assert choose_eps_h(EIGHT) in EPS_H_CHOICES


@pytest.mark.parametrize("fields", [{}, PAPER], ids=["target-charged", "paper"])
def test_schedule_passes_engine_validation_and_recertifies(fields: dict[str, str]) -> None:
    t = Targets(epsilon=8.0, halt_budget="split-votes", **fields)  # type: ignore[arg-type]
    p = plan(t)
    doc = {"rounds": [r.to_dict() for r in p.rounds], "repeat_last": True, "design": p.certificate.design}
    if any(r.m_D > MAX_D_HAT for r in p.rounds):  # certified, but beyond what one engine holds
        assert p.schedule is None and "2^32" in p.not_runnable_reason and not p.certificate.runnable
        with pytest.raises(InvalidSchedule, match="2\\^32"):
            Schedule.from_dict(doc)
        again: Schedule | tuple[RoundSpec, ...] = p.rounds
    else:
        again = Schedule.from_dict(doc)  # the engine's own validation, from plain data
        assert again == p.schedule
    c = certify(again, p.n_required, "tight", t.delta, design=Design.named(p.certificate.design))
    assert (c.epsilon_training, c.epsilon_queries) == (p.certificate.epsilon_training,
                                                       p.certificate.epsilon_queries)
    assert p.meets_targets and c.privacy_checks_hold
    assert c.query_private == (not fields)


def test_target_charged_rounds_have_their_halting_test_and_accuracy_floor() -> None:
    p = plan(EIGHT)
    for r in p.rounds:
        assert r.halt_eps == choose_eps_h(EIGHT) and r.halt_threshold is not None and r.delta_bt is None
        assert r.halt_threshold < r.c  # the test fires below the hard cap...
        tq, tr = at.scales(r.halt_eps)
        assert at.at_tail(r.c - r.halt_threshold, tq, tr) <= 1e-9  # ...and the cap almost never binds
    early = [x for x in p.checks if x.name.startswith("noisy halting fires early")]
    assert early and all(x.holds and x.bound <= BETA_H_SHARE * 0.05 for x in early)
    # T is sized by Theorem A: every listed round's bound on an answer's error meets alpha
    acc = [x for x in p.checks if x.name.startswith("Theorem A")]
    assert len(acc) == len(p.rounds) and all(x.holds for x in acc)
    bounds = schedule_accuracy(p.rounds, DEFAULT, 1)
    assert max(a.bound for a in bounds) <= EIGHT.alpha
    # the relabelling chain's sample sizes (Lemma C.2, Lemma R) and the total accuracy failure
    relabel = [x for x in p.checks if x.name.startswith("relabelling")]
    assert len(relabel) == len(p.rounds) and all(x.holds for x in relabel)
    total = [x for x in p.checks if x.name.startswith("accuracy failure")]
    assert len(total) == 1 and total[0].holds and total[0].value <= EIGHT.beta


@pytest.mark.parametrize(("fields", "retired"), [({"halting": "never"}, "never"),
                                                 ({"restarts": "private"}, "private"),
                                                 ({"restarts": "stateless"}, "stateless")])
def test_retired_designs_are_refused_with_the_reason(fields: dict[str, str], retired: str) -> None:
    with pytest.raises(PlanInfeasible, match="retired") as info:
        plan(Targets(epsilon=1.0, **fields))  # type: ignore[arg-type]
    assert RETIRED[retired] in str(info.value)


def test_paper_accounting_plans_the_papers_design_only() -> None:
    with pytest.raises(PlanInfeasible, match="paper's own design"):
        plan(Targets(epsilon=0.5, accounting="paper", halting="noisy", restarts="none"))


# ------------------------------------------------------------- the target-charged design's data-cost targets


def test_issue_13_epsilon_1() -> None:
    p = plan(Targets(epsilon=1.0, delta=1e-6, alpha=0.1, halt_budget="split-votes"))
    c = p.certificate
    assert c.design == "target-charged" and c.query_private
    assert p.n_required <= 1e8 and p.meets_targets
    # the growing relabelling: the first rounds keep the even schedule's sizes (n depends on them), the
    # later ones grow to about 2^31 labeled points, within the 2^32 D-hat points the engine orders
    assert p.schedule is not None and not p.not_runnable_reason
    assert max(r.m_D for r in p.rounds[:2]) < 3 * min(r.m_D for r in p.rounds[:2])
    assert 2**29 <= p.rounds[-1].m_D <= 2**32 and p.rounds[-1].alpha < p.rounds[1].alpha / 10


def test_issue_13_epsilon_8() -> None:
    p = plan(EIGHT)
    assert p.certificate.query_private and p.n_required <= 1e7 and p.meets_targets


@pytest.mark.slow
def test_issue_13_a_billion_examples_certify_epsilon_at_most_10() -> None:
    a = best_epsilon(10**9, Targets(epsilon=1.0, halt_budget="split-votes"))
    assert a.plan is not None and a.plan.n_required <= 10**9
    assert a.plan.certificate.query_private and a.epsilon <= 10.0
