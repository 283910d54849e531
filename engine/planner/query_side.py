"""Step Q0 of the query chain: what a query costs in the other answers of its own round
(Theorem Q in docs/privacy/genericbbl.md section 5).

Two query streams differ in one query x_{j0} of round i. Couple both worlds on every noise
variable. The differing query changes the round's state only through its outcome (top or not).

* **target-charged.** Every other answer is a function of (F_i, x_j, z_j): no randomness is shared
  between queries, so the restart channel does not exist. The outcome reaches later answers only
  through the round's top count C, which only the noisy halting test reads (AboveThreshold with the
  exact scales of engine.design.noise_plan: eps_h = 1/t_r + 2/t_x, Lemma AT), with the hard cap c
  charged by Lemma Cap: (eps_h, (1 + e^{eps_h}) delta_h), delta_h the largest cap probability over
  the schedule's rounds (a cap may act in any round; Theorem Q, step 1).
* **paper.** Both channels are open: halting at the c-th top (c <= R) and the threshold noise
  restarted by each top (issue 8, docs/privacy/genericbbl.md 4): NOT valid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from everlast.engine.design import Design, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import above_threshold as at
from everlast.engine.schedule import RoundSpec

LEMMA_Q = ("Theorem Q (in-round step: AboveThreshold, Dwork-Roth Thm 3.23, discrete form, on the round's "
           "top count; Lemma Cap for the hard cap)")
LEMMA_FALSE = "Claim E.6, in-round step (FALSE for this design; issue 8)"


@dataclass(frozen=True, slots=True)
class InRound:
    """The in-round step for one round of a design."""

    epsilon: float
    """eps_h of the halting test (exact scales); +inf when a channel is open."""
    delta: float
    """(1 + e^epsilon) delta_cap_h (Lemma Cap)."""
    valid: bool
    eps_h: float
    delta_cap_h: float
    """P[the round's hard cap c binds before the halting test fires] (Lemma T(ii)); 0 if c > R."""
    lemma: str
    problems: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        return "; ".join(self.problems)


def halting_test(design: Design, spec: RoundSpec) -> tuple[float, float]:
    """(eps_h, cap probability) of a target-charged round's halting test at the scales the engine
    runs (0 cap probability when c > R: the cap cannot be reached)."""
    plan = noise_plan(design, spec)
    assert plan.halt_threshold is not None and plan.halt_query is not None and plan.c0 is not None
    eps_h = at.at_epsilon(plan.halt_threshold, plan.halt_query)
    cap = 0.0 if spec.c > spec.R else at.at_tail(plan.c - plan.c0, plan.halt_query, plan.halt_threshold)
    return eps_h, cap


def in_round(design: Design, spec: RoundSpec, cap_floor: float = 0.0) -> InRound:
    """Theorem Q for one round. ``cap_floor``: the largest halting-cap probability over the
    schedule's rounds (charged whatever round holds the challenge: docs/privacy/genericbbl.md 5.3, step 1)."""
    if not design.target_charged:
        problems = []
        if spec.c <= spec.R:
            problems.append(f"halting channel open (c={spec.c} <= R={spec.R}): a query can spend a top "
                            "and make a later query be refused")
        problems.append("restart channel open: each top restarts the threshold noise, which later "
                        "answers reveal (no bound of order eps' exists)")
        return InRound(math.inf, 0.0, False, 0.0, 0.0, LEMMA_FALSE, tuple(problems))
    try:
        eps_h, cap = halting_test(design, spec)
    except InvalidSchedule as exc:
        return InRound(math.inf, 0.0, False, 0.0, 0.0, LEMMA_Q, (f"not runnable exactly: {exc}",))
    d_h = max(cap, cap_floor)
    return InRound(eps_h, at.cap_charge(eps_h, d_h), True, eps_h, d_h, LEMMA_Q)
