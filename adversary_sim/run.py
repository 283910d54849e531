"""In-process attack runs: ``python -m everlast.adversary_sim STREAM [options] --json``.

Runs one stream of this package (``iid``, ``prober``, ``drift``, ``poisoning``, ``recorded``) against
an in-process predictor (``adversary_sim.streams.run_stream``) and prints the round-by-round record
that ``everlast report`` plots. The same stream objects run against a daemon through
``everlast replay`` (``adversary_sim.kafka_replay``).

The default schedule is small enough for seconds per run: T = 2000 classifiers of lambda = 20
points, R = 100 000 queries per round, alpha = 0.1, the default design (target-charged) with eps0 at
the accuracy floor and the hard cap c sized from the concept's top rate (twice what i.i.d. traffic
of continuous data spends, docs/halt_budget.md: ~2,600 for thresholds), so honest traffic does not
halt a round and an attack that aims at the boundary does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click
import numpy as np

from everlast.adversary_sim.drift import DriftStream
from everlast.adversary_sim.iid import DISTRIBUTIONS, make_task
from everlast.adversary_sim.poisoning import PoisoningStream
from everlast.adversary_sim.prober import BoundaryProber
from everlast.adversary_sim.recorded import RecordedStream
from everlast.adversary_sim.streams import IIDStream, Stream, run_stream
from everlast.engine.concepts import from_spec
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner.fill import hand_round
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import Schedule

STREAM_ROUND: dict[str, Any] = {"T": 2000, "lam": 20, "R": 100_000, "alpha": 0.1, "m_S": 2000, "m_D": 50_000}


def default_schedule(concept: str = "thresholds", d: int = 1, **over: Any) -> Schedule:
    """One round of STREAM_ROUND (with ``over``: c, R), repeated, under the default design
    (``engine.planner.fill.hand_round``: eps0 at the accuracy floor, c from the concept's top rate)."""
    spec = {**STREAM_ROUND, **{k: v for k, v in over.items() if v is not None}}
    spec["m_D"] = min(spec["m_D"], spec["R"])
    return Schedule((hand_round(concept=concept, d=d, **spec),), repeat_last=True)


def _common(f: Any) -> Any:
    opts = [
        click.option("--concept", type=click.Choice(["thresholds", "intervals", "stumps"]), default="thresholds",
                     show_default=True),
        click.option("--d", "dim", type=click.IntRange(min=1), default=2, show_default=True,
                     help="Dimension (stumps)."),
        click.option("--distribution", type=click.Choice(sorted(DISTRIBUTIONS)), default="uniform",
                     show_default=True),
        click.option("--queries", type=click.IntRange(min=1), default=500_000, show_default=True),
        click.option("--batch", type=click.IntRange(min=1), default=None,
                     help="Queries per batch; adaptive streams see each batch's answers [64 adaptive, 4096 else]."),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--c", "c", type=click.IntRange(min=1), default=None,
                     help="Hard cap on a round's tops [from the concept's top rate, docs/halt_budget.md]."),
        click.option("--R", "R", type=click.IntRange(min=1), default=None,
                     help=f"Queries per round [{STREAM_ROUND['R']}]; m_D = min(m_D, R)."),
        click.option("--keep-going", is_flag=True, help="Keep sending after the predictor halts."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def execute(stream_name: str, make: Any, concept: str, dim: int, distribution: str, queries: int, batch: int | None,
            seed: int, c: int | None, R: int | None, keep_going: bool, as_json: bool) -> dict[str, Any]:
    cls = from_spec({"name": concept, "d": dim})
    task = make_task(cls, distribution, seed=seed)
    try:
        sched = default_schedule(concept, dim, c=c, R=R)
    except InvalidSchedule as exc:
        raise click.UsageError(str(exc)) from None
    x, y = task.sample(np.random.default_rng([seed, 0]), sched.initial_size)
    p = Predictor.create(cls, sched, x, y, seed=seed)
    stream: Stream = make(task)
    if batch is None:
        batch = 64 if stream.adaptive else 4096
    rep = run_stream(p, stream, queries, seed=seed, batch=batch, stop_when_halted=not keep_going)
    out = {**rep.to_json(), "stream": stream_name, "concept": concept, "distribution": distribution,
           "seed": seed, "schedule": sched.to_dict(), "n": sched.initial_size}
    if as_json:
        click.echo(json.dumps(out, allow_nan=False))
    else:
        click.echo(f"{stream_name}: {out['queries']:,} queries; halted: {out['halted']}"
                   + (f" after {out['queries_to_halt']:,}" if out["queries_to_halt"] else "")
                   + (f"; paused rounds: {out['paused_rounds']} (first after {out['queries_to_pause']:,} queries)"
                      if out["paused_rounds"] else ""), file=sys.stdout)
        for r in out["rounds"]:
            ef = "-" if r["error_fresh"] is None else f"{r['error_fresh']:.4f}"
            click.echo(f"  round {r['round']}: {r['queries']:,} queries, {r['refused']:,} refused, tops "
                       f"{r['tops_used']}/{r['tops_allowed']}, error on the true distribution {ef}")
    return out


@click.group()
def main() -> None:
    """In-process attack streams against the engine (records for ``everlast report``)."""


@main.command("iid")
@_common
def iid_cmd(**kw: Any) -> None:
    """I.i.d. queries from the named distribution (the honest baseline)."""
    execute("iid", lambda t: IIDStream(t, kw["seed"]), **kw)


@main.command("prober")
@_common
def prober_cmd(**kw: Any) -> None:
    """Adaptive boundary prober: bisection on labels, then queries where the vote is split."""
    execute("prober", lambda t: BoundaryProber(t, kw["seed"]), **kw)


@main.command("drift")
@click.option("--shift", type=float, default=3.0, show_default=True, help="Total shift of the first coordinate.")
@click.option("--horizon", type=click.IntRange(min=1), default=300_000, show_default=True,
              help="Queries over which the shift builds up (linear) or one period (periodic).")
@click.option("--kind", type=click.Choice(["linear", "periodic"]), default="linear", show_default=True)
@_common
def drift_cmd(shift: float, horizon: int, kind: str, **kw: Any) -> None:
    """The query distribution moves over time; accuracy on the current and original distribution."""
    execute("drift", lambda t: DriftStream(t, kw["seed"], total_shift=shift, horizon=horizon, kind=kind), **kw)


@main.command("poisoning")
@click.option("--fraction", type=click.FloatRange(0.0, 1.0), default=0.97, show_default=True,
              help="Share of the queries that are poison.")
@click.option("--side", type=click.Choice(["positive", "negative"]), default="positive", show_default=True)
@click.option("--offset", type=float, default=0.3, show_default=True, help="Quantile distance from the median.")
@_common
def poisoning_cmd(fraction: float, side: str, offset: float, **kw: Any) -> None:
    """Queries concentrated on one side to bias the next round's relabeled set."""
    execute("poisoning", lambda t: PoisoningStream(t, kw["seed"], fraction=fraction, side=side, offset=offset), **kw)


@main.command("recorded")
@click.argument("record", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_common
def recorded_cmd(record: Path, **kw: Any) -> None:
    """Replay a recorded stream (JSON lines or msgpack; adversary_sim.recorded)."""
    execute("recorded", lambda t: RecordedStream(record), **kw)
