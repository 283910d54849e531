"""The per-round parameters GenericBBL runs with (section 5, step 3), chained into a schedule, as
frozen values (one round's: ``engine.round_spec.RoundSpec``, re-exported here).

A schedule is *input* to the engine: the planner (``engine.planner``) computes one from privacy
targets, or a user writes one by hand for a simulation. The engine never derives privacy numbers
itself; it only checks that the sizes chain (what the algorithm needs to be defined at all).

Notation follows the paper: round i has a labeled set S_i of lambda_i * T_i points, cut into T_i
chunks of lambda_i; BetweenThresholds (BT) with privacy parameters (eps'_i, delta'_i) answers R_i
queries with thresholds 1/2 -+ gamma_i and at most c_i "top" outcomes; LabelBoost relabels a
subsample S-hat_i (m_S points) together with a subsample D-hat_i (m_D of the R_i queries), and the
relabeled D-hat_i supplies S_{i+1}.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from everlast.engine import fields
from everlast.engine.burn import Burn
from everlast.engine.design import DEFAULT, Design, capacity_problem, noise_plan, spec_of
from everlast.engine.errors import InvalidSchedule
from everlast.engine.quotas import Quotas, quota_plan
from everlast.engine.round_spec import RoundSpec as RoundSpec  # re-exported: a schedule's rounds


@dataclass(frozen=True, slots=True)
class Schedule:
    """Rounds 1..K explicitly; round i > K repeats round K when ``repeat_last`` (else the
    predictor refuses after round K: it never answers beyond what the schedule covers).

    A schedule is always runnable exactly (``engine.design.noise_plan`` accepts every round)."""

    rounds: tuple[RoundSpec, ...]
    repeat_last: bool = True
    design: Design = DEFAULT
    """The default design is target-charged (docs/privacy/genericbbl.md 9); the paper's must be named."""
    quotas: Quotas | None = None
    """Per-client top quotas (``engine.quotas``; target-charged only): ``None`` = off, and then the
    schedule, its state and its answers are exactly those of a schedule without the field."""
    burn: Burn | None = None
    """The private burn-rate signal (``engine.burn``; target-charged only): ``None`` = off."""

    def __post_init__(self) -> None:
        if isinstance(self.quotas, Mapping):
            object.__setattr__(self, "quotas", Quotas.from_dict(self.quotas))
        if isinstance(self.burn, Mapping):
            object.__setattr__(self, "burn", Burn.from_dict(self.burn))
        validate(self)

    @property
    def halting(self) -> str:
        return self.design.halting.value

    @property
    def restarts(self) -> str:
        return self.design.restarts.value

    def spec(self, i: int) -> RoundSpec | None:
        """Parameters of round ``i`` (1-based), or ``None`` past a non-repeating schedule."""
        if i < 1:
            raise ValueError("rounds are numbered from 1")
        if i <= len(self.rounds):
            return self.rounds[i - 1]
        return self.rounds[-1] if self.repeat_last else None

    @property
    def initial_size(self) -> int:
        """|S_1|: the fewest training examples round 1 needs."""
        return self.rounds[0].labeled_size

    @property
    def clients(self) -> bool:
        """Whether the schedule runs per-client quotas or the burn-rate signal (a state then carries
        their part: ``engine.predictor.FORMAT_CLIENTS``)."""
        return self.quotas is not None or self.burn is not None

    def to_dict(self) -> dict[str, Any]:
        """Plain values; ``quotas`` and ``burn`` appear only when on (so a schedule without them has
        the bytes it had before they existed)."""
        out: dict[str, Any] = {
            "rounds": [r.to_dict() for r in self.rounds],
            "repeat_last": self.repeat_last,
            "design": self.design.name,
            **self.design.to_dict(),
        }
        if self.quotas is not None:
            out["quotas"] = self.quotas.to_dict()
        if self.burn is not None:
            out["burn"] = self.burn.to_dict()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schedule:
        rounds = d.get("rounds")
        if not isinstance(rounds, Sequence) or isinstance(rounds, str | bytes) or not rounds:
            raise InvalidSchedule("a schedule needs a non-empty list 'rounds'")
        quotas, burn = d.get("quotas"), d.get("burn")
        return cls(
            rounds=tuple(RoundSpec.from_dict(r, f"round {i}") for i, r in enumerate(rounds, 1)),
            repeat_last=fields.flag(d.get("repeat_last", True), "repeat_last"),
            design=design_of(d),
            quotas=None if quotas is None else Quotas.from_dict(quotas),
            burn=None if burn is None else Burn.from_dict(burn),
        )


def design_of(d: Mapping[str, Any]) -> Design:
    """The design a schedule file names (``design``, or ``halting`` and ``restarts``), the default
    (target-charged) when it names none."""
    name = d.get("design")
    if name is not None:
        design = Design.named(str(name))
        if any(k in d and d[k] != v for k, v in design.to_dict().items()):
            raise InvalidSchedule(f"design {design.name!r} contradicts the schedule's halting/restarts")
        return design
    if "halting" not in d and "restarts" not in d:
        return DEFAULT
    default = DEFAULT.to_dict()
    return Design.parse(d.get("halting", default["halting"]), d.get("restarts", default["restarts"]))


def validate(s: Schedule) -> None:
    """Check that every round is well-formed, runnable exactly by the engine
    (``engine.design.noise_plan``) and that the sizes chain (paper, Claim D.6: the next round's
    labeled set is drawn from the relabeled D-hat_i, so m_D,i >= |S_{i+1}|)."""
    if not s.rounds:
        raise InvalidSchedule("a schedule needs at least one round")
    if not isinstance(s.design, Design):
        raise InvalidSchedule("a schedule's design must be an engine.design.Design")
    if s.quotas is not None and not isinstance(s.quotas, Quotas):
        raise InvalidSchedule("a schedule's quotas must be an engine.quotas.Quotas (or a mapping)")
    if s.burn is not None and not isinstance(s.burn, Burn):
        raise InvalidSchedule("a schedule's burn must be an engine.burn.Burn (or a mapping)")
    if s.clients and not s.design.target_charged:
        raise InvalidSchedule("per-client quotas and the burn-rate signal run with the target-charged design "
                              "only (the paper's design is not query-private: docs/privacy/genericbbl.md 4)")
    for i, r in enumerate(s.rounds, start=1):
        where = f"round {i}"
        for name in ("T", "lam", "R", "c", "m_S", "m_D"):
            if getattr(r, name) < 1:
                raise InvalidSchedule(f"{where}: {name} must be >= 1")
        for name in ("eps_bt", "alpha", "band"):
            v = getattr(r, name)
            if not (math.isfinite(v) and v > 0):
                raise InvalidSchedule(f"{where}: {name} must be a positive finite number")
        if not 0 < r.beta < 1:
            raise InvalidSchedule(f"{where}: beta must lie in (0, 1)")
        if r.band >= 0.5:
            raise InvalidSchedule(f"{where}: the band half-width must be < 1/2")
        if r.m_S > r.labeled_size:
            raise InvalidSchedule(f"{where}: m_S exceeds |S_i| = lam * T")
        if r.m_D > r.R:
            raise InvalidSchedule(f"{where}: m_D exceeds R (D-hat is a subset of the round's queries)")
        spec_of(s.design).check_fields(r, where)
        try:
            noise_plan(s.design, r)
            if s.quotas is not None:
                quota_plan(s.quotas, r)
        except InvalidSchedule as exc:
            raise InvalidSchedule(f"{where}: {exc}") from None
        too_big = capacity_problem(r)
        if too_big:
            raise InvalidSchedule(f"{where}: {too_big}")
        nxt = s.spec(i + 1)
        if nxt is not None and r.m_D < nxt.labeled_size:
            raise InvalidSchedule(
                f"{where}: m_D = {r.m_D} cannot supply round {i + 1}'s labeled set of "
                f"{nxt.labeled_size} = lam * T points"
            )
