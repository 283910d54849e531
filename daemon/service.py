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

Every processed record is in the journal, durably, before its label is produced; a checkpoint of
the partition drops the rows it covers.

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
from aiokafka.errors import KafkaError
from aiokafka.partitioner import DefaultPartitioner

from everlast.daemon import batch as codec
from everlast.daemon.checkpoint.blobs import BlobStore, DirStore, EncryptedStore, key_from_env
from everlast.daemon.checkpoint.checkpoint import PartitionCheckpoint
from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.daemon.config import Config
from everlast.daemon.errors import BrokerError, CheckpointError, ConfigError, DaemonError, Stopped, as_daemon_error
from everlast.daemon.journal import FILENAME as JOURNAL_FILE
from everlast.daemon.journal import Journal, Slice
from everlast.daemon.logs import UNLIMITED
from everlast.daemon.metrics import Heartbeat, Metrics
from everlast.daemon.model import ModelRuntime
from everlast.daemon.partition import Event, Headers, PartitionProcessor, Served, Step
from everlast.daemon.retry import retrying, until_stopped
from everlast.engine.errors import EngineError
from everlast.engine.phases import Phase

log = logging.getLogger("everlast.daemon")


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
        self.procs: dict[int, PartitionProcessor] = {}
        self.ckpts: dict[int, PartitionCheckpoint] = {}
        self.transitions: dict[int, asyncio.Task[dict[str, BaseException]]] = {}
        self.encoder = codec.LabelEncoder()
        self._partitioner = DefaultPartitioner()
        self._parts: dict[str, list[int]] = {}
        self._label_part: dict[bytes | None, int] = {}
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
        self._jseq: dict[int, int] = {}
        """Per partition: the last journal row whose records are processed in full."""
        self._log_start: dict[int, int] = {}
        """Per partition, until its first feed: the log's first offset, as the broker said at assignment."""
        self.embedded = cfg.broker.bootstrap_servers is None
        """The daemon's own broker, started with it: its log is always empty at start (expected)."""
        self.clean: bool | None = None
        """After ``run``: whether the hand-over checkpoints cover every published answer."""
        self.uncovered: list[str] = []
        self.ready_flag = False
        self.broker_ok = False
        self.checkpoint_ok = True
        self._ends: dict[int, int] = {}
        self.failed: BaseException | None = None
        self.scrapes_at_failure: int | None = None

    @property
    def owned(self) -> set[int]:
        return set(self.procs)

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

    def _tp(self, part: int) -> TopicPartition:
        return TopicPartition(self.cfg.topics.queries, part)

    # -- wiring ------------------------------------------------------------------------------

    def _kw(self) -> dict[str, Any]:
        kw = self.cfg.broker.aiokafka_kwargs()
        kw["bootstrap_servers"] = self.bootstrap
        return kw

    async def _ensure_topics(self) -> None:
        if not self.cfg.topics.create:
            return
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        from everlast.daemon.checkpoint.kafka_store import MIN_COMPACTION_LAG_MS

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
                new.append(NewTopic(t.checkpoints, 1, 1, topic_configs={
                    "cleanup.policy": "compact", "min.compaction.lag.ms": str(MIN_COMPACTION_LAG_MS),
                    # the lag counts on the broker's clock, not a replica's (docs/privacy/learner.md 2)
                    "message.timestamp.type": "LogAppendTime"}))
            if new:
                await admin.create_topics(new)  # "already exists" comes back as an error code, not a raise
        finally:
            await admin.close()

    async def _check_checkpoints_topic(self) -> None:
        """Refuse to start when the Kafka checkpoints topic deletes records by retention: a model whose
        claim and state expire would be created again, a second release of its training data
        (``kafka_store.retention_problem``), or is compacted with a ``min.compaction.lag.ms`` below an
        hour (``kafka_store.compaction_lag_problem``: the claim's argument needs it). A broker that does
        not describe the topic's configuration (Tansu describes only the settings given at creation) gets
        a warning. Sets how long a claim's read-back may take (``kafka_store.claim_bound_s``)."""
        if self.cfg.checkpoint.store != "kafka":
            return
        from aiokafka.admin import AIOKafkaAdminClient
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        from everlast.daemon.checkpoint.kafka_store import (
            MIN_COMPACTION_LAG_MS,
            claim_bound_s,
            compaction_lag_problem,
            retention_problem,
            timestamp_problem,
        )

        topic = self.cfg.topics.checkpoints
        admin = AIOKafkaAdminClient(**{k: v for k, v in self._kw().items() if k != "retry_backoff_ms"})
        configs: dict[str, str] | None = None
        try:
            await admin.start()
            got = await asyncio.wait_for(admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]), 30)
            configs = {str(e[0]): str(e[1]) for r in got for res in r.resources if res[0] == 0 for e in res[4]
                       if e[1] is not None}
        except Exception as exc:  # the broker may not implement DescribeConfigs
            log.warning("cannot read the configuration of the checkpoints topic %s (%s); it must never delete "
                        "records by retention (docs/OPERATIONS.md, 'Checkpoint topic')", topic, type(exc).__name__)
        finally:
            await _quietly(admin.close)
        self._claim_bound_s = claim_bound_s(configs)
        if configs is None:
            return
        problem = retention_problem(configs)
        if problem is not None:
            raise ConfigError(
                f"the checkpoints topic {topic} deletes records by retention ({problem}): a model whose claim and "
                "state expire would be created again, a second release of its training data. Set cleanup.policy="
                "compact (or retention.ms=-1 and retention.bytes=-1) on it (docs/OPERATIONS.md, 'Checkpoint "
                "topic')")
        lag_problem = compaction_lag_problem(configs)
        if lag_problem is not None:
            raise ConfigError(
                f"the checkpoints topic {topic} is compacted with {lag_problem}: the cleaner could remove a claim's "
                "first record while a replica reads its own claim back, and two replicas could both create a model "
                f"(a second release of its training data). Set min.compaction.lag.ms={MIN_COMPACTION_LAG_MS} or more "
                "on it (docs/OPERATIONS.md, 'Checkpoint topic')")
        compacted = "compact" in configs.get("cleanup.policy", "")
        if compacted and "min.compaction.lag.ms" not in configs:
            log.warning("the broker does not report min.compaction.lag.ms of the compacted checkpoints topic %s; it "
                        "must be at least %d so that no claim is compacted while it is read back (docs/OPERATIONS.md, "
                        "'Checkpoint topic')", topic, MIN_COMPACTION_LAG_MS)
        if timestamp_problem(configs) is not None:
            raise ConfigError(
                f"the compacted checkpoints topic {topic} has message.timestamp.type=CreateTime: the compaction lag "
                "then counts on the replicas' clocks, and one running slow shortens it below what the claim's "
                "argument needs (two replicas could both create a model). Set message.timestamp.type=LogAppendTime "
                "on it (docs/OPERATIONS.md, 'Checkpoint topic')")
        if "cleanup.policy" not in configs:
            log.warning("the broker does not say how the checkpoints topic %s is cleaned; it must never delete "
                        "records by retention (docs/OPERATIONS.md, 'Checkpoint topic')", topic)

    def _make_store(self) -> BlobStore:
        ck = self.cfg.checkpoint
        inner: BlobStore
        if ck.store == "dir":
            inner = DirStore(ck.dir)
            inner.secure_root()
        else:
            from everlast.daemon.checkpoint.kafka_store import KafkaStore

            self.kafka_store = KafkaStore(
                self.producer,
                lambda: AIOKafkaConsumer(**self._kw(), enable_auto_commit=False, fetch_max_wait_ms=50),
                self.cfg.topics.checkpoints,
                ck.max_chunk_bytes,
            )
            self.kafka_store.claim_bound_s = self._claim_bound_s
            inner = self.kafka_store
        key = key_from_env(ck.key_env)
        return EncryptedStore(inner, key) if key is not None else inner

    # -- lifecycle ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        self.stop = stop
        c = self.cfg.consumer
        await self._ensure_topics()
        await self._check_checkpoints_topic()
        async with contextlib.AsyncExitStack() as clients:
            self._producer = AIOKafkaProducer(
                **self._kw(),
                acks="all",
                linger_ms=2,
                enable_idempotence=False,
                max_request_size=max(1_048_576, self.cfg.checkpoint.max_chunk_bytes + 65_536),
            )
            await self._producer.start()
            clients.push_async_callback(_quietly, self._producer.stop)
            self._store = self._make_store()
            if self.cfg.checkpoint.journal:
                ck = self.cfg.checkpoint
                self.journal = Journal(ck.dir / JOURNAL_FILE, key_from_env(ck.key_env))
                clients.callback(self.journal.close)
            self._consumer = AIOKafkaConsumer(
                **self._kw(),
                group_id=c.group_id,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                fetch_max_wait_ms=c.fetch_max_wait_ms,
                session_timeout_ms=c.session_timeout_ms,
                heartbeat_interval_ms=c.heartbeat_interval_ms,
                max_poll_interval_ms=max(300_000, c.session_timeout_ms),
            )
            await self._consumer.start()
            clients.push_async_callback(_quietly, self._consumer.stop)
            self._consumer.subscribe([self.cfg.topics.queries], listener=_Listener(self))
            self._broker(True)
            monitor = asyncio.create_task(self._monitor(stop))
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
                self._broker(False)
                log.warning("fetch failed (%s); retrying", type(exc).__name__)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
                continue
            async with self.lock:
                await self._handle(fetched)
                self._update_lag()
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
        pending = [t for t in self.transitions.values() if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.cfg.shutdown_timeout_s)
        async with self.lock:  # the batch in flight has been answered and acknowledged (or halted)
            self.uncovered = await self._hand_over(sorted(self.procs))
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
        if not all(p.log_checked for p in self.procs.values()):
            return "checking the log"
        suspended = sorted(m.id for p in self.procs.values() for m in p.models.values() if m.suspension is not None)
        if suspended:
            return "suspended: " + ", ".join(suspended[:20]) + (" ..." if len(suspended) > 20 else "")
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
        async with self.lock:
            self._homes()
            self._label_part.clear()
            self._parts.clear()
            if self.kafka_store is not None:
                await self.kafka_store.refresh()
            for part in partitions:
                if part in self.procs:
                    continue
                committed = await self.consumer.committed(self._tp(part))
                start = int(committed) if committed is not None else 0
                served: list[Served] = []
                cks: dict[str, ModelCheckpointer] = {}
                jid = self.journal.id if self.journal is not None else None
                for mr in (self.models[m] for m, p in self.home.items() if p == part):
                    with self.heartbeat.busy():  # a creation fits on a worker thread, for as long as the data asks
                        s, ck, restored = await mr.activate(self.store, start, self.n_partitions, jid, partition=part,
                                                           claim_wait_s=self.cfg.checkpoint.claim_wait_seconds)
                    if mr.adopted is not None:
                        g = mr.guarantee
                        log.warning("model %s: its checkpoint runs another schedule than the configuration (%s "
                                    "differ): a model keeps the schedule it was created with; the certificate of "
                                    "the running one: training-set epsilon %.4g, query epsilon %.4g (delta %.2g); "
                                    "%s. Serve the new schedule under a new model id (docs/OPERATIONS.md, 'A model "
                                    "halted')", s.id, mr.adopted, g.epsilon_training, g.epsilon_queries, g.delta,
                                    client_tests_line(g.details))
                        publish_guarantee(self.metrics, mr)
                        mr.adopted = None
                    elif mr.mechanism == "private-learner":  # its validated certificate, once fitted or restored
                        publish_guarantee(self.metrics, mr)
                    served.append(s)
                    cks[s.id] = ck
                    state = (f" ({s.phase.value})" if s.phase is not Phase.ANSWERING else "") + (
                        " (suspended)" if s.suspension is not None else "")
                    rounds = f"round {s.round}" if s.engine.has_rounds else "no rounds (private learner)"
                    log.info("model %s %s at offset %d on partition %d, %s%s", s.id,
                             "restored" if restored else "created", s.offset, part, rounds, state)
                proc = PartitionProcessor(part, served, self.models.keys(), start, self.encoder)
                ck_part = PartitionCheckpoint(
                    part, cks, offset=proc.next_offset, every_queries=self.cfg.checkpoint.every_queries,
                    every_seconds=self.cfg.checkpoint.every_seconds,
                    meta={m: self.models[m].meta(self.n_partitions) for m in cks},
                )
                self.procs[part], self.ckpts[part] = proc, ck_part
                await self._log_bounds(part)
                await self._replay_journal(part)
                if served:
                    # before answering anything new: a created model's first checkpoint (a crash must never
                    # re-draw its randomness), a restored one's state after its journal, and it gives up its
                    # one-time hand-over claim
                    await self._commit(part)
                self.consumer.seek(self._tp(part), proc.start_position)
                for s in served:
                    self._publish(s)
            self._models_active()
            self.ready_flag = True

    async def _log_bounds(self, part: int) -> None:
        """Where the partition's log begins (records deleted by retention?) and how far it reaches
        (a lower bound, saved with the checkpoints: a log found ending before it is another log)."""
        tp = self._tp(part)
        with contextlib.suppress(KafkaError, TimeoutError):
            first = await asyncio.wait_for(self.consumer.beginning_offsets([tp]), 10)
            self._log_start[part] = int(first[tp])
        with contextlib.suppress(KafkaError, TimeoutError):
            end = await asyncio.wait_for(self.consumer.end_offsets([tp]), 10)
            self.procs[part].saw_log_end(int(end[tp]))

    async def _replay_journal(self, part: int) -> None:
        """Replay the journal's rows of a partition just assigned through its restored models (the
        processor says which rows, or why none can be trusted) and re-publish their labels: the
        models come back exactly where their published answers left them, whatever the broker kept."""
        jr, proc = self.journal, self.procs[part]
        if jr is None:
            return
        topic = self.cfg.topics.queries
        rows = await asyncio.to_thread(jr.slices, topic, part)
        seqs, why = proc.journal_plan(rows)
        self._jseq[part] = jr.position()  # rows not replayed are of no use: the next checkpoint drops them
        if why is not None:
            if rows and proc.models:
                log.warning("partition %d: its %d journal rows are not replayed (%s); a model restored from a "
                            "periodic checkpoint relies on the broker's log", part, len(rows), why)
            return
        if not seqs:
            return
        self._jseq[part] = seqs[0] - 1
        max_bytes, n, first = self.cfg.consumer.max_record_bytes, 0, None
        for seq in seqs:
            sl = await asyncio.to_thread(jr.read, topic, part, seq)
            first = sl.start if first is None else first
            n += len(sl.records)
            step = proc.replay(codec.decode(sl.records, max_bytes, self.cfg.consumer.client_header))
            while True:
                await self._send([(part, step)], journal=False)
                self._apply(part, step, start_transitions=False)
                if not step.transitions:
                    break
                failures = await self._transition(proc, step.transitions)
                self._log_events(part, proc.transition_done(failures))
                self.ckpts[part].mark_dirty()
                await self._commit(part)  # covers the rows before this one (this one maybe in part)
                step = proc.resume()
            self._jseq[part] = seq
        proc.replayed()
        self._log_events(part, [Event("journal", detail=f"{n} records, offsets {first} to {proc.next_offset - 1}")])

    async def revoke(self, partitions: list[int]) -> None:
        waits = [self.transitions[p] for p in partitions if p in self.transitions]
        if waits:
            await asyncio.wait(waits, timeout=self.cfg.shutdown_timeout_s)
        async with self.lock:
            await self._hand_over([p for p in partitions if p in self.procs])
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
                proc, ck = self.procs[part], self.ckpts[part]
                task = self.transitions.pop(part, None)
                if task is not None and task.done() and task.exception() is None:
                    self._log_events(proc.partition, proc.transition_done(task.result()))
                elif task is not None:
                    task.cancel()  # still running (or failed): the state is in flux, no checkpoint
                    uncovered.append(f"partition {part}: a round transition did not finish")
                    proc.revoke()
                    del self.procs[part], self.ckpts[part]
                    continue
                why = ck.blocked(proc)
                if why is not None:
                    uncovered.append(f"partition {part}: {why}")
                    log.warning("partition %d: no checkpoint at hand-over (%s); the next owner replays from "
                                "the previous one%s", part, why, " and the journal" if self.journal else "")
                else:
                    try:
                        await self._commit(part, handover=True, stop=give_up)
                    except Exception as exc:
                        if proc.models:  # (a partition without models has nothing to cover)
                            uncovered.append(f"partition {part}: the hand-over checkpoint failed "
                                             f"({type(exc).__name__})")
                        log.error("partition %d: checkpoint at hand-over failed (%s); the next owner replays "
                                  "from the previous one", part, type(exc).__name__)
                proc.revoke()
                del self.procs[part], self.ckpts[part]
                with contextlib.suppress(KeyError):
                    self.metrics.lag.remove(str(part))  # a gauge of a partition we no longer own would go stale
        finally:
            timer.cancel()
        return uncovered

    def _models_active(self) -> None:
        self.metrics.models_active.set(sum(len(p.models) for p in self.procs.values()))

    # -- records -------------------------------------------------------------------------------

    async def _handle(self, fetched: dict[TopicPartition, list[Any]]) -> None:
        t0 = time.perf_counter()
        steps: list[tuple[int, Step]] = []
        max_bytes, hdr = self.cfg.consumer.max_record_bytes, self.cfg.consumer.client_header
        for part, proc in self.procs.items():
            tp = self._tp(part)
            recs = fetched.get(tp)
            step = proc.feed(codec.decode(recs, max_bytes, hdr) if recs else None, self.consumer.highwater(tp),
                             self._log_start.pop(part, None))
            steps.append((part, step))
        await self._send(steps)
        for part, step in steps:
            self._apply(part, step)
        if fetched:
            self.metrics.batch_seconds.observe(time.perf_counter() - t0)

    async def _send(self, steps: list[tuple[int, Step]], journal: bool = True) -> None:
        """Journal the processed records (durably), then produce every record and wait for the
        broker's acks, retrying while the broker is away (re-sent records are byte-identical, so
        duplicates are harmless). One batch per (topic, partition); keys are partitioned as Kafka's
        default (murmur2). ``journal=False``: the records came from the journal (a replay)."""
        if journal and self.journal is not None:
            await self._journal(steps)
        t = self.cfg.topics
        groups: dict[tuple[str, int], list[tuple[bytes | None, list[bytes], list[Headers]]]] = {}
        for _, step in steps:
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
                    groups.setdefault((t.dead_letters, self._partition_of(key, parts)), []).append(
                        (key, [value], [hdrs]))
        if groups:
            await retrying(lambda: self._send_batches(groups), self.halt, what="produce",
                           max_backoff_s=self.cfg.broker.max_backoff_s, on_error=self._broker_error)
            self._broker(True)

    async def _journal(self, steps: list[tuple[int, Step]]) -> None:
        """The processed records of every step, in the journal before any label is produced."""
        jr = self.journal
        assert jr is not None
        batches = {part: [Slice(a, b, recs) for a, b, recs in step.processed] for part, step in steps
                   if step.processed and part in self.procs and self.procs[part].models}  # (no state elsewhere)
        if not batches:
            return
        last = await retrying(lambda: asyncio.to_thread(jr.append, self.cfg.topics.queries, batches), self.halt,
                              what="journal write", max_backoff_s=self.cfg.broker.max_backoff_s,
                              on_error=self._checkpoint_error, interruptible=False)
        self._jseq.update(last)

    async def _partitions(self, topic: str) -> list[int]:
        parts = self._parts.get(topic)
        if parts is None:
            parts = self._parts[topic] = sorted(await self.producer.partitions_for(topic))
        return parts

    def _partition_of(self, key: bytes | None, parts: list[int]) -> int:
        return int(self._partitioner(key, parts, parts)) if key is not None else parts[0]

    async def _send_batches(
        self, groups: dict[tuple[str, int], list[tuple[bytes | None, list[bytes], list[Headers]]]]
    ) -> None:
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

    def _apply(self, part: int, step: Step, start_transitions: bool = True) -> None:
        """After the step's records are acknowledged: store the offset, act on the consumer,
        count, log (and start the round transitions the step asks for, unless the caller runs them)."""
        proc, ck = self.procs.get(part), self.ckpts.get(part)
        if proc is None or ck is None:
            return
        tp = self._tp(part)
        if step.log_reset:
            if not self.embedded:  # the embedded broker starts empty at every start: expected
                self.metrics.log_resets.inc()
            ck.reset()
            ck.mark_dirty(urgent=True)  # the exact state at offset 0 of the new log, before its records
            self._ends.pop(part, None)
        if proc.next_offset > ck.offset:
            ck.store_offset(proc.next_offset, step.answered)
        if step.seek is not None:
            self.consumer.seek(tp, step.seek)
        if step.pause:
            self.consumer.pause(tp)
        if step.resume:
            self.consumer.resume(tp)
        if step.transitions and start_transitions:
            self.transitions[part] = asyncio.create_task(self._transition(proc, step.transitions))
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
        self._log_events(part, step.events)
        if any(e.kind == "suspended" for e in step.events):
            ck.mark_dirty(urgent=True)
        if step.counts or step.events:
            for m in proc.models.values():
                self._publish(m)

    # -- transitions ---------------------------------------------------------------------------

    async def _transition(self, proc: PartitionProcessor, ids: list[str]) -> dict[str, BaseException]:
        """Run the transitions in a worker thread; an ``EngineError`` suspends its model (returned),
        anything else stops the daemon (a restart replays)."""
        failures: dict[str, BaseException] = {}
        for mid in ids:
            m = proc.models[mid]
            t0 = time.perf_counter()
            try:
                await asyncio.to_thread(m.engine.transition)
            except EngineError as exc:
                failures[mid] = exc
                continue
            self.metrics.transition_seconds.labels(model=mid).observe(time.perf_counter() - t0)
            self.metrics.rounds_completed.labels(model=mid).inc()
        return failures

    async def _finish_transitions(self) -> None:
        for part, task in list(self.transitions.items()):
            if not task.done():
                continue
            del self.transitions[part]
            exc = task.exception()
            if exc is not None:
                log.error("partition %d: a round transition failed (%s): stopping", part, type(exc).__name__)
                self._fail(exc)
                return
            async with self.lock:
                proc, ck = self.procs.get(part), self.ckpts.get(part)
                if proc is None or ck is None:
                    continue  # revoked meanwhile: the new owner replays from its checkpoint
                self._log_events(part, proc.transition_done(task.result()))
                ck.mark_dirty()
                await self._commit(part)  # the new round, before it answers anything
                step = proc.resume()
                await self._send([(part, step)])
                self._apply(part, step)

    # -- checkpoints ---------------------------------------------------------------------------

    async def _commit(self, part: int, handover: bool = False, stop: asyncio.Event | None = None) -> None:
        proc, ck = self.procs[part], self.ckpts[part]
        tp = self._tp(part)

        async def commit_offset(offset: int) -> None:  # informational: never wait long for it
            if self.broker_ok and not self.halt.is_set():
                await asyncio.wait_for(self.consumer.commit({tp: offset}), 5.0)

        jr = self.journal
        covered = self._jseq.get(part, 0)
        jinfo = (jr.id, covered) if jr is not None else None

        async def once() -> None:
            t0 = time.perf_counter()
            await ck.commit(proc, commit_offset, handover=handover, journal=jinfo)
            self.metrics.checkpoint_seconds.observe(time.perf_counter() - t0)

        await retrying(once, stop or self.halt, what=f"checkpoint of partition {part}",
                       max_backoff_s=self.cfg.broker.max_backoff_s, on_error=self._checkpoint_error,
                       interruptible=False)
        self.checkpoint_ok = True
        if jr is not None and covered:
            try:  # rows the checkpoint covers; left behind (a failure), a restore skips them anyway
                await asyncio.to_thread(jr.clear, self.cfg.topics.queries, part, covered)
            except CheckpointError as exc:
                log.warning("partition %d: cannot drop the journal's rows after a checkpoint (%s)", part, exc)

    async def _maybe_checkpoint(self) -> None:
        for part in sorted(self.procs):
            if part in self.transitions:
                continue
            ck = self.ckpts[part]
            if ck.due() and ck.blocked(self.procs[part]) is None:
                await self._commit(part)

    def _checkpoint_error(self, err: DaemonError) -> None:
        self.metrics.checkpoint_failures.inc()
        self.checkpoint_ok = False
        self.heartbeat.beat()  # waiting for the store is not a stall

    # -- signals -------------------------------------------------------------------------------

    def _log_events(self, part: int, events: list[Event]) -> None:
        for e in events:
            if e.kind == "halted":
                log.error("model %s halted in round %d: its halt budget is spent; it refuses every query from "
                          "now on (docs/OPERATIONS.md, 'A model halted')", e.model, e.round)
            elif e.kind == "exhausted":
                log.warning("model %s: the schedule has ended (round %d); it refuses every query", e.model, e.round)
            elif e.kind == "suspended":
                log.error("model %s suspended (%s): it refuses every query until an operator acts "
                          "(docs/OPERATIONS.md)", e.model, e.detail)
            elif e.kind == "log_replaced" and self.embedded:
                log.info("partition %d: the embedded broker starts empty (it keeps nothing across restarts); "
                         "reading its new log from offset 0 (%s)", part, e.detail)
            elif e.kind == "log_replaced":
                log.error("partition %d: the log was replaced (%s): the broker lost data; re-reading it from "
                          "the start", part, e.detail)
            elif e.kind == "log_deleted":
                log.warning("partition %d: the broker deleted records before this daemon read them (%s, "
                            "retention?): their queries get no label", part, e.detail)
            elif e.kind == "journal":
                log.info("partition %d: replayed the journal (%s): the models are where their published answers "
                         "left them, and those labels are published again", part, e.detail)
            elif e.kind == "round":
                log.info("model %s entered round %d (%s)", e.model, e.round, e.detail)
            elif e.kind == "quota":  # a released fact (Theorem Q+, remark 4): the client, never a query
                log.warning("model %s: client %s spent its share of round %d's halt budget (its quota test "
                            "fired): its queries are refused (client-quota) until the round ends; every other "
                            "client is answered (docs/OPERATIONS.md, 'A client's quota fired')",
                            e.model, e.detail, e.round, extra={UNLIMITED: True, "everlast_client": e.detail})
            elif e.kind == "quota_many":
                log.warning("model %s: more than %s clients' quotas fired in round %d; further ones are counted "
                            "(everlast_client_quota_fired_total), not logged: many ids spend the budget together "
                            "(Sybils? docs/OPERATIONS.md, 'A client's quota fired')", e.model, e.detail, e.round,
                            extra={UNLIMITED: True})

    def _publish(self, m: Served) -> None:
        g = self.metrics
        g.suspended.labels(model=m.id).set(0 if m.suspension is None else 1)
        if not m.engine.has_rounds:  # no round, halt or round-progress series (everlast_model_info says so)
            return
        g.round.labels(model=m.id).set(m.round)
        g.halted.labels(model=m.id).set(1 if m.phase is Phase.HALTED else 0)
        if m.broken:
            return
        info = m.engine.round_info()
        if info is None:
            return
        g.round_answered.labels(model=m.id).set(info.answered)
        g.round_allowed.labels(model=m.id).set(info.allowed)
        g.halts_allowed.labels(model=m.id).set(info.halt_cap)
        sched = self.models[m.id].schedule if m.id in self.models else None
        spec = sched.spec(m.round) if sched is not None else None
        if spec is not None and spec.halt_threshold is not None:
            g.halt_threshold.labels(model=m.id).set(spec.halt_threshold)
        if sched is not None and sched.burn is not None:
            windows, noisy = m.burn.of_round(m.round)
            g.burn_noisy_tops.labels(model=m.id).set(noisy)
            g.burn_queries.labels(model=m.id).set(windows * sched.burn.window)
        if self.cfg.metrics.expose_halts_used:
            g.halts_used.labels(model=m.id).set(info.tops)

    async def _monitor(self, stop: asyncio.Event, every_s: float = 5.0) -> None:
        """Beside the run loop, so that it reports while the loop waits (for a transition, the
        checkpoint store or the broker): is the broker there, and how far behind is each partition."""
        while not stop.is_set():
            with contextlib.suppress(Stopped):
                await self._probe_broker(every_s)
                await self._refresh_ends(every_s)
            self._update_lag()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every_s)

    async def _probe_broker(self, timeout_s: float) -> None:
        """A metadata round trip: the health signal while no traffic flows (aiokafka retries
        quietly, so an idle consumer alone would never notice the broker is gone)."""
        try:
            ok = await until_stopped(asyncio.wait_for(self.producer.client.force_metadata_update(), timeout_s),
                                     self.stop)
        except (TimeoutError, KafkaError):
            ok = False
        if not ok:
            log.warning("the broker does not answer; retrying")
        self._broker(bool(ok))

    async def _refresh_ends(self, timeout_s: float) -> None:
        """The partitions' log-end offsets, for the lag gauge only: a paused partition, or a loop
        that waits, gets no fetch responses, and its lag would freeze. (Tansu answers with a lower
        bound, the start of its last batch; never used to judge the log itself.)"""
        tps = [self._tp(p) for p in self.procs]
        if not tps:
            return
        try:
            ends = await until_stopped(asyncio.wait_for(self.consumer.end_offsets(tps), timeout_s), self.stop)
        except (TimeoutError, KafkaError):
            return
        self._ends = {tp.partition: int(o) for tp, o in ends.items()}

    def _broker(self, up: bool) -> None:
        self.broker_ok = up
        self.metrics.broker_up.set(1 if up else 0)

    def _broker_error(self, err: DaemonError) -> None:
        self._broker(False)
        self.heartbeat.beat()  # waiting for the broker is not a stall

    def _update_lag(self) -> None:
        for part, proc in list(self.procs.items()):
            hw = max(self.consumer.highwater(self._tp(part)) or 0, self._ends.get(part, 0))
            self.metrics.lag.labels(partition=str(part)).set(max(0, hw - proc.next_offset))


def publish_guarantee(metrics: Metrics, m: ModelRuntime) -> None:
    """The model's certificate and public description as metrics (at start, and again when a restored
    checkpoint runs another schedule than the configuration's)."""
    g = m.guarantee
    metrics.eps.labels(model=m.id, protects="training").set(g.epsilon_training)
    metrics.eps.labels(model=m.id, protects="queries").set(g.epsilon_queries)
    metrics.delta.labels(model=m.id, protects="training").set(g.delta)
    metrics.delta.labels(model=m.id, protects="queries").set(g.delta)
    metrics.describe(m.id, m.mechanism, m.cfg.concept, m.n_train, g.details)


def client_tests_line(details: dict[str, object]) -> str:
    """The per-client quotas and burn-rate signal a GenericBBL model runs (charged in its query epsilon
    by Theorem Q+, docs/privacy/genericbbl.md 5.5), in words."""
    q, b = details.get("quotas"), details.get("burn")
    parts = []
    if isinstance(q, dict):
        parts.append(f"per-client quotas on (share {q['share']:g} of the halting threshold, eps_q {q['eps']:g})")
    else:
        parts.append("per-client quotas off")
    if isinstance(b, dict):
        parts.append(f"burn-rate signal on (a noisy top count per {b['window']:,} queries, eps_b {b['eps']:g})")
    else:
        parts.append("burn-rate signal off")
    charged = " (both charged in the query epsilon, Theorem Q+)" if isinstance(q, dict) and isinstance(b, dict) \
        else " (charged in the query epsilon, Theorem Q+)" if isinstance(q, dict) or isinstance(b, dict) else ""
    return ", ".join(parts) + charged


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

