"""Producing a step's records: label records to the labels topic and rejected records to the dead
letters, partitioned as Kafka's default partitioner does (murmur2 of the key), one batch per (topic,
partition)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from everlast.daemon.config import TopicsConfig
from everlast.daemon.errors import BrokerError
from everlast.daemon.partition import Headers, Step

Groups = dict[tuple[str, int], list[tuple[bytes | None, list[bytes], list[Headers]]]]
"""Records to produce per (topic, partition): segments of (key, values, headers)."""


class Outbox:
    def __init__(self, topics: TopicsConfig, producer: Callable[[], AIOKafkaProducer]) -> None:
        self.topics = topics
        self._producer = producer
        self._partitioner = DefaultPartitioner()
        self._parts: dict[str, list[int]] = {}
        self._label_part: dict[bytes | None, int] = {}

    @property
    def producer(self) -> AIOKafkaProducer:
        return self._producer()

    def forget(self) -> None:
        """The topics' partitions may have changed (a rebalance): ask again."""
        self._label_part.clear()
        self._parts.clear()

    async def group(self, step: Step, groups: Groups) -> None:
        t = self.topics
        if step.labels:
            parts = await self._partitions(t.labels)
            cache = self._label_part
            for key, (values, headers) in step.labels.items():
                p = cache.get(key)
                if p is None:
                    p = self._partition_of(key, parts)
                    if len(cache) < 10_000:  # invalid records may carry any key: bound the cache
                        cache[key] = p
                groups.setdefault((t.labels, p), []).append((key, values, headers))
        if step.dead_letters:
            parts = await self._partitions(t.dead_letters)
            for key, value, hdrs in step.dead_letters:
                groups.setdefault((t.dead_letters, self._partition_of(key, parts)), []).append((key, [value], [hdrs]))

    async def _partitions(self, topic: str) -> list[int]:
        parts = self._parts.get(topic)
        if parts is None:
            parts = self._parts[topic] = sorted(await self.producer.partitions_for(topic))
        return parts

    def _partition_of(self, key: bytes | None, parts: list[int]) -> int:
        return int(self._partitioner(key, parts, parts)) if key is not None else parts[0]

    async def send_batches(self, groups: Groups) -> None:
        futs = []
        for (topic, p), segments in groups.items():
            b = self.producer.create_batch()
            for key, values, headers in segments:
                for value, h in zip(values, headers, strict=True):
                    if b.append(key=key, value=value, timestamp=None, headers=h) is None:
                        futs.append(await self.producer.send_batch(b, topic, partition=p))
                        b = self.producer.create_batch()
                        if b.append(key=key, value=value, timestamp=None, headers=h) is None:
                            raise BrokerError("a record is larger than the producer's batch size", retriable=False)
            if b.record_count():
                futs.append(await self.producer.send_batch(b, topic, partition=p))
        await asyncio.gather(*futs)

