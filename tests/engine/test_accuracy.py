"""Everlasting accuracy: over several rounds, the error on fresh i.i.d. points stays <= alpha.

Fixed seeds. The margins are wide: measured errors are ~0.2-1% against alpha = 0.1, and a
binomial bound on 20,000 fresh points adds at most 0.01 at these rates.
"""

from __future__ import annotations

import numpy as np
import pytest

from adversary_sim.iid import make_task
from adversary_sim.inprocess import run_iid
from engine.concepts import from_spec
from engine.planner.fill import fill_tests
from engine.predictor import Predictor
from engine.schedule import RoundSpec, Schedule


@pytest.mark.slow
@pytest.mark.parametrize(
    ("concept", "distribution"),
    [("thresholds", "uniform"), ("thresholds", "normal"), ("intervals", "uniform"), ("intervals", "mixture")],
)
def test_error_stays_below_alpha_over_rounds(concept: str, distribution: str) -> None:
    alpha = 0.1
    spec = RoundSpec(T=2000, lam=50, R=200_000, c=10_000, eps_bt=0.5, delta_bt=1e-8,
                     alpha=alpha, m_S=2000, m_D=100_000)
    cls = from_spec({"name": concept})
    task = make_task(cls, distribution, seed=11)
    x, y = task.sample(np.random.default_rng(11), 150_000)
    p = Predictor.create(cls, Schedule((fill_tests(spec),)), x, y, seed=11)  # the default design
    report = run_iid(p, task, 1_000_000, seed=11)
    assert not report.halted
    assert len(report.rounds) == 5
    for r in report.rounds:
        assert r.error_fresh is not None and r.error_fresh <= alpha
        assert r.wrong / r.queries <= alpha
