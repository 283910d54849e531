"""Queries to the queries topic, labels back from the labels topic: request-reply by query id.

**Ids.** A client's query id ``q`` travels as ``<client>:s<q>`` (a string id) or ``<client>:i<q>`` (an
integer id). The client id (``auth``) has no ``:``, so the record id names its client unambiguously:
two clients' ids never meet, whatever ids they choose, and a label is returned only to requests of
the client its id names. The record carries the client id in the ``consumer.client_header`` header,
the only header the gateway writes; its value is the authenticated client, never anything the client
sent. Records are msgpack ``{"id", "x"}`` keyed by the model id, on the partition murmur2 of the key
names (Kafka's default partitioner), exactly what the daemon expects.

**Labels.** One consumer reads every partition of the labels topic from its beginning (no consumer
group) and keeps an index (model, record id) -> the first label published for it. A request first
looks its ids up there: an id already answered is answered from the index (a replay: never produced
again, so never re-answered with fresh noise); an id whose query is in flight waits for that one;
only the others are produced. A request that times out leaves its ids in flight, so a retry waits
for the same labels rather than producing again. After a restart of the gateway, the index is
rebuilt from the topic before the gateway is ready, so a replayed id is found there too.

**Exactly one.** The daemon gives each query record exactly one label record (or an ``invalid`` one).
So a query the gateway accepted (a 2xx, or a 504 after its produce was acknowledged) has its label on
the topic, and a retry with the same id returns it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from everlast.daemon import wire
from everlast.daemon.config import Config
from everlast.daemon.fetch_wait import FetchWait

log = logging.getLogger("everlast.gateway")

LABELS_FETCH_WAIT_MS = 5
"""The labels reader's fetch wait: an idle hop costs up to this on a broker that answers an empty
fetch only at its max wait (the embedded one); raised while that broker stalls (``fetch_wait``)."""

Id = str | int
Label = tuple[int | None, str, int, str | None]
"""(label, status, round, reason) of a published label record."""


class Unavailable(Exception):
    """The broker did not take the queries in time (nothing, or not all, acknowledged)."""


class _LabelRec(msgspec.Struct):
    id: Any = None
    label: int | None = None
    status: str = ""
    round: int = 0
    reason: str | None = None


_MSGPACK = msgspec.msgpack.Decoder(_LabelRec)
_JSON = msgspec.json.Decoder(_LabelRec)
_PACK = msgspec.msgpack.Encoder().encode


def record_id(client: str, qid: Id) -> str:
    return f"{client}:i{qid}" if isinstance(qid, int) else f"{client}:s{qid}"


@dataclass(slots=True)
class _Wait:
    pos: dict[str, int]
    results: list[Label | None]
    remaining: int
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def fill(self, rid: str, lab: Label) -> None:
        i = self.pos.get(rid)
        if i is not None and self.results[i] is None:
            self.results[i] = lab
            self.remaining -= 1
            if self.remaining <= 0:
                self.done.set()


@dataclass(slots=True)
class Outcome:
    labels: list[Label | None]
    """Per query, its label; None for one still in flight at the timeout."""
    produced: int
    replayed: int


class Relay:
    def __init__(self, cfg: Config, models: Sequence[str], bootstrap: str | None = None) -> None:
        self.cfg = cfg
        self.models = set(models)
        self.bootstrap = bootstrap or cfg.broker.bootstrap_servers
        self.header = cfg.consumer.client_header
        self.index: dict[tuple[str, str], Label] = {}
        self.waiting: dict[tuple[str, str], list[_Wait]] = {}
        self.caught_up = False
        self.broker_up = False
        self.labels_seen = 0
        self._parts: list[int] = []
        self._producer: Any = None
        self._consumer: Any = None
        self._task: asyncio.Task[None] | None = None
        self.connected = False
        self._ends: dict[Any, int] = {}

    # -- life -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect in the background (retrying while the broker is unreachable), then read labels."""
        self._task = asyncio.create_task(self._connect_and_run(), name="gateway-labels")

    async def _connect_and_run(self) -> None:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
        from aiokafka.partitioner import DefaultPartitioner

        kw = {**self.cfg.broker.aiokafka_kwargs(), "bootstrap_servers": self.bootstrap}
        self._partitioner = DefaultPartitioner()
        delay = 0.2
        while True:
            self._producer = AIOKafkaProducer(**kw, acks="all", linger_ms=0, max_batch_size=1 << 20,
                                              partitioner=self._partitioner)
            self._consumer = AIOKafkaConsumer(**kw, enable_auto_commit=False, fetch_max_wait_ms=LABELS_FETCH_WAIT_MS,
                                              max_partition_fetch_bytes=1 << 22)
            try:
                await self._producer.start()
                await self._consumer.start()
                break
            except Exception as exc:  # the broker is not there yet: not ready, try again
                log.warning("cannot reach the broker (%s); retrying in %.1fs", type(exc).__name__, delay)
                for c in (self._producer, self._consumer):
                    with contextlib.suppress(Exception):
                        await c.stop()
                await asyncio.sleep(delay)
                delay = min(2 * delay, 5.0)
        self.connected = True
        await self._run()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self.connected = False
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for c in (self._producer, self._consumer):
            if c is not None:
                with contextlib.suppress(Exception):
                    await c.stop()

    @staticmethod
    def record_id(client: str, qid: Id) -> str:
        """The record's id of a client's query id (module docstring)."""
        return record_id(client, qid)

    def alive(self) -> bool:
        """False once the labels reader has died (a bug: /healthz fails, so the process is restarted)."""
        return self._task is None or not self._task.done()

    async def probe(self, timeout_s: float) -> bool:
        """Whether the broker answers a metadata request (and the queries topic exists)."""
        if not self.connected:
            self.broker_up = False
            return False
        try:
            await asyncio.wait_for(self._producer.client.fetch_all_metadata(), timeout_s)
            parts = self._producer.client.cluster.partitions_for_topic(self.cfg.topics.queries)
            if parts:
                self._parts = sorted(parts)
            self.broker_up = bool(self._parts)
        except Exception:  # any failure to reach the broker: down until the next probe
            self.broker_up = False
        return self.broker_up

    # -- the labels topic ---------------------------------------------------------------------------

    async def _run(self) -> None:
        from aiokafka import TopicPartition

        c = self._consumer
        topic = self.cfg.topics.labels
        while True:
            parts = c.partitions_for_topic(topic)
            if parts:
                break
            with contextlib.suppress(Exception):
                await c._client.force_metadata_update()
            await asyncio.sleep(0.2)
        tps = [TopicPartition(topic, p) for p in sorted(parts)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        # caught up once each partition's position reaches the first high watermark a fetch reported
        # (the end at start or later; a ListOffsets answer can be short of it on some brokers)
        wait = FetchWait(LABELS_FETCH_WAIT_MS, "the gateway's labels reader")
        while True:
            try:
                batch = await c.getmany(timeout_ms=100, max_records=20_000)
            except Exception as exc:  # the consumer retries by itself; report and go on
                log.warning("reading the labels topic failed (%s); retrying", type(exc).__name__)
                await asyncio.sleep(0.5)
                continue
            for recs in batch.values():
                self._take(recs)
            await wait.after(c, any(batch.values()), tps)
            if not self.caught_up:
                for tp in tps:
                    hw = c.highwater(tp)
                    if hw is not None:
                        self._ends.setdefault(tp, hw)
                self.caught_up = len(self._ends) == len(tps) and all(
                    [await c.position(tp) >= end for tp, end in self._ends.items()])
                if self.caught_up:
                    log.info("labels index built: %d labels from the labels topic", len(self.index))

    def _take(self, recs: Sequence[Any]) -> None:
        index, waiting, models = self.index, self.waiting, self.models
        for r in recs:
            try:
                model = r.key.decode()
            except (AttributeError, UnicodeDecodeError):
                continue
            if model not in models or r.value is None:
                continue
            try:
                lab = (_JSON if r.headers and wire.content_type(r.headers) == "json" else _MSGPACK).decode(r.value)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            rid = lab.id
            if not isinstance(rid, str) or ":" not in rid:
                continue  # not a gateway query (an operator's, through Kafka directly)
            k = (model, rid)
            if k in index:
                continue  # the first label published for an id stays its label
            v: Label = (lab.label, lab.status, lab.round, lab.reason)
            index[k] = v
            self.labels_seen += 1
            for w in waiting.pop(k, ()):
                w.fill(rid, v)
        if len(index) > self.cfg.gateway.index_max_entries:  # drop the older half (amortized O(1))
            keep = len(index) // 2
            self.index = dict(itertools.islice(index.items(), len(index) - keep, None))

    # -- predict ----------------------------------------------------------------------------------------

    async def predict(self, model: str, client: str, ids: Sequence[Id], x: NDArray[np.float64],
                      timeout_s: float) -> Outcome:
        """Each query's label: from the index, from a query already in flight, or produced now and
        awaited. Raises ``Unavailable`` when the broker does not acknowledge in time (the client may
        retry with the same ids: what was written is answered once)."""
        n = len(ids)
        rids = [self.record_id(client, q) for q in ids]
        results: list[Label | None] = [None] * n
        w = _Wait({}, results, 0)
        send: list[int] = []
        index, waiting = self.index, self.waiting
        replayed = 0
        for i, rid in enumerate(rids):
            k = (model, rid)
            lab = index.get(k)
            if lab is not None:
                results[i] = lab
                replayed += 1
                continue
            w.pos[rid] = i
            w.remaining += 1
            lst = waiting.get(k)
            if lst is None:
                waiting[k] = [w]
                send.append(i)
            else:
                lst.append(w)
        if w.remaining == 0:
            return Outcome(results, 0, replayed)
        if send:
            try:
                await asyncio.wait_for(self._produce(model, client, [rids[i] for i in send], x, send),
                                       self.cfg.gateway.produce_timeout_s)
            except Exception as exc:
                for i in send:  # not acknowledged: a retry produces again (the first label is kept)
                    waiting.pop((model, rids[i]), None)
                self._forget(model, w)
                raise Unavailable(type(exc).__name__) from None
        try:
            await asyncio.wait_for(w.done.wait(), max(0.0, timeout_s))
        except TimeoutError:
            self._forget(model, w)
        return Outcome(results, len(send), replayed)

    def _forget(self, model: str, w: _Wait) -> None:
        """Stop waiting (the ids stay in flight: a later request for them waits for the same labels)."""
        for rid in w.pos:
            lst = self.waiting.get((model, rid))
            if lst is not None and w in lst:
                lst.remove(w)

    async def _produce(self, model: str, client: str, rids: list[str], x: NDArray[np.float64],
                       idx: list[int]) -> None:
        p = self._producer
        key = model.encode()
        if not self._parts:
            self._parts = sorted(await p.partitions_for(self.cfg.topics.queries))
        part = int(self._partitioner(key, self._parts, self._parts))
        hdr = [(self.header, client.encode())]
        xs = x[idx].tolist() if len(idx) != len(x) else x.tolist()
        topic = self.cfg.topics.queries
        futs = []
        b = p.create_batch()
        for rid, xv in zip(rids, xs, strict=True):
            value = _PACK({"id": rid, "x": xv})
            if b.append(key=key, value=value, timestamp=None, headers=hdr) is None:
                futs.append(await p.send_batch(b, topic, partition=part))
                b = p.create_batch()
                b.append(key=key, value=value, timestamp=None, headers=hdr)
        futs.append(await p.send_batch(b, topic, partition=part))
        await asyncio.gather(*futs)

