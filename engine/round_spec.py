"""One round's parameters (a "phase" of GenericBBL, section 5, step 3), as a frozen value.

A :class:`RoundSpec` is what ``engine.design.noise_plan`` turns into the exact integers and scales
the engine runs, and what ``engine.schedule.Schedule`` chains round after round. It lives in its own
module so that the design and the schedule both import it without importing each other.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from everlast.engine.errors import InvalidSchedule

COMPLETE_HINT = ("plan the schedule (everlast plan --json), complete a hand-written one "
                 "(everlast complete SCHEDULE), or name the paper's design (halting 'paper', restarts "
                 "'per-top'; not query-private)")
RETIRED_FIELDS = {"restart_eps", "restart_threshold", "block_cap"}


def integral(x: float | int, what: str) -> int:
    """An integer-valued schedule field as an int (JSON may carry 12.0); refuses 12.5."""
    if isinstance(x, bool):
        raise InvalidSchedule(f"{what} must be an integer")
    if isinstance(x, int):
        return x
    if not (isinstance(x, float) and math.isfinite(x) and x == math.floor(x)):
        raise InvalidSchedule(f"{what} must be an integer")
    return int(x)


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
    def from_dict(cls, d: Mapping[str, Any]) -> RoundSpec:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown & RETIRED_FIELDS:
            raise InvalidSchedule(f"round fields {sorted(unknown & RETIRED_FIELDS)} belong to the retired "
                                  f"private-restarts design; {COMPLETE_HINT}")
        if unknown:
            raise InvalidSchedule(f"unknown round fields: {sorted(unknown)}")
        missing = {f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING} - set(d)
        if missing:
            raise InvalidSchedule(f"round is missing fields: {sorted(missing)}")
        def opt(name: str, kind: type) -> Any:
            v = d.get(name)
            return None if v is None else kind(v)

        try:
            spec = cls(
                T=int(d["T"]), lam=int(d["lam"]), R=int(d["R"]), c=int(d["c"]),
                eps_bt=float(d["eps_bt"]), delta_bt=opt("delta_bt", float),
                alpha=float(d["alpha"]), m_S=int(d["m_S"]), m_D=int(d["m_D"]),
                gamma=opt("gamma", float), beta=float(d.get("beta", 0.05)),
                halt_eps=opt("halt_eps", float),
                halt_threshold=None if d.get("halt_threshold") is None
                else integral(d["halt_threshold"], "halt_threshold"),
            )
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidSchedule(f"round fields have the wrong type: {exc}") from None
        return spec
