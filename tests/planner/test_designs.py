"""Every (halting, restarts) design (issue 8): the planned schedules pass the engine's validation
for their design, re-certify from the schedule alone, and the default design is query-private and
the cheapest among the designs whose query privacy is proven."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.planner import Targets, certify, cheapest_sound, designs, plan
from engine.planner import block as blk
from engine.schedule import RoundSpec, Schedule

SLACK = 1e-9
SOUND = {("noisy", "private"), ("noisy", "stateless"), ("never", "private"), ("never", "stateless")}


@pytest.fixture(scope="module", params=[1.0, 8.0], ids=["eps1", "eps8"])
def costs(request: pytest.FixtureRequest) -> tuple[float, tuple]:  # type: ignore[type-arg]
    eps = float(request.param)
    return eps, designs(Targets(epsilon=eps, halts="split-votes"))


def test_which_designs_are_proven(costs: tuple) -> None:  # type: ignore[type-arg]
    _, ds = costs
    for d in ds:
        if d.conditional_on:
            assert d.conditional_on == "Lemma S" and not d.query_private
            assert math.isinf(d.epsilon_training) and math.isinf(d.epsilon_queries)
        else:
            assert d.query_private == ((d.halting, d.restarts) in SOUND), d.name
            assert math.isfinite(d.epsilon_queries) == d.query_private


def test_default_is_query_private_and_cheapest_sound(costs: tuple) -> None:  # type: ignore[type-arg]
    eps, ds = costs
    (default,) = [d for d in ds if d.is_default]
    best = cheapest_sound(ds)
    assert best is not None and best.name == default.name == "noisy+private"
    p = plan(Targets(epsilon=eps, halts="split-votes"))
    assert p.certificate.query_private and p.n_required == default.n_required
    assert (p.certificate.halting, p.certificate.restarts) == ("noisy", "private")
    # pinned data cost (docs/PRIVACY.md section 9): eps = 1 -> 6.2e16, eps = 8 -> 6.1e12
    assert p.n_required == pytest.approx({1.0: 6.15e16, 8.0: 6.15e12}[eps], rel=0.03)
    # the conditional Lemma S design is cheaper -- and never the default
    lemma_s = next(d for d in ds if d.conditional_on)
    assert lemma_s.n_required is not None and lemma_s.n_required < default.n_required


@pytest.mark.parametrize("eps", [1.0, 8.0])
def test_default_with_the_papers_halt_budget_is_never_stateless(eps: float) -> None:
    """With c ~ R (the paper's halt budget) blocks cost more than one instance per query."""
    p = plan(Targets(epsilon=eps))
    assert (p.certificate.halting, p.certificate.restarts) == ("never", "stateless")
    assert p.certificate.query_private and p.meets_targets
    alt = plan(Targets(epsilon=eps, halting="noisy", restarts="private"))
    assert alt.certificate.query_private and alt.n_required > p.n_required


@pytest.mark.parametrize(("halting", "restarts"), [("noisy", "private"), ("never", "stateless"),
                                                   ("noisy", "stateless"), ("never", "private"),
                                                   ("paper", "per-top"), ("noisy", "per-top")])
def test_schedule_passes_engine_validation_and_recertifies(halting: str, restarts: str) -> None:
    t = Targets(epsilon=1.0, halts="split-votes", halting=halting, restarts=restarts,  # type: ignore[arg-type]
                eps_r=0.4 if restarts == "private" else None)
    p = plan(t)
    assert p.schedule is not None, p.not_runnable_reason
    s = p.schedule
    assert (s.halting, s.restarts) == (halting, restarts)
    again = Schedule.from_dict(s.to_dict())  # the engine's own validation, from plain data
    assert again == s
    c = certify(again, p.n_required, "tight", 1e-6)
    assert c.epsilon_training == p.certificate.epsilon_training
    assert c.query_private == ((halting, restarts) in SOUND)
    assert p.meets_targets and c.privacy_checks_hold
    for r in s.rounds:
        if halting == "never":
            assert r.c > r.R
        if halting == "noisy":
            assert r.halt_eps is not None and r.halt_threshold is not None and r.c > r.halt_threshold
        if restarts == "private":
            assert r.restart_eps == 0.4 and r.block_cap is not None and r.restart_threshold is not None
            assert r.block_cap > r.restart_threshold


def test_lemma_s_design_is_conditional() -> None:
    p = plan(Targets(epsilon=1.0, halts="split-votes", block_bound="lemma-s"))
    c = p.certificate
    assert c.conditional_on == "Lemma S" and not c.query_private
    assert math.isinf(c.epsilon_training) and math.isinf(c.epsilon_queries)
    assert c.epsilon_training_conditional <= 1.0 + SLACK and c.epsilon_queries_conditional <= 1.0 + SLACK
    assert p.meets_targets  # against the conditional numbers
    assert any("CONDITIONAL ON Lemma S" in w for w in c.warnings)
    # the proven accounting of the same schedule is far from the target (one block of c tops)
    assert p.schedule is not None
    proven = certify(p.schedule, p.n_required)
    assert proven.conditional_on is None and not proven.epsilon_training <= 1.0


# ---------------------------------------------------------------------------- property test


def _in_round_by_hand(r: RoundSpec) -> tuple[float, float]:
    """Theorem Q recomputed from the closed forms (independent of engine.planner)."""
    assert r.halt_eps is not None and r.halt_threshold is not None
    assert r.restart_eps is not None and r.restart_threshold is not None and r.block_cap is not None

    def tail(g: float, e: float) -> float:  # P[Lap(4/e) - Lap(2/e) >= g], g >= 0
        return 2 / 3 * math.exp(-e * g / 4) - 1 / 6 * math.exp(-e * g / 2)

    d_h = tail(r.c - int(r.halt_threshold), r.halt_eps) if r.c <= r.R else 0.0
    d_r = (tail(r.block_cap - r.restart_threshold, r.restart_eps)
           if r.block_cap <= min(r.c, r.R) else 0.0)
    eps = r.halt_eps + r.restart_eps
    return eps, (1 + math.exp(eps)) * (d_h + d_r)


targets = st.builds(
    Targets,
    epsilon=st.floats(0.5, 8.0),
    delta=st.floats(-10.0, -5.0).map(lambda x: 10.0**x),
    alpha=st.floats(0.03, 0.25),
    beta=st.floats(0.01, 0.1),
    concept=st.sampled_from(["thresholds", "intervals"]),
    halts=st.just("split-votes"),
    rounds=st.sampled_from([3, 6]),
    halting=st.just("noisy"),
    restarts=st.just("private"),
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(targets, st.floats(0.15, 0.6))
def test_noisy_private_plans_recheck(t: Targets, share: float) -> None:
    t = dataclasses.replace(t, eps_r=round(share * (t.epsilon - 0.01), 4))
    p = plan(t)
    s = p.schedule
    assert s is not None, p.not_runnable_reason
    assert Schedule.from_dict(s.to_dict()) == s  # the engine accepts it for its design
    c = p.certificate
    assert c.query_private and c.privacy_checks_hold and p.meets_targets
    assert c.epsilon_training <= t.epsilon * (1 + SLACK) and c.epsilon_queries <= t.epsilon * (1 + SLACK)
    assert c.delta_training <= t.delta * (1 + SLACK) and c.delta_queries <= t.delta * (1 + SLACK)
    for i, r in enumerate(s.rounds, start=1):
        # Theorem B's gap, in closed form: x = (gamma T - 1) eps'/3 - (2/3) ln(1/(2 delta_mu)) > 0
        x = (r.band * r.T - 1) * r.eps_bt / 3 - 2 / 3 * math.log(1 / (2 * r.delta_bt))
        assert x > 0
        assert blk.band_slack(r.eps_bt, r.T, r.band, r.delta_bt) == pytest.approx(x, rel=1e-9)
        eps_in, delta_in = _in_round_by_hand(r)
        q0 = next(st_ for st_ in c.steps if st_.name == f"in-round answers, round {c.worst_query_round}")
        if i == c.worst_query_round:
            assert q0.epsilon == pytest.approx(eps_in) and q0.delta == pytest.approx(delta_in, rel=1e-6)
        assert delta_in <= 1e-3 * t.delta * (1 + 1e-6)  # the in-round share of delta
    q0 = next(st_ for st_ in c.steps if st_.name == f"in-round answers, round {c.worst_query_round}")
    # the proven query chain = Q0 + the later rounds (Proposition 2.5)
    assert c.epsilon_queries == pytest.approx(c.epsilon_queries_conditional + q0.epsilon, rel=1e-12)


def test_lemma_n_prime_certifies_what_lemma_ns_failure_charge_cannot() -> None:
    """Lemma N holds (k0 far above its margin), but the blocks' epsilon is so large that its failure
    charge (1 + e^E) delta_fail cannot fit the budget; Lemma N' charges its noise-only failure once,
    so the round is certified, and the step says which lemma did it."""
    from engine.planner import block as blk
    from engine.planner import certify
    from engine.schedule import RoundSpec, Schedule

    spec = RoundSpec(T=10_000, lam=50, R=1_000_000, eps_bt=0.2, delta_bt=1e-8, alpha=0.1, m_S=2000, m_D=500_000,
                     c=8400, halt_eps=0.5, halt_threshold=8000.0, restart_eps=1.0, restart_threshold=1000.0,
                     block_cap=1200)
    only_n = [blk.compose_blocks(blk.block_epsilon(0.2, 10_000, 0.1, 1e-8, 1200), 1e-8,
                                 blk.blocks_bound(8400, 1_000_000, kl), 1e-6, phi * 1e-6)
              for phi in blk.FAIL_GRID
              if (kl := blk.k_low_for(1_000_000, 1000.0, 1.0, phi * 1e-6, 1200)) >= 1]
    assert only_n and all(e == float("inf") for e in only_n)
    cert = certify(Schedule((spec,), halting="noisy", restarts="private"), 1_000_000)
    assert math.isfinite(cert.epsilon_training)
    notes = " ".join(st.note for st in cert.steps if st.chain == "training")
    assert "Lemmas N' + K'" in notes and "charged once" in notes
