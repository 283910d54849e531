"""The tight planner's options (``engine.planner.tight``), shared with its round solvers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from everlast.engine.burn import Burn
from everlast.engine.design import DEFAULT, Design
from everlast.engine.planner.accountants import TIGHT, TIGHT_LEMMA_C1, LabelBoostLemma, TightAccountant
from everlast.engine.planner.accuracy import Reading
from everlast.engine.planner.learning import CLAIM_D5, HaltBudget, LambdaLog
from everlast.engine.quotas import Quotas

Band = Literal["planned", "alpha"]
Chunks = Literal["sized", "alpha"]
Relabelling = Literal["growing", "even"]
AnswerMargin = Literal["lemma-a1", "band"]


@dataclass(frozen=True, slots=True)
class TightOptions:
    halt_budget: HaltBudget = CLAIM_D5
    """The halt-budget policy (``--halts``): Claim D.5's or split-votes (``engine.planner.learning``)."""
    k: float = 2.0
    rounds: int = 12
    lambda_log: LambdaLog = "log2"
    boundaries: int = 1
    cap_c: bool = True
    """Cap the paper's halt budget at R_i (False only to reproduce docs/notes/calibration.md table (iii))."""
    accuracy_floors: bool = True
    """Raise T_i to Claim D.2's and D.7's accuracy floors (privacy-neutral: a larger T only helps)."""
    design: Design = DEFAULT
    """engine.design: target-charged (noisy halting, threshold c0 = budget + g_low, hard cap
    c = c0 + g_high; docs/privacy/genericbbl.md 5) or paper (c = the halt budget)."""
    eps_h: float = 0.01
    """eps_h of the noisy halting test (charged to every query, Theorem Q)."""
    reading: Reading = "per-query"
    """Theorem A's reading of an answer's accuracy (docs/privacy/genericbbl.md 6.3): per query (its
    own noise inside the hypothesis) or every answer (a union bound over the round)."""
    band: Band = "planned"
    """The band's half-width: chosen per round by the planner, or the paper's gamma_i = alpha_i."""
    accuracy_share: float = 0.5
    """theta: the relabelling chain's share of alpha (a_i = 2 sum_{j=2}^i alpha_j <= theta alpha);
    the rest of alpha pays each round's own answers (Theorem A)."""
    chunks: Chunks = "sized"
    """How lambda_i and alpha_i are set (docs/privacy/genericbbl.md 6.3): ``sized`` spreads theta alpha
    evenly over the K - 1 relabellings (alpha_i = theta alpha/(2(K - 1)), which LabelBoost's sample
    S-hat pays) and sizes each round's chunks for its ensemble share alone; ``alpha`` is the paper's
    alpha_i = theta alpha/2^i with lambda_i from Theorem A.2 at alpha_i."""
    relabelling: Relabelling = "growing"
    """How theta alpha is spread over the relabellings (``chunks = "sized"``; docs/privacy/genericbbl.md
    6.3, Theorem A-infinity): ``growing`` lets the rounds' sizes grow geometrically from round 2 to the
    largest last round the engine counts (``round_solvers.LAST_ROUND_SIZE``) with alpha_i falling as they
    grow, and leaves part of theta alpha to the repetitions of the last round (the accuracy horizon);
    ``even`` spreads theta alpha evenly over the K - 1 listed relabellings (no repetition covered)."""
    sizes_from: tuple[int, ...] | None = None
    """Internal (``tight.solve``): the T of each round of the ``even`` schedule, from which the
    ``growing`` schedule sets its chunk sizes (None: not yet known)."""
    answer_margin: AnswerMargin = "lemma-a1"
    """The share of T the answer's noise may use (Theorem A): Lemma A1's (1/2 - gamma - rho_i), or
    ``band``, min(gamma, that) -- every noise inside the band's margin, as before Lemma A1 (the
    ablation's margin lever; Theorem A still certifies the result)."""
    labelboost: LabelBoostLemma = "direct"
    """LabelBoost's privacy: the direct Lemma LB (docs/privacy/genericbbl.md 3) or Lemma C.1."""
    quotas: Quotas | None = None
    """Per-client quotas the schedule will run (their test is charged to every query: Theorem Q+)."""
    burn: Burn | None = None
    """The burn-rate signal the schedule will run (charged to every query: Theorem Q+)."""

    @property
    def accountant(self) -> TightAccountant:
        return TIGHT if self.labelboost == "direct" else TIGHT_LEMMA_C1
