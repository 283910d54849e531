"""``everlast complete``: fill in the tests a hand-written schedule's design needs, and certify it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from everlast.cli.common import emit_json
from everlast.engine.errors import EngineError
from everlast.engine.planner import certify
from everlast.engine.planner.fill import fill_tests
from everlast.engine.planner.report import certificate_json, guarantee_sentence
from everlast.engine.schedule import RoundSpec, Schedule, design_of

SIZES = ("T", "lam", "R", "alpha")
"""What a hand-written round must give; the rest can be filled in (``fill_sizes``)."""
FILLED = ("c", "eps_bt", "m_S", "m_D")


def fill_sizes(r: Mapping[str, Any], nxt: Mapping[str, Any] | None, concept: str, d: int,
               delta: float) -> tuple[dict[str, Any], dict[str, str]]:
    """A round dict given only its sizes (T, lam, R, alpha; optionally beta, gamma) completed as
    ``everlast round`` completes one: m_D = min(the next round's lambda T, R) (Claim D.6), m_S as
    the planner sizes it (Lemma C.2), eps_bt at the accuracy floor and c from the concept's top rate
    (``engine.planner.fill.hand_round``). Returns the dict and, per field filled, why."""
    from everlast.cli.hand_round import labelboost_m_s
    from everlast.engine.planner.fill import hand_round

    missing = [k for k in SIZES if k not in r]
    if missing:
        raise click.UsageError(f"a round needs {', '.join(SIZES)} (missing: {', '.join(missing)}); "
                               "`everlast round --n N` writes a whole one")
    try:
        T, lam, R, alpha = int(r["T"]), int(r["lam"]), int(r["R"]), float(r["alpha"])
        beta = float(r.get("beta", 0.05))
        gamma = None if r.get("gamma") is None else float(r["gamma"])
    except (TypeError, ValueError):
        raise click.UsageError("T, lam and R must be integers, alpha a number") from None
    nxt_size = lam * T if nxt is None else int(nxt["lam"]) * int(nxt["T"])
    m_d = int(r.get("m_D", min(nxt_size, R)))
    m_s = int(r.get("m_S", labelboost_m_s(m_d, lam * T, lam, alpha, beta, concept, d)))
    try:
        spec = hand_round(T=T, lam=lam, R=R, alpha=alpha, m_S=m_s, m_D=m_d, concept=concept, d=d, gamma=gamma,
                          beta=beta, delta=delta, eps0=None if r.get("eps_bt") is None else float(r["eps_bt"]),
                          c=None if r.get("c") is None else int(r["c"]))
    except EngineError as exc:
        raise click.UsageError(str(exc)) from None
    why = {"m_D": f"{m_d:,}: the next round's lambda T (Claim D.6), at most R",
           "m_S": f"{m_s:,}: LabelBoost's sample for m_D points (Lemma C.2), as the planner sizes it",
           "eps_bt": f"{spec.eps_bt:g}: the accuracy floor (a query every classifier agrees on is answered "
                     "against them w.p. <= alpha/16)",
           "c": f"{spec.c:,}: from {concept}'s top rate for the round's own i.i.d. stream (docs/halt_budget.md)"}
    out = {**r, **{k: v for k, v in spec.to_dict().items() if k in FILLED and k not in r}}
    out.setdefault("delta_bt", None)
    return out, {k: why[k] for k in FILLED if k not in r}


def complete_schedule(doc: Mapping[str, Any], delta: float = 1e-6, concept: str = "thresholds",
                      d: int = 1, filled: dict[int, dict[str, str]] | None = None) -> Schedule:
    """The schedule of ``doc`` (a parsed schedule file) with every round's missing test parameters
    filled in for its design (the default, target-charged, when the file names none): the noisy
    halting test's eps_h and threshold c0 (``engine.planner.fill.fill_tests``); the paper's design
    needs none. A default-design round that gives only its sizes (T, lam, R, alpha) gets the rest
    too (``fill_sizes``; ``filled`` receives, per round, what was filled and why)."""
    rounds = doc.get("rounds")
    if not isinstance(rounds, Sequence) or isinstance(rounds, str | bytes) or not rounds:
        raise click.UsageError("a schedule needs a non-empty list 'rounds'")
    if not all(isinstance(r, Mapping) for r in rounds):
        raise click.UsageError("each round is a JSON object")
    try:
        design = design_of(doc)
        given = list(rounds)
        if design.target_charged:
            for i, r in enumerate(rounds):
                given[i] = {"delta_bt": None, **r}  # unused by the default design
                if any(k not in r for k in FILLED):
                    given[i], why = fill_sizes(r, rounds[i + 1] if i + 1 < len(rounds) else None, concept, d, delta)
                    if filled is not None:
                        filled[i + 1] = why
        specs = tuple(fill_tests(RoundSpec.from_dict(r), design, delta) for r in given)
        return Schedule(specs, repeat_last=bool(doc.get("repeat_last", True)), design=design)
    except EngineError as exc:
        raise click.UsageError(str(exc)) from None


@click.command()
@click.argument("schedule_path", metavar="SCHEDULE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the completed schedule here (default: print it on stdout).")
@click.option("--n", type=click.IntRange(min=1), default=None,
              help="Training-set size for the certificate [default: |S_1|, no subsampling gain].")
@click.option("--delta", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=1e-6,
              show_default=True, help="Target delta the tests' margins are sized for.")
@click.option("--concept", type=click.Choice(["thresholds", "intervals", "stumps"]), default="thresholds",
              show_default=True, help="Concept class (sizes the hard cap c of a round that gives none).")
@click.option("--d", "dim", type=click.IntRange(min=1), default=1, show_default=True, help="Dimension (stumps).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: {schedule, certificate, guarantee, filled, failing_checks}.")
def complete(schedule_path: Path, out: Path | None, n: int | None, delta: float, concept: str, dim: int,
             as_json: bool) -> None:
    """Complete a hand-written SCHEDULE for its design (default: target-charged, whose noisy halting
    test is filled in; docs/privacy/genericbbl.md section 9) and print what the planner certifies for it."""
    from everlast.cli.hand_round import advice, proven_accuracy, with_hand_checks

    try:
        doc = json.loads(schedule_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise click.UsageError(f"cannot read schedule file: {exc}") from None
    if not isinstance(doc, dict):
        raise click.UsageError("a schedule file holds one JSON object")
    filled: dict[int, dict[str, str]] = {}
    sched = complete_schedule(doc, delta, concept, dim, filled)
    cert = with_hand_checks(certify(sched, n or sched.initial_size, delta=delta), sched)
    text = json.dumps(sched.to_dict(), indent=2) + "\n"
    if out is not None:
        out.write_text(text)
    failed = [advice(x, sched.rounds, n, delta) for x in cert.checks if not x.holds]
    if as_json:
        emit_json({"schedule": sched.to_dict(), "certificate": certificate_json(cert),
                   "guarantee": guarantee_sentence(cert), "filled": {str(k): v for k, v in filled.items()},
                   "failing_checks": failed})
        return
    if out is None:
        click.echo(text, nl=False)
    for i, why in filled.items():
        for k, w in why.items():
            click.echo(f"filled in: round {i}: {k} = {w}", err=True)
    for line in failed[:8]:
        click.echo(f"warning: {line}", err=True)
    click.echo(guarantee_sentence(cert), err=True)
    proven = proven_accuracy(sched.rounds, sched.design, concept, dim)
    if proven:
        click.echo(proven, err=True)
