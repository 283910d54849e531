"""The run loop: fetch -> decode and validate -> answer through the engine -> produce label records
-> checkpoint -> commit.

Ownership: a model lives on the partition its key hashes to (murmur2, Kafka's default
partitioner); the replica that owns the partition serves the model. On assignment the model is
restored from the checkpoint store (or created and checkpointed before it answers anything) and
the partition is sought to the checkpoint's offset; records a model already answered before the
checkpoint are skipped for that model, so every query is answered by exactly one state.

Round ends: the engine answers a round's R_i-th query, then needs a transition. The partition's
remaining records are parked, the partition is paused, and the transition runs in a worker thread
while other partitions keep flowing; when it is done the parked records are processed and the
partition resumed. In-flight work is bounded by ``consumer.max_records`` per partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from aiokafka.partitioner import DefaultPartitioner

from daemon import wire
from daemon.checkpoint.blobs import BlobStore, DirStore, EncryptedStore, key_from_env
from daemon.config import Config
from daemon.metrics import Heartbeat, Metrics
from daemon.model import ModelRuntime
from engine.phases import Phase

log = logging.getLogger("everlast.daemon")

REFUSED_REASON = "the predictor has failed (a round's halt budget was spent) and refuses every query"
EXHAUSTED_REASON = "the schedule has ended; the predictor refuses every query"


def fingerprint(r: Any) -> str:
    """Identity of a log record (timestamp, key, value): detects a log replaced under the same offsets."""
    h = hashlib.sha256()
    h.update(str(r.timestamp).encode())
    for part in (r.key, r.value):
        h.update(b"\x00" if part is None else len(part).to_bytes(8, "big") + part)
    return h.hexdigest()[:32]


@dataclass
class Outbox:
    records: list[tuple[str, bytes | None, bytes, list[tuple[str, bytes]]]] = field(default_factory=list)

    def add(self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        self.records.append((topic, key, value, headers))


@dataclass
class _Item:
    kind: str  # "q" | "rej" | "skip"
    query: wire.Query | None = None
    rejected: wire.Rejected | None = None
    label: int | None = None
    round: int = 0


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, svc: Service) -> None:
        self.svc = svc

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self.svc.revoke([tp.partition for tp in revoked if tp.topic == self.svc.cfg.topics.queries])

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        await self.svc.assign([tp.partition for tp in assigned if tp.topic == self.svc.cfg.topics.queries])


class Service:
    def __init__(self, cfg: Config, models: dict[str, ModelRuntime], metrics: Metrics, bootstrap: str) -> None:
        self.cfg = cfg
        self.models = models
        self.metrics = metrics
        self.bootstrap = bootstrap
        self.heartbeat = Heartbeat()
        self.lock = asyncio.Lock()
        self.home: dict[str, int] = {}
        self.n_partitions: int | None = None
        self.owned: set[int] = set()
        self.next_offset: dict[int, int] = {}
        self.last_fp: dict[int, str | None] = {}
        self.dirty: set[int] = set()
        self.parked: dict[int, list[Any]] = {}
        self.transitions: dict[int, asyncio.Task[None]] = {}
        self._partitioner = DefaultPartitioner()
        self.consumer: AIOKafkaConsumer | None = None
        self.producer: AIOKafkaProducer | None = None
        self.store: BlobStore | None = None
        self.kafka_store: Any = None
        self.ready_flag = False
        self.broker_ok = False
        self._last_probe = 0.0
        self.failed: BaseException | None = None

    # -- wiring ------------------------------------------------------------------------------

    def _kw(self) -> dict[str, Any]:
        kw = self.cfg.broker.aiokafka_kwargs()
        kw["bootstrap_servers"] = self.bootstrap
        return kw

    async def _ensure_topics(self) -> None:
        if not self.cfg.topics.create:
            return
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        t = self.cfg.topics
        admin = AIOKafkaAdminClient(**{k: v for k, v in self._kw().items() if k != "retry_backoff_ms"})
        await admin.start()
        try:
            existing = set(await admin.list_topics())
            new = [
                NewTopic(name, t.partitions, 1)
                for name in (t.queries, t.labels, t.dead_letters)
                if name not in existing
            ]
            if self.cfg.checkpoint.store == "kafka" and t.checkpoints not in existing:
                new.append(NewTopic(t.checkpoints, 1, 1, topic_configs={"cleanup.policy": "compact"}))
            if new:
                await admin.create_topics(new)  # "already exists" comes back as an error code, not a raise
        finally:
            await admin.close()

    def _make_store(self) -> BlobStore:
        ck = self.cfg.checkpoint
        inner: BlobStore
        if ck.store == "dir":
            inner = DirStore(ck.dir)
        else:
            from daemon.checkpoint.kafka_store import KafkaStore

            assert self.producer is not None
            self.kafka_store = KafkaStore(
                self.producer,
                lambda: AIOKafkaConsumer(**self._kw(), enable_auto_commit=False, fetch_max_wait_ms=50),
                self.cfg.topics.checkpoints,
                ck.max_chunk_bytes,
            )
            inner = self.kafka_store
        key = key_from_env(ck.key_env)
        return EncryptedStore(inner, key) if key is not None else inner

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        c = self.cfg.consumer
        await self._ensure_topics()
        self.producer = AIOKafkaProducer(
            **self._kw(),
            acks="all",
            linger_ms=2,
            enable_idempotence=False,
            max_request_size=max(1_048_576, self.cfg.checkpoint.max_chunk_bytes + 65_536),
        )
        await self.producer.start()
        self.store = self._make_store()
        self.consumer = AIOKafkaConsumer(
            **self._kw(),
            group_id=c.group_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=c.fetch_max_wait_ms,
            session_timeout_ms=c.session_timeout_ms,
            heartbeat_interval_ms=c.heartbeat_interval_ms,
            max_poll_interval_ms=max(300_000, c.session_timeout_ms),
        )
        await self.consumer.start()
        self.consumer.subscribe([self.cfg.topics.queries], listener=_Listener(self))
        self._broker(True)
        try:
            while not stop.is_set():
                self.heartbeat.beat()
                if self.failed is not None:
                    raise self.failed
                await self._probe_broker()
                await self._resume_finished()
                try:
                    batch = await self.consumer.getmany(timeout_ms=100, max_records=c.max_records)
                except KafkaError as exc:
                    self._broker(False)
                    log.warning("fetch failed (%s); retrying", type(exc).__name__)
                    await asyncio.sleep(0.5)
                    continue
                async with self.lock:
                    if batch:
                        t0 = time.perf_counter()
                        out = Outbox()
                        for tp, recs in batch.items():
                            if tp.partition not in self.owned:
                                continue  # revoked meanwhile: the new owner replays from its checkpoint
                            if tp.partition in self.parked:  # never drop: queue behind the parked records
                                self.parked[tp.partition].extend(recs)
                            else:
                                self._process(tp.partition, recs, out)
                        await self._send(out, stop)
                        self.metrics.batch_seconds.observe(time.perf_counter() - t0)
                    self._update_lag()
                    await self._maybe_checkpoint(force=False)
            if self.failed is not None:
                raise self.failed
        finally:
            await self._shutdown()

    async def _shutdown(self) -> None:
        """Finish transitions (bounded), checkpoint and commit what was answered, leave the group."""
        pending = [t for t in self.transitions.values() if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.cfg.shutdown_timeout_s)
        async with self.lock:
            try:
                for part in sorted(self.owned):
                    if part not in self.transitions:
                        await self._checkpoint_partition(part, handover=True)
            except Exception:
                log.exception("final checkpoint failed; a restart replays from the previous one")
        if self.consumer is not None:
            with contextlib.suppress(Exception):
                await self.consumer.stop()
        if self.producer is not None:
            with contextlib.suppress(Exception):
                await self.producer.stop()

    def ready(self) -> bool:
        return self.ready_flag and self.failed is None and self.broker_ok

    # -- partitions ----------------------------------------------------------------------------

    def _homes(self) -> None:
        assert self.consumer is not None
        parts = sorted(self.consumer.partitions_for_topic(self.cfg.topics.queries) or [])
        part = DefaultPartitioner()
        self.home = {m: part(m.encode(), parts, parts) for m in self.models}
        self.n_partitions = len(parts)

    def _models_on(self, partition: int) -> list[ModelRuntime]:
        return [self.models[m] for m, p in self.home.items() if p == partition]

    async def assign(self, partitions: list[int]) -> None:
        """Restore (or create) the models homed on the assigned partitions and seek there. A failure
        (an unreadable checkpoint, a wrong key) stops the daemon: aiokafka would otherwise swallow it
        and leave the partition silently unserved."""
        try:
            await self._assign(partitions)
        except BaseException as exc:
            log.error("partition assignment failed (%s): stopping", type(exc).__name__)
            self.failed = exc
            raise

    async def _assign(self, partitions: list[int]) -> None:
        assert self.consumer is not None and self.store is not None
        async with self.lock:
            self._homes()
            if self.kafka_store is not None:
                await self.kafka_store.refresh()
            for part in partitions:
                tp = TopicPartition(self.cfg.topics.queries, part)
                committed = await self.consumer.committed(tp)
                start = int(committed) if committed is not None else 0
                offsets = []
                for m in self._models_on(part):
                    restored = await m.activate(self.store, start, self.n_partitions)
                    if not restored:
                        await self._checkpoint_model(m, part)  # before answering anything
                    log.info(
                        "model %s %s at offset %d on partition %d",
                        m.id,
                        "restored" if restored else "created",
                        m.offset,
                        part,
                    )
                    offsets.append(m.offset)
                    if m.last_fp is not None:
                        self.last_fp[part] = m.last_fp
                    self._publish_model(m)
                nxt = min(offsets) if offsets else start
                # re-read the last processed record too: its fingerprint proves the log is the same
                self.consumer.seek(tp, nxt - 1 if nxt > 0 and self.last_fp.get(part) else nxt)
                self.next_offset[part] = nxt
                self.owned.add(part)
            self.metrics.models_active.set(sum(1 for m in self.models.values() if m.predictor is not None))
            self.ready_flag = True

    async def revoke(self, partitions: list[int]) -> None:
        waits = [self.transitions[p] for p in partitions if p in self.transitions]
        if waits:
            await asyncio.wait(waits, timeout=self.cfg.shutdown_timeout_s)
        async with self.lock:
            for part in partitions:
                if part not in self.owned:
                    continue
                try:
                    await self._checkpoint_partition(part, handover=True)
                except Exception:  # the next owner replays from the previous checkpoint
                    log.exception("partition %d: checkpoint at hand-over failed", part)
                for m in self._models_on(part):
                    m.deactivate()
                self.owned.discard(part)
                self.parked.pop(part, None)
                with contextlib.suppress(KeyError):
                    self.metrics.lag.remove(str(part))  # a gauge of a partition we no longer own would go stale
                self.transitions.pop(part, None)
            self.metrics.models_active.set(sum(1 for m in self.models.values() if m.predictor is not None))

    # -- processing ----------------------------------------------------------------------------

    def _process(self, part: int, recs: list[Any], out: Outbox) -> None:
        """Answer the records of one partition in order, up to the first one that must wait for a
        round transition; park the rest."""
        recs = self._drop_seen(part, recs)
        if not recs:
            return
        items: list[_Item] = []
        by_model: dict[str, list[int]] = {}
        max_bytes = self.cfg.consumer.max_record_bytes
        for r in recs:
            dec = wire.decode_query(r.key, r.value, r.headers, max_bytes=max_bytes)
            if isinstance(dec, wire.Query):
                m = self.models.get(dec.model)
                if m is None:
                    dec = wire.Rejected(
                        "unknown_model", "no model with this id is served", dec.id, dec.model, dec.content_type
                    )
                elif self.home.get(m.id) != part:
                    dec = wire.Rejected(
                        "wrong_partition",
                        "record is not on its model's partition (produce with the "
                        "murmur2 partitioner, keyed by model id)",
                        dec.id,
                        dec.model,
                        dec.content_type,
                    )
                elif r.offset < m.offset:
                    items.append(_Item("skip"))  # answered before the checkpoint this state comes from
                    continue
                elif len(dec.x) != m.concept.point_dim:
                    dec = wire.Rejected(
                        "dimension",
                        f"x must have {m.concept.point_dim} coordinate(s)",
                        dec.id,
                        dec.model,
                        dec.content_type,
                    )
            if isinstance(dec, wire.Query) and self.models[dec.model].suspended:
                items.append(_Item("q", query=dec, label=-1))
                continue
            if isinstance(dec, wire.Query):
                by_model.setdefault(dec.model, []).append(len(items))
                items.append(_Item("q", query=dec))
            else:
                items.append(_Item("rej", rejected=dec))
        cut = len(items)
        for mid, idx in by_model.items():
            p = self.models[mid].predictor
            assert p is not None
            cap = p.capacity
            allowed = len(idx) if cap is None else cap
            if len(idx) > allowed:
                cut = min(cut, idx[allowed])
        for mid, idx in by_model.items():
            take = [i for i in idx if i < cut]
            if not take:
                continue
            m = self.models[mid]
            assert m.predictor is not None
            qs = [items[i].query for i in take]
            ans = m.predictor.answer(m.stack([q.x for q in qs if q is not None]))
            assert ans.consumed == len(take)
            for i, lab in zip(take, ans.labels.tolist(), strict=True):
                items[i].label = int(lab)
                items[i].round = ans.round
            m.since_checkpoint += len(take)
        counts: dict[tuple[str, str], int] = {}
        for i in range(cut):
            self._emit(items[i], recs[i], out, counts)
        for (model, status), k in counts.items():
            self.metrics.queries.labels(model=model, status=status).inc(k)
        self.next_offset[part] = recs[cut].offset if cut < len(recs) else recs[-1].offset + 1
        if cut > 0:
            self.last_fp[part] = fingerprint(recs[cut - 1])
        for m in self._models_on(part):
            if m.predictor is not None:
                m.offset = max(m.offset, self.next_offset[part])
                m.unverified_restore = False  # the log reached back to its checkpoint: replays are exact
                m.last_fp = self.last_fp.get(part)
                self._publish_model(m)
        self.dirty.add(part)
        if cut < len(recs):
            self.parked[part] = recs[cut:]
            assert self.consumer is not None
            self.consumer.pause(TopicPartition(self.cfg.topics.queries, part))
            due = [
                m
                for m in self._models_on(part)
                if m.predictor is not None and m.predictor.phase is Phase.TRANSITION_DUE
            ]
            self.transitions[part] = asyncio.create_task(self._transition(part, due))

    def _drop_seen(self, part: int, recs: list[Any]) -> list[Any]:
        """Records below the processed offset are normally duplicates (a fetch delivered twice, or the
        one-record overlap re-read after a restore to verify the log) and are dropped. They are a
        *new* log only on positive evidence: the broker's high watermark is below what we processed,
        or the record at the last processed offset has another fingerprint. Then every model on the
        partition is rebased to the log's start (or suspended, if its state may lag published
        answers) and the partition is re-read from offset 0."""
        nxt = self.next_offset.get(part, 0)
        if not recs or recs[0].offset >= nxt:
            return recs
        assert self.consumer is not None
        tp = TopicPartition(self.cfg.topics.queries, part)
        hw = self.consumer.highwater(tp)
        last = [r for r in recs if r.offset == nxt - 1]
        replaced = (hw is not None and hw < nxt) or (
            bool(last) and self.last_fp.get(part) is not None and fingerprint(last[0]) != self.last_fp[part]
        )
        if not replaced:
            return [r for r in recs if r.offset >= nxt]
        log.error(
            "partition %d: the log was replaced (high watermark %s, processed up to %d): the broker lost "
            "data; re-reading it from the start",
            part,
            hw,
            nxt,
        )
        self.metrics.log_resets.inc()
        for m in self._models_on(part):
            m.offset = 0
            if m.unverified_restore:
                # Restored from a periodic checkpoint, and the log that would replay up to the answers
                # already published is gone: continuing could reuse randomness and overspend the
                # round's halt budget. Refuse until an operator acts (docs/OPERATIONS.md).
                m.suspended = (
                    "the broker lost this model's queries after its last checkpoint; it refuses "
                    "until an operator restores a checkpoint (see docs/OPERATIONS.md)"
                )
                log.error("model %s suspended: cannot prove its state covers every published answer", m.id)
        self.next_offset[part] = 0
        self.last_fp[part] = None
        self.consumer.seek(tp, 0)
        return []

    def _emit(self, it: _Item, r: Any, out: Outbox, counts: dict[tuple[str, str], int]) -> None:
        t = self.cfg.topics
        if it.kind == "skip":
            return
        if it.kind == "q":
            q = it.query
            assert q is not None and it.label is not None
            key = q.model.encode()
            if it.label >= 0:
                status, label, reason = "ok", it.label, None
            else:
                mr = self.models[q.model]
                p = mr.predictor
                status, label = "refused", None
                reason = mr.suspended or (
                    EXHAUSTED_REASON if p is not None and p.phase is Phase.EXHAUSTED else REFUSED_REASON
                )
            out.add(
                t.labels,
                key,
                wire.encode_label(q.id, label, status, it.round, reason, q.content_type),
                wire.label_headers(q.content_type),
            )
            counts[(q.model, status)] = counts.get((q.model, status), 0) + 1
            return
        rej = it.rejected
        assert rej is not None
        self.metrics.invalid.labels(reason=rej.code).inc()
        if rej.id is not None:
            m = self.models.get(rej.model or "")
            rnd = m.predictor.round if m is not None and m.predictor is not None else 0
            out.add(
                t.labels,
                r.key,
                wire.encode_label(rej.id, None, "invalid", rnd, rej.message, rej.content_type),
                wire.label_headers(rej.content_type),
            )
            if m is not None:
                counts[(m.id, "invalid")] = counts.get((m.id, "invalid"), 0) + 1
        out.add(
            t.dead_letters,
            r.key,
            r.value if r.value is not None else b"",
            wire.dead_letter_headers(rej.code, rej.message, r.topic, r.partition, r.offset),
        )
        self.metrics.dead_letters.labels(reason=rej.code).inc()

    async def _send(self, out: Outbox, stop: asyncio.Event) -> None:
        """Produce every record and wait for the broker's acks; retry with backoff while the broker
        is away (re-sent records are byte-identical, so duplicates are harmless). Records go out as
        one batch per (topic, partition), keyed partitioning as Kafka's default (murmur2)."""
        assert self.producer is not None
        if not out.records:
            return
        backoff = 0.1
        while True:
            try:
                await self._send_batches(out)
                self._broker(True)
                return
            except KafkaError as exc:
                self._broker(False)
                if stop.is_set():
                    raise
                log.warning("produce failed (%s); retrying in %.1fs", type(exc).__name__, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.cfg.broker.max_backoff_s)

    async def _send_batches(self, out: Outbox) -> None:
        assert self.producer is not None
        groups: dict[tuple[str, int], list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]] = {}
        for topic, key, value, headers in out.records:
            parts = sorted(await self.producer.partitions_for(topic))
            p = self._partitioner(key, parts, parts) if key is not None else parts[0]
            groups.setdefault((topic, p), []).append((key, value, headers))
        futs = []
        for (topic, p), recs in groups.items():
            batch = self.producer.create_batch()
            for key, value, headers in recs:
                if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                    futs.append(await self.producer.send_batch(batch, topic, partition=p))
                    batch = self.producer.create_batch()
                    if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                        raise KafkaError("a label record is larger than the producer's batch size")
            if batch.record_count():
                futs.append(await self.producer.send_batch(batch, topic, partition=p))
        await asyncio.gather(*futs)

    async def _transition(self, part: int, models: list[ModelRuntime]) -> None:
        try:
            for m in models:
                assert m.predictor is not None
                m.transitioning = True
                t0 = time.perf_counter()
                await asyncio.to_thread(m.predictor.transition)
                m.transitioning = False
                self.metrics.transition_seconds.labels(model=m.id).observe(time.perf_counter() - t0)
                self.metrics.rounds_completed.labels(model=m.id).inc()
                log.info("model %s entered round %d (%s)", m.id, m.predictor.round, m.predictor.phase.value)
            async with self.lock:
                if part in self.owned:
                    await self._checkpoint_partition(part)
        except BaseException as exc:  # a failed transition is a bug: stop, restart replays it
            self.failed = exc
            raise

    async def _resume_finished(self) -> None:
        for part, task in list(self.transitions.items()):
            if not task.done():
                continue
            del self.transitions[part]
            if task.exception() is not None or part not in self.owned:
                continue
            async with self.lock:
                recs = self.parked.pop(part, [])
                out = Outbox()
                if recs:
                    self._process(part, recs, out)
                await self._send(out, asyncio.Event())
                if part not in self.parked:
                    assert self.consumer is not None
                    self.consumer.resume(TopicPartition(self.cfg.topics.queries, part))

    # -- checkpoints ---------------------------------------------------------------------------

    async def _checkpoint_model(self, m: ModelRuntime, part: int, handover: bool = False) -> None:
        t0 = time.perf_counter()
        try:
            await m.checkpoint(part, handover=handover)
        except Exception:
            self.metrics.checkpoint_failures.inc()
            raise
        self.metrics.checkpoint_seconds.observe(time.perf_counter() - t0)

    async def _checkpoint_partition(self, part: int, handover: bool = False) -> None:
        for m in self._models_on(part):
            if m.predictor is not None and not m.transitioning:
                await self._checkpoint_model(m, part, handover)
        self.dirty.discard(part)
        assert self.consumer is not None
        with contextlib.suppress(KafkaError):  # commits are informational; restarts use checkpoints
            await self.consumer.commit({TopicPartition(self.cfg.topics.queries, part): self.next_offset[part]})

    async def _maybe_checkpoint(self, force: bool) -> None:
        ck = self.cfg.checkpoint
        now = time.monotonic()
        for part in sorted(self.owned):
            if part in self.transitions:
                continue
            ms = [m for m in self._models_on(part) if m.predictor is not None]
            if part not in self.dirty and not any(m.since_checkpoint for m in ms):
                continue
            due = (
                force
                or any(m.since_checkpoint >= ck.every_queries for m in ms)
                or any(now - m.last_checkpoint >= ck.every_seconds for m in ms)
                or not ms
            )
            if due:
                await self._checkpoint_partition(part)

    # -- metrics -------------------------------------------------------------------------------

    def _publish_model(self, m: ModelRuntime) -> None:
        p = m.predictor
        if p is None:
            return
        g = self.metrics
        g.round.labels(model=m.id).set(p.round)
        g.halted.labels(model=m.id).set(1 if p.phase is Phase.HALTED else 0)
        info = p.round_info()
        if info is None:
            return
        g.round_answered.labels(model=m.id).set(info.answered)
        g.round_allowed.labels(model=m.id).set(info.allowed)
        g.halts_allowed.labels(model=m.id).set(info.halt_cap)
        if self.cfg.metrics.expose_halts_used:
            g.halts_used.labels(model=m.id).set(info.tops)

    async def _probe_broker(self, every_s: float = 5.0) -> None:
        """A metadata round trip every few seconds: the health signal while no traffic flows (aiokafka
        retries quietly, so an idle consumer alone would never notice the broker is gone)."""
        now = time.monotonic()
        if now - self._last_probe < every_s or self.producer is None:
            return
        self._last_probe = now
        try:
            ok = await asyncio.wait_for(self.producer.client.force_metadata_update(), timeout=every_s)
        except (TimeoutError, KafkaError):
            ok = False
        if not ok:
            log.warning("the broker does not answer; retrying")
        self._broker(bool(ok))

    def _broker(self, up: bool) -> None:
        self.broker_ok = up
        self.metrics.broker_up.set(1 if up else 0)

    def _update_lag(self) -> None:
        if self.consumer is None:
            return
        for part in self.owned:
            hw = self.consumer.highwater(TopicPartition(self.cfg.topics.queries, part))
            if hw is not None:
                self.metrics.lag.labels(partition=str(part)).set(max(0, hw - self.next_offset.get(part, 0)))
