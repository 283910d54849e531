"""Restart on a fresh log: the daemon restarts against a broker that
lost its data, so its checkpoint's offset lies beyond the new log's end. It notices at assignment
(from the first fetch response, before any record arrives past the old offset) and answers every
new query. A model recovers exactly from its hand-over checkpoint, or from a periodic one and its
journal (``daemon/journal.py``); only when the journal is gone too is it suspended (``refused``,
with the reason; ``everlast_model_suspended`` and /readyz say so). Zero unanswered queries either
way. On the daemon's embedded broker an empty log at start is expected: logged as info, not
counted as broker data loss."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import msgpack
import numpy as np
import pytest

from everlast.daemon.broker import EmbeddedBroker, free_port
from everlast.daemon.journal import FILENAME
from tests.daemon.kafka_helpers import (
    collect,
    collect_ids,
    create_topics,
    produce,
    query_records,
    running,
    write_config,
)
from tests.daemon.test_crash import start_daemon
from tests.daemon.test_lifecycle import metric, scrape

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]


async def watchdog(aw: Awaitable[Any], seconds: float) -> Any:
    """Bound a scenario; on a stall print every task's stack before failing."""
    try:
        return await asyncio.wait_for(aw, seconds)
    except TimeoutError:
        for t in asyncio.all_tasks():
            t.print_stack(limit=8)
        raise


async def test_a_clean_restart_on_the_embedded_brokers_fresh_log_answers_every_query(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The README's minimal setup: no broker configured, so each start brings an empty embedded one."""
    cfg, _ = write_config(tmp_path, "unused", ["m"])
    text = cfg.read_text().replace('bootstrap_servers = "unused"', "embedded_port = 0")
    cfg.write_text(text)
    topic = text.split('queries = "')[1].split('"')[0]
    labels_topic = text.split('labels = "')[1].split('"')[0]
    xs = np.random.default_rng(9).random(2_002)

    async def scenario() -> None:
        async with running(cfg) as st:
            b = str(st["bootstrap"])
            await produce(b, topic, query_records("m", xs))
            await collect_ids(b, labels_topic, set(range(2_002)))
        assert st["exit_code"] == 0  # a clean stop: a hand-over checkpoint at offset 2002 of its partition
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="everlast.daemon"):
            async with running(cfg) as st:
                b = str(st["bootstrap"])
                await produce(b, topic, query_records("m", xs[:10], start_id=10_000))
                labels = await collect_ids(b, labels_topic, set(range(10_000, 10_010)))
                text = (await asyncio.to_thread(scrape, int(st["metrics_port"])))[1]  # type: ignore[call-overload]
        got = {lab["id"]: lab for lab in labels}
        assert set(got) == set(range(10_000, 10_010)), "a query was left unanswered"
        assert {lab["status"] for lab in got.values()} == {"ok"}  # the hand-over state is exact: it continues
        # expected on the embedded broker: info, not an error, not counted as data loss (no page)
        assert metric(text, "everlast_log_resets_total") == 0
        assert metric(text, "everlast_model_suspended", model="m") == 0
        assert any("the embedded broker starts empty" in r.message and r.levelno == logging.INFO
                   for r in caplog.records)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR], "an error logged on a routine restart"

    await watchdog(scenario(), 240)


async def raw_labels(bootstrap: str, topic: str, until: int) -> dict[Any, bytes]:
    out: dict[Any, bytes] = {}
    for r in await collect(bootstrap, topic, until=until):
        out.setdefault(msgpack.unpackb(r.value)["id"], r.value)
    return out


async def _killed_then_fresh_log(tmp_path: Path, lose_journal: bool) -> tuple[dict[Any, Any], str, tuple[int, str]]:
    """kill -9 after answering 3,000 queries (no checkpoint since the first: every answer lies beyond
    it; a checkpoint that covered every answer would be exact, journal or not: its published mark says so),
    the broker loses its data, the daemon restarts (optionally without its journal) and gets 10
    new queries. Returns their labels, the log, and /readyz."""
    b = EmbeddedBroker().start()
    try:
        port = free_port()
        cfg, topics = write_config(tmp_path, b.bootstrap, ["m"], every_queries=100_000)
        text = cfg.read_text().replace("port = 0", f"port = {port}")
        cfg.write_text(text.replace("every_seconds = 1.0", "every_seconds = 3600"))
        names = [topics["queries"], topics["labels"], topics["dead_letters"]]
        await create_topics(b.bootstrap, names)
        xs = np.random.default_rng(10).random(3_000)
        log = tmp_path / "daemon.log"
        await produce(b.bootstrap, topics["queries"], query_records("m", xs))
        proc = start_daemon(cfg, log)
        try:
            first = await raw_labels(b.bootstrap, topics["labels"], 3_000)
        finally:
            proc.send_signal(signal.SIGKILL)  # answers now lie beyond its last (periodic) checkpoint
            proc.wait()
        assert len(first) == 3_000
        if lose_journal:
            for p in (tmp_path / "ck").glob(FILENAME + "*"):
                p.unlink()
        b.stop()
        b.start()  # the broker lost its data: same address, empty log
        await create_topics(b.bootstrap, names)
        await produce(b.bootstrap, topics["queries"], query_records("m", xs[:10], start_id=10_000))
        proc = start_daemon(cfg, log)
        try:
            labels = await collect_ids(b.bootstrap, topics["labels"], set(range(10_000, 10_010)))
            if not lose_journal:  # the journal's labels are published again, byte for byte
                assert await raw_labels(b.bootstrap, topics["labels"], 3_010) == first | {
                    lab["id"]: ANY for lab in labels if lab["id"] >= 10_000}
            ready = await asyncio.to_thread(scrape, port, "/readyz")
            text = (await asyncio.to_thread(scrape, port))[1]
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0, log.read_text()[-4000:]
        got = {lab["id"]: lab for lab in labels if lab["id"] >= 10_000}
        assert set(got) == set(range(10_000, 10_010)), "a query was left unanswered"
        assert metric(text, "everlast_log_resets_total") >= 1, text  # an external broker lost data: counted
        assert metric(text, "everlast_model_suspended", model="m") == (1 if lose_journal else 0)
        return got, log.read_text(), ready
    finally:
        b.stop()


async def test_a_killed_daemon_restarted_on_a_fresh_log_recovers_from_its_journal(tmp_path: Path) -> None:
    got, text, ready = await watchdog(_killed_then_fresh_log(tmp_path, lose_journal=False), 240)
    assert {lab["status"] for lab in got.values()} == {"ok"}
    assert "replayed the journal" in text and "suspended" not in text
    assert ready[0] == 200


async def test_a_killed_daemon_without_its_journal_on_a_fresh_log_refuses_every_query_and_says_why(
    tmp_path: Path,
) -> None:
    got, text, ready = await watchdog(_killed_then_fresh_log(tmp_path, lose_journal=True), 240)
    (reason,) = {lab["reason"] for lab in got.values() if lab["status"] == "refused"}
    assert {lab["status"] for lab in got.values()} == {"refused"}
    # what was lost, both of it: the journal (behind the published mark) and the broker's log
    assert reason.startswith("this model's state is behind answers it already published") and "journal" in reason
    assert "broker's log does not hold those queries" in reason and "published up to offset 3000" in reason, reason
    assert "the log was replaced" in text and "model m suspended" in text
    assert ready[0] == 503 and ready[1].startswith("not ready: suspended: m (this model's state is behind"), ready
