"""The run loop's I/O: fetch -> ``PartitionProcessor.feed`` -> produce (retried) -> store the
acknowledged offset -> checkpoint when due. Every decision about records is the processor's
(``daemon/partition.py``), the commit order the checkpoint's (``daemon/checkpoint/checkpoint.py``);
this module only talks to the broker, the checkpoint store and the metrics.

Ownership: a model lives on the partition its key hashes to (murmur2, Kafka's default
partitioner); the replica that owns the partition serves the model. On assignment each model is
restored from the checkpoint store (or created), the partition's journal rows are replayed through
it (``daemon/journal.py``: their labels are re-published), it is checkpointed before it answers
anything new, and the partition is sought to where its processor starts. A round transition runs
in a worker thread while other partitions keep flowing; the processor parks its partition's
records meanwhile.

Every processed record is in the journal, durably, before its label is produced, and every model's
published mark with it (``daemon/marks.py``); a checkpoint of the partition drops the rows it
covers. A restored model that does not reach its mark is judged before it answers
(``recovery.judge_marks``); one whose state cannot be restored is suspended alone
(``ModelRuntime.unrestored``).

What an answer releases beside its labels reaches the operator here: a WARNING line naming the
client whose quota fired (never rate-limited; bounded by the processor), per-model counters of
quota firings and refusals (no client label: a label per id would grow without bound), and the
round's summed burn-rate releases and its c0 as gauges (the halt-budget alerts read them).

Shutdown (SIGTERM): stop fetching; let the batch in flight finish, waiting for the broker's
acknowledgements at most ``drain_timeout_s``; then the hand-over checkpoint of every partition.
``clean`` says whether those checkpoints cover every published answer (``app`` logs "stopped
cleanly" and exits 0 only then).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from everlast.daemon import batch as codec
from everlast.daemon import topics
from everlast.daemon.checkpoint.blobs import BlobStore, DirStore, key_from_env, sealed
from everlast.daemon.checkpoint.checkpoint import PartitionCheckpoint
from everlast.daemon.config import Config
from everlast.daemon.errors import CheckpointError, DaemonError, Stopped, as_daemon_error
from everlast.daemon.events import Event, EventKind, log_events
from everlast.daemon.fetch_wait import FetchWait
from everlast.daemon.journal import FILENAME as JOURNAL_FILE
from everlast.daemon.journal import Journal, Slice, open_or_set_aside
from everlast.daemon.marks import FILENAME as MARKS_FILE
from everlast.daemon.marks import Marks
from everlast.daemon.metrics import Heartbeat, Metrics
from everlast.daemon.model import ModelRuntime
from everlast.daemon.monitor import update_lag, watch
from everlast.daemon.outbox import Groups, Outbox
from everlast.daemon.owned import OwnedPartition, drop_lag, running
from everlast.daemon.partition import PartitionProcessor, Served, Step
from everlast.daemon.recovery import activate, judge_marks, log_bounds, recheck, replay_journal
from everlast.daemon.retry import retrying, until_stopped
from everlast.daemon.signals import client_tests_line, publish, publish_guarantee
from everlast.engine.errors import EngineError

__all__ = ["Service", "client_tests_line", "publish_guarantee"]

log = logging.getLogger("everlast.daemon")

LABEL_BATCH_BYTES = 1 << 19
"""The producer's record batch: a fetched batch's labels (<= 5,000 of ~40 bytes) fit one; under
Kafka's default 1 MB message limit."""


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
        self.owned: dict[int, OwnedPartition] = {}
        """The partitions this process serves (``daemon/owned.py``)."""
        self.encoder = codec.LabelEncoder()
        self._partitioner = DefaultPartitioner()
        self.outbox = Outbox(cfg.topics, lambda: self.producer)
        self._producer: AIOKafkaProducer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._store: BlobStore | None = None
        self.kafka_store: Any = None
        self._claim_bound_s = 900.0  # how long a claim's read-back may take (set from the topic at start)
        self.stop = asyncio.Event()
        """Set by SIGTERM: fetch nothing more."""
        self.halt = asyncio.Event()
        """Set when the drain timeout has passed after ``stop``: stop waiting for the broker."""
        self.journal: Journal | None = None
        self.journal_note: str | None = None
        """Set at start when the journal file was damaged (moved aside): what its models lost."""
        self.marks: Marks | None = None
        """The published marks (``daemon/marks.py``), beside the journal."""
        self.marks_damaged: str | None = None
        self.embedded = cfg.broker.bootstrap_servers is None
        """The daemon's own broker, started with it: its log is always empty at start (expected)."""
        self.clean: bool | None = None
        """After ``run``: whether the hand-over checkpoints cover every published answer."""
        self.uncovered: list[str] = []
        self.ready_flag = False
        self.broker_ok = False
        self.recheck_due = False
        """The broker went away or came back since the logs were last judged (``recovery.recheck``)."""
        self.checkpoint_ok = True
        self.failed: BaseException | None = None
        self.scrapes_at_failure: int | None = None

    @property
    def procs(self) -> dict[int, PartitionProcessor]:
        """The processor of each owned partition (read-only view, for tools and tests)."""
        return {p: o.proc for p, o in self.owned.items()}

    @property
    def producer(self) -> AIOKafkaProducer:
        if self._producer is None:
            raise RuntimeError("the service is not running")
        return self._producer

    @property
    def consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("the service is not running")
        return self._consumer

    @property
    def store(self) -> BlobStore:
        if self._store is None:
            raise RuntimeError("the service is not running")
        return self._store

    def tp(self, part: int) -> TopicPartition:
        return TopicPartition(self.cfg.topics.queries, part)

    # -- wiring ------------------------------------------------------------------------------

    def _kw(self) -> dict[str, Any]:
        kw = self.cfg.broker.aiokafka_kwargs()
        kw["bootstrap_servers"] = self.bootstrap
        return kw

    def _make_store(self) -> BlobStore:
        ck = self.cfg.checkpoint
        if ck.store == "kafka":
            from everlast.daemon.checkpoint.kafka_store import KafkaStore

            self.kafka_store = KafkaStore(
                self.producer, lambda: AIOKafkaConsumer(**self._kw(), enable_auto_commit=False, fetch_max_wait_ms=50),
                self.cfg.topics.checkpoints, ck.max_chunk_bytes)
            self.kafka_store.claim_bound_s = self._claim_bound_s
        return sealed(self.kafka_store or DirStore.private(ck.dir), key_from_env(ck.key_env))

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        self.stop = stop
        await topics.ensure_topics(self.cfg, self._kw())
        bound = await topics.check_checkpoints(self.cfg, self._kw(), _quietly)
        if bound is not None:
            self._claim_bound_s = bound
        async with contextlib.AsyncExitStack() as clients:
            await self._start_clients(clients)
            self.broker(True)
            monitor = asyncio.create_task(watch(self, stop))
            drain = asyncio.create_task(self._drain_deadline(stop))
            try:
                await self._loop(stop)
            except Stopped:
                pass
            finally:
                monitor.cancel()
                try:
                    await self._shutdown()
                finally:
                    drain.cancel()
            if self.failed is not None:
                raise self.failed

    async def _start_clients(self, clients: contextlib.AsyncExitStack) -> None:
        c, ck = self.cfg.consumer, self.cfg.checkpoint
        self._producer = AIOKafkaProducer(  # a batch's labels in one record batch, not 16 kB ones: every
            # reader of a log that walks its batches per fetch (the embedded broker) reads a planned round faster
            **self._kw(), acks="all", linger_ms=2, enable_idempotence=False, max_batch_size=LABEL_BATCH_BYTES,
            max_request_size=max(1_048_576, ck.max_chunk_bytes + 65_536),
        )
        await self._producer.start()
        clients.push_async_callback(_quietly, self._producer.stop)
        self._store = self._make_store()
        if ck.journal:
            self.journal, self.journal_note = open_or_set_aside(ck.dir / JOURNAL_FILE, key_from_env(ck.key_env))
            clients.callback(self.journal.close)
            if self.journal_note is not None:
                log.error("%s: the models whose rows it held continue only if their published answers are "
                          "covered (their checkpoints, or the broker's log); the others are suspended",
                          self.journal_note)
            self.marks = Marks(ck.dir / MARKS_FILE)
            clients.callback(self.marks.close)
            self.marks_damaged = self.marks.damaged
        self._consumer = AIOKafkaConsumer(
            **self._kw(), group_id=c.group_id, enable_auto_commit=False, auto_offset_reset="earliest",
            fetch_max_wait_ms=c.fetch_max_wait_ms, session_timeout_ms=c.session_timeout_ms,
            heartbeat_interval_ms=c.heartbeat_interval_ms, max_poll_interval_ms=max(300_000, c.session_timeout_ms),
        )
        await self._consumer.start()
        clients.push_async_callback(_quietly, self._consumer.stop)
        self.fetch_wait = FetchWait(c.fetch_max_wait_ms, "the queries consumer")
        self._consumer.subscribe([self.cfg.topics.queries], listener=_Listener(self))

    async def _loop(self, stop: asyncio.Event) -> None:
        c = self.cfg.consumer
        while not stop.is_set():
            self.heartbeat.beat()
            if self.failed is not None:
                return
            await self._finish_transitions()
            try:
                fetched = await until_stopped(self.consumer.getmany(timeout_ms=100, max_records=c.max_records), stop)
            except Exception as exc:  # the retry policy of the error's type (daemon.retry)
                err = as_daemon_error(exc)
                if err is None or not err.retriable:
                    raise
                self.broker(False)
                log.warning("fetch failed (%s); retrying", type(exc).__name__)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
                continue
            paused = self.consumer.paused()  # a paused partition returns nothing on purpose
            await self.fetch_wait.after(self.consumer, any(fetched.values()),
                                        [tp for tp in map(self.tp, list(self.owned)) if tp not in paused])
            async with self.lock:
                await self._handle(fetched)
                update_lag(self)
                await self._maybe_checkpoint()

    async def _drain_deadline(self, stop: asyncio.Event) -> None:
        """``drain_timeout_s`` after the stop request: stop waiting for acknowledgements (``halt``)."""
        await stop.wait()
        await asyncio.sleep(self.cfg.drain_timeout_s)
        self.halt.set()

    async def _shutdown(self) -> None:
        """Drain, then hand over: the batch in flight finishes (its answers are acknowledged by the
        broker, waited for at most ``drain_timeout_s`` from the stop request), transitions finish
        (bounded), and every partition gets its hand-over checkpoint. ``clean`` and ``uncovered``
        say whether those checkpoints cover every published answer."""
        pending = running(self.owned)
        if pending:
            await asyncio.wait(pending, timeout=self.cfg.shutdown_timeout_s)
        async with self.lock:  # the batch in flight has been answered and acknowledged (or halted)
            self.uncovered = await self._hand_over(sorted(self.owned))
        self.clean = not self.uncovered

    def _fail(self, exc: BaseException) -> None:
        """Stop the daemon with ``exc``; a scrape after this point has read the final counters."""
        self.failed = exc
        self.scrapes_at_failure = self.metrics.scrapes

    def ready(self) -> bool:
        return self.not_ready() is None

    def not_ready(self) -> str | None:
        """Why /readyz answers 503 (``None``: ready)."""
        if not self.ready_flag:
            return "starting"
        if self.failed is not None:
            return "stopping after an error"
        if not self.broker_ok:
            return "the broker does not answer"
        if not self.checkpoint_ok:
            return "checkpoint writes fail"
        if not all(o.proc.log_checked for o in self.owned.values()):
            return "checking the log"
        suspended = sorted((m.id, m.suspension.reason) for o in self.owned.values() for m in o.models.values()
                           if m.suspension is not None)
        if suspended:  # each with its reason (what was lost, what to do): the other models serve
            return "suspended: " + "; ".join(f"{m} ({why})" for m, why in suspended[:5]) + (
                f"; and {len(suspended) - 5} more" if len(suspended) > 5 else "")
        return None

    # -- partitions ----------------------------------------------------------------------------

    def _homes(self) -> None:
        parts = sorted(self.consumer.partitions_for_topic(self.cfg.topics.queries) or [])
        self.home = {m: self._partitioner(m.encode(), parts, parts) for m in self.models}
        self.n_partitions = len(parts)

    async def assign(self, partitions: list[int]) -> None:
        """Restore (or create) the models homed on the assigned partitions and seek there. A failure
        (an unreadable checkpoint, a wrong key) stops the daemon: aiokafka would otherwise swallow it
        and leave the partition silently unserved."""
        try:
            async with self.lock:
                await self._assign(partitions)
        except Stopped:
            pass
        except BaseException as exc:
            log.error("partition assignment failed (%s): stopping", type(exc).__name__)
            if isinstance(exc, CheckpointError):
                self.metrics.checkpoint_failures.inc()
            self._fail(exc)
            raise

    async def _assign(self, partitions: list[int]) -> None:
        self._homes()
        self.outbox.forget()
        if self.kafka_store is not None:
            await self.kafka_store.refresh()
        for part in partitions:
            if part in self.owned:
                continue
            committed = await self.consumer.committed(self.tp(part))
            start = int(committed) if committed is not None else 0
            served, cks = await activate(self, part, start)
            proc = PartitionProcessor(part, served, self.models.keys(), start, self.encoder)
            ck = PartitionCheckpoint(
                part, cks, offset=proc.next_offset, every_queries=self.cfg.checkpoint.every_queries,
                every_seconds=self.cfg.checkpoint.every_seconds,
                meta={m: {**self.models[m].meta(self.n_partitions),
                          **({"marks": self.marks.id} if self.marks is not None else {})} for m in cks},
            )
            o = self.owned[part] = OwnedPartition(part, proc, ck)
            await self._open(o)
        self._models_active()
        self.ready_flag = True

    async def _open(self, o: OwnedPartition) -> None:
        """A partition just assigned: its log bounds, its journal replayed, its first checkpoint (a
        created model's first one: a crash must never re-draw its randomness; a restored one's state
        after its journal; it gives up its one-time hand-over claim), before answering anything new."""
        await log_bounds(self, o)
        await replay_journal(self, o)
        self.log_events(o.part, judge_marks(o, self.marks, self.journal_note))
        o.opened = True
        if o.models:
            await self.commit(o)
        self.consumer.seek(self.tp(o.part), o.proc.start_position)
        for s in o.models.values():
            self._publish(s)

    async def revoke(self, partitions: list[int]) -> None:
        waits = [t for p in partitions if p in self.owned and (t := self.owned[p].transition) is not None]
        if waits:
            await asyncio.wait(waits, timeout=self.cfg.shutdown_timeout_s)
        async with self.lock:
            await self._hand_over([p for p in partitions if p in self.owned])
            self._models_active()

    async def _hand_over(self, partitions: list[int]) -> list[str]:
        """Checkpoint (as a hand-over) and drop each partition; a checkpoint that cannot be taken
        leaves the previous one (and the journal's rows), from which the next owner replays.
        Returns what the checkpoints do not cover (one line per partition; empty: everything)."""
        give_up = asyncio.Event()
        timer = asyncio.get_running_loop().call_later(self.cfg.shutdown_timeout_s, give_up.set)
        uncovered: list[str] = []
        try:
            for part in partitions:
                o = self.owned[part]
                try:
                    why = await o.hand_over(self, give_up, self.journal is not None)
                finally:
                    del self.owned[part]
                    drop_lag(self.metrics.lag, part)
                if why is not None:
                    uncovered.append(why)
        finally:
            timer.cancel()
        return uncovered

    def _models_active(self) -> None:
        self.metrics.models_active.set(sum(len(o.models) for o in self.owned.values()))

    # -- records -------------------------------------------------------------------------------

    async def _handle(self, fetched: dict[TopicPartition, list[Any]]) -> None:
        if self.recheck_due:  # the records in hand may be another log's: fetched again where it seeks
            return await recheck(self)
        t0 = time.perf_counter()
        steps: list[tuple[OwnedPartition, Step]] = []
        max_bytes, hdr = self.cfg.consumer.max_record_bytes, self.cfg.consumer.client_header
        for part, o in self.owned.items():
            tp = self.tp(part)
            recs = fetched.get(tp)
            step = o.proc.feed(codec.decode(recs, max_bytes, hdr) if recs else None, self.consumer.highwater(tp),
                               o.take_log_start())
            steps.append((o, step))
        await self.send(steps)
        for o, step in steps:
            self.apply(o, step)
        if fetched:
            self.metrics.batch_seconds.observe(time.perf_counter() - t0)

    async def send(self, steps: list[tuple[OwnedPartition, Step]], journal: bool = True) -> None:
        """Journal the processed records (durably), then produce every record and wait for the
        broker's acks, retrying while the broker is away (re-sent records are byte-identical, so
        duplicates are harmless). One batch per (topic, partition); keys are partitioned as Kafka's
        default (murmur2). ``journal=False``: the records came from the journal (a replay)."""
        if journal and self.journal is not None:
            await self._journal(steps)
        groups: Groups = {}
        for _, step in steps:
            await self.outbox.group(step, groups)
        if groups:
            await retrying(lambda: self.outbox.send_batches(groups), self.halt, what="produce",
                           max_backoff_s=self.cfg.broker.max_backoff_s, on_error=self._broker_error)
            self.broker(True)

    async def _journal(self, steps: list[tuple[OwnedPartition, Step]]) -> None:
        """The processed records of every step, in the journal before any label is produced."""
        jr = self.journal
        assert jr is not None
        batches = {o.part: [Slice(a, b, recs) for a, b, recs in step.processed] for o, step in steps
                   if step.processed and o.part in self.owned and o.models}  # (no state elsewhere)
        if not batches:
            return
        marks = {m.id: m.offset for o, _ in steps if o.part in batches for m in o.models.values()}

        def persist() -> dict[int, int]:  # the records, then how far the models answered: before any label
            last = jr.append(self.cfg.topics.queries, batches)
            if self.marks is not None:
                self.marks.publish(marks)
            return last

        last = await retrying(lambda: asyncio.to_thread(persist), self.halt,
                              what="journal write", max_backoff_s=self.cfg.broker.max_backoff_s,
                              on_error=self._checkpoint_error, interruptible=False)
        for part, seq in last.items():
            self.owned[part].jseq = seq

    def apply(self, o: OwnedPartition, step: Step, start_transitions: bool = True) -> None:
        """After the step's records are acknowledged: store the offset, act on the consumer,
        count, log (and start the round transitions the step asks for, unless the caller runs them)."""
        if self.owned.get(o.part) is not o:
            return
        proc, ck, tp = o.proc, o.ck, self.tp(o.part)
        if step.log_reset:
            if not self.embedded:  # the embedded broker starts empty at every start: expected
                self.metrics.log_resets.inc()
            ck.reset()
            ck.mark_dirty(urgent=True)  # the exact state at offset 0 of the new log, before its records
            o.log_end = 0
            if self.marks is not None:  # offsets start over: the marks of the old log would read as ahead
                self.marks.publish({m.id: m.offset for m in proc.models.values()})
        if proc.next_offset > ck.offset:
            ck.store_offset(proc.next_offset, step.answered)
        if step.seek is not None:
            self.consumer.seek(tp, step.seek)
        if step.pause:
            self.consumer.pause(tp)
        if step.resume:
            self.consumer.resume(tp)
        if step.transitions and start_transitions:
            o.start_transition(asyncio.create_task(self.transition(proc, step.transitions)))
        self._count(step)
        self.log_events(o.part, step.events)
        if any(e.kind is EventKind.SUSPENDED for e in step.events):
            ck.mark_dirty(urgent=True)
        if step.counts or step.events:
            for m in proc.models.values():
                self._publish(m)

    def _count(self, step: Step) -> None:
        g = self.metrics
        for (model, status), k in step.counts.items():
            g.queries.labels(model=model, status=status).inc(k)
        for reason, k in step.invalid.items():
            g.invalid.labels(reason=reason).inc(k)
            g.dead_letters.labels(reason=reason).inc(k)
        for model, k in step.quota_refused.items():
            g.quota_refusals.labels(model=model).inc(k)
        for model, k in step.quota_fired.items():
            g.quota_fired.labels(model=model).inc(k)
        for model, k in step.paused_refused.items():
            g.paused_refusals.labels(model=model).inc(k)
        for e in step.events:
            if e.kind is EventKind.PAUSED:
                g.rounds_paused.labels(model=e.model).inc()

    # -- transitions ---------------------------------------------------------------------------

    async def transition(self, proc: PartitionProcessor, ids: list[str]) -> dict[str, BaseException]:
        """Run the transitions in a worker thread; an ``EngineError`` suspends its model (returned),
        and so does a ``MemoryError``: a round this engine cannot allocate (the predictor is left
        unchanged by any failure, and a restart would only reach the same round again; the start-up
        log says which rounds one engine holds). Anything else stops the daemon (a restart replays)."""
        failures: dict[str, BaseException] = {}
        for mid in ids:
            m = proc.models[mid]
            t0 = time.perf_counter()
            try:
                await asyncio.to_thread(m.engine.transition)
            except (EngineError, MemoryError) as exc:
                failures[mid] = exc
                continue
            self.metrics.transition_seconds.labels(model=mid).observe(time.perf_counter() - t0)
            self.metrics.rounds_completed.labels(model=mid).inc()
        return failures

    async def _finish_transitions(self) -> None:
        for part, o in list(self.owned.items()):
            task = o.finished_transition()
            if task is None:
                continue
            exc = task.exception()
            if exc is not None:
                log.error("partition %d: a round transition failed (%s): stopping", part, type(exc).__name__)
                self._fail(exc)
                return
            async with self.lock:
                if self.owned.get(part) is not o:
                    continue  # revoked meanwhile: the new owner replays from its checkpoint
                await o.after_transition(self, task.result())

    # -- checkpoints ---------------------------------------------------------------------------

    async def commit(self, o: OwnedPartition, handover: bool = False, stop: asyncio.Event | None = None) -> None:
        """The partition's checkpoint (``PartitionCheckpoint.commit``, retried while the store
        fails), then the journal's rows it covers are dropped."""
        tp = self.tp(o.part)

        async def commit_offset(offset: int) -> None:  # informational: never wait long for it
            if self.broker_ok and not self.halt.is_set():
                await asyncio.wait_for(self.consumer.commit({tp: offset}), 5.0)

        jr = self.journal
        covered = o.jseq
        jinfo = (jr.id, covered) if jr is not None else None

        async def once() -> None:
            t0 = time.perf_counter()
            await o.ck.commit(o.proc, commit_offset, handover=handover, journal=jinfo)
            self.metrics.checkpoint_seconds.observe(time.perf_counter() - t0)

        await retrying(once, stop or self.halt, what=f"checkpoint of partition {o.part}",
                       max_backoff_s=self.cfg.broker.max_backoff_s, on_error=self._checkpoint_error,
                       interruptible=False)
        self.checkpoint_ok = True
        if jr is not None and covered:
            try:  # rows the checkpoint covers; left behind (a failure), a restore skips them anyway
                await asyncio.to_thread(jr.clear, self.cfg.topics.queries, o.part, covered)
            except CheckpointError as exc:
                log.warning("partition %d: cannot drop the journal's rows after a checkpoint (%s)", o.part, exc)

    async def _maybe_checkpoint(self) -> None:
        for part in sorted(self.owned):
            o = self.owned[part]
            if o.due():
                await self.commit(o)

    def _checkpoint_error(self, err: DaemonError) -> None:
        self.metrics.checkpoint_failures.inc()
        self.checkpoint_ok = False
        self.heartbeat.beat()  # waiting for the store is not a stall

    # -- signals -------------------------------------------------------------------------------

    def log_events(self, part: int, events: list[Event]) -> None:
        log_events(part, events, self.embedded)

    def _publish(self, m: Served) -> None:
        publish(self.metrics, m, self.models.get(m.id), self.cfg.metrics.expose_halts_used)

    def broker(self, up: bool) -> None:
        self.recheck_due = self.recheck_due or (up != self.broker_ok and self.ready_flag)
        self.broker_ok = up
        self.metrics.broker_up.set(1 if up else 0)

    def _broker_error(self, err: DaemonError) -> None:
        self.broker(False)
        self.heartbeat.beat()  # waiting for the broker is not a stall


async def _quietly(stop: Any, timeout_s: float = 10.0) -> None:
    """Stop a Kafka client without waiting long for a broker that is gone (at exit, what it still
    holds is either acknowledged already or replayed from the checkpoint)."""
    try:
        await asyncio.wait_for(stop(), timeout_s)
    except asyncio.CancelledError:  # aiokafka's stop() may re-raise the cancellation of its own tasks
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
    except Exception:
        pass

