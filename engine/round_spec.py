"""One round's parameters (a "phase" of GenericBBL, section 5, step 3), as a frozen value.

A :class:`RoundSpec` is what ``engine.design.noise_plan`` turns into the exact integers and scales
the engine runs, and what ``engine.schedule.Schedule`` chains round after round. It lives in its own
module so that the design and the schedule both import it without importing each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from everlast.engine import fields
from everlast.engine.fields import integral

__all__ = ["COMPLETE_HINT", "RETIRED_FIELDS", "RoundSpec", "integral"]

COMPLETE_HINT = ("plan the schedule (everlast plan --json), complete a hand-written one "
                 "(everlast complete SCHEDULE), or name the paper's design (halting 'paper', restarts "
                 "'per-top'; not query-private)")
RETIRED_FIELDS = {"restart_eps", "restart_threshold", "block_cap"}


@dataclass(frozen=True, slots=True)
class RoundSpec:
    """Parameters of one round (one "phase" of GenericBBL)."""

    T: int
    """Number of chunks, hence of classifiers voting (T_i)."""
    lam: int
    """Points per chunk (lambda_i); |S_i| = lam * T."""
    R: int
    """Queries answered in the round (R_i)."""
    c: int
    """Hard cap on the round's top outcomes (c_i): the round fails at c tops."""
    eps_bt: float
    """The per-query privacy parameter, on the vote *count* (integers, engine.design.noise_plan):
    paper, eps'_i: threshold noise DLap(2/eps'), per-query noise DLap(6/eps'); target-charged,
    eps0_i: per-query noise DLap(1/eps0)."""
    delta_bt: float | None
    """paper: delta'_i, the delta each BT instance is charged (accounting only; no effect on
    sampling). Unused (null) by the target-charged design."""
    alpha: float
    """alpha_i, the accuracy target of the round (accuracy only)."""
    m_S: int
    """|S-hat_i|: labeled points LabelBoost scores against (subsample of S_i)."""
    m_D: int
    """|D-hat_i|: queries of the round kept (uniformly, by reservoir) and relabeled by LabelBoost."""
    gamma: float | None = None
    """Half-width of BT's band: thresholds 1/2 -+ gamma. ``None`` means alpha (the paper)."""
    beta: float = 0.05
    """beta_i, the failure probability budget of the round (accuracy only)."""
    halt_eps: float | None = None
    """eps_h of the noisy halting test (target-charged)."""
    halt_threshold: int | None = None
    """c0 (an integer): the noisy halting test fires when tops + DLap(4/eps_h) >= c0 + DLap(2/eps_h)."""

    @property
    def band(self) -> float:
        return self.alpha if self.gamma is None else self.gamma

    @property
    def labeled_size(self) -> int:
        """|S_i| = lambda_i * T_i."""
        return self.lam * self.T

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], what: str = "round") -> RoundSpec:
        """A round from its JSON object, every field checked as its type (``engine.fields``: ``"lam":
        5.9``, ``"T": 4000.5`` and ``"T": true`` are refused, naming the field); ``what`` names the
        round in errors (``Schedule.from_dict`` passes ``round 2``)."""
        retired = dict.fromkeys(RETIRED_FIELDS, f"belong to the retired private-restarts design; {COMPLETE_HINT}")
        return cls(**fields.read(cls, d, what, retired=retired))
