"""The crash-recovery target: kill -9 a daemon on its embedded broker mid-stream (the broker dies with it and
comes back empty), restart it: no model is suspended; every query it processed after its last
checkpoint, whose label the broker lost, is answered again from the journal with the bytes first
published (a consumer that read the labels live checks them); the models continue exactly (the
GenericBBL model's answers before and after the kill are an uninterrupted run's); new queries are
answered. For a GenericBBL model and a private-learner model on one daemon."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from everlast.daemon.broker import free_port
from everlast.daemon.checkpoint.blobs import DirStore
from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.engine.learner import PrivateLearner
from tests.daemon.daemon_process import Daemon
from tests.daemon.kafka_helpers import write_model_files
from tests.daemon.test_e2e import reference
from tests.daemon.test_lifecycle import metric, scrape

pytestmark = [pytest.mark.broker, pytest.mark.asyncio, pytest.mark.slow]

MODELS = ("g", "l")
SENT = 30_000
"""Queries per model in the stream the kill interrupts."""
KILL_AT = 24_000
"""Labels of each model the live consumer has read when the daemon is killed (the stream goes on)."""
NEW = 2_000


def configure(root: Path) -> Daemon:
    root.mkdir(parents=True, exist_ok=True)
    d = Daemon(root, free_port(), free_port(), root / "run")
    data, sched = write_model_files(root, "g", seed=0)
    g = np.random.default_rng(5)
    x = g.random(3_000)
    np.savez(root / "l.npz", x=x, y=(x >= 0.37).astype(int))
    (root / "everlast.toml").write_text(
        f"[broker]\nembedded_port = {d.port}\n"
        "[consumer]\nsession_timeout_ms = 2000\nheartbeat_interval_ms = 200\n"
        # checkpoints by count only (and at a round's end): the kill lands thousands of answers past one
        f'[checkpoint]\ndir = "{root / "checkpoints"}"\nevery_queries = 10000\nevery_seconds = 3600\n'
        f"[metrics]\nport = {d.metrics_port}\n"
        f'[[models]]\nid = "g"\ndata = "{data}"\nschedule = "{sched}"\nseed = 100\n'
        f'[[models]]\nid = "l"\ndata = "{root / "l.npz"}"\nmechanism = "private-learner"\n'
        "learner = { epsilon = 1.0 }\n"
    )
    return d


async def start(d: Daemon) -> None:
    await asyncio.to_thread(d.start, 120.0)


class Reader:
    """Reads the labels topic from the beginning, live; keeps each id's first bytes per model."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.seen: dict[str, dict[int, bytes]] = {m: {} for m in MODELS}
        self.task: asyncio.Task[None] | None = None

    async def run(self) -> None:
        c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20,
                             request_timeout_ms=5_000, retry_backoff_ms=100)
        await c.start()
        try:
            tps = [TopicPartition("everlast.labels", p) for p in range(4)]
            c.assign(tps)
            await c.seek_to_beginning(*tps)
            while True:
                for recs in (await c.getmany(timeout_ms=50, max_records=50_000)).values():
                    for r in recs:
                        lab = msgpack.unpackb(r.value)
                        self.seen[r.key.decode()].setdefault(lab["id"], r.value)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(c.stop(), 5)

    def __enter__(self) -> Reader:
        self.task = asyncio.create_task(self.run())
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.task is not None
        self.task.cancel()


async def produce_paced(bootstrap: str, xs: dict[str, np.ndarray], start_id: int, stop: asyncio.Event,
                        per_tick: int = 250) -> None:
    """Both models' queries, ``per_tick`` each every 50 ms (5,000/s per model), until done or ``stop``."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, request_timeout_ms=5_000)
    await p.start()
    try:
        n = len(next(iter(xs.values())))
        for i in range(0, n, per_tick):
            if stop.is_set():
                return
            for m in MODELS:
                parts = sorted(await p.partitions_for("everlast.queries"))
                part = p._partitioner(m.encode(), parts, parts)
                b = p.create_batch()
                for k in range(i, min(n, i + per_tick)):
                    v = msgpack.packb({"id": start_id + k, "x": float(xs[m][k])})
                    if b.append(key=m.encode(), value=v, timestamp=None) is None:  # full: send it, start another
                        await p.send_batch(b, "everlast.queries", partition=part)
                        b = p.create_batch()
                        b.append(key=m.encode(), value=v, timestamp=None)
                await p.send_batch(b, "everlast.queries", partition=part)
            await asyncio.sleep(0.05)
    except Exception:
        if not stop.is_set():
            raise
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(p.stop(), 5)


async def test_kill_9_on_the_embedded_broker_recovers_from_the_journal(tmp_path: Path) -> None:
    d = configure(tmp_path)
    g = np.random.default_rng(27)
    xs = {m: g.random(SENT) for m in MODELS}
    new = {m: g.random(NEW) for m in MODELS}
    await start(d)
    stop = asyncio.Event()
    with Reader(d.bootstrap) as live:
        producer = asyncio.create_task(produce_paced(d.bootstrap, xs, 0, stop))
        deadline = time.monotonic() + 120
        while min(len(live.seen[m]) for m in MODELS) < KILL_AT and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert not producer.done(), "the stream ended before the kill: not mid-stream"
        assert d.proc is not None
        d.proc.send_signal(signal.SIGKILL)  # the embedded broker dies with it (parent-death signal)
        d.proc.wait()
        d.proc = None
        stop.set()
        await producer
    before = live.seen
    assert all(len(before[m]) >= KILL_AT for m in MODELS)

    await start(d)  # ready: the journal is replayed, its labels acknowledged by the new broker
    try:
        with Reader(d.bootstrap) as after:
            await asyncio.sleep(1.0)
            republished = {m: dict(after.seen[m]) for m in MODELS}
            await produce_paced(d.bootstrap, new, 1_000_000, asyncio.Event(), per_tick=1_000)
            deadline = time.monotonic() + 120
            while (min(sum(1 for i in after.seen[m] if i >= 1_000_000) for m in MODELS) < NEW
                   and time.monotonic() < deadline):
                await asyncio.sleep(0.05)
            later = after.seen
        status, text = await asyncio.to_thread(scrape, d.metrics_port)
        ready = await asyncio.to_thread(scrape, d.metrics_port, "/readyz")
    finally:
        assert d.stop() == 0, d.log()[-3000:]
    log = d.log()
    assert status == 200 and ready[0] == 200, ready
    for m in MODELS:
        assert metric(text, "everlast_model_suspended", model=m) == 0, m
    assert "suspended" not in log and "ERROR" not in log, log[-3000:]
    assert metric(text, "everlast_log_resets_total") == 0  # the embedded broker's empty log is expected

    for m in MODELS:
        again, first = republished[m], before[m]
        assert again, f"{m}: no label published again from the journal"
        consumed = max(first.keys() | again.keys())
        lo = min(again)
        # the journal holds everything since the last checkpoint: a contiguous run up to the last query consumed
        assert sorted(again) == list(range(lo, consumed + 1)), m
        same = again.keys() & first.keys()
        assert same and all(again[i] == first[i] for i in same), f"{m}: a label published again differs"
        print(f"{m}: read live {len(first):,}, published again {len(again):,} (ids {lo:,}-{consumed:,}), "
              f"{len(again.keys() - first.keys()):,} of them never read before the kill")
        fresh = {i - 1_000_000: msgpack.unpackb(v) for i, v in later[m].items() if i >= 1_000_000}
        assert len(fresh) == NEW and {f["status"] for f in fresh.values()} == {"ok"}, m
        labels_new = np.array([fresh[i]["label"] for i in range(NEW)])
        if m == "g":  # one uninterrupted run over what it consumed, then the new queries
            ref = reference(tmp_path, "g", 100, np.concatenate([xs["g"][: consumed + 1], new["g"]]))
            old = np.array([msgpack.unpackb({**first, **again}[i])["label"] for i in range(consumed + 1)])
            assert np.array_equal(old, ref[: consumed + 1]) and np.array_equal(labels_new, ref[consumed + 1 :])
        else:  # the released hypothesis, restored (never refitted)
            restored = await ModelCheckpointer(DirStore(tmp_path / "checkpoints"), "l").load()
            assert restored is not None and isinstance(restored.predictor, PrivateLearner)
            assert np.array_equal(labels_new, restored.predictor.answer(new["l"]).labels)
