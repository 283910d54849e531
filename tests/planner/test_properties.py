"""Property test (the paper's design, per-top restarts): for random targets, an auditor re-derives
every privacy condition and both chains from the planned schedule alone (with the schedule's
declared delta'_i, independently of ``certify``), and ``certify(plan.schedule, plan.n_required)``
reproduces the targets. The other designs: tests/planner/test_designs.py."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.planner import Targets, bt, certify, plan
from engine.planner import amplification as amp
from engine.planner import composition as comp
from engine.schedule import RoundSpec

SLACK = 1e-9


def _phi(r: RoundSpec, Delta: float) -> float:
    E = comp.kov_epsilon(r.eps_bt, r.delta_bt, min(r.c, r.R), Delta)
    e_ls, _ = amp.bbg(r.m_S / r.labeled_size, 3.0, 0.0)
    return E + e_ls


targets = st.builds(
    Targets,
    epsilon=st.floats(0.25, 16.0),
    delta=st.floats(-10.0, -4.0).map(lambda x: 10.0**x),
    alpha=st.floats(0.02, 0.3),
    beta=st.floats(0.01, 0.1),
    concept=st.sampled_from(["thresholds", "intervals"]),
    halts=st.sampled_from(["paper", "split-votes"]),
    rounds=st.sampled_from([3, 6, 12]),
    halting=st.just("paper"),
    restarts=st.just("per-top"),
)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(targets)
def test_every_privacy_condition_rechecked_on_random_plans(t: Targets) -> None:
    p = plan(t)
    assert p.schedule is not None, p.not_runnable_reason  # the engine accepts it (sizes chain)
    rounds, n, eps, delta = p.rounds, p.n_required, t.epsilon, t.delta
    for r in rounds:
        assert 0.0 < r.eps_bt < 1.0 and 0.0 < r.delta_bt < 1.0  # P2
        assert bt.gap_holds(r.band, r.eps_bt, r.delta_bt, r.T)  # P1 with the declared delta'
        assert 1 <= r.m_S <= r.labeled_size and 1 <= r.m_D <= r.R
    # training chain (Claim E.5): round 1, Delta_1 = delta / r_1
    r1 = rounds[0].labeled_size / n
    assert r1 <= 1.0
    eps_S, delta_S = amp.bbg(r1, _phi(rounds[0], min(0.5, delta / r1)), min(0.5, delta / r1))
    assert eps_S <= eps * (1 + SLACK) and delta_S <= delta * (1 + SLACK)
    # query chain without the in-round step (Claim E.6): every round, the last one repeating
    for i, r in enumerate(rounds):
        nxt = rounds[min(i + 1, len(rounds) - 1)]
        rD = r.m_D / r.R
        Delta = min(0.5, delta / (4 * math.e * rD))
        eps_D, delta_D = amp.bbg(rD, _phi(nxt, Delta) + 3.0, 4 * math.e * Delta)
        assert eps_D <= eps * (1 + SLACK) and delta_D <= delta * (1 + SLACK)
    # and the certifier agrees
    c = certify(p.schedule, n, "tight", delta)
    assert c.privacy_checks_hold
    assert c.epsilon_training <= eps * (1 + SLACK)
    assert c.epsilon_queries_conditional <= eps * (1 + SLACK)
    assert c.delta_training <= delta * (1 + SLACK)
    assert not c.query_private and math.isinf(c.epsilon_queries)  # issue 8: never claimed
    assert c.epsilon_training == p.certificate.epsilon_training
