"""kill -9 the daemon mid-stream, several times: every query still gets a label, every label of an
id is byte-identical, and the answers equal the uninterrupted in-process run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from everlast.daemon.broker import EmbeddedBroker
from tests.daemon.kafka_helpers import create_topics, produce, query_records, write_config
from tests.daemon.test_e2e import reference

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]


def start_daemon(cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "everlast.cli", "serve", "--config", str(cfg)],
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
        env={**os.environ},
    )


async def test_kill_9_at_random_points_loses_nothing_and_replays_identically(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    model, n = "crashy", 60_000
    # checkpoints rarer than the fetch batches: a kill almost surely lands with answers past the last one
    cfg, topics = write_config(tmp_path, broker.bootstrap, [model], every_queries=25_000)
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    xs = np.random.default_rng(8).random(n)
    await produce(broker.bootstrap, topics["queries"], query_records(model, xs))

    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20)
    await c.start()
    tps = [TopicPartition(topics["labels"], p) for p in range(4)]
    c.assign(tps)
    await c.seek_to_beginning(*tps)
    raw: dict[int, list[bytes]] = {}

    async def drain(seconds: float) -> None:
        end = asyncio.get_running_loop().time() + seconds
        while asyncio.get_running_loop().time() < end:
            batch = await c.getmany(timeout_ms=50, max_records=50_000)
            for recs in batch.values():
                for r in recs:
                    import msgpack

                    raw.setdefault(msgpack.unpackb(r.value)["id"], []).append(r.value)

    rng = np.random.default_rng(1)
    log = tmp_path / "daemon.log"
    kills = 0
    for target in sorted(rng.integers(5_000, 50_000, size=4)):
        proc = start_daemon(cfg, log)
        while len(raw) < target and proc.poll() is None:
            await drain(0.05)
        await asyncio.sleep(float(rng.uniform(0, 0.3)))  # land the kill at a random point of a batch
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
    started = log.read_text().count("metrics and health on")
    proc = start_daemon(cfg, log)
    try:
        # wait until the last daemon is up (its signal handlers are installed before this line):
        # the earlier ones may already have published every label, and a SIGTERM during start-up
        # would end it with the default action, not a clean stop
        for _ in range(600):
            if log.read_text().count("metrics and health on") > started or proc.poll() is not None:
                break
            await drain(0.1)
        for _ in range(600):
            await drain(0.1)
            if len(raw) >= n:
                break
    finally:
        if len(raw) < n and proc.poll() is None:  # stalled: have the daemon print every thread's stack
            proc.send_signal(signal.SIGUSR1)
            await asyncio.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()[-12000:]
        await c.stop()
    assert kills == 4
    assert len(raw) == n, f"{n - len(raw)} queries without a label"
    dup = sum(len(v) - 1 for v in raw.values())
    assert all(len(set(v)) == 1 for v in raw.values()), "a replay produced a different answer"
    import msgpack

    got = np.array([msgpack.unpackb(raw[i][0])["label"] for i in range(n)])
    assert np.array_equal(got, reference(tmp_path, model, 100, xs))
    assert dup > 0  # the kills did land mid-stream (replays happened)
