"""certify never prints a query delta below what the in-round step alone costs: when Lemma Cap's
delta (the hard cap binding before the noisy halting test) reaches the target, nothing is certified."""

from __future__ import annotations

import dataclasses
import math

from everlast.engine.design import DEFAULT
from everlast.engine.planner import certify, in_round_step
from everlast.engine.schedule import RoundSpec, Schedule

T = 4000
SPEC = RoundSpec(T=T, lam=1, R=T, c=12, eps_bt=0.15, delta_bt=None, alpha=0.2, m_S=T // 10, m_D=T,
                 gamma=0.2, beta=0.05, halt_eps=1.0, halt_threshold=10)


def test_cap_delta_above_the_target_certifies_no_query_epsilon() -> None:
    ir = in_round_step(DEFAULT, SPEC, 1)
    assert ir.valid and ir.delta > 1e-6  # c - c0 = 2 at eps_h = 1: the cap binds often
    c = certify(Schedule((SPEC,), True, DEFAULT), T, "tight", 1e-6)
    assert c.epsilon_queries == math.inf and not c.query_private
    assert c.delta_queries >= ir.delta and "Lemma Cap" in c.queries_reason
    assert math.isfinite(c.epsilon_training) and c.delta_training <= 1e-6


def test_small_cap_delta_is_still_certified() -> None:
    wide = dataclasses.replace(SPEC, c=400, halt_threshold=10)
    ir = in_round_step(DEFAULT, wide, 1)
    assert ir.delta < 1e-9
    c = certify(Schedule((wide,), True, DEFAULT), T, "tight", 1e-6)
    assert math.isfinite(c.epsilon_queries) and c.delta_queries <= 1e-6
