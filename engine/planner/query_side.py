"""Step Q0 of the query chain: what a query costs in the other answers of its own round
(Theorem Q in docs/PRIVACY.md section 5; issue 8).

Two query streams differ in one query x_{j0} of round i. Couple both worlds on every noise variable
(threshold noises by block index, per-query noises by query index, the tests' noises). The
differing query changes the round's state only through its outcome (top or not), i.e. through the
round's top count C and the block's top count B, each shifted by d in {-1, 0, 1} from query j0 on.

* **halting channel.** ``paper``/``never`` fail the predictor when C >= c. If c <= R the
  adversary can make the round fail in one world only (issue 8): NOT valid. If c > R the round can
  never fail (C <= R < c): 0. ``noisy``: C is read only by an AboveThreshold test (eps_h) with the
  hard cap c: eps_h, plus Lemma Cap's delta for the cap.
* **restart channel.** ``per-top``: the threshold noise restarts iff the outcome is a top; no bound
  of order eps' exists (query_privacy.md section 2): NOT valid. ``stateless``: no state: 0.
  ``private``: B is read only by the block's AboveThreshold test (eps_r), with no hard cap: eps_r.

Theorem Q: given all the noise except the two tests' threshold noises and their per-query noises
at the firing times, the view is a function of the two firing times, and the two firing events are
independent AboveThreshold events on inputs that differ by at most 1 -- so the uncapped round is
(eps_h + eps_r)-DP in the differing query (basic composition of the two tests), and the halting
cap adds (1 + e^{eps_h + eps_r}) delta_cap_h (Lemma Cap, Lemma T).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from engine.planner import above_threshold as at
from engine.schedule import RoundSpec

LEMMA_Q = ("Theorem Q (in-round step: AboveThreshold, Dwork-Roth Thm 3.23, on the top counts; "
           "Lemma Cap for the hard caps)")
LEMMA_FALSE = "Claim E.6, in-round step (FALSE for this design; issue 8)"


@dataclass(frozen=True, slots=True)
class InRound:
    """The in-round step for one round of a design."""

    epsilon: float
    """eps_h (noisy halting) + eps_r (private restarts); +inf when a channel is open."""
    delta: float
    """(1 + e^epsilon)(delta_cap_h + delta_cap_r) (Lemma Cap)."""
    valid: bool
    eps_h: float
    eps_r: float
    delta_cap_h: float
    """P[the round's hard cap c binds before the halting test fires] (Lemma T (a)); 0 if c > R."""
    delta_cap_r: float
    """Always 0: the engine puts no hard cap on a block (a cap that reads the hidden query's outcome
    is not covered by Lemma T(ii) when the adversary picks the block; docs/PRIVACY.md 5.3). block_cap
    is charged on the training side instead (Lemma K, section 6.4)."""
    lemma: str
    problems: tuple[str, ...] = ()

    @property
    def note(self) -> str:
        return "; ".join(self.problems)


def _gap(cap: int, threshold: float) -> float:
    """cap - threshold in exact arithmetic (counts can exceed float precision), as a float."""
    return float(Fraction(cap) - Fraction(threshold))


def _positive(v: float | None) -> bool:
    return v is not None and math.isfinite(v) and v > 0.0


def in_round(spec: RoundSpec, halting: str, restarts: str, cap_floor: float = 0.0) -> InRound:
    """Theorem Q for one round: the cost of a query in the other answers of its own round.
    ``cap_floor``: the largest halting-cap probability over the schedule's rounds (charged whatever
    round holds the challenge: docs/PRIVACY.md 5.3, step 1)."""
    problems: list[str] = []
    eps_h = eps_r = d_h = d_r = 0.0
    if halting in ("paper", "never"):
        if spec.c <= spec.R:
            if halting == "never":
                problems.append(f"halting 'never' needs c > R (c={spec.c}, R={spec.R}): with c <= R the "
                                "round fails if c of its queries are tops")
            else:
                problems.append(f"halting channel open (c={spec.c} <= R={spec.R}): a query can spend a "
                                "top and make a later query be refused")
    elif halting == "noisy":
        if not (_positive(spec.halt_eps) and spec.halt_threshold is not None):
            problems.append("halting 'noisy' needs halt_eps > 0 and halt_threshold")
        else:
            assert spec.halt_eps is not None and spec.halt_threshold is not None
            eps_h = spec.halt_eps
            d_h = at.cap_probability(_gap(spec.c, spec.halt_threshold), 0.0, eps_h,
                                     reachable=spec.c <= spec.R)
    if halting in ("paper", "never", "noisy"):
        d_h = max(d_h, cap_floor)
    else:
        problems.append(f"unknown halting policy {halting!r}")
    if restarts == "per-top":
        problems.append("restart channel open: each top restarts the threshold noise, which later "
                        "answers reveal (no bound of order eps' exists)")
    elif restarts == "private":
        if not (_positive(spec.restart_eps) and spec.restart_threshold is not None
                and spec.block_cap is not None and spec.block_cap >= 1):
            problems.append("restarts 'private' needs restart_eps > 0, restart_threshold and block_cap")
        else:
            assert spec.restart_eps is not None and spec.restart_threshold is not None
            assert spec.block_cap is not None
            eps_r = spec.restart_eps  # no hard block cap in the mechanism: nothing to charge (d_r = 0)
    elif restarts != "stateless":
        problems.append(f"unknown restart policy {restarts!r}")
    if problems:
        return InRound(math.inf, 0.0, False, eps_h, eps_r, d_h, d_r, LEMMA_FALSE, tuple(problems))
    eps = eps_h + eps_r
    lemma = LEMMA_Q if eps > 0.0 else "Theorem Q (no shared state: c > R and no test reads the outcome)"
    return InRound(eps, at.cap_charge(eps, d_h + d_r), True, eps_h, eps_r, d_h, d_r, lemma)
