"""The fetch wait raised while the broker answers empty with records waiting (daemon/fetch_wait.py).

The embedded broker walks a partition's record batches for each fetch and answers empty once the walk
outlasts the fetch's max wait; a 5 ms reader of a partition of 16,000 batches read nothing there."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import msgpack
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from bench.hop import fill as _fill
from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.config import load
from everlast.daemon.fetch_wait import CAP_MS, STRIKES, FetchWait, set_wait
from everlast.daemon.gateway.relay import LABELS_FETCH_WAIT_MS, Relay
from tests.daemon.kafka_helpers import create_topics, unique, write_config


class _Fetcher:
    _fetch_max_wait_ms = 5


class _Consumer:
    """highwater / position of one partition, and aiokafka's fetcher attribute."""

    def __init__(self, pos: int, hw: int | None) -> None:
        self.pos, self.hw, self._fetcher = pos, hw, _Fetcher()

    def highwater(self, tp: Any) -> int | None:
        return self.hw

    async def position(self, tp: Any) -> int:
        return self.pos


def _polls(w: FetchWait, c: _Consumer, n: int, got: bool = False) -> list[int | None]:
    async def go() -> list[int | None]:
        return [await w.after(c, got, ["tp"]) for _ in range(n)]

    return asyncio.run(go())


def test_empty_polls_with_records_waiting_double_the_wait_up_to_the_cap() -> None:
    c, w = _Consumer(pos=10, hw=1_000), FetchWait(5, "test")
    raised = [ms for ms in _polls(w, c, STRIKES * 10) if ms is not None]
    assert raised == [10, 20, 40, 80, 160, 320, CAP_MS]
    assert c._fetcher._fetch_max_wait_ms == CAP_MS == w.ms


def test_no_raise_when_records_come_or_nothing_waits() -> None:
    c, w = _Consumer(pos=10, hw=1_000), FetchWait(5, "test")
    assert _polls(w, c, 10, got=True) == [None] * 10  # records came back: no stall
    at_end = _Consumer(pos=1_000, hw=1_000)
    assert _polls(w, at_end, 10) == [None] * 10  # an idle reader at the end: empty is the answer
    assert _polls(w, _Consumer(pos=0, hw=None), 10) == [None] * 10  # no fetch answered yet
    assert c._fetcher._fetch_max_wait_ms == 5


def test_a_poll_with_records_restarts_the_count() -> None:
    c, w = _Consumer(pos=10, hw=1_000), FetchWait(5, "test")
    for _ in range(5):
        assert _polls(w, c, STRIKES - 1) == [None] * (STRIKES - 1)
        assert _polls(w, c, 1, got=True) == [None]
    assert w.ms == 5


def test_set_wait_refuses_a_consumer_without_the_attribute() -> None:
    with pytest.raises(RuntimeError, match="_fetch_max_wait_ms"):
        set_wait(object(), 10)


@pytest.mark.broker
@pytest.mark.asyncio
async def test_set_wait_reaches_the_installed_aiokafkas_fetches(broker: EmbeddedBroker) -> None:
    topic = unique("fw")
    await create_topics(broker.bootstrap, [topic], partitions=1)
    await _fill(broker.bootstrap, topic, 3, b"v")
    c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, 0)
        set_wait(c, 77)
        assert c._fetcher._fetch_max_wait_ms == 77
        got = await c.getmany(tp, timeout_ms=5_000, max_records=1_000)
        assert len(got[tp]) == 300 and c.highwater(tp) == 300
    finally:
        await c.stop()


BATCHES = 16_000


async def _read(bootstrap: str, topic: str, start: int, polls: int, wait: FetchWait | None) -> int:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5)
    await c.start()
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek(tp, start)
        n = 0
        for _ in range(polls):
            got = await c.getmany(timeout_ms=100, max_records=1_000)
            n += sum(len(v) for v in got.values())
            if wait is not None:
                await wait.after(c, any(got.values()), [tp])
        return n
    finally:
        await c.stop()


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.asyncio
async def test_a_reader_stalled_by_a_long_log_reads_on_once_its_wait_is_raised(broker: EmbeddedBroker) -> None:
    topic = unique("fw-long")
    await create_topics(broker.bootstrap, [topic], partitions=1)
    await _fill(broker.bootstrap, topic, BATCHES, msgpack.packb({"id": "c:s1", "label": 1, "status": "ok", "round": 1}))
    start = (BATCHES - 1_000) * 100
    stalled = await _read(broker.bootstrap, topic, start, 20, None)  # the mutant: the 5 ms wait kept
    w = FetchWait(5, "test")
    n = await _read(broker.bootstrap, topic, start, 20 + 100, w)
    assert n >= 50_000, (n, w.ms)
    if stalled == 0:  # where this broker stalls at this length (it did on the 2-core machine), the wait rose
        assert w.ms > 5


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.asyncio
async def test_the_gateways_labels_index_is_built_from_a_long_log(broker: EmbeddedBroker, tmp_path: Path) -> None:
    path, topics = write_config(tmp_path, broker.bootstrap, [])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"]], partitions=1)
    label = msgpack.packb({"id": "alice:s1", "label": 1, "status": "ok", "round": 1})
    await _fill(broker.bootstrap, topics["labels"], BATCHES, label)
    tail = msgpack.packb({"id": "alice:s2", "label": 0, "status": "ok", "round": 1})
    await _fill(broker.bootstrap, topics["labels"], 1, tail)
    r = Relay(load(path), ["m"], broker.bootstrap)
    await r.start()
    try:
        for _ in range(3_000):  # polls of the index, not a deadline: the reader's progress is what counts
            if r.caught_up:
                break
            await asyncio.sleep(0.1)
        assert r.caught_up, r.labels_seen
        assert r.index[("m", "alice:s2")] == (0, "ok", 1, None)
    finally:
        await r.stop()
    assert LABELS_FETCH_WAIT_MS == 5
