"""The availability scenario through a real broker and a real daemon: can one client switch a model
off for the others? (``everlast audit --game availability``.)

``run_clients_kafka`` is ``adversary_sim.availability.run_clients`` over Kafka: named streams take
turns, step by step, each producing its next batch with its name in the client header (as the
operator's gateway would set it) and waiting for the broker's acknowledgement before the next client
produces, so the order of the queries in the log -- hence every answer -- is the same on every run
of a seed; then the step waits for all its answers (adaptive streams see their own). Statuses and
refusal reasons are counted per client (``wire.refusal_code``).

``run_availability`` is the issue's scenario on the compose sample's model (``deploy/compose``: its
training set, schedule, quotas and burn-rate signal): client A runs the boundary prober (docs/AUDITS.md)
(10,000 queries, batches of 100), client B an i.i.d. stream (5,000, batches of 50) at the same time,
against ``everlast serve`` started in this process on the embedded broker (or a given one). With
quotas on, A is refused with ``client-quota`` and B answered in full; with them off, the prober
halts the model for both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from everlast.adversary_sim.availability import Client, Tally
from everlast.adversary_sim.kafka_replay import _partitions
from everlast.daemon.batch import CLIENT_HEADER
from everlast.daemon.wire import refusal_code

COMPOSE = Path(__file__).resolve().parents[1] / "deploy" / "compose"
"""The compose stack's directory in the repository (its sample model is the scenario's)."""
MODEL = "sample"


async def run_clients_kafka(bootstrap: str, queries_topic: str, labels_topic: str, model: str,
                            clients: list[Client], *, header: str = CLIENT_HEADER, timeout_s: float = 60.0,
                            progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Each step, every client with queries left produces its next batch (in client order, each
    acknowledged before the next), then the step waits for every answer. Returns
    ``{"clients": {NAME: {"sent", "ok", "refused", "reasons"}}, "invalid": int}``."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    run = os.urandom(4).hex()
    key = model.encode()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1, max_batch_size=1 << 19)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=10)
    await producer.start()
    await consumer.start()
    stats = {c.name: Tally() for c in clients}
    got: dict[str, dict[str, Any]] = {}
    waiting: set[str] = set()
    arrived = asyncio.Event()
    done = asyncio.Event()
    invalid = 0
    try:
        tps = [TopicPartition(labels_topic, p) for p in await _partitions(consumer, labels_topic, attempts=200)]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:  # fix the positions now: later records belong to this run
            await consumer.position(tp)

        async def consume() -> None:
            while not done.is_set():
                res = await consumer.getmany(timeout_ms=50, max_records=50_000)
                for recs in res.values():
                    for r in recs:
                        if r.key != key:
                            continue
                        lab = msgpack.unpackb(r.value, raw=False)
                        qid = lab.get("id") if isinstance(lab, dict) else None
                        if isinstance(qid, str) and qid.startswith(run) and qid in waiting:
                            got[qid] = lab
                            waiting.discard(qid)
                if not waiting:
                    arrived.set()

        task = asyncio.create_task(consume())
        parts = sorted(await producer.partitions_for(queries_topic))
        part = int(producer._partitioner(key, parts, parts))
        while True:
            step = [(c, min(c.batch, c.queries - stats[c.name].sent)) for c in clients]
            step = [(c, n) for c, n in step if n > 0]
            if not step:
                break
            ids: list[list[str]] = []
            arrived.clear()
            for c, n in step:
                x = np.asarray(c.stream.next_batch(n)[0], dtype=np.float64)
                mine = [f"{run}-{c.name}-{stats[c.name].sent + k}" for k in range(n)]
                waiting.update(mine)
                ids.append(mine)
                b = producer.create_batch()
                hdr = [(header, c.name.encode())]
                for qid, xv in zip(mine, x.tolist(), strict=True):
                    value = msgpack.packb({"id": qid, "x": xv})
                    if b.append(key=key, value=value, timestamp=None, headers=hdr) is None:
                        await (await producer.send_batch(b, queries_topic, partition=part))
                        b = producer.create_batch()
                        b.append(key=key, value=value, timestamp=None, headers=hdr)
                await (await producer.send_batch(b, queries_topic, partition=part))  # acknowledged: ordered
            await asyncio.wait_for(arrived.wait(), timeout_s)
            for (c, n), mine in zip(step, ids, strict=True):
                s = stats[c.name]
                s.sent += n
                labels = []
                for qid in mine:
                    lab = got.pop(qid)
                    st = lab.get("status")
                    if st == "ok":
                        s.ok += 1
                        labels.append(int(lab["label"]))
                        continue
                    labels.append(-1)
                    if st == "invalid":
                        invalid += 1
                        continue
                    s.refused += 1
                    code = refusal_code(lab.get("reason"))
                    s.reasons[code] = s.reasons.get(code, 0) + 1
                if c.stream.adaptive:
                    c.stream.observe(np.asarray(labels, dtype=np.int8))
                if progress is not None:
                    progress(n)
        done.set()
        await task
    finally:
        done.set()
        await producer.stop()
        await consumer.stop()
    return {"clients": {k: v.to_json() for k, v in stats.items()}, "invalid": invalid}


def sample_model(quotas: bool, model_id: str = MODEL) -> dict[str, Any]:
    """The compose sample's ``[[models]]`` entry (deploy/compose/everlast.toml), paths made absolute,
    under the id ``model_id``; without its quotas when ``quotas`` is false."""
    raw = tomllib.loads((COMPOSE / "everlast.toml").read_text())
    m = dict(next(m for m in raw["models"] if m["id"] == MODEL), id=model_id)
    for k in ("data", "schedule"):
        m[k] = str(COMPOSE / m[k])
    if not quotas:
        m.pop("quotas", None)
    return m


def _toml(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def write_config(root: Path, models: list[dict[str, Any]], bootstrap: str | None, seed: int) -> Path:
    """A daemon configuration for the scenario: the models (``[[models]]`` entries, each given the
    seed), their own topics and checkpoints, metrics on any free port, the embedded broker on any
    free port unless ``bootstrap`` is given."""
    from everlast.daemon.broker import free_port

    tag = os.urandom(4).hex()
    broker = [f'bootstrap_servers = "{bootstrap}"'] if bootstrap else [f"embedded_port = {free_port()}"]
    lines = ["[broker]", *broker, "[topics]", f'queries = "availability.queries.{tag}"',
             f'labels = "availability.labels.{tag}"', f'dead_letters = "availability.dead-letters.{tag}"',
             "[consumer]", f'group_id = "availability-{tag}"', "fetch_max_wait_ms = 5", "session_timeout_ms = 6000",
             "heartbeat_interval_ms = 500", "[checkpoint]", f'dir = "{root / "checkpoints"}"', "journal = false",
             "[metrics]", 'host = "127.0.0.1"', "port = 0", "[log]", 'level = "WARNING"']
    for m in models:
        lines += ["[[models]]", *[f"{k} = {_toml(v)}" for k, v in m.items()], f"seed = {seed}"]
    path = root / "everlast.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


class _QuotaLines(logging.Handler):
    """The daemon's log lines that name a client whose quota fired (what an operator reads)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.clients: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        who = getattr(record, "everlast_client", None)
        if isinstance(who, str):
            self.clients.append(who.rsplit(" (offset", 1)[0])


async def run_availability(*, quotas: bool = True, seed: int = 0, bootstrap: str | None = None,
                           queries_a: int = 10_000, queries_b: int = 5_000,
                           progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """The scenario (module docstring) against a daemon started here; returns the audit's JSON."""
    from everlast.adversary_sim.iid import make_task
    from everlast.adversary_sim.prober import BoundaryProber
    from everlast.adversary_sim.streams import IIDStream
    from everlast.daemon.app import serve
    from everlast.daemon.config import load
    from everlast.engine.concepts import from_spec
    from everlast.engine.phases import Phase

    model = sample_model(quotas)
    task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=seed)
    clients = [Client("A", BoundaryProber(task, seed), 100, queries_a),
               Client("B", IIDStream(task, seed + 1), 50, queries_b)]
    lines = _QuotaLines()
    daemon_log = logging.getLogger("everlast.daemon")
    daemon_log.addHandler(lines)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="everlast-availability-") as tmp:
        cfg = load(write_config(Path(tmp), [model], bootstrap, seed))
        stop = asyncio.Event()
        status: dict[str, Any] = {}
        daemon = asyncio.create_task(serve(cfg, stop, status, handle_signals=False))
        try:
            svc = await _ready(daemon, status)
            out = await run_clients_kafka(str(status["bootstrap"]), cfg.topics.queries, cfg.topics.labels, MODEL,
                                          clients, header=cfg.consumer.client_header, progress=progress)
            served = next(m for p in svc.procs.values() for m in p.models.values() if m.id == MODEL)
            info = served.engine.round_info()
            sched = svc.models[MODEL].schedule
            windows, noisy = served.burn.of_round(served.round)
            out.update({
                "game": "availability", "model": MODEL, "seed": seed,
                "quotas": model.get("quotas"), "burn": model.get("burn"),
                "halted": served.phase is Phase.HALTED, "paused": served.phase is Phase.PAUSED,
                "round": served.round,
                "quota_fired": lines.clients,
                "burn_noisy_tops": noisy if sched is not None and sched.burn is not None else None,
                "burn_queries": windows * sched.burn.window if sched is not None and sched.burn is not None else None,
                "halt_budget": info.halt_cap if info is not None else None,
                "halt_threshold": sched.spec(served.round).halt_threshold if sched is not None else None,
                "guarantee": svc.models[MODEL].guarantee.to_json(),
            })
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(daemon, 60)
            daemon_log.removeHandler(lines)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


async def _ready(daemon: asyncio.Task[int], status: dict[str, Any], timeout_s: float = 120.0) -> Any:
    """The service once it serves (its partitions assigned, the model restored or created)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if daemon.done():
            daemon.result()  # raises the daemon's error
            raise RuntimeError("the daemon stopped before it was ready")
        svc = status.get("service")
        if svc is not None and svc.ready() and any(MODEL in p.models for p in svc.procs.values()):
            return svc
        await asyncio.sleep(0.1)
    raise TimeoutError(f"the daemon was not ready within {timeout_s:.0f}s")
