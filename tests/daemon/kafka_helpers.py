"""Produce queries and collect label records on the test broker; build daemon configs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from everlast.engine.planner.fill import fill_tests
from everlast.engine.schedule import RoundSpec, Schedule

# Small enough for seconds-long tests, large enough that the planner certifies a (weak, finite)
# training-set guarantee: the daemon refuses schedules that certify none.
SMALL_ROUND = {"T": 2000, "lam": 10, "R": 20_000, "c": 2_000, "eps_bt": 0.8, "delta_bt": 1e-8,
               "alpha": 0.1, "m_S": 400, "m_D": 20_000}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def write_model_files(
    root: Path, model: str, n: int = 20_000, seed: int = 0, round_: dict[str, Any] | None = None
) -> tuple[Path, Path]:
    g = np.random.default_rng(seed)
    x = g.random(n)
    y = (x >= 0.5).astype(int)
    data = root / f"{model}.npz"
    np.savez(data, x=x, y=y)
    sched = root / f"{model}.schedule.json"
    spec = RoundSpec.from_dict(round_ or SMALL_ROUND)
    sched.write_text(json.dumps(Schedule((fill_tests(spec),)).to_dict()))  # the default design
    return data, sched


def write_config(
    root: Path,
    bootstrap: str,
    models: list[str],
    *,
    store: str = "dir",
    every_queries: int = 2_000,
    group: str | None = None,
    topics: dict[str, str] | None = None,
    extra: str = "",
    round_: dict[str, Any] | None = None,
) -> tuple[Path, dict[str, str]]:
    root.mkdir(parents=True, exist_ok=True)
    topics = topics or {
        "queries": unique("q"),
        "labels": unique("l"),
        "dead_letters": unique("dl"),
        "checkpoints": unique("ck"),
    }
    lines = [
        "[broker]",
        f'bootstrap_servers = "{bootstrap}"',
        "[topics]",
        *[f'{k} = "{v}"' for k, v in topics.items()],
        "partitions = 4",
        "[consumer]",
        f'group_id = "{group or unique("g")}"',
        "session_timeout_ms = 2000",
        "heartbeat_interval_ms = 200",
        "fetch_max_wait_ms = 20",
        "max_records = 2000",
        "[checkpoint]",
        f'store = "{store}"',
        f'dir = "{root / "ck"}"',
        f"every_queries = {every_queries}",
        "every_seconds = 1.0",
        "[metrics]",
        "port = 0",
    ]
    for i, m in enumerate(models):
        data, sched = write_model_files(root, m, seed=i, round_=round_)
        lines += ["[[models]]", f'id = "{m}"', f'data = "{data}"', f'schedule = "{sched}"', f"seed = {100 + i}"]
    path = root / "everlast.toml"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path, topics


async def create_topics(bootstrap: str, names: list[str], partitions: int = 4) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(n, partitions, 1) for n in names])
    finally:
        await admin.close()


async def produce(
    bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]
) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=1 << 19)
    await p.start()
    try:
        futs = [await p.send(topic, key=k, value=v, headers=h) for k, v, h in records]
        await asyncio.gather(*futs)
    finally:
        await p.stop()


def query_records(
    model: str, xs: np.ndarray, start_id: int = 0
) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
    return [(model.encode(), msgpack.packb({"id": start_id + i, "x": float(x)}), []) for i, x in enumerate(xs)]


async def collect(bootstrap: str, topic: str, until: int, timeout: float = 60.0, partitions: int = 4) -> list[Any]:
    """All records of ``topic`` from the beginning until ``until`` have arrived (or time out)."""
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20)
    await c.start()
    out: list[Any] = []
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while len(out) < until and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=200, max_records=50_000)
            for recs in batch.values():
                out.extend(recs)
    finally:
        await c.stop()
    return out


def decode_labels(recs: list[Any]) -> list[dict[str, Any]]:
    res = []
    for r in recs:
        ct = dict(r.headers or ()).get("content-type", b"")
        res.append(json.loads(r.value) if ct == b"application/json" else msgpack.unpackb(r.value, raw=False))
    return res


@contextlib.asynccontextmanager
async def running(cfg_path: Path) -> AsyncIterator[dict[str, object]]:
    """The daemon in this event loop; stopped (and awaited) however the test exits."""
    from everlast.daemon.app import serve
    from everlast.daemon.config import load

    status: dict[str, object] = {}
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load(cfg_path), stop, status, handle_signals=False))
    for _ in range(600):  # until the service object exists (or the daemon failed to start)
        if "service" in status or task.done():
            break
        await asyncio.sleep(0.01)
    if task.done():
        task.result()  # raises the start-up error
    try:
        yield status
    finally:
        stop.set()
        try:
            code = await asyncio.wait_for(task, 60)
        except TimeoutError:
            task.cancel()
            raise
        status["exit_code"] = code


async def collect_ids(
    bootstrap: str, topic: str, ids: set[Any], timeout: float = 90.0, partitions: int = 4
) -> list[dict[str, Any]]:
    """Decoded label records of ``topic`` until every id in ``ids`` has one (or time out)."""
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20)
    await c.start()
    out: list[dict[str, Any]] = []
    missing = set(ids)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        deadline = time.monotonic() + timeout
        while missing and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=200, max_records=50_000)
            for recs in batch.values():
                for lab in decode_labels(recs):
                    out.append(lab)
                    missing.discard(lab["id"])
    finally:
        await c.stop()
    return out
