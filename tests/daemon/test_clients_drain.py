"""The Kafka clients read to the end of a long log: their timeouts bound a wait *without* progress,
not the whole read. (At a planned round's size, millions of labels, `everlast consume` stopped after
30 s of printing with "no end seen", and `everlast replay` gave up 120 s after its last query was
sent while the daemon was still answering: "answered 3,382,583, missing 1,617,417".)

Each test makes the read take several times the timeout while records keep coming: a slow answerer
for replay (a stand-in for a daemon that is minutes behind the producer), a log of two million
labels for consume (slow set)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from everlast.adversary_sim.iid import make_task
from everlast.adversary_sim.kafka_replay import IIDStream, replay
from everlast.daemon.broker import EmbeddedBroker
from everlast.engine.concepts import Thresholds
from tests.daemon.kafka_helpers import create_topics, unique

pytestmark = [pytest.mark.broker]


async def _slow_answerer(bootstrap: str, queries: str, labels: str, total: int, per_second: float) -> None:
    """Answer every query with label 1, at most ``per_second`` a second, keyed like the daemon."""
    c = AIOKafkaConsumer(queries, bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                         fetch_max_wait_ms=10)
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, max_batch_size=1 << 19)
    await c.start()
    await p.start()
    done = 0
    try:
        while done < total:
            got = await c.getmany(timeout_ms=100, max_records=500)
            for tp, recs in got.items():
                b = p.create_batch()
                for r in recs:
                    q = msgpack.unpackb(r.value)
                    v = msgpack.packb({"id": q["id"], "label": 1, "status": "ok", "round": 1})
                    assert b.append(key=r.key, value=v, timestamp=None) is not None
                await (await p.send_batch(b, labels, partition=tp.partition))
                done += len(recs)
                await asyncio.sleep(len(recs) / per_second)
    finally:
        await c.stop()
        await p.stop()


@pytest.mark.asyncio
async def test_replay_waits_for_answers_while_they_keep_coming(broker: EmbeddedBroker) -> None:
    q, lab = unique("q"), unique("l")
    await create_topics(broker.bootstrap, [q, lab], partitions=1)
    total = 6_000
    answerer = asyncio.create_task(_slow_answerer(broker.bootstrap, q, lab, total, per_second=1_000.0))
    task = make_task(Thresholds(), "uniform", seed=0)
    rep = await replay(broker.bootstrap, q, lab, "m", IIDStream(task, 1), total, batch=1_000, timeout_s=2.0)
    await answerer
    out = rep.to_json()  # the answers take ~6 s to come, three times the timeout
    assert out["answered"] == total and out["missing"] == 0


def _write_labels(bootstrap: str, topic: str, n: int) -> None:
    async def go() -> None:
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, max_batch_size=1 << 19)
        await p.start()
        try:
            futs = []
            for i in range(0, n, 5_000):
                b = p.create_batch()
                for j in range(i, min(i + 5_000, n)):
                    v = msgpack.packb({"id": j, "label": j & 1, "status": "ok", "round": 1})
                    assert b.append(key=b"m", value=v, timestamp=None) is not None
                futs.append(await p.send_batch(b, topic, partition=0))
                if len(futs) > 100:
                    await asyncio.gather(*futs)
                    futs.clear()
            await asyncio.gather(*futs)
        finally:
            await p.stop()

    asyncio.run(go())


@pytest.mark.slow
def test_consume_prints_every_label_of_a_log_of_millions(broker: EmbeddedBroker, tmp_path: Path) -> None:
    n = 2_000_000  # past the ~1.75e6 where the clients stopped at a planned round's size
    topic = unique("labels")
    asyncio.run(create_topics(broker.bootstrap, [topic], partitions=1))
    _write_labels(broker.bootstrap, topic, n)
    out = tmp_path / "labels.jsonl"
    with out.open("wb") as fh:
        r = subprocess.run([sys.executable, "-m", "everlast.cli", "consume", "--bootstrap-servers", broker.bootstrap,
                            "--topic", topic, "--json", "--timeout", "5"], stdout=fh, stderr=subprocess.PIPE,
                           timeout=3600, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    ids = set()
    with out.open() as fh:
        for line in fh:
            ids.add(json.loads(line)["label"]["id"])
    assert len(ids) == n and min(ids) == 0 and max(ids) == n - 1
