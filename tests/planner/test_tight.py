"""The tight solver against calibration.md tables (iii) and (iv), and its structural promises.

Same assumptions as calibration.md: VC 1, delta = 1e-6, beta = 0.05, log2 inside lambda_i, c_i
uncapped in (iii), no D.7 accuracy floor in (iv). Tolerance: 3% on n and on each round-1 component
(calibration extrapolates the last T geometrically, the solver solves a repeating last round).
"""

from __future__ import annotations

import pytest

from engine.planner import Targets, bt, plan
from engine.planner.report import CALIBRATION
from engine.planner.tight import TightOptions, solve


@pytest.mark.parametrize("row", CALIBRATION, ids=[f"{r[0]}-eps{r[1]:g}-a{r[2]:g}" for r in CALIBRATION])
def test_agrees_with_calibration_tables(row: tuple) -> None:  # type: ignore[type-arg]
    _, eps, alpha, halts, cap, floors, n, T1, R1, c1, rD = row
    sol = solve(eps, 1e-6, alpha, 0.05, 1, TightOptions(halts=halts, cap_c=cap, accuracy_floors=floors))
    r = sol.specs[0]
    assert sol.n_required == pytest.approx(n, rel=0.03)
    assert pytest.approx(T1, rel=0.03) == r.T
    assert pytest.approx(R1, rel=0.03) == r.R
    assert r.c == pytest.approx(c1, rel=0.03)
    assert sol.rD == pytest.approx(rD, rel=0.03)
    assert r.lam == {0.05: 3899, 0.1: 1790, 0.2: 815}[alpha]


@pytest.mark.parametrize("halts", ["paper", "split-votes"])
@pytest.mark.parametrize("eps", [1.0, 8.0])
def test_papers_design_plans_meet_targets_and_are_runnable(halts: str, eps: float) -> None:
    p = plan(Targets(epsilon=eps, halts=halts, halting="paper", restarts="per-top"))  # type: ignore[arg-type]
    c = p.certificate
    assert p.schedule is not None and c.runnable
    assert (p.schedule.halting, p.schedule.restarts) == ("paper", "per-top")
    assert p.meets_targets
    assert c.epsilon_training == pytest.approx(eps, rel=1e-3)  # the budget is spent, not wasted
    assert c.delta_training <= 1e-6 * (1 + 1e-9)
    assert c.privacy_checks_hold
    assert not c.query_private  # issue 8: halting and restart channels
    for spec, rp in zip(p.rounds, p.round_plans, strict=True):
        # T_i is the smallest meeting Lemma C.3 for its (eps', delta'), unless an accuracy floor
        # (Claims D.2/D.7) is higher
        assert rp.t_privacy == bt.min_t(spec.band, spec.eps_bt, spec.delta_bt)
        assert max(rp.t_privacy, rp.t_accuracy) == spec.T
        assert spec.c <= spec.R  # capped
    expected = {(1.0, "paper"): 3.68e18, (8.0, "paper"): 3.46e15,
                (1.0, "split-votes"): 4.84e13, (8.0, "split-votes"): 3.58e10}[(eps, halts)]
    assert p.n_required == pytest.approx(expected, rel=0.01)


def test_cap_halves_the_paper_halt_budget_cost() -> None:
    capped = solve(1.0, 1e-6, 0.1, opts=TightOptions(halts="paper"))
    uncapped = solve(1.0, 1e-6, 0.1, opts=TightOptions(halts="paper", cap_c=False))
    assert 1.8 < uncapped.n_required / capped.n_required < 2.3


def test_more_rounds_barely_move_n() -> None:
    a = solve(1.0, 1e-6, 0.1, opts=TightOptions(halts="split-votes", rounds=12)).n_required
    b = solve(1.0, 1e-6, 0.1, opts=TightOptions(halts="split-votes", rounds=16)).n_required
    assert b == pytest.approx(a, rel=5e-3)
