"""``everlast replay``: replay a query stream through Kafka against a running daemon."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click
import numpy as np

from everlast.adversary_sim.iid import DISTRIBUTIONS, make_task
from everlast.adversary_sim.kafka_replay import IIDStream, ReplayReport, replay
from everlast.cli.common import emit_json, progress
from everlast.engine.concepts import from_spec


@click.command("replay")
@click.option("--bootstrap-servers", required=True, help="Kafka bootstrap servers of the daemon's broker.")
@click.option("--queries-topic", default="everlast.queries", show_default=True)
@click.option("--labels-topic", default="everlast.labels", show_default=True)
@click.option("--model", required=True, help="Model id (the record key).")
@click.option("--concept", type=click.Choice(["thresholds", "intervals", "stumps", "trees"]), default="thresholds",
              show_default=True, help="Concept class of the model (its queries' shape) and of the hidden target that "
                                      "labels the stream; trees (the private learner's depth-k trees on R^d) are "
                                      "replayed with a stump target on R^d, which every tree can represent.")
@click.option("--d", "dim", type=click.IntRange(min=1), default=2, show_default=True,
              help="Dimension (stumps, trees).")
@click.option("--distribution", type=click.Choice(sorted(DISTRIBUTIONS)), default="uniform", show_default=True)
@click.option("--stream", "stream_name", type=click.Choice(["iid", "prober", "drift", "poisoning", "recorded"]),
              default="iid", show_default=True,
              help="i.i.d. queries, the adaptive boundary prober (closed loop; it HALTS the model for good: "
                   "use a throwaway model), drift, poisoning, or a record.")
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The recorded stream to replay (JSONL or msgpack; with --stream recorded).")
@click.option("--queries", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Offered queries per second, paced in ticks of 10 ms: latency is then measured at this rate "
                   "[default: as fast as possible: latency then measures the queue the burst builds].")
@click.option("--format", "fmt", type=click.Choice(["json", "msgpack"]), default="json", show_default=True,
              help="Query format (the labels come back in it): JSON keeps the labels topic readable by kcat and "
                   "other JSON consumers; msgpack is the daemon's fastest path.")
@click.option("--batch", type=click.IntRange(min=1), default=1000, show_default=True)
@click.option("--client", default=None, metavar="NAME",
              help="Send every query with the record header everlast-client: NAME, as an operator's gateway would "
                   "(the model's per-client quotas count it as client NAME) [default: no header, the anonymous "
                   "client].")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--timeout", "timeout_s", type=float, default=120.0, show_default=True,
              help="Seconds to wait without a new answer before the missing ones are counted as missing.")
@click.option("--record", "record_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write every query and its answer as JSON lines.")
@click.option("--truth", default=None, metavar="CONCEPT|FILE",
              help="What your model should answer, to report its real accuracy: the target concept's parameters "
                   "(thresholds: T, meaning 1[x >= T]; intervals: A,B; stumps: J,T, meaning 1[x_J >= T]) labelling "
                   "the stream, or a labelled file (CSV/NPZ/Parquet as a training set) whose points are replayed "
                   "and whose labels are the truth. Without it, accuracy is against the replay's own synthetic "
                   "concept, and the output says so.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def replay_cmd(bootstrap_servers: str, queries_topic: str, labels_topic: str, model: str, concept: str, dim: int,
               distribution: str, stream_name: str, input_path: Path | None, queries: int, rate: float | None,
               fmt: str, batch: int, client: str | None, seed: int, timeout_s: float, record_path: Path | None,
               truth: str | None, as_json: bool) -> None:
    """Produce queries, match the label records by id, report throughput, latency, statuses, accuracy.
    Adaptive streams run closed-loop: each batch waits for its answers. The prober (--stream prober)
    hunts the decision boundary until the model halts: point it only at a throwaway model (a halted
    model refuses every query, for good)."""
    cc = from_spec({"name": "stumps" if concept == "trees" else concept, "d": dim})  # trees: points of R^d
    task = make_task(cc, distribution, seed=seed)
    against = synthetic_note(task)
    stream: Any
    if truth is not None and Path(truth).is_file():
        if stream_name not in ("iid",):
            raise click.UsageError("--truth FILE replays the file's points: it takes no --stream")
        stream, against = labelled_stream(Path(truth), cc)
        queries = min(queries, int(stream.x.shape[0]))
    else:
        if truth is not None:
            task, against = truth_task(truth, task)
        stream = make_stream(stream_name, task, seed, input_path)
        if stream_name == "recorded":
            against = f"the labels (y) recorded in {input_path.name if input_path else 'the record'}"
    with progress(queries, "replay") as bar:
        rep = asyncio.run(replay(bootstrap_servers, queries_topic, labels_topic, model, stream,
                                 queries, rate=rate, batch=batch, timeout_s=timeout_s,
                                 record=record_path is not None, progress=bar.update, fmt=fmt, client=client))
    if record_path is not None:
        write_record(record_path, rep)
    out = {**rep.to_json(), "model": model, "stream": stream_name, "distribution": distribution, "concept": concept,
           "offered_rate_qps": rate, "format": fmt, "client": client,
           "accuracy_against": against, "accuracy_is_the_models": truth is not None or stream_name == "recorded"}
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


def synthetic_note(task: Any) -> str:
    params = ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}" for k, v in task.target.items())
    return (f"the replay's synthetic {task.concept.name} concept ({params}: the {task.distribution} distribution's "
            "median), not necessarily your model's: give --truth for its real accuracy")


def truth_task(truth: str, task: Any) -> tuple[Any, str]:
    """The stream's task with the user's concept as its labels (``--truth`` parameters)."""
    from everlast.adversary_sim.iid import Task

    name = task.concept.name
    try:
        vals = [float(v) for v in truth.split(",")]
    except ValueError:
        raise click.UsageError(f"--truth {truth!r} is neither a file nor numbers") from None
    if not all(np.isfinite(vals)):
        raise click.UsageError("--truth needs finite numbers")
    if name == "thresholds" and len(vals) == 1:
        target: dict[str, Any] = {"t": vals[0]}
        said = f"your concept 1[x >= {vals[0]:g}]"
    elif name == "intervals" and len(vals) == 2 and vals[0] <= vals[1]:
        target = {"a": vals[0], "b": vals[1]}
        said = f"your concept 1[{vals[0]:g} <= x <= {vals[1]:g}]"
    elif name == "stumps" and len(vals) == 2 and float(vals[0]).is_integer() and 0 <= vals[0] < task.concept.point_dim:
        target = {"j": int(vals[0]), "s": 1, "t": vals[1]}
        said = f"your concept 1[x_{int(vals[0])} >= {vals[1]:g}]"
    else:
        want = {"thresholds": "T", "intervals": "A,B (A <= B)", "stumps": "J,T (J a coordinate index)"}[name]
        raise click.UsageError(f"--truth for {name} takes {want}, or a labelled file")
    return Task(task.concept, task.distribution, target), said


def labelled_stream(path: Path, cc: Any) -> tuple[Any, str]:
    from everlast.adversary_sim.kafka_replay import LabelledStream
    from everlast.daemon.data import load_training
    from everlast.daemon.errors import ConfigError
    from everlast.engine.concepts.base import check_labels
    from everlast.engine.errors import EngineError

    try:
        x, y = load_training(path)
        xs = cc.validate_points(x, "truth")
        ys = check_labels(y, int(xs.shape[0]))
    except (ConfigError, EngineError) as exc:
        raise click.UsageError(f"--truth {path.name}: {exc}") from None
    return LabelledStream(xs, ys), f"the labels of {path.name} (its {xs.shape[0]:,} points replayed in order)"


def write_record(path: Path, rep: ReplayReport) -> None:
    with path.open("w") as f:
        for r in rep.records:
            f.write(json.dumps(r) + "\n")


def print_summary(out: dict[str, object]) -> None:
    lat = out["latency_ms"]
    assert isinstance(lat, dict)
    acc = out["accuracy"]
    qps = out["throughput_qps"]
    rate = out.get("offered_rate_qps")
    click.echo(f"sent {out['sent']:,}, answered {out['answered']:,}, missing {out['missing']:,}")
    click.echo(f"statuses: {out['statuses']}; answers by round: {out['rounds']}")
    click.echo("accuracy: " + ("-" if acc is None else f"{acc:.4f}") + f" against {out.get('accuracy_against', '?')}")
    if qps is None:
        return
    p = (f"latency p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms" if lat.get("p50") is not None else "")
    sent = out.get("sent_qps")
    if isinstance(rate, int | float):
        click.echo(f"at an offered rate of {rate:,.0f} queries/s: answered {qps:,.0f} queries/s; {p} (query sent to "
                   "label read, through the broker)")
        if isinstance(sent, int | float) and sent < 0.9 * rate:
            click.echo(f"note: the client sent only {sent:,.0f} queries/s, short of the rate (is the machine busy? "
                       "`uptime`): these figures measure the machine as much as the daemon")
    else:
        click.echo(f"answered {qps:,.0f} queries/s, sent as fast as the client could: {p}, which measures the "
                   "queue that burst built; give --rate for latency at a stated rate")
