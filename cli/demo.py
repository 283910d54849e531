"""``everlast demo``: the main job end to end on one machine, both mechanisms side by side.

Writes two sample models of the same task (a hidden threshold): GenericBBL (``demo``: a synthetic
training set and a small explicit schedule) and the generic private learner (``demo-learner``:
the planner's n for epsilon = 1, alpha = 0.1, a few thousand examples, docs/privacy/learner.md).
Starts the daemon on the embedded broker, replays the same i.i.d. stream through Kafka to both at a
paced rate (latency is measured at that stated rate), and prints, for each, a summary of the
answers and the guarantee it certifies.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click
import numpy as np

from everlast.adversary_sim.iid import make_task
from everlast.adversary_sim.kafka_replay import IIDStream, replay
from everlast.cli.common import emit_json, progress
from everlast.cli.guarantee import strength
from everlast.cli.replay import print_summary
from everlast.engine.concepts import from_spec
from everlast.engine.planner.fill import hand_round
from everlast.engine.schedule import Schedule

# Three rounds of the default design (target-charged) in the demo's 240,000 queries, with the whole
# sample training set in round 1 (lam T = 80,000 of n = 100,000). eps0 is the accuracy floor and
# the hard cap c comes from the thresholds' top rate (engine.planner.fill.hand_round). Many chunks
# of few points (lam = 5) make the certificate about as strong as 10^5 examples allow (a round's
# epsilon scales like sqrt(lam R) / (gamma lam T)): training epsilon ~0.49, queries ~2.1.
SAMPLE_ROUND: dict[str, Any] = {"T": 16_000, "lam": 5, "R": 80_000, "alpha": 0.1, "m_S": 1_000, "m_D": 80_000}


RATE = 20_000.0
"""Queries per second the demo offers each model: well within what one 2-core machine serves (the
daemon's capacity is `python -m bench.e2e`'s figure), so its latency is the service's, not a queue's."""

LEARNER = "demo-learner"
LEARNER_EPSILON = 1.0
TREES = "demo-trees"
"""The same learner data served as depth-3 trees on R^1 (docs/privacy/learner.md 8)."""


def planner_learner_n(epsilon: float = LEARNER_EPSILON, alpha: float = 0.1) -> int:
    """The planner's n for the private learner (thresholds on all finite doubles, Theorem L2: the demo's
    labels come from a threshold, so the realizable bound applies)."""
    from everlast.engine.planner import Targets
    from everlast.engine.planner.mechanisms import learner_cost

    n = learner_cost(Targets(epsilon=epsilon, alpha=alpha), guarantee="realizable").n_required
    assert n is not None
    return n


def write_sample(root: Path, n: int, seed: int, n_learner: int | None = None, broker_port: int = 0,
                 metrics_port: int = 0) -> Path:
    """Training sets labeled by a hidden threshold, a schedule, and a config using them: GenericBBL's
    model ``demo`` and, with ``n_learner``, the private learner's ``demo-learner`` (its own
    examples of the same task; its fit draws OS entropy: the learner takes no seed)."""
    task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=seed)
    x, y = task.sample(np.random.default_rng([seed, 0]), n)
    np.savez(root / "train.npz", x=x, y=y)
    learner = ""
    if n_learner is not None:
        xl, yl = task.sample(np.random.default_rng([seed, 1]), n_learner)
        np.savez(root / "learner.npz", x=xl, y=yl)
        learner = (f'[[models]]\nid = "{LEARNER}"\ndata = "{root / "learner.npz"}"\nmechanism = "private-learner"\n'
                   f"learner = {{ epsilon = {LEARNER_EPSILON} }}\n"
                   f'[[models]]\nid = "{TREES}"\ndata = "{root / "learner.npz"}"\nmechanism = "private-learner"\n'
                   f'concept = "trees"\nd = 1\ndepth = 3\nlearner = {{ epsilon = {LEARNER_EPSILON} }}\n')
    sched = Schedule((hand_round(**SAMPLE_ROUND),), repeat_last=True)  # the default design
    (root / "schedule.json").write_text(json.dumps(sched.to_dict()))
    cfg = root / "everlast.toml"
    cfg.write_text(
        f"[broker]\nembedded_port = {broker_port}\n"
        "[consumer]\nsession_timeout_ms = 2000\nheartbeat_interval_ms = 200\n"
        f'[checkpoint]\ndir = "{root / "checkpoints"}"\n'
        f"[metrics]\nport = {metrics_port}\n"
        f'[[models]]\nid = "demo"\ndata = "{root / "train.npz"}"\nschedule = "{root / "schedule.json"}"\n'
        f"seed = {seed}\n" + learner
    )
    return cfg


@click.command()
@click.option("--queries", type=click.IntRange(min=1), default=240_000, show_default=True,
              help="Queries replayed to each model (the same stream to both).")
@click.option("--n", "n", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="Size of GenericBBL's sample training set.")
@click.option("--learner-n", type=click.IntRange(min=1), default=None,
              help="Size of the private learner's training set [default: the planner's realizable n for "
                   "epsilon = 1, alpha = 0.1 (2,229; the sample's labels come from a threshold)].")
@click.option("--seed", type=int, default=1, show_default=True,
              help="Seed of the task, the streams and GenericBBL's sample (the learner's fit draws OS entropy).")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=RATE, show_default=True,
              help="Queries per second offered to each model (both at once), paced: the latency printed is "
                   "measured at this rate.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def demo(queries: int, n: int, learner_n: int | None, seed: int, rate: float, as_json: bool) -> None:
    """Serve GenericBBL and the private learner on the embedded broker; replay one stream to both."""
    from everlast.daemon.app import prepare_models
    from everlast.daemon.broker import free_port
    from everlast.daemon.config import load

    n_learner = learner_n if learner_n is not None else planner_learner_n()
    with tempfile.TemporaryDirectory(prefix="everlast-demo-") as tmp:
        root = Path(tmp)
        broker_port, metrics_port = free_port(), free_port()
        path = write_sample(root, n, seed, n_learner, broker_port, metrics_port)
        cfg = load(path)
        models = prepare_models(cfg)  # the certificates the daemon prints at start (planned the same way)
        task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=seed)
        # the daemon in its own process, as it runs in production: the replay client does not share its CPU
        daemon = start_daemon(path, root)
        try:
            wait_ready(daemon, metrics_port, root)

            async def main() -> list[Any]:
                with progress(3 * queries, "demo") as bar:
                    # the same seed: the same i.i.d. stream to every model, replayed concurrently
                    return list(await asyncio.gather(*(
                        replay(f"127.0.0.1:{broker_port}", cfg.topics.queries, cfg.topics.labels, model,
                               IIDStream(task, seed), queries, rate=rate, batch=2000, progress=bar.update)
                        for model in ("demo", LEARNER, TREES))))

            reps = asyncio.run(main())
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(60)
            except subprocess.TimeoutExpired:
                daemon.kill()
        against = (f"the demo's hidden threshold (1[x >= {task.target['t']:.4g}]), which labelled both "
                   "models' training sets: their real accuracy")
        out: dict[str, Any] = {**reps[0].to_json(), "guarantee": models["demo"].guarantee.to_json(),
                               "n_train": n, "accuracy_against": against, "offered_rate_qps": rate}
        out["learner"] = {**reps[1].to_json(), "guarantee": models[LEARNER].guarantee.to_json(),
                          "n_train": n_learner, "model": LEARNER, "accuracy_against": against,
                          "offered_rate_qps": rate}
        out["trees"] = {**reps[2].to_json(), "guarantee": models[TREES].guarantee.to_json(),
                        "n_train": n_learner, "model": TREES, "accuracy_against": against,
                        "offered_rate_qps": rate}
    if as_json:
        emit_json(out)
        return
    click.echo("everlast demo: three models on the embedded broker, the same i.i.d. stream replayed through Kafka "
               "to each\n")
    click.echo(side_by_side(out) + "\n")
    click.echo(f"GenericBBL (model demo, n = {n:,}):")
    print_summary(out)
    click.echo("certified: " + demo_guarantee(out["guarantee"]) + "\n")
    lo = out["learner"]
    click.echo(f"Private learner (model {LEARNER}, n = {n_learner:,}):")
    print_summary(lo)
    click.echo("certified: " + learner_guarantee(lo["guarantee"]) + "\n")
    tr = out["trees"]
    click.echo(f"Private learner, depth-3 trees (model {TREES}, the same n = {n_learner:,}):")
    print_summary(tr)
    click.echo("certified: " + learner_guarantee(tr["guarantee"]) + "\n")
    click.echo(f"Throughput above is what each model answered while the replay offered it {rate:,.0f} queries/s "
               "(the three models at once, the replay client on the same machine): it shows the daemon keeping up, not "
               "its capacity. The capacity is `python -m bench.e2e`'s figure (the daemon against a raw Kafka "
               "pass-through on the same broker); `--rate` sets the offered rate.")


def start_daemon(config: Path, root: Path) -> subprocess.Popen[bytes]:
    """``everlast serve`` as a child process (its log in ``root/serve.log``, warnings and up)."""
    env = {**os.environ, "EVERLAST_LOG__LEVEL": "WARNING", "EVERLAST_RUN_DIR": str(root / "run")}
    with (root / "serve.log").open("wb") as log:
        return subprocess.Popen([sys.executable, "-m", "everlast.cli", "serve", "--config", str(config)],
                                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)


def wait_ready(daemon: subprocess.Popen[bytes], port: int, root: Path, timeout_s: float = 120.0) -> None:
    import time
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon.poll() is not None:
            raise click.ClickException("the daemon stopped at start:\n" + (root / "serve.log").read_text()[-3000:])
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
                if r.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise click.ClickException(f"the daemon was not ready in {timeout_s:.0f} s")


def side_by_side(out: dict[str, Any]) -> str:
    """Both mechanisms in one table: data, certificates, what the stream saw."""

    def eps(v: float | None, d: float) -> str:
        return "none" if v is None or not math.isfinite(v) else f"({v:.3g}, {d:.2g})"

    def row(name: str, n: int, r: dict[str, Any]) -> str:
        g = r["guarantee"]
        acc = "-" if r["accuracy"] is None else f"{r['accuracy']:.4f}"
        refused = r["statuses"].get("refused", 0)
        q = eps(g["epsilon_queries"], g["delta"]) if g["query_private"] else "not certified"
        return (f"| {name} | {n:,} | {eps(g['epsilon_training'], g['delta'])} | {q} | {acc} | "
                f"{r['answered']:,} | {refused:,} |")

    return "\n".join([
        "| mechanism | n | training (eps, delta) | queries (eps, delta) | accuracy | answered | refused |",
        "|---|---|---|---|---|---|---|",
        row("generic-bbl", out["n_train"], out),
        row("private-learner", out["learner"]["n_train"], out["learner"]),
        *([row("private-learner, trees", out["trees"]["n_train"], out["trees"])] if "trees" in out else []),
    ])


def learner_guarantee(g: dict[str, Any]) -> str:
    """The private learner's certificate in one sentence (docs/privacy/learner.md)."""
    eps = g["epsilon_training"]
    p = f"with probability >= {1 - g['beta']:.3g}"
    acc = f"error <= {g['alpha_proven']:.3g} {p}" if g["alpha_proven"] < 1.0 else "no accuracy proven at this n"
    exc = g["agnostic_excess"]
    agn = (f"error <= {g['agnostic_comparator']} + {exc:.3g} {p}" if exc < 1.0 else
           f"error <= {g['agnostic_comparator']} + {exc:.3g}, vacuous at this n")
    return (f"training set ({eps:.4g}, 0)-DP ({strength(eps)}; {g['claim']}); queries (0, 0)-DP (each answer "
            f"depends only on the released hypothesis and its own query); no rounds, never halts; accuracy, "
            f"realizable ({g['accuracy_theorem']}, only if {g['realizable_if']}): {acc}; agnostic "
            f"({g['agnostic_theorem']}, every distribution): {agn}; both for training examples drawn i.i.d. from "
            "the distribution the queries come from. Inputs must be floats: on inputs of unbounded precision "
            "only GenericBBL applies.")


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
