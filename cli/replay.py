"""``everlast replay``: replay a query stream through Kafka against a running daemon."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from everlast.adversary_sim.iid import DISTRIBUTIONS, make_task
from everlast.adversary_sim.kafka_replay import IIDStream, ReplayReport, replay
from everlast.cli.common import emit_json, progress
from everlast.engine.concepts import from_spec


@click.command("replay")
@click.option("--bootstrap-servers", required=True, help="Kafka bootstrap servers of the daemon's broker.")
@click.option("--queries-topic", default="everlast.queries", show_default=True)
@click.option("--labels-topic", default="everlast.labels", show_default=True)
@click.option("--model", required=True, help="Model id (the record key).")
@click.option("--concept", type=click.Choice(["thresholds", "intervals", "stumps"]), default="thresholds",
              show_default=True, help="Concept class of the hidden target that labels the stream.")
@click.option("--d", "dim", type=click.IntRange(min=1), default=2, show_default=True, help="Dimension (stumps).")
@click.option("--distribution", type=click.Choice(sorted(DISTRIBUTIONS)), default="uniform", show_default=True)
@click.option("--stream", "stream_name", type=click.Choice(["iid", "prober", "drift", "poisoning", "recorded"]),
              default="iid", show_default=True,
              help="i.i.d. queries, the adaptive boundary prober (closed loop), drift, poisoning, or a record.")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The recorded stream to replay (JSONL or msgpack; with --stream recorded).")
@click.option("--queries", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--rate", type=float, default=None, help="Target queries per second (default: as fast as possible).")
@click.option("--batch", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
              help="Seconds to wait for the last answers.")
@click.option("--record", "record_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write every query and its answer as JSON lines.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def replay_cmd(bootstrap_servers: str, queries_topic: str, labels_topic: str, model: str, concept: str, dim: int,
               distribution: str, stream_name: str, input_path: Path | None, queries: int, rate: float | None,
               batch: int, seed: int, timeout_s: float, record_path: Path | None, as_json: bool) -> None:
    """Produce queries, match the label records by id, report throughput, latency, statuses, accuracy.
    Adaptive streams (the prober) run closed-loop: each batch waits for its answers."""
    task = make_task(from_spec({"name": concept, "d": dim}), distribution, seed=seed)
    stream = make_stream(stream_name, task, seed, input_path)
    with progress(queries, "replay") as bar:
        rep = asyncio.run(replay(bootstrap_servers, queries_topic, labels_topic, model, stream,
                                 queries, rate=rate, batch=batch, timeout_s=timeout_s,
                                 record=record_path is not None, progress=bar.update))
    if record_path is not None:
        write_record(record_path, rep)
    out = {**rep.to_json(), "model": model, "stream": stream_name, "distribution": distribution, "concept": concept}
    extra = getattr(stream, "report", None)
    if callable(extra):
        out["stream_report"] = extra()
    if as_json:
        emit_json(out)
    else:
        print_summary(out)


def make_stream(name: str, task: Any, seed: int, input_path: Path | None) -> Any:
    """The stream objects of ``adversary_sim`` (the same ones the in-process runs use)."""
    if name == "iid":
        return IIDStream(task, seed)
    if name == "prober":
        from everlast.adversary_sim.prober import BoundaryProber

        return BoundaryProber(task, seed)
    if name == "drift":
        from everlast.adversary_sim.drift import DriftStream

        return DriftStream(task, seed)
    if name == "poisoning":
        from everlast.adversary_sim.poisoning import PoisoningStream

        return PoisoningStream(task, seed)
    if input_path is None:
        raise click.UsageError("--stream recorded needs --input FILE")
    from everlast.adversary_sim.recorded import RecordedStream

    return RecordedStream(input_path)


def write_record(path: Path, rep: ReplayReport) -> None:
    with path.open("w") as f:
        for r in rep.records:
            f.write(json.dumps(r) + "\n")


def print_summary(out: dict[str, object]) -> None:
    lat = out["latency_ms"]
    assert isinstance(lat, dict)
    acc = out["accuracy"]
    qps = out["throughput_qps"]
    click.echo(f"sent {out['sent']:,}, answered {out['answered']:,}, missing {out['missing']:,}")
    click.echo(f"statuses: {out['statuses']}; answers by round: {out['rounds']}")
    click.echo("accuracy against the hidden concept: " + ("-" if acc is None else f"{acc:.4f}"))
    click.echo(("throughput: -" if qps is None else f"throughput: {qps:,.0f} queries/s") +
               (f"; latency p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms" if lat.get("p50") is not None else ""))
