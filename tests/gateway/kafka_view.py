"""What is on the topics (what the gateway produced, what the daemon published), read directly."""

from __future__ import annotations

from typing import Any

import httpx
import msgpack
from aiokafka import AIOKafkaConsumer, TopicPartition


async def _read(bootstrap: str, topic: str) -> list[Any]:
    """Every record of ``topic`` up to its high watermarks as fetches report them (the embedded
    broker's ListOffsets answer can be short of them)."""
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
        out: list[Any] = []
        target: dict[TopicPartition, int] = {}
        while True:
            for recs in (await c.getmany(timeout_ms=100, max_records=50_000)).values():
                out.extend(recs)
            for tp in tps:
                hw = c.highwater(tp)
                if hw is not None:
                    target.setdefault(tp, hw)
            if len(target) == len(tps) and all([await c.position(tp) >= target[tp] for tp in tps]):
                return [r for r in out if r.offset < target[TopicPartition(r.topic, r.partition)]]
    finally:
        await c.stop()


async def records(bootstrap: str, topic: str) -> list[Any]:
    return await _read(bootstrap, topic)


async def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Records per partition now."""
    out: dict[int, int] = {}
    for r in await _read(bootstrap, topic):
        out[r.partition] = max(out.get(r.partition, 0), r.offset + 1)
    return out


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
