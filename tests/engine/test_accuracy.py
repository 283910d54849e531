"""Everlasting accuracy under the target-charged design: over several rounds, the error on fresh
i.i.d. points stays <= alpha, and the round never halts on i.i.d. data.

The round is written by hand (no planner), with the accuracy conditions visible:
  * T = 1000 classifiers on chunks of lam = 40, band gamma = alpha = 0.1: lo = 400, hi = 600;
  * per-query noise DLap(1/eps0) with 1/eps0 = 4 <= gamma T / ln(R/beta) = 100 / ln(2e6) = 6.9,
    so over a round's R queries P[some |z| > gamma T] <= 2 R e^{-100/4} / (1 + e^{-1/4}) < 1e-5:
    a query whose vote is outside the band keeps the majority's label;
  * halting test eps_h = 0.1 (noises DLap(40), DLap(20)) with c0 = 20,000 and c = 30,000 against
    ~1-3% of R = 100,000 queries falling in the band (tops; the test checks < c0/4 = 5,000): a halt
    needs xi - rho_h >= 15,000 at some query, P <= R (e^{-7500/40} + e^{-7500/20}) < e^{-170}.
Each round's decision rule is scored on 20,000 fresh points with its own noise
(``engine.diagnostics.shadow_labels``); the answered queries are scored too. The test asserts the
Clopper-Pearson upper bound (family level 1e-6, Bonferroni over every check) is <= alpha, i.e.
that the error is below alpha with confidence, not that one estimate happened to be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import stats

from everlast.engine.concepts import from_spec
from everlast.engine.diagnostics import shadow_labels
from everlast.engine.phases import Phase
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import RoundSpec, Schedule
from tests.engine.stats import FAMILY_ALPHA

ALPHA = 0.1
ROUND = RoundSpec(T=1000, lam=40, R=100_000, c=30_000, eps_bt=0.25, delta_bt=None, alpha=ALPHA, m_S=2000,
                  m_D=50_000, gamma=0.1, beta=0.05, halt_eps=0.1, halt_threshold=20_000)
ROUNDS = 6
FRESH = 20_000

F64 = NDArray[np.float64]
Task = tuple[Callable[[np.random.Generator, int], F64], Callable[[F64], NDArray[np.int8]]]
TASKS: dict[str, tuple[str, Task]] = {
    "thresholds-uniform": ("thresholds", (lambda g, n: g.random(n), lambda x: (x >= 0.5).astype(np.int8))),
    "thresholds-normal": ("thresholds", (lambda g, n: g.normal(size=n), lambda x: (x >= 0.3).astype(np.int8))),
    "intervals-uniform": ("intervals", (lambda g, n: g.random(n),
                                        lambda x: ((x >= 0.3) & (x <= 0.7)).astype(np.int8))),
    "intervals-mixture": ("intervals", (lambda g, n: np.where(g.random(n) < 0.5, g.normal(-1, 0.5, n),
                                                              g.normal(1, 0.5, n)),
                                        lambda x: ((x >= -0.5) & (x <= 1.2)).astype(np.int8))),
}


def upper(wrong: int, n: int, m: int) -> float:
    """Clopper-Pearson one-sided upper bound on the error rate at level FAMILY_ALPHA / m."""
    return float(stats.beta.ppf(1 - FAMILY_ALPHA / m, wrong + 1, n - wrong))


@pytest.mark.slow
@pytest.mark.parametrize("task", list(TASKS))
def test_error_stays_below_alpha_over_rounds(task: str) -> None:
    concept_name, (draw, truth) = TASKS[task]
    concept = from_spec({"name": concept_name})
    g = np.random.default_rng(11)
    x = draw(g, ROUND.labeled_size + 5000)
    p = Predictor.create(concept, Schedule((ROUND,)), x, truth(x), seed=11)
    assert (p.plan.lo, p.plan.hi) == (400, 600)
    m = 2 * ROUNDS
    report: list[dict[str, Any]] = []
    for r in range(1, ROUNDS + 1):
        assert p.round == r and p.phase is Phase.ANSWERING
        fx = draw(g, FRESH)
        fresh_wrong = int(np.count_nonzero(shadow_labels(p, fx, np.random.default_rng(r)) != truth(fx)))
        wrong = 0
        while p.phase is Phase.ANSWERING:
            q = draw(g, 1 << 15)
            res = p.answer(q)
            wrong += int(np.count_nonzero(res.labels != truth(q[: res.consumed])))
        assert p.phase is Phase.TRANSITION_DUE, "the round halted on i.i.d. data"
        report.append({"round": r, "fresh": fresh_wrong / FRESH, "answered": wrong / ROUND.R,
                       "tops": p.tops_in_round})
        assert upper(fresh_wrong, FRESH, m) <= ALPHA, report
        assert upper(wrong, ROUND.R, m) <= ALPHA, report
        assert p.tops_in_round < ROUND.halt_threshold // 4, report  # far from the halting test's threshold
        p.transition()
