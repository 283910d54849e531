"""The schedule ``everlast simulate`` runs: a schedule file, the default round with the flags applied
(``build_schedule``), or the planner's schedule for targets (``planned_schedule``), cut to what one
engine runs (``one_engine_prefix``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import click

from everlast.engine.design import DEFAULT, PAPER, Design
from everlast.engine.errors import EngineError
from everlast.engine.planner import PlanInfeasible, Targets, best_epsilon, plan
from everlast.engine.planner.fill import accuracy_eps0, hand_round
from everlast.engine.schedule import RoundSpec, Schedule

# The default: five rounds of the default design (target-charged) in a few seconds, alpha = 0.1, all
# of the default n = 10^6 examples in round 1 (|S_1| = lam T). eps0 is the accuracy floor and c is
# sized from the concept's top rate (docs/halt_budget.md) so that i.i.d. traffic does not halt a
# round. T = 10^5 classifiers of lam = 10 points make the certificate about as strong as 10^6
# examples allow (the round's epsilon scales like sqrt(lam R) / (gamma lam T)); it is still moderate
# (training epsilon ~3, queries ~6): strong guarantees need far more data (everlast plan).
DEFAULT_ROUND: dict[str, Any] = {
    "T": 100_000,
    "lam": 10,
    "R": 1_000_000,
    "c": None,  # from the concept's top rate (engine.planner.fill.hand_round)
    "eps_bt": None,  # the accuracy floor (engine.planner.fill.accuracy_eps0)
    "delta_bt": None,  # the paper's design only (default 1e-8 there)
    "alpha": 0.1,
    "m_S": 2_000,
    "m_D": 1_000_000,
    "gamma": None,
    "beta": 0.05,
}
PAPER_DELTA_BT = 1e-8
PAPER_EPS_FACTOR = 8.0
"""The paper's design adds DLap(2/eps') and DLap(6/eps') noises: about 8 times the target-charged
design's 1/eps0, so its accuracy floor is ~8 times higher."""
MAX_INPROCESS_POINTS = 200_000_000
SCHEDULE_FLAGS = {
    "T": "T",
    "lam": "lam",
    "R": "R",
    "c": "c",
    "eps_bt": "eps_bt",
    "delta_bt": "delta_bt",
    "alpha": "alpha",
    "m_s": "m_S",
    "m_d": "m_D",
    "gamma": "gamma",
}


def build_schedule(path: Path | None, flags: dict[str, Any], design: Design = DEFAULT, delta: float = 1e-6,
                   concept: str = "thresholds", d: int = 1) -> Schedule:
    """The schedule file as given, or DEFAULT_ROUND with the flags applied under ``design``: for
    the default (target-charged) design eps0 defaults to the accuracy floor, c to the concept's
    halt budget and the halting test is filled in (``engine.planner.fill.hand_round``)."""
    given = {SCHEDULE_FLAGS[k]: v for k, v in flags.items() if v is not None}
    if path is not None:
        if given:
            raise click.UsageError("give either --schedule or schedule flags, not both")
        try:
            return Schedule.from_dict(json.loads(path.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise click.UsageError(f"cannot read schedule file: {exc}") from None
        except EngineError as exc:
            raise click.UsageError(f"bad schedule file: {exc}") from None
    spec = {**DEFAULT_ROUND, **given}
    spec["m_D"] = min(int(spec["m_D"]), int(spec["R"]))
    try:
        rnd = hand_round(T=int(spec["T"]), lam=int(spec["lam"]), R=int(spec["R"]), alpha=float(spec["alpha"]),
                         m_S=int(spec["m_S"]), m_D=int(spec["m_D"]), concept=concept, d=d, gamma=spec["gamma"],
                         beta=float(spec["beta"]), delta=delta, eps0=spec["eps_bt"], c=spec["c"])
        if design == PAPER:
            band = rnd.band
            eps = spec["eps_bt"] or PAPER_EPS_FACTOR * accuracy_eps0(band, rnd.T, rnd.R, rnd.beta)
            rnd = RoundSpec.from_dict({**rnd.to_dict(), "eps_bt": eps, "halt_eps": None, "halt_threshold": None,
                                       "delta_bt": spec["delta_bt"] or PAPER_DELTA_BT})
        elif spec["delta_bt"] is not None:
            raise click.UsageError("--delta-bt is the paper design's delta'; the default design has none")
        return Schedule((rnd,), repeat_last=True, design=design)
    except EngineError as exc:
        raise click.UsageError(str(exc)) from None


def planned_schedule(
    concept: str, d: int, n: int | None, epsilon: float, delta: float, alpha: float, accounting: str
) -> tuple[Schedule, int]:
    """The planner's schedule for the targets and its n_required, if the given n (default: that
    n_required) supports it and it can run in-process."""
    targets = Targets(epsilon=epsilon, delta=delta, alpha=alpha, concept=concept, d=d, accounting=accounting)  # type: ignore[arg-type]
    try:
        p = plan(targets)
    except PlanInfeasible as exc:
        raise click.ClickException(f"no schedule meets the targets: {exc}") from None
    n = p.n_required if n is None else n
    if p.n_required > n:
        best = best_epsilon(n, targets)
        better = (
            f"n = {n:,} supports epsilon = {best.epsilon:.3g} at most"
            if math.isfinite(best.epsilon)
            else f"n = {n:,} certifies no finite epsilon at alpha = {alpha}"
        )
        raise click.ClickException(
            f"epsilon = {epsilon} at alpha = {alpha} needs n = {p.n_required:.3g} labeled examples; {better}. "
            "Run with an explicit schedule (the default) to see the guarantee a small run certifies."
        )
    schedule = p.schedule or one_engine_prefix(p.rounds, p.certificate.design)
    if schedule is None:
        raise click.ClickException(f"no round of the planned schedule runs on one engine: {p.not_runnable_reason}")
    if schedule.initial_size > MAX_INPROCESS_POINTS:
        raise click.ClickException(
            f"the planned schedule needs |S_1| = {schedule.initial_size:.3g} points in memory; "
            "too large to simulate in-process"
        )
    return schedule, n


def one_engine_prefix(rounds: tuple[RoundSpec, ...], design_name: str) -> Schedule | None:
    """The longest prefix of a planned schedule one engine runs (the later rounds' D-hat is beyond
    what one engine orders), ending after its last round. Running a prefix and refusing afterwards
    is a truncation of the certified mechanism: the whole schedule's certificate covers it."""
    design = Design.named(design_name)
    for k in range(len(rounds), 0, -1):
        try:
            return Schedule(rounds[:k], repeat_last=False, design=design)
        except EngineError:
            continue
    return None
