"""Properties over random inputs (hypothesis):

* no printed delta exceeds its target: random targets for the paper design (cheap plans), random
  hand-written target-charged schedules certified at random target deltas, and (slow) random
  targets for the target-charged design;
* a plan re-certifies from its schedule alone (the schedule's plain data, validated by the engine);
* ``meets_targets`` is False when delta (or epsilon) exceeds the target.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from everlast.engine.design import DEFAULT
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import Targets, certify, plan
from everlast.engine.planner.fill import accuracy_eps0, fill_tests
from everlast.engine.schedule import RoundSpec, Schedule

SLACK = 1e-9


def _printed_deltas_within(c_delta_target: float, cert: object) -> None:
    from everlast.engine.planner.chain import Certificate

    assert isinstance(cert, Certificate)
    if math.isfinite(cert.epsilon_training):
        assert cert.delta_training <= c_delta_target
    if math.isfinite(cert.epsilon_queries):
        assert cert.delta_queries <= c_delta_target
    for s in cert.steps:  # every chain's final step (what is printed as the guarantee)
        if s.name.startswith(("subsample S_1 from S", "query chain")) and math.isfinite(s.epsilon):
            assert s.delta <= c_delta_target


paper_targets = st.builds(
    Targets,
    epsilon=st.floats(0.25, 16.0),
    delta=st.floats(-10.0, -4.0).map(lambda x: 10.0**x),
    alpha=st.floats(0.02, 0.3),
    beta=st.floats(0.01, 0.1),
    concept=st.sampled_from(["thresholds", "intervals"]),
    halt_budget=st.sampled_from(["paper", "split-votes"]),
    rounds=st.sampled_from([3, 6, 12]),
    halting=st.just("paper"),
    restarts=st.just("per-top"),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(paper_targets)
def test_paper_design_plans_never_print_a_delta_above_the_target(t: Targets) -> None:
    p = plan(t)
    c = p.certificate
    _printed_deltas_within(t.delta, c)
    assert c.privacy_checks_hold or not c.runnable
    assert not c.query_private and math.isinf(c.epsilon_queries)  # docs/privacy/genericbbl.md 4: never claimed
    if p.schedule is not None:
        again = Schedule.from_dict(p.schedule.to_dict())
        assert again == p.schedule
        c2 = certify(again, p.n_required, "tight", t.delta)
        assert (c2.epsilon_training, c2.delta_training) == (c.epsilon_training, c.delta_training)
        assert c2.epsilon_queries_conditional == c.epsilon_queries_conditional
    # meets_targets checks delta too
    assert p.meets_targets == (max(c.epsilon_training, c.epsilon_queries_conditional)
                               <= t.epsilon * (1 + SLACK) and c.delta <= t.delta)
    shrunk = dataclasses.replace(p, targets=dataclasses.replace(t, delta=c.delta / 2))
    assert not shrunk.meets_targets


@st.composite
def hand_rounds(draw: st.DrawFn) -> tuple[RoundSpec, int, float]:
    gamma = draw(st.floats(0.02, 0.25))
    T = draw(st.integers(2_000, 2_000_000))
    lam = draw(st.integers(1, 50))
    R = draw(st.integers(lam * T, max(lam * T, 10**8)))  # D-hat (m_D <= R) supplies the next S
    beta = 0.05
    room = gamma * T - 2.0
    if room <= 1.0:
        T = int(3.0 / gamma) + 10
    eps0 = accuracy_eps0(gamma, T, R, beta) * draw(st.floats(1.0, 4.0))
    c = draw(st.integers(500, 100_000))
    spec = RoundSpec(T=T, lam=lam, R=R, c=c, eps_bt=eps0, delta_bt=None, alpha=gamma,
                     m_S=max(1, lam * T // 10), m_D=min(R, lam * T), beta=beta)
    delta = 10.0 ** draw(st.floats(-12.0, -3.0))
    n = lam * T * draw(st.integers(1, 1000))
    return spec, n, delta


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hand_rounds())
def test_hand_written_target_charged_rounds_never_print_a_delta_above_the_target(
        case: tuple[RoundSpec, int, float]) -> None:
    spec, n, delta = case
    try:
        done = fill_tests(spec, DEFAULT, delta)
    except InvalidSchedule:  # c too small for any halting margin: refused with the reason
        assume(False)
    cert = certify(Schedule((done,), design=DEFAULT), n, "tight", delta)
    _printed_deltas_within(delta, cert)
    if math.isfinite(cert.epsilon):
        assert cert.meets(cert.epsilon, delta)
        assert not cert.meets(cert.epsilon, cert.delta * (1 - 1e-9)) or cert.delta == 0.0


tct_targets = st.builds(
    Targets,
    epsilon=st.floats(0.5, 16.0),
    delta=st.floats(-10.0, -5.0).map(lambda x: 10.0**x),
    alpha=st.floats(0.03, 0.25),
    beta=st.floats(0.01, 0.1),
    concept=st.sampled_from(["thresholds", "intervals"]),
    halt_budget=st.just("split-votes"),
    rounds=st.sampled_from([2, 3, 6]),
)


@pytest.mark.slow
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tct_targets)
def test_target_charged_plans_meet_their_targets(t: Targets) -> None:
    p = plan(t)
    c = p.certificate
    if p.schedule is None:  # certified, but one engine cannot hold it: only a capacity refusal may do that
        assert "largest D-hat" in p.not_runnable_reason, p.not_runnable_reason
    else:
        assert Schedule.from_dict(p.schedule.to_dict()) == p.schedule
    assert c.query_private and c.privacy_checks_hold and p.meets_targets
    assert c.epsilon_training <= t.epsilon * (1 + SLACK) and c.epsilon_queries <= t.epsilon * (1 + SLACK)
    _printed_deltas_within(t.delta, c)
