"""The per-round parameters GenericBBL runs with (section 5, step 3), as frozen values.

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

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.errors import InvalidSchedule

HaltingPolicy = Literal["paper", "never", "noisy"]
"""When a round fails (docs/PRIVACY.md, "query privacy"):
``paper``: at the c_i-th top (step 3(d)iv; leaks the hidden query's outcome when c_i < R_i);
``never``: c_i > R_i is required, so no round can fail (even if all R_i queries are tops);
``noisy``: an AboveThreshold test on the round's top count (threshold ``halt_threshold``, privacy
``halt_eps``) decides, with c_i as a hard cap."""

RestartPolicy = Literal["per-top", "private", "stateless"]
"""When BetweenThresholds draws a fresh threshold noise:
``per-top``: after every top (Observation 2; leaks through the restart channel);
``private``: when an AboveThreshold test on the current block's top count fires (threshold
``restart_threshold``, privacy ``restart_eps``); ``block_cap`` bounds the tops a block is charged for;
``stateless``: before every query (each query is its own BetweenThresholds instance)."""

DEFAULT_DESIGN: tuple[HaltingPolicy, RestartPolicy] = ("noisy", "private")
"""(halting, restarts) of a schedule that names neither: the planner's default, query-private design."""
COMPLETE_HINT = ("plan the schedule (everlast plan --json), complete a hand-written one "
                 "(everlast complete SCHEDULE), or name another design: halting 'never' with c > R, or "
                 "halting 'paper' and restarts 'per-top' (the paper's design, not query-private)")

POLICIES: dict[str, tuple[str, ...]] = {"halting": ("paper", "never", "noisy"),
                                         "restarts": ("per-top", "private", "stateless")}


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
    """Top outcomes allowed in the round (c_i); the c-th top fails the predictor."""
    eps_bt: float
    """eps'_i: BT noise is Lap(2/(eps' T)) on the thresholds and Lap(6/(eps' T)) per query."""
    delta_bt: float
    """delta'_i: the delta each BT instance is charged (accounting only; no effect on sampling)."""
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
    """eps_h of the noisy halting test (halting "noisy")."""
    halt_threshold: float | None = None
    """c0: the noisy halting test fires when tops + Lap(4/eps_h) >= c0 + Lap(2/eps_h)."""
    restart_eps: float | None = None
    """eps_r of the private restart test (restarts "private")."""
    restart_threshold: float | None = None
    """k0: a block restarts when its tops + Lap(4/eps_r) >= k0 + Lap(2/eps_r)."""
    block_cap: int | None = None
    """k_max: the most tops a block is charged for (restarts "private"; accounting only: the engine does
    not cap a block, and a block exceeds k_max only on Lemma K's (or K''s) event, docs/PRIVACY.md 6.4)."""

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
                eps_bt=float(d["eps_bt"]), delta_bt=float(d["delta_bt"]),
                alpha=float(d["alpha"]), m_S=int(d["m_S"]), m_D=int(d["m_D"]),
                gamma=opt("gamma", float), beta=float(d.get("beta", 0.05)),
                halt_eps=opt("halt_eps", float), halt_threshold=opt("halt_threshold", float),
                restart_eps=opt("restart_eps", float), restart_threshold=opt("restart_threshold", float),
                block_cap=opt("block_cap", int),
            )
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidSchedule(f"round fields have the wrong type: {exc}") from None
        return spec


@dataclass(frozen=True, slots=True)
class Schedule:
    """Rounds 1..K explicitly; round i > K repeats round K when ``repeat_last`` (else the
    predictor refuses after round K: it never answers beyond what the schedule covers)."""

    rounds: tuple[RoundSpec, ...]
    repeat_last: bool = True
    halting: HaltingPolicy = "noisy"
    restarts: RestartPolicy = "private"
    """The default design is the cheapest sound one (docs/PRIVACY.md section 9): noisy halting and
    private restarts. The paper's design ("paper", "per-top") must be named, and is flagged."""

    def __post_init__(self) -> None:
        validate(self)

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "rounds": [r.to_dict() for r in self.rounds],
            "repeat_last": self.repeat_last,
            "halting": self.halting,
            "restarts": self.restarts,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schedule:
        rounds = d.get("rounds")
        if not isinstance(rounds, Sequence) or isinstance(rounds, str | bytes) or not rounds:
            raise InvalidSchedule("a schedule needs a non-empty list 'rounds'")
        halting, restarts = design_of(d)
        return cls(
            rounds=tuple(RoundSpec.from_dict(r) for r in rounds),
            repeat_last=bool(d.get("repeat_last", True)),
            halting=halting,
            restarts=restarts,
        )


def design_of(d: Mapping[str, Any]) -> tuple[HaltingPolicy, RestartPolicy]:
    """(halting, restarts) a schedule file names, the default design for what it leaves out."""
    halting = d.get("halting", DEFAULT_DESIGN[0])
    restarts = d.get("restarts", DEFAULT_DESIGN[1])
    if halting not in POLICIES["halting"]:
        raise InvalidSchedule(f"unknown halting policy {halting!r}; known: {', '.join(POLICIES['halting'])}")
    if restarts not in POLICIES["restarts"]:
        raise InvalidSchedule(f"unknown restart policy {restarts!r}; known: {', '.join(POLICIES['restarts'])}")
    return halting, restarts


def validate(s: Schedule) -> None:
    """Check that every round is well-formed and that the sizes chain (paper, Claim D.6:
    the next round's labeled set is drawn from the relabeled D-hat_i, so m_D,i >= |S_{i+1}|)."""
    if not s.rounds:
        raise InvalidSchedule("a schedule needs at least one round")
    for i, r in enumerate(s.rounds, start=1):
        where = f"round {i}"
        for name in ("T", "lam", "R", "c", "m_S", "m_D"):
            if getattr(r, name) < 1:
                raise InvalidSchedule(f"{where}: {name} must be >= 1")
        for name in ("eps_bt", "alpha", "band"):
            v = getattr(r, name)
            if not (math.isfinite(v) and v > 0):
                raise InvalidSchedule(f"{where}: {name} must be a positive finite number")
        if not 0 < r.delta_bt < 1:
            raise InvalidSchedule(f"{where}: delta_bt must lie in (0, 1)")
        if not 0 < r.beta < 1:
            raise InvalidSchedule(f"{where}: beta must lie in (0, 1)")
        if r.band >= 0.5:
            raise InvalidSchedule(f"{where}: the band half-width must be < 1/2")
        if r.m_S > r.labeled_size:
            raise InvalidSchedule(f"{where}: m_S exceeds |S_i| = lam * T")
        if r.m_D > r.R:
            raise InvalidSchedule(f"{where}: m_D exceeds R (D-hat is a subset of the round's queries)")
        _validate_policies(s, r, where)
        nxt = s.spec(i + 1)
        if nxt is not None and r.m_D < nxt.labeled_size:
            raise InvalidSchedule(
                f"{where}: m_D = {r.m_D} cannot supply round {i + 1}'s labeled set of "
                f"{nxt.labeled_size} = lam * T points"
            )


def _validate_policies(s: Schedule, r: RoundSpec, where: str) -> None:
    if s.halting not in POLICIES["halting"] or s.restarts not in POLICIES["restarts"]:
        raise InvalidSchedule("unknown halting or restart policy")
    if s.halting == "never" and r.c <= r.R:
        raise InvalidSchedule(f"{where}: halting 'never' needs c > R (no round may fail, even if every query is a top)")
    if s.halting == "noisy":
        if r.halt_eps is None and r.halt_threshold is None:
            raise InvalidSchedule(f"{where}: halting 'noisy' (the default design) needs halt_eps and "
                                  f"halt_threshold: {COMPLETE_HINT}")
        if r.halt_eps is None or not (math.isfinite(r.halt_eps) and r.halt_eps > 0):
            raise InvalidSchedule(f"{where}: halting 'noisy' needs a positive halt_eps")
        if r.halt_threshold is None or not (math.isfinite(r.halt_threshold) and r.halt_threshold > 0):
            raise InvalidSchedule(f"{where}: halting 'noisy' needs a positive halt_threshold")
    if s.restarts == "private":
        if r.restart_eps is None and r.restart_threshold is None and r.block_cap is None:
            raise InvalidSchedule(f"{where}: restarts 'private' (the default design) needs restart_eps, "
                                  f"restart_threshold and block_cap: {COMPLETE_HINT}")
        if r.restart_eps is None or not (math.isfinite(r.restart_eps) and r.restart_eps > 0):
            raise InvalidSchedule(f"{where}: restarts 'private' needs a positive restart_eps")
        if r.block_cap is None or r.block_cap < 1:
            raise InvalidSchedule(f"{where}: restarts 'private' needs block_cap >= 1")
        if r.restart_threshold is None or not (math.isfinite(r.restart_threshold) and r.restart_threshold > 0):
            raise InvalidSchedule(f"{where}: restarts 'private' needs a positive restart_threshold")
