"""What is on the topics (what the gateway produced, what the daemon published), read directly."""

from __future__ import annotations

from typing import Any

import httpx
import msgpack
from aiokafka import AIOKafkaConsumer, TopicPartition


async def records(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic`` now (all partitions, from the beginning to the end)."""
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5)
    await c.start()
    try:
        parts = c.partitions_for_topic(topic) or set()
        if not parts:
            await c._client.force_metadata_update()
            parts = c.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        ends = await c.end_offsets(tps)
        out: list[Any] = []
        while any(await c.position(tp) < ends[tp] for tp in tps):
            for recs in (await c.getmany(timeout_ms=200, max_records=50_000)).values():
                out.extend(r for r in recs if r.offset < ends[TopicPartition(r.topic, r.partition)])
        return out
    finally:
        await c.stop()


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await c.start()
    try:
        tps = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or ())]
        return {tp.partition: v for tp, v in (await c.end_offsets(tps)).items()}
    finally:
        await c.stop()


def value(rec: Any) -> Any:
    return msgpack.unpackb(rec.value, raw=False)


async def daemon_counters(port: int) -> dict[str, float]:
    """The daemon's query, invalid-record and dead-letter counters (its /metrics)."""
    async with httpx.AsyncClient() as h:
        text = (await h.get(f"http://127.0.0.1:{port}/metrics")).text
    out = {}
    for line in text.splitlines():
        if line.startswith(("everlast_queries_total", "everlast_invalid_records_total",
                            "everlast_dead_letters_total")):
            name, v = line.rsplit(" ", 1)
            out[name] = float(v)
    return out
