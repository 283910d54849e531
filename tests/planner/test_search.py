"""engine.planner.best_epsilon (the estimate-guided search) against the plain bisection of
tests/planner/bisection.py: the same contract (an exact plan for the user's targets that fits
n, within rel_tol in log epsilon of one that does not), the same refusals. Paper-design and
paper-accounting plans are cheap, so many cases run in seconds."""

from __future__ import annotations

import math

import pytest

from everlast.engine.planner import Targets, api, best_epsilon, search
from tests.planner import bisection

PAPER_TARGETS = Targets(epsilon=1.0, halt_budget="split-votes", halting="paper", restarts="per-top")


@pytest.mark.parametrize("n", [10**10, 10**12, 10**14])
def test_same_bracket_as_the_bisection(n: int) -> None:
    fast, slow = best_epsilon(n, PAPER_TARGETS), bisection.best_epsilon(n, PAPER_TARGETS)
    assert fast.plan is not None and slow.plan is not None
    assert fast.plan.n_required <= n and slow.plan.n_required <= n
    assert fast.plan.targets == PAPER_TARGETS.with_epsilon(fast.target)  # the user's targets, exactly
    # both targets lie within the tolerance of the same threshold epsilon
    assert abs(math.log(fast.target) - math.log(slow.target)) <= 2 * search.REL_TOL
    # the target just below the returned one (by the tolerance) does not fit
    below = api.plan(PAPER_TARGETS.with_epsilon(fast.target * math.exp(-search.REL_TOL)))
    assert below.n_required > n
    assert fast.epsilon == pytest.approx(search._certified(fast.plan))


def test_refusals_match() -> None:
    for n, t in ((10**7, PAPER_TARGETS), (10**20, Targets(epsilon=0.5, accounting="paper"))):
        fast, slow = best_epsilon(n, t), bisection.best_epsilon(n, t)
        assert math.isinf(fast.epsilon) and fast.plan is None and fast.reason == slow.reason
    huge = Targets(epsilon=0.5, accounting="paper")
    fast = best_epsilon(10**40, huge)
    assert fast.target == 0.01 and "searched down" in fast.reason


def test_paper_accounting_searches_up_to_one() -> None:
    t = Targets(epsilon=0.5, accounting="paper")
    fast, slow = best_epsilon(10**25, t), bisection.best_epsilon(10**25, t)
    assert fast.plan is not None and fast.target <= 1.0
    assert abs(math.log(fast.target) - math.log(slow.target)) <= 2 * search.REL_TOL
