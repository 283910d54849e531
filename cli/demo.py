"""``everlast demo``: the main job end to end on one machine.

Writes a sample model (a synthetic training set and a small explicit schedule), starts the daemon on
the embedded broker, replays an i.i.d. stream through Kafka, and prints a summary of the answers,
the rounds and the guarantee the planner certifies for the sample.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import click
import numpy as np

from adversary_sim.iid import make_task
from adversary_sim.kafka_replay import IIDStream, replay
from cli.common import emit_json, progress
from cli.replay import print_summary
from engine.concepts import from_spec
from engine.planner.fill import fill_tests
from engine.schedule import RoundSpec, Schedule

SAMPLE_ROUND = {"T": 3000, "lam": 20, "R": 80_000, "c": 2_000, "eps_bt": 0.5, "delta_bt": 1e-8,
                "alpha": 0.1, "m_S": 1_000, "m_D": 60_000}


def write_sample(root: Path, n: int, seed: int) -> Path:
    """A training set labeled by a hidden threshold, a schedule, and a config using them."""
    task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=seed)
    x, y = task.sample(np.random.default_rng([seed, 0]), n)
    np.savez(root / "train.npz", x=x, y=y)
    # the default design (noisy halting + private restarts), its tests filled in for this small round
    sched = Schedule((fill_tests(RoundSpec.from_dict(SAMPLE_ROUND)),), repeat_last=True)
    (root / "schedule.json").write_text(json.dumps(sched.to_dict()))
    cfg = root / "everlast.toml"
    cfg.write_text(
        "[broker]\nembedded_port = 0\n"
        "[consumer]\nsession_timeout_ms = 2000\nheartbeat_interval_ms = 200\n"
        f'[checkpoint]\ndir = "{root / "checkpoints"}"\n'
        "[metrics]\nport = 0\n"
        f'[[models]]\nid = "demo"\ndata = "{root / "train.npz"}"\nschedule = "{root / "schedule.json"}"\n'
        f"seed = {seed}\n"
    )
    return cfg


@click.command()
@click.option("--queries", type=click.IntRange(min=1), default=240_000, show_default=True)
@click.option("--n", "n", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Size of the sample training set.")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def demo(queries: int, n: int, seed: int, as_json: bool) -> None:
    """Serve a sample model on the embedded broker and replay a stream through it."""
    from daemon import logs
    from daemon.app import serve
    from daemon.config import load

    logs.setup("text", "WARNING")
    with tempfile.TemporaryDirectory(prefix="everlast-demo-") as tmp:
        cfg = load(write_sample(Path(tmp), n, seed))
        task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=seed)

        async def main() -> dict[str, Any]:
            status: dict[str, Any] = {}
            stop = asyncio.Event()
            served = asyncio.create_task(serve(cfg, stop, status, handle_signals=False))
            while "service" not in status and not served.done():
                await asyncio.sleep(0.01)
            if served.done():
                served.result()
            svc = status["service"]
            try:
                with progress(queries, "demo") as bar:
                    rep = await replay(status["bootstrap"], cfg.topics.queries, cfg.topics.labels, "demo",
                                       IIDStream(task, seed), queries, batch=2000, progress=bar.update)
            finally:
                stop.set()
                await served
            g = svc.models["demo"].guarantee
            return {**rep.to_json(), "guarantee": g.to_json()}

        out = asyncio.run(main())
    if as_json:
        emit_json(out)
        return
    click.echo("everlast demo: the daemon on the embedded broker, a stream replayed through Kafka")
    print_summary(out)
    g = out["guarantee"]
    eps = g["epsilon_training"]
    click.echo(
        "certified: training set "
        + (f"({eps:.4g}, {g['delta']:.2g})-DP" if eps is not None and math.isfinite(eps) else "no guarantee")
        + (" -- weak: a strong guarantee needs ~1e13 labeled examples (everlast plan)" if eps is None or eps > 10
           else "")
        + "; queries: " + ("certified" if g["query_private"] else "NOT certified under this design (docs/PRIVACY.md)")
    )
