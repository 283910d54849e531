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


def complete_schedule(doc: Mapping[str, Any], delta: float = 1e-6) -> Schedule:
    """The schedule of ``doc`` (a parsed schedule file) with every round's missing test parameters
    filled in for its design (the default, target-charged, when the file names none): the noisy
    halting test's eps_h and threshold c0 (``engine.planner.fill.fill_tests``); the paper's design
    needs none."""
    rounds = doc.get("rounds")
    if not isinstance(rounds, Sequence) or isinstance(rounds, str | bytes) or not rounds:
        raise click.UsageError("a schedule needs a non-empty list 'rounds'")
    try:
        design = design_of(doc)
        specs = tuple(fill_tests(RoundSpec.from_dict(r), design, delta) for r in rounds)
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
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: {schedule, certificate, guarantee}.")
def complete(schedule_path: Path, out: Path | None, n: int | None, delta: float, as_json: bool) -> None:
    """Complete a hand-written SCHEDULE for its design (default: target-charged, whose noisy halting
    test is filled in; docs/privacy/genericbbl.md section 9) and print what the planner certifies for it."""
    try:
        doc = json.loads(schedule_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise click.UsageError(f"cannot read schedule file: {exc}") from None
    if not isinstance(doc, dict):
        raise click.UsageError("a schedule file holds one JSON object")
    sched = complete_schedule(doc, delta)
    cert = certify(sched, n or sched.initial_size, delta=delta)
    text = json.dumps(sched.to_dict(), indent=2) + "\n"
    if out is not None:
        out.write_text(text)
    if as_json:
        emit_json({"schedule": sched.to_dict(), "certificate": certificate_json(cert),
                   "guarantee": guarantee_sentence(cert)})
        return
    if out is None:
        click.echo(text, nl=False)
    failed = [x for x in cert.checks if not x.holds]
    for x in failed[:5]:
        click.echo(f"warning: round {x.round}: {x.name} fails ({x.kind}; {x.lemma})", err=True)
    click.echo(guarantee_sentence(cert), err=True)
