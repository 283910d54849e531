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
from cli.simulate import strength
from engine.concepts import from_spec
from engine.planner.fill import hand_round
from engine.schedule import Schedule

# Three rounds of the default design (target-charged) in the demo's 240,000 queries, with the whole
# sample training set in round 1 (lam T = 80,000 of n = 100,000). eps0 is the accuracy floor and
# the hard cap c comes from the thresholds' top rate (engine.planner.fill.hand_round). Many chunks
# of few points (lam = 5) make the certificate about as strong as 10^5 examples allow (a round's
# epsilon scales like sqrt(lam R) / (gamma lam T)): training epsilon ~6.3, queries ~10 -- weak.
SAMPLE_ROUND: dict[str, Any] = {"T": 16_000, "lam": 5, "R": 80_000, "alpha": 0.1, "m_S": 1_000, "m_D": 80_000}


def write_sample(root: Path, n: int, seed: int) -> Path:
    """A training set labeled by a hidden threshold, a schedule, and a config using them."""
    task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=seed)
    x, y = task.sample(np.random.default_rng([seed, 0]), n)
    np.savez(root / "train.npz", x=x, y=y)
    sched = Schedule((hand_round(**SAMPLE_ROUND),), repeat_last=True)  # the default design
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
    click.echo("certified: " + demo_guarantee(g))


def demo_guarantee(g: dict[str, Any]) -> str:
    """The sample's certificate in one honest sentence (weak numbers are called weak)."""

    def part(eps: float | None, what: str) -> str:
        if eps is None or not math.isfinite(eps):
            return f"{what}: no guarantee"
        return f"{what} ({eps:.4g}, {g['delta']:.2g})-DP ({strength(eps)})"

    text = part(g["epsilon_training"], "training set") + "; "
    text += part(g["epsilon_queries"], "queries") if g["query_private"] else \
        "queries: NOT certified under this design (docs/PRIVACY.md)"
    worst = max(x if x is not None else math.inf for x in (g["epsilon_training"], g["epsilon_queries"]))
    if worst > 2:
        text += (" -- a demo round this small cannot certify more; a strong guarantee needs far more "
                 "labeled examples (everlast plan says how many)")
    return text
