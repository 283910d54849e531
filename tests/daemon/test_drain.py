"""SIGTERM drains: the daemon stops fetching, waits (at most drain_timeout_s)
for the broker's acknowledgements of the answers it already sent, writes the hand-over checkpoint
and exits 0 with "stopped cleanly" only when that checkpoint covers every published answer. Under
traffic (~1,500 queries/s), the next start replays nothing: every query has exactly one label
record across the two runs. When the acknowledgements never come (the broker frozen), it says
what is not covered and exits non-zero; the next start replays those answers byte for byte."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
from aiokafka import AIOKafkaProducer

from everlast.daemon.broker import EmbeddedBroker
from tests.daemon.kafka_helpers import collect, create_topics, produce, query_records, write_config
from tests.daemon.test_crash import start_daemon

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]

RATE = 1_500
"""Queries per second of the stream the SIGTERM interrupts."""


async def paced(bootstrap: str, topic: str, model: str, xs: np.ndarray, start_id: int, stop: asyncio.Event) -> int:
    """``xs`` as queries at RATE per second (ticks of 50 ms), until done or ``stop``; returns how many."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2)
    await p.start()
    sent, t0, tick = 0, time.monotonic(), RATE // 20
    try:
        while sent < len(xs) and not stop.is_set():
            futs = [await p.send(topic, key=model.encode(), value=msgpack.packb({"id": start_id + k, "x": float(x)}))
                    for k, x in enumerate(xs[sent : sent + tick].tolist(), start=sent)]
            await asyncio.gather(*futs)
            sent += len(futs)
            ahead = sent / RATE - (time.monotonic() - t0)
            if ahead > 0:
                await asyncio.sleep(ahead)
    finally:
        await p.stop()
    return sent


def labels_by_id(recs: list[object]) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    for r in recs:
        v = r.value  # type: ignore[attr-defined]
        out.setdefault(msgpack.unpackb(v)["id"], []).append(v)
    return out


async def test_sigterm_under_traffic_checkpoints_every_answer_and_the_next_start_replays_nothing(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    cfg, topics = write_config(tmp_path, broker.bootstrap, ["m"], every_queries=50_000)
    cfg.write_text(cfg.read_text().replace("every_seconds = 1.0", "every_seconds = 3600"))  # no periodic one
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    # The stream runs until the SIGTERM has been sent (it holds ~11 minutes of queries at RATE), so the
    # signal lands mid-stream however slowly the daemon starts: it waits on a count of labels, not on time.
    xs = np.random.default_rng(25).random(1_000_000)
    log = tmp_path / "d.log"
    proc = start_daemon(cfg, log)
    for _ in range(1_200):  # the stream starts once the model serves (a loaded machine starts slowly)
        if "model m created at offset" in (log.read_text() if log.exists() else "") or proc.poll() is not None:
            break
        await asyncio.sleep(0.1)
    stop = asyncio.Event()
    stream = asyncio.create_task(paced(broker.bootstrap, topics["queries"], "m", xs, 0, stop))
    try:
        while len(await collect(broker.bootstrap, topics["labels"], until=3_000, timeout=0.5)) < 3_000:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert not stream.done(), stream  # (only a failed producer ends it early)
        proc.send_signal(signal.SIGTERM)  # mid-stream: the daemon is answering as queries arrive
        code = await asyncio.to_thread(proc.wait, 60)
    finally:
        stop.set()
        sent = await stream
    text = log.read_text()
    assert code == 0, text[-3000:]
    assert "stopped cleanly: the checkpoints cover every published answer" in text
    first = labels_by_id(await collect(broker.bootstrap, topics["labels"], until=10**9, timeout=2))
    assert 3_000 <= len(first) < sent  # it stopped mid-stream: queries were left for the next start
    assert all(len(v) == 1 for v in first.values())

    total = sent + 3_000  # and 3,000 more for the next start
    await produce(broker.bootstrap, topics["queries"], query_records("m", xs[sent:total], start_id=sent))
    proc = start_daemon(cfg, log)
    try:
        recs = await collect(broker.bootstrap, topics["labels"], until=total, timeout=90)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 60) == 0
    both = labels_by_id(recs)
    assert sorted(both) == list(range(total))
    replayed = sum(len(v) - 1 for v in both.values())
    print(f"SIGTERM at {RATE} queries/s after {len(first):,} answers: the next start replayed {replayed} records")
    assert replayed == 0  # the hand-over checkpoint covered every answer published before the SIGTERM


async def test_a_drain_without_acknowledgements_says_what_is_not_covered_and_exits_non_zero(tmp_path: Path) -> None:
    b = EmbeddedBroker().start()
    try:
        cfg, topics = write_config(tmp_path, b.bootstrap, ["m"], every_queries=10**6,
                                   extra="drain_timeout_s = 2\nshutdown_timeout_s = 5\n")
        text = cfg.read_text().replace("every_seconds = 1.0", "every_seconds = 3600")
        # top-level keys must precede the tables
        cfg.write_text("drain_timeout_s = 2\nshutdown_timeout_s = 5\n" + text.replace(
            "drain_timeout_s = 2\nshutdown_timeout_s = 5\n", ""))
        await create_topics(b.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
        xs = np.random.default_rng(26).random(30_000)
        await produce(b.bootstrap, topics["queries"], query_records("m", xs))
        log = tmp_path / "d.log"
        proc = start_daemon(cfg, log)
        frozen = False
        try:
            while len(await collect(b.bootstrap, topics["labels"], until=1, timeout=0.2)) < 1:
                assert proc.poll() is None, log.read_text()[-3000:]
            for pid in b.pids:  # the broker stops answering: the answers in flight are never acknowledged
                os.kill(pid, signal.SIGSTOP)
            frozen = True
            await asyncio.sleep(0.5)
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(proc.wait, 60)
        finally:
            if frozen:
                for pid in b.pids:
                    os.kill(pid, signal.SIGCONT)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        out = log.read_text()
        assert code != 0, out[-3000:]
        assert "stopped cleanly" not in out
        assert "do not cover every published answer" in out and "are not acknowledged" in out, out[-3000:]
        proc = start_daemon(cfg, log)  # replays the uncovered answers (journal): the same bytes
        try:
            for _ in range(90):
                recs = await collect(b.bootstrap, topics["labels"], until=10**9, timeout=1)
                if len(labels_by_id(recs)) == len(xs):
                    break
        finally:
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.to_thread(proc.wait, 60) == 0
        got = labels_by_id(recs)
        assert sorted(got) == list(range(len(xs))) and all(len(set(v)) == 1 for v in got.values())
        assert "replayed the journal" in log.read_text()
    finally:
        b.stop()
