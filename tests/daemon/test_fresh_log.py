"""Restart on a fresh log: the daemon restarts against a broker that lost its
data, so its checkpoint's offset lies beyond the new log's end. It must notice at assignment (from
the first fetch response, before any record arrives past the old offset) and answer every new
query: ``ok`` when its checkpoint was a clean hand-over, ``refused`` (suspended, with the reason)
when answers may have been published beyond its checkpoint. Zero unanswered queries either way."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.partition import LOG_LOST_REASON
from tests.daemon.kafka_helpers import collect_ids, create_topics, produce, query_records, running, write_config
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


async def test_a_clean_restart_on_the_embedded_brokers_fresh_log_answers_every_query(tmp_path: Path) -> None:
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
        async with running(cfg) as st:
            b = str(st["bootstrap"])
            await produce(b, topic, query_records("m", xs[:10], start_id=10_000))
            labels = await collect_ids(b, labels_topic, set(range(10_000, 10_010)))
            text = (await asyncio.to_thread(scrape, int(st["metrics_port"])))[1]  # type: ignore[call-overload]
        got = {lab["id"]: lab for lab in labels}
        assert set(got) == set(range(10_000, 10_010)), "a query was left unanswered"
        assert {lab["status"] for lab in got.values()} == {"ok"}  # the hand-over state is exact: it continues
        assert metric(text, "everlast_log_resets_total") >= 1

    await watchdog(scenario(), 240)


async def test_a_killed_daemon_restarted_on_a_fresh_log_refuses_every_query_and_says_why(tmp_path: Path) -> None:
    b = EmbeddedBroker().start()
    try:
        cfg, topics = write_config(tmp_path, b.bootstrap, ["m"], every_queries=1_000)
        names = [topics["queries"], topics["labels"], topics["dead_letters"]]
        await create_topics(b.bootstrap, names)
        xs = np.random.default_rng(10).random(3_000)
        log = tmp_path / "daemon.log"

        async def scenario() -> None:
            await produce(b.bootstrap, topics["queries"], query_records("m", xs))
            proc = start_daemon(cfg, log)
            try:
                await collect_ids(b.bootstrap, topics["labels"], set(range(3_000)))
            finally:
                proc.send_signal(signal.SIGKILL)  # answers may now lie beyond its last (periodic) checkpoint
                proc.wait()
            b.stop()
            b.start()  # the broker lost its data: same address, empty log
            await create_topics(b.bootstrap, names)
            await produce(b.bootstrap, topics["queries"], query_records("m", xs[:10], start_id=10_000))
            proc = start_daemon(cfg, log)
            try:
                labels = await collect_ids(b.bootstrap, topics["labels"], set(range(10_000, 10_010)))
            finally:
                proc.send_signal(signal.SIGTERM)
                assert proc.wait(timeout=60) == 0, log.read_text()[-4000:]
            got = {lab["id"]: lab for lab in labels}
            assert set(got) == set(range(10_000, 10_010)), "a query was left unanswered"
            assert {(lab["status"], lab["reason"]) for lab in got.values()} == {("refused", LOG_LOST_REASON)}
            text = log.read_text()
            assert "the log was replaced" in text and "model m suspended" in text

        await watchdog(scenario(), 240)
    finally:
        b.stop()
