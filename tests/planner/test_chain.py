"""certify() on hand-written schedules: values by hand, failures reported as +inf with a reason,
and the query chain never claimed while Claim E.6's in-round step is open (issue 8)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from engine.planner import amplification as amp
from engine.planner import bt, certify, in_round_step
from engine.planner import composition as comp
from engine.planner.report import certificate_text
from engine.schedule import RoundSpec, Schedule

SMALL = RoundSpec(T=10_000, lam=50, R=1_000_000, c=20_000, eps_bt=0.2, delta_bt=1e-8, alpha=0.1,
                  m_S=2_000, m_D=500_000, gamma=None, beta=0.05)


def test_small_hand_written_schedule_is_weak_and_computed_by_hand() -> None:
    s = Schedule((SMALL,), repeat_last=True, halting="paper", restarts="per-top")
    n, delta = 1_000_000, 1e-6
    c = certify(s, n, "tight", delta)
    # by hand
    d_inst = bt.min_delta(0.1, 0.2, 10_000)
    r1 = SMALL.labeled_size / n
    E1 = comp.kov_epsilon(0.2, d_inst, 20_000, delta / r1)
    e_ls, _ = amp.bbg(2_000 / 500_000, 3.0, 0.0)
    eps_S, delta_S = amp.bbg(r1, E1 + e_ls, delta / r1)
    assert c.epsilon_training == pytest.approx(eps_S, rel=1e-12)
    assert c.delta_training == pytest.approx(delta, rel=1e-9) and delta_S == pytest.approx(delta)
    assert 10 < c.epsilon_training < math.inf
    assert "weak" in certificate_text(c)
    assert "NOT PROVEN" in certificate_text(c)
    assert not c.query_private and math.isinf(c.epsilon_queries)
    assert c.privacy_checks_hold
    # the query chain for round 1 (round 2 repeats round 1) by hand
    r_D = 500_000 / 1_000_000
    E2 = comp.kov_epsilon(0.2, d_inst, 20_000, delta / (4 * math.e * r_D))
    eps_D, _ = amp.bbg(r_D, E2 + e_ls + 3.0, 4 * math.e * delta / (4 * math.e * r_D))
    assert c.epsilon_queries_conditional == pytest.approx(eps_D, rel=1e-12)


def test_gap_failure_gives_infinity_with_reason() -> None:
    bad = RoundSpec(T=100, lam=50, R=10_000, c=10, eps_bt=0.2, delta_bt=1e-8, alpha=0.1, m_S=100,
                    m_D=5_000, beta=0.05)
    c = certify(Schedule((bad,), halting="paper", restarts="per-top"), 10_000)
    assert math.isinf(c.epsilon_training) and math.isinf(c.epsilon)
    assert "Lemma C.3" in c.training_reason and "needs T >=" in c.training_reason
    assert not c.privacy_checks_hold
    p = certify(Schedule((bad,), halting="paper", restarts="per-top"), 10_000, "paper")
    assert math.isinf(p.epsilon_training)


def test_too_few_training_examples() -> None:
    c = certify(Schedule((SMALL,), halting="paper", restarts="per-top"), SMALL.labeled_size - 1)
    assert math.isinf(c.epsilon_training) and "|S_1|" in c.training_reason


def test_bad_subsample_sizes_are_privacy_failures() -> None:
    bad = RoundSpec(T=10_000, lam=50, R=1_000_000, c=20_000, eps_bt=0.2, delta_bt=1e-8, alpha=0.1,
                    m_S=10**7, m_D=2 * 10**6, beta=0.05)
    c = certify([bad], 10**6)  # a bare sequence: not validated by the engine
    assert math.isinf(c.epsilon_training)
    assert math.isinf(c.epsilon_queries_conditional)


def test_paper_accounting_refuses_claim_2_7_outside_its_range() -> None:
    c = certify(Schedule((SMALL,), halting="paper", restarts="per-top"), 10**6, "paper")
    assert math.isinf(c.epsilon_training) and "Claim 2.7" in c.training_reason
    assert c.delta_training < 1.0


def test_in_round_step_channels() -> None:
    halting = in_round_step(SMALL, 1, "paper", "per-top")
    assert not halting.valid and "halting channel" in halting.note and "restart" in halting.note
    # c = R still lets the round fail when every query is a top: the channel needs c > R
    at_r = RoundSpec(T=10_000, lam=50, R=1000, c=1000, eps_bt=0.2, delta_bt=1e-8, alpha=0.1,
                     m_S=100, m_D=500, beta=0.05)
    assert "halting channel" in in_round_step(at_r, 1, "paper", "stateless").note
    assert not in_round_step(at_r, 1, "never", "stateless").valid
    full = dataclasses.replace(at_r, c=1001)
    restart_only = in_round_step(full, 1, "paper", "per-top")
    assert not restart_only.valid and "halting" not in restart_only.note and "restart" in restart_only.note
    closed = in_round_step(full, 1, "never", "stateless")
    assert closed.valid and closed.epsilon == 0.0 and closed.delta == 0.0
    assert not in_round_step(SMALL, 1, "never", "stateless").valid  # never needs c > R
    # noisy halting / private restarts without their parameters: not valid
    assert not in_round_step(full, 1, "noisy", "stateless").valid
    assert not in_round_step(full, 1, "never", "private").valid


def test_stateless_never_design_is_query_private() -> None:
    full = RoundSpec(T=200_000, lam=50, R=2_000, c=2_001, eps_bt=0.01, delta_bt=1e-12, alpha=0.1,
                     m_S=100, m_D=1_000, beta=0.05)
    c = certify([full], 10**8, halting="never", restarts="stateless")  # bare rounds: D.6 not needed
    assert c.query_private
    assert c.epsilon_queries == pytest.approx(c.epsilon_queries_conditional)
    comp_step = next(s for s in c.steps if s.name == "BT composition, round 1")
    assert comp_step.inputs_dict()["instances"] == 2_000  # one instance per query


def test_non_repeating_schedule_last_round_reaches_nothing() -> None:
    r2 = RoundSpec(T=10_000, lam=50, R=1_000_000, c=20_000, eps_bt=0.2, delta_bt=1e-8, alpha=0.05,
                   m_S=2_000, m_D=500_000, beta=0.025)
    s = Schedule((SMALL, r2), repeat_last=False, halting="paper", restarts="per-top")
    c = certify(s, 10**6)
    assert dict((r, e) for r, e, _ in c.per_round_queries)[2] == 0.0
    assert c.epsilon_queries_conditional == max(e for _, e, _ in c.per_round_queries)
