"""A blob store on a Kafka topic, so a model's checkpoint follows its partition to another replica.

Record key ``<model>/<name>``; a blob larger than ``max_chunk_bytes`` is split into chunks that
carry headers ``everlast-blob`` (an id) and ``everlast-chunk`` ("i/n"), reassembled on read. The
newest *complete* blob per key wins; a tombstone (no value) deletes. Nothing relies on the broker
compacting the topic (Tansu never does; on Apache Kafka enable ``cleanup.policy=compact`` to bound
its size), nor on ``end_offsets`` (read up to the high watermark seen in fetch responses).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from daemon.errors import CheckpointError


@dataclass
class _Partial:
    blob: bytes
    n: int
    parts: dict[int, bytes] = field(default_factory=dict)


class KafkaStore:
    def __init__(self, producer: Any, consumer_factory: Any, topic: str, max_chunk_bytes: int) -> None:
        self.producer = producer
        self.consumer_factory = consumer_factory  # () -> an unstarted AIOKafkaConsumer without a group
        self.topic = topic
        self.max_chunk = max_chunk_bytes
        self.cache: dict[str, bytes] = {}

    async def refresh(self, timeout_s: float = 30.0) -> None:
        """Re-read the whole topic (after a rebalance another replica may have written)."""
        from aiokafka import TopicPartition

        consumer = self.consumer_factory()
        await consumer.start()
        try:
            parts = consumer.partitions_for_topic(self.topic) or set()
            if not parts:
                await consumer._client.force_metadata_update()
                parts = consumer.partitions_for_topic(self.topic) or set()
            tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
            if not tps:
                self.cache = {}
                return
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            partial: dict[str, _Partial] = {}
            newest: dict[str, bytes] = {}
            import time

            deadline = time.monotonic() + timeout_s
            while True:
                batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
                for recs in batch.values():
                    for r in recs:
                        self._apply(r, partial, newest)
                done = True
                for tp in tps:
                    hw = consumer.highwater(tp)
                    if hw is None or await consumer.position(tp) < hw:
                        done = False
                if done:
                    break
                if time.monotonic() > deadline:
                    raise CheckpointError("timed out reading the checkpoint topic")
            self.cache = newest
        finally:
            await consumer.stop()

    @staticmethod
    def _apply(r: Any, partial: dict[str, _Partial], newest: dict[str, bytes]) -> None:
        key = r.key.decode() if r.key is not None else ""
        if r.value is None:
            newest.pop(key, None)
            partial.pop(key, None)
            return
        h = dict(r.headers or ())
        blob, chunk = h.get("everlast-blob"), h.get("everlast-chunk")
        if blob is None or chunk is None:
            return
        i_s, n_s = chunk.decode().split("/")
        i, n = int(i_s), int(n_s)
        cur = partial.get(key)
        if cur is None or cur.blob != blob:
            cur = partial[key] = _Partial(blob, n)
        cur.parts[i] = r.value
        if len(cur.parts) == cur.n:
            newest[key] = b"".join(cur.parts[j] for j in range(cur.n))
            del partial[key]

    async def put(self, model: str, name: str, data: bytes) -> None:
        key = f"{model}/{name}"
        blob = os.urandom(8).hex().encode()
        chunks = [data[i : i + self.max_chunk] for i in range(0, max(len(data), 1), self.max_chunk)] or [b""]
        futs = []
        for i, c in enumerate(chunks):
            headers = [("everlast-blob", blob), ("everlast-chunk", f"{i}/{len(chunks)}".encode())]
            futs.append(await self.producer.send(self.topic, key=key.encode(), value=c, headers=headers))
        try:
            for f in futs:
                await f
        except Exception as exc:  # KafkaError and timeouts: the caller retries by policy
            raise CheckpointError(f"cannot write checkpoint {key} to Kafka ({type(exc).__name__})") from None
        self.cache[key] = data

    async def get(self, model: str, name: str) -> bytes | None:
        return self.cache.get(f"{model}/{name}")

    async def names(self, model: str) -> list[str]:
        prefix = f"{model}/"
        return sorted(k[len(prefix) :] for k in self.cache if k.startswith(prefix))

    async def delete(self, model: str, names: Iterable[str]) -> None:
        for n in names:
            key = f"{model}/{n}"
            if key in self.cache:
                fut = await self.producer.send(self.topic, key=key.encode(), value=None)
                await fut
                self.cache.pop(key, None)
