"""The sans-IO partition processor: every decision the daemon makes about one partition's records,
with no I/O (h11's move). ``Service`` feeds it decoded batches and broker facts (the high
watermark, revocation, a finished transition) and performs what each ``Step`` asks: produce these
records, pause or resume the partition, seek, run these transitions. Because it never awaits, every
decision is tested without a broker (tests/daemon/test_partition.py).

Decisions, in the order ``feed`` takes them:

0. **The journal** (``daemon/journal.py``, at assignment): the records the partition processed
   after its models' checkpoints, kept locally and made durable before their labels were
   published. ``journal_plan`` says which rows to replay (those after every model's checkpoint,
   chained from the partition's next offset) or why they cannot be trusted; ``replay`` runs them
   like fetched records, so the models come back exactly where their published answers left
   them, and their labels are re-published byte for byte. A model whose state then does not
   reach its published mark (``daemon/marks.py``; the service judges it) relies on the broker's
   log (``Served.lost`` says what of its own state was lost, for the reason it gets if the log
   does not hold the rest).
1. **A replaced log** (the broker lost data): the high watermark is below the next offset to
   process or below the log's end a checkpoint saw (``log_end``: a log only grows), or the record
   at a checkpoint's last processed offset has another fingerprint. Every
   model is rebased to offset 0 and the partition re-read from there. Only a model whose state
   may lag answers already published is suspended: restored from a periodic checkpoint without
   its journal (lost, or written by another replica), and whose answers change its state
   (GenericBBL; never the private learner, whose answers are a fixed function of its release).
   Checked on the first fetch response after assignment, records or not, and again after the
   broker went away or came back (``recheck``: the I/O layer seeks one record back) or the
   consumer's position went back (a re-read record must be the one processed). **Deleted records**
   (the log starts after the next offset: retention ran while the daemon was away) are judged the
   same way.
2. **Records already processed** (a re-delivery, or the one-record overlap re-read to verify the
   log) are dropped; a model restored at a later offset than its partition skips the records
   before its own offset.
3. **Routing**: a record keyed by a model homed here goes to that model; one keyed by a model
   homed elsewhere is ``wrong_partition``, by no model ``unknown_model`` (both ``invalid``).
4. **Validation**: the batch codec checked the schema; here the model's dimension.
5. **The round's end**: the engine says how many queries it takes before a transition
   (``Servable.capacity``). The batch is cut at the first query beyond any model's capacity (two
   models on one partition: the earliest), the rest is parked and the partition paused while the
   transitions run; ``transition_done`` then ``resume`` picks the parked records up.
6. **Answers**: one ``answer`` call per model and batch, with each query's client (the record's
   client header, ``Batch.clients``; ``None`` = the anonymous client) in record order, so that a
   replay (the journal keeps the headers) gives the same answers. What an answer releases beside
   its labels is passed on: ``client-quota`` refusals (counted), after which query a client's
   quota test fired (an ``Event`` naming the client, at most ``QUOTA_LOG_LINES`` per model and
   round) and the burn-rate windows it completed (summed per round in ``Served.burn``, saved with
   the checkpoints). ``InvalidInput`` (nothing changed) is
   narrowed to the queries that cause it, which get ``invalid`` records (``domain``): in one
   vectorized step when the engine says which queries lie outside its declared domain
   (``engine.serving.DomainScreen``: the private learner), else query by query. Any other engine
   error suspends the model: its queries are refused with the reason, from now on and after
   restarts (persisted).
7. **Suspended models** are never called: their queries get ``refused`` records naming why.

Every record up to the cut produces exactly one label record (``ok``, ``refused`` or ``invalid``,
if it has an id) and every rejected record a dead letter: nothing is dropped silently.
"""

from __future__ import annotations

import bisect
import enum
import hashlib
import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.daemon import wire
from everlast.daemon.batch import Batch, Id, LabelEncoder
from everlast.daemon.errors import OutOfTurn
from everlast.daemon.events import Event, EventKind
from everlast.engine.errors import EngineError, InvalidInput
from everlast.engine.phases import Phase
from everlast.engine.serving import Answers, DomainScreen, Refusal, Servable

Headers = list[tuple[str, bytes]]
Out = tuple[bytes | None, bytes, Headers]
"""A record to produce: (key, value, headers)."""

LOG_LOST_REASON = (
    "the broker lost this model's queries after its last checkpoint; it refuses until an operator "
    "restores a checkpoint (see docs/OPERATIONS.md)"
)
LOG_DELETED_REASON = (
    "the broker deleted this model's queries after its last checkpoint (retention); it refuses until an "
    "operator restores a checkpoint (see docs/OPERATIONS.md)"
)


def behind_reason(lost: str, broker: str) -> str:
    """Why a model whose restored state is behind its published answers is suspended: what was lost
    of its own state (``Served.lost``: the journal's rows, the checkpoint's) and what of the broker's."""
    return (
        f"this model's state is behind answers it already published ({lost}), and {broker}: answering on "
        "would reuse the randomness of published answers. It refuses until an operator restores a checkpoint "
        "that covers them or retires the model (see docs/OPERATIONS.md, 'A model suspended')"
    )


def engine_failed_reason(exc: BaseException) -> str:
    if isinstance(exc, MemoryError):
        return ("the round transition could not allocate the next round's memory (MemoryError): one engine "
                "cannot hold that round (`everlast plan --json`, 'capacity'); the model refuses every query until "
                "an operator acts (see docs/OPERATIONS.md, 'A round one engine cannot hold')")
    return (
        f"the model's engine failed ({type(exc).__name__}); it refuses every query until an operator "
        "acts (see docs/OPERATIONS.md)"
    )


def fingerprint(r: Any) -> str:
    """Identity of a log record (timestamp, key, value): detects a log replaced under the same offsets."""
    h = hashlib.sha256()
    h.update(str(r.timestamp).encode())
    for part in (r.key, r.value):
        h.update(b"\x00" if part is None else len(part).to_bytes(8, "big") + part)
    return h.hexdigest()[:32]


class Status(enum.Enum):
    ACTIVE = "active"
    TRANSITIONING = "transitioning"
    """Some models' rounds ended: records are parked and the partition paused until ``transition_done``."""
    REVOKED = "revoked"


@dataclass(frozen=True, slots=True)
class Suspension:
    """Why a model refuses every query from ``from_offset`` on (persisted with its checkpoint)."""

    reason: str
    round: int
    from_offset: int
    engine_failed: bool
    """The engine raised: its state is not saved again (the last good one stays in the store)."""

    def to_meta(self) -> dict[str, Any]:
        return {"suspended": self.reason, "suspended_round": self.round, "suspended_from": self.from_offset,
                "engine_failed": self.engine_failed}

    @classmethod
    def from_meta(cls, meta: dict[str, Any], round_: int) -> Suspension | None:
        reason = meta.get("suspended")
        if not reason:
            return None
        return cls(str(reason), int(meta.get("suspended_round", round_)), int(meta.get("suspended_from", 0)),
                   bool(meta.get("engine_failed", False)))


@dataclass
class BurnTally:
    """The released burn-rate windows of a round (``engine.burn``; ``Answers.burn``): their count and
    the sum of their noisy top counts. A sum of released values (post-processing, Theorem Q+): public,
    like the releases themselves."""

    round: int = 0
    windows: int = 0
    """Windows released in ``round`` (they are released in order: queries [0, windows * W))."""
    noisy_tops: int = 0

    def add(self, rows: NDArray[np.int64]) -> None:
        """Rows (round, window, noisy_tops) of one ``answer`` call (one round)."""
        if not rows.size:
            return
        rnd = int(rows[-1, 0])
        if rnd != self.round:
            self.round, self.windows, self.noisy_tops = rnd, 0, 0
        mine = rows[rows[:, 0] == rnd]
        self.windows = max(self.windows, int(mine[:, 1].max()) + 1)
        self.noisy_tops += int(mine[:, 2].sum())

    def of_round(self, rnd: int) -> tuple[int, int]:
        """(windows released, their noisy top count) in round ``rnd``."""
        return (self.windows, self.noisy_tops) if self.round == rnd else (0, 0)

    def to_meta(self) -> list[int]:
        return [self.round, self.windows, self.noisy_tops]

    @classmethod
    def from_meta(cls, v: Any) -> BurnTally:
        try:
            r, w, t = (int(a) for a in v)
        except (TypeError, ValueError):
            return cls()
        return cls(r, w, t)


QUOTA_LOG_LINES = 100
"""At most this many log lines per model and round name a client whose quota fired; the rest are
counted (``everlast_client_quota_fired_total``) and summarised in one line."""


def show_client(client: bytes | None) -> str:
    """A client id for a log line: quoted and escaped (ids come from the operator's gateway, but a
    log line must never carry raw control characters), at most 256 characters."""
    if client is None:
        return "(the anonymous client: no client header)"
    return json.dumps(client.decode("utf-8", "backslashreplace")[:256])


@dataclass
class Served:
    """A model as its partition serves it: the engine and what the daemon tracks about it."""

    id: str
    engine: Servable
    offset: int
    """Next offset of the partition this model has not processed."""
    last_fp: str | None = None
    """Fingerprint of the record at ``offset - 1`` (from the checkpoint; verifies the log)."""
    verified: bool = True
    """False while restored from a periodic checkpoint and neither its journal nor the log has been
    seen to reach back to it: answers may have been published beyond it that only the log can
    replay."""
    log_end: int = 0
    """The log's end (a lower bound of its high watermark) when its checkpoint was written: a log
    that ends before it is another log, even when the checkpoint's offset is 0."""
    journal_seq: int | None = None
    """The last journal row its checkpoint covers, if the checkpoint was written beside this
    daemon's journal (``None``: the journal cannot vouch for it)."""
    suspension: Suspension | None = None
    round: int = 0
    """The last round the engine reported (kept so that a failed engine is never asked)."""
    phase: Phase = Phase.ANSWERING
    broken: bool = False
    """The engine raised in this process: it is never called again (a restored one is fresh)."""
    burn: BurnTally = field(default_factory=BurnTally)
    """The burn-rate releases of the current round, summed (saved with the checkpoints)."""
    quota_lines: tuple[int, int] = (0, 0)
    """(round, quota firings seen in it): bounds the log lines that name clients."""
    lost: str | None = None
    """What of its own state is known lost when its restored state is behind its published mark
    (``daemon/marks.py``): the journal's rows, in words. It then relies on the broker's log."""
    marks_id: str | None = None
    """The id of the published marks file its checkpoint was written beside (``daemon/marks.py``):
    only then does reaching its mark vouch that nothing was published beyond its state."""
    frozen: bool = False
    """Its state could not be restored (damaged, lost, or bound to other data or configuration): its
    engine is a placeholder, never called; its checkpoint is never written (the store keeps what is
    there for an operator); it is suspended, and the suspension is judged again at every start."""

    def __post_init__(self) -> None:
        self.round, self.phase = self.engine.round, self.engine.phase

    @property
    def point_dim(self) -> int:
        return int(self.engine.point_dim)


@dataclass
class Step:
    """What the I/O layer must do after one call into the processor."""

    labels: dict[bytes | None, tuple[list[bytes], list[Headers]]] = field(default_factory=dict)
    """Label records per key (values, headers), in record order; keys are model ids, except for
    invalid records whose key names no model."""
    dead_letters: list[Out] = field(default_factory=list)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)
    """Label records by (model, status)."""
    invalid: dict[str, int] = field(default_factory=dict)
    """Rejected records by reason (each also a dead letter)."""
    answered: int = 0
    """Queries an engine consumed (the checkpoint cadence counts them)."""
    quota_refused: dict[str, int] = field(default_factory=dict)
    """Queries refused for their client's quota (``client-quota``), by model."""
    quota_fired: dict[str, int] = field(default_factory=dict)
    """Clients whose quota test fired (at most one per client and round), by model."""
    paused_refused: dict[str, int] = field(default_factory=dict)
    """Queries refused because their round was paused (``round-paused``), by model."""
    transitions: list[str] = field(default_factory=list)
    """Models whose round ended: run their transitions, then call ``transition_done``."""
    pause: bool = False
    resume: bool = False
    seek: int | None = None
    log_reset: bool = False
    events: list[Event] = field(default_factory=list)
    processed: list[tuple[int, int, Sequence[Any]]] = field(default_factory=list)
    """The records processed, as (next offset before, next offset after, records): what the
    journal must hold before the labels are published."""

    def count(self, model: str, status: str, k: int = 1) -> None:
        self.counts[(model, status)] = self.counts.get((model, status), 0) + k

    def add(self, key: bytes | None, values: list[bytes], headers: list[Headers]) -> None:
        got = self.labels.get(key)
        if got is None:
            self.labels[key] = (values, headers)
        else:
            got[0].extend(values)
            got[1].extend(headers)

    def label_records(self) -> list[Out]:
        """Every label record as (key, value, headers) (for tests and tools)."""
        return [(k, v, h) for k, (vs, hs) in self.labels.items() for v, h in zip(vs, hs, strict=True)]


_Answered = tuple[list[int], list[int], int, str | None]
"""Labels (-1: refused), refusal codes, the round, and the suspension reason if the engine failed."""


@dataclass
class _Plan:
    """One model's share of a batch: record indices by fate."""

    m: Served
    query: list[int]
    x: NDArray[np.float64]
    refused: list[int]
    clean: bool
    """Every record of the model's key is a query for its engine (none rejected, skipped or refused)."""


class PartitionProcessor:
    def __init__(self, partition: int, models: Sequence[Served], known: Collection[str], start: int,
                 encoder: LabelEncoder | None = None) -> None:
        """``models``: those homed on this partition (restored or created); ``known``: every
        configured model id (to tell a wrong partition from an unknown model); ``start``: the
        consumer group's committed offset, for a partition without models."""
        self.partition = partition
        self.models = {m.id: m for m in models}
        self.known = frozenset(known)
        self.enc = encoder or LabelEncoder()
        self.status = Status.ACTIVE
        live = [m for m in models if not m.frozen]  # a frozen model's state is not here: it bounds nothing
        self.next_offset = min([m.offset for m in live], default=min([m.offset for m in models], default=start))
        lows = [m for m in live if m.offset == self.next_offset and m.last_fp]
        self.last_fp: str | None = lows[0].last_fp if lows else None
        # offsets whose record must match a checkpoint's fingerprint, until seen
        self._expect: dict[int, str] = {m.offset - 1: m.last_fp for m in live if m.last_fp and m.offset > 0}
        self.log_end = max([m.log_end for m in live], default=0)
        """The furthest end this partition's log has been seen to reach (checkpoints save it)."""
        self.log_checked = False
        """A fetch response has shown the log (its high watermark) since assignment."""
        self.parked: list[Batch] = []
        self._transitioning: list[str] = []
        self._keys: dict[bytes | None, str | None] = {}

    # -- where to start ----------------------------------------------------------------------

    @property
    def start_position(self) -> int:
        """Where to seek after assignment: one record before the next offset when its fingerprint
        is known, so that the first fetch proves (or disproves) that the log is the same."""
        nxt = self.next_offset
        return nxt - 1 if nxt > 0 and (nxt - 1) in self._expect else nxt

    # -- broker facts --------------------------------------------------------------------------

    def feed(self, batch: Batch | None, highwater: int | None, log_start: int | None = None) -> Step:
        """A fetched batch of this partition (offset order) and the high watermark from the same
        fetch response (``None`` if no response arrived since assignment); ``log_start``: the log's
        first offset, when the I/O layer has asked the broker (at assignment)."""
        if self.status is Status.REVOKED:
            raise OutOfTurn(f"partition {self.partition}: feed after revoke")
        step = Step()
        if highwater is not None:
            self.log_checked = True
        if self.status is Status.TRANSITIONING:
            if batch is not None and len(batch):
                self.parked.append(batch)
            return step
        if self._replaced(batch, highwater):
            self._rebase(step, highwater)
            return step
        if log_start is not None and log_start > self.next_offset:
            self._deleted(step, log_start)  # the records below it (none, normally) are dropped next
        if batch is not None and len(batch):
            first = 0
            while first < len(batch) and batch.offset(first) < self.next_offset:
                first += 1
            self._run([batch.tail(first)] if first < len(batch) else [], step)
        return step

    def transition_done(self, failures: dict[str, BaseException] | None = None) -> list[Event]:
        """The transitions ``Step.transitions`` asked for have run (``failures``: the models whose
        transition raised an ``EngineError``: they are suspended). Checkpoint now, then ``resume``."""
        if self.status is not Status.TRANSITIONING:
            raise OutOfTurn(f"partition {self.partition}: transition_done while {self.status.value}")
        events = []
        failures = failures or {}
        for mid in self._transitioning:
            m = self.models[mid]
            exc = failures.get(mid)
            if exc is not None:
                events.append(self._suspend(m, engine_failed_reason(exc), self.next_offset, True))
                continue
            m.round, m.phase = m.engine.round, m.engine.phase
            events.append(Event(EventKind.ROUND, m.id, m.round, m.phase.value))
            if m.phase is Phase.EXHAUSTED:
                events.append(Event(EventKind.EXHAUSTED, m.id, m.round))
        self._transitioning = []
        self.status = Status.ACTIVE
        return events

    def resume(self) -> Step:
        """Process the records parked while the transitions ran; resume the partition unless
        another round ended among them."""
        if self.status is not Status.ACTIVE:
            raise OutOfTurn(f"partition {self.partition}: resume while {self.status.value} "
                            "(call transition_done first)")
        step = Step()
        parked, self.parked = self.parked, []
        self._run(parked, step)
        step.resume = self.status is Status.ACTIVE
        return step

    def revoke(self) -> None:
        self.status = Status.REVOKED
        self.parked = []

    # -- 0. the journal ----------------------------------------------------------------------------

    def journal_plan(self, rows: Sequence[tuple[int, int, int]]) -> tuple[list[int], str | None]:
        """Which of the journal's rows of this partition (``(seq, start, end)`` in write order) to
        replay before fetching: those after every model's checkpoint, which must chain from the
        partition's next offset (a frozen model's state is not here: it has no say). Returns (the
        rows' seqs, None), and once they are all replayed (``replayed``) every model is exact as far
        as the journal reaches (the service then compares that with the published marks); or ([],
        why) when the rows cannot be trusted (the models keep what their checkpoints say)."""
        live = [m for m in self.models.values() if not m.frozen]
        if not live:
            return [], "no model is homed on this partition" if rows else None
        foreign = sorted(m.id for m in live if m.journal_seq is None)
        if foreign:
            return [], f"the checkpoint of model {foreign[0]} was not written beside this journal"
        base = min(m.journal_seq for m in live if m.journal_seq is not None)
        todo = [r for r in rows if r[0] > base]
        at = self.next_offset
        for _seq, start, end in todo:  # a row may straddle a checkpoint taken mid-replay
            if start > at:
                return [], (f"the journal does not reach back to offset {at} (its next row starts at {start}): "
                            "rows are missing")
            at = max(at, end)
        if not todo:  # nothing processed since the checkpoints: the journal vouches for them as they are
            for m in live:
                m.verified = True
        return [r[0] for r in todo], None

    def replay(self, batch: Batch) -> Step:
        """Process journaled records as if fetched (no log checks: they are what this partition
        processed before). The step's labels are the ones first published, byte for byte."""
        if self.status is not Status.ACTIVE:
            raise OutOfTurn(f"partition {self.partition}: replay while {self.status.value} (a replayed round's "
                            "transition must finish first)")
        step = Step()
        first = 0
        while first < len(batch) and batch.offset(first) < self.next_offset:
            first += 1
        if first < len(batch):
            self._run([batch.tail(first)], step)
        return step

    def replayed(self, whole: bool = True) -> None:
        """The journal's rows are replayed (``whole``: every row the plan named; then every model is
        exact as far as the journal reaches: the caller still compares it with the published marks):
        the first fetch must show that the log holds the same record at the last replayed offset (or
        was replaced, or lost it)."""
        if whole:
            for m in self.models.values():
                m.verified = m.verified or not m.frozen
        end = self.next_offset
        if end > 0 and self.last_fp:
            self._expect = {end - 1: self.last_fp}

    # -- 1. a replaced log -----------------------------------------------------------------------

    def recheck(self) -> int:
        """The log may have been replaced under this running partition (the broker went away, e.g. an
        embedded broker restarted empty): judge it again as at assignment before processing more. The
        next fetch must show the record before the next offset with the fingerprint it had when it was
        processed, and a high watermark that reaches the next offset; else the log was replaced
        (``_rebase``: re-read from offset 0; a model whose state may lag its published answers is
        suspended). Returns where to seek (one record back, when its fingerprint is known)."""
        if self.status is Status.REVOKED:
            raise OutOfTurn(f"partition {self.partition}: recheck after revoke")
        if self.next_offset > 0 and self.last_fp:
            self._expect[self.next_offset - 1] = self.last_fp
        return self.start_position

    def saw_log_end(self, end: int) -> None:
        """The broker says the log reaches at least ``end`` (at assignment, before any checkpoint)."""
        if self.status is not Status.REVOKED and end >= max(self.next_offset, self.log_end):
            self.log_end = end

    def _replaced(self, batch: Batch | None, highwater: int | None) -> bool:
        if highwater is not None:
            if highwater < max(self.next_offset, self.log_end):
                return True
            self.log_end = highwater
        if batch is None or not len(batch):
            return False
        first = batch.offset(0)
        if first < self.next_offset and self.last_fp:  # a re-read (the consumer's position went back): same log?
            self._expect.setdefault(self.next_offset - 1, self.last_fp)
        if not self._expect:
            return False
        for off in [o for o in self._expect if o < first]:  # a gap in the log: that record never comes
            del self._expect[off]
        if not self._expect:
            return False
        last = max(self._expect)
        for i in range(len(batch)):
            off = batch.offset(i)
            if off > last:
                break
            want = self._expect.pop(off, None)
            if want is not None and fingerprint(batch.records[i]) != want:
                return True
        return False

    def _rebase(self, step: Step, highwater: int | None) -> None:
        step.log_reset = True
        step.seek = 0
        step.events.append(Event(EventKind.LOG_REPLACED,
                                 detail=f"high watermark {highwater}, next offset {self.next_offset}"))
        for m in self.models.values():
            if m.suspension is not None:
                m.suspension = replace(m.suspension, from_offset=0)
            elif not m.verified and m.engine.answers_change_state:
                # its state may lag answers already published, and the log that would replay them
                # is gone: continuing could reuse randomness and overspend the round's halt budget
                reason = LOG_LOST_REASON if m.lost is None else behind_reason(
                    m.lost, f"the broker's log does not hold those queries ({self._log_said(highwater)})")
                step.events.append(self._suspend(m, reason, 0, False))
            m.offset, m.last_fp, m.verified = 0, None, True
        self.next_offset, self.last_fp, self._expect = 0, None, {}
        self.log_end = highwater or 0

    def _deleted(self, step: Step, log_start: int) -> None:
        """The log begins after the next offset: the broker deleted records this partition has not
        processed (retention while the daemon was away). Harmless for an exact model (their queries
        get no label: they never reached it); a model that may have published answers beyond its
        checkpoint, whose queries are among the deleted, cannot replay them: suspended."""
        step.seek = log_start
        step.events.append(Event(EventKind.LOG_DELETED, detail=f"offsets {self.next_offset} to {log_start - 1}"))
        for m in self.models.values():
            if m.offset >= log_start:
                continue
            if m.suspension is None and not m.verified and m.engine.answers_change_state:
                reason = LOG_DELETED_REASON if m.lost is None else behind_reason(
                    m.lost, f"the broker deleted those queries (its log begins at offset {log_start}: retention)")
                step.events.append(self._suspend(m, reason, log_start, False))
            m.offset, m.last_fp, m.verified = log_start, None, True
        self.next_offset, self.last_fp = log_start, None
        self._expect = {o: fp for o, fp in self._expect.items() if o >= log_start}

    def _log_said(self, highwater: int | None) -> str:
        return f"its high watermark is {highwater}" if highwater is not None else "it was replaced"

    def suspend_behind(self, m: Served, lost: str) -> Event:
        """At restore, before anything is answered: ``m`` cannot tell how far it answered (``lost``
        says why). Suspended; its state is kept as it is (never saved again), the suspension saved."""
        return self._suspend(m, behind_reason(lost, "the daemon cannot tell which of them the broker's log "
                                              "holds"), m.offset, True, "state behind its published answers")

    def _suspend(self, m: Served, reason: str, from_offset: int, engine_failed: bool, what: str = "") -> Event:
        m.suspension = Suspension(reason, m.round, from_offset, engine_failed)
        m.broken = m.broken or engine_failed
        what = what or ("engine failed" if engine_failed else "log lost" if m.lost is None else
                        f"state behind its published answers: {m.lost}; the broker lost them too")
        return Event(EventKind.SUSPENDED, m.id, m.round, what)

    # -- 2-7. records ------------------------------------------------------------------------------

    def _run(self, batches: list[Batch], step: Step) -> None:
        for k, b in enumerate(batches):
            while len(b):
                cut = self._answer(b, step)
                if cut:
                    before = self.next_offset
                    self._advance(b, cut)
                    step.processed.append((before, self.next_offset, b.records[:cut]))
                if cut == len(b):
                    break
                due = [m.id for m in self.models.values() if not m.broken and m.engine.capacity == 0]
                if due:
                    self._transitioning = due
                    self.status = Status.TRANSITIONING
                    self.parked = [b.tail(cut), *batches[k + 1 :]]
                    step.transitions = due
                    step.pause = True
                    return
                if cut == 0:
                    raise RuntimeError("the engine reports capacity but takes no query (a contract breach)")
                b = b.tail(cut)  # fewer queries reached the engine than its capacity (some were rejected)

    def _advance(self, b: Batch, cut: int) -> None:
        self.next_offset = b.offset(cut - 1) + 1
        self.last_fp = fingerprint(b.records[cut - 1])
        for m in self.models.values():
            if m.offset <= self.next_offset:
                m.offset, m.last_fp = self.next_offset, self.last_fp
                m.verified = True  # the log reached back to its checkpoint: replays are exact

    def _model_of(self, key: bytes | None) -> str | None:
        mid = self._keys.get(key, "")
        if mid == "":
            mid = wire.model_of(key)
            if len(self._keys) < 10_000:  # keys are chosen by clients: bound the cache
                self._keys[key] = mid
        return mid

    def _answer(self, b: Batch, step: Step) -> int:
        """Answer and emit the records of ``b`` up to the round's cut; returns the cut."""
        n = len(b)
        rejected: dict[int, wire.Rejected] = dict(b.rejected)
        skipped: set[int] = set()
        plans: list[_Plan] = []
        for key, idx in b.groups.items():
            mid = self._model_of(key)
            m = self.models.get(mid) if mid is not None else None
            if m is None:
                if mid is not None:
                    code, msg = ("wrong_partition", wire.MSG_WRONG_PARTITION) if mid in self.known else (
                        "unknown_model", wire.MSG_UNKNOWN_MODEL)
                    for i in idx:
                        if i not in rejected:
                            rejected[i] = wire.Rejected(code, msg, b.ids[i], mid, b.content_type(i))
                continue
            plans.append(self._plan(m, b, idx, rejected, skipped))
        cut = n
        for p in plans:
            cap = p.m.engine.capacity if p.query and not p.m.broken else None
            if cap is not None and len(p.query) > cap:
                cut = min(cut, p.query[cap])
        slots: dict[int, tuple[bytes, Headers]] = {}  # label records of the groups not emitted whole
        for p in plans:
            self._respond(p, b, cut, slots, rejected, step)
        for i in sorted(rejected):
            if i >= cut:
                break
            if i not in skipped:
                self._reject(b, i, rejected[i], slots, step)
        if slots:
            recs = b.records
            for i in sorted(slots):
                v, h = slots[i]
                step.add(recs[i].key, [v], [h])
        return cut

    def _plan(self, m: Served, b: Batch, idx: list[int], rejected: dict[int, wire.Rejected],
              skipped: set[int]) -> _Plan:
        k = 0
        while k < len(idx) and b.offset(idx[k]) < m.offset:  # answered before its checkpoint
            skipped.add(idx[k])
            k += 1
        group = len(idx)
        idx = idx[k:] if k else idx
        ok = [i for i in idx if i not in rejected] if rejected else idx
        x = self._stack(m, b, ok, rejected)
        if x.shape[0] != len(ok):
            ok = [i for i in ok if i not in rejected]
        refused: list[int] = []
        s = m.suspension
        if s is not None:
            j = 0
            while j < len(ok) and b.offset(ok[j]) < s.from_offset:
                j += 1
            ok, refused, x = ok[:j], ok[j:], x[:j]
        return _Plan(m, ok, x, refused, len(ok) == group)

    def _stack(self, m: Served, b: Batch, ok: list[int], rejected: dict[int, wire.Rejected]) -> NDArray[np.float64]:
        """The model's points as the engine's batch layout; a record of the wrong dimension is
        rejected (``dimension``) and left out."""
        d = m.point_dim
        if d == 1 and b.xarr is not None:
            return b.xarr if len(ok) == len(b) else b.xarr[ok]
        xs = [b.x[i] for i in ok]
        try:
            arr = np.array(xs, dtype=np.float64)
            if (d == 1 and arr.ndim == 1) or (d > 1 and arr.shape == (len(ok), d)):
                return arr
        except ValueError:  # lists of several lengths, or scalars mixed with lists
            pass
        keep, rows = [], []
        for i, v in zip(ok, xs, strict=True):
            dim = len(v) if isinstance(v, list) else 1
            if dim == d:
                keep.append(i)
                rows.append(v)
            else:
                rejected[i] = wire.Rejected("dimension", wire.msg_dimension(d), b.ids[i], m.id, b.content_type(i))
        return np.array(rows, dtype=np.float64).reshape((len(keep),) if d == 1 else (len(keep), d))

    def _respond(self, p: _Plan, b: Batch, cut: int, slots: dict[int, tuple[bytes, Headers]],
                 rejected: dict[int, wire.Rejected], step: Step) -> None:
        m = p.m
        take = bisect.bisect_left(p.query, cut)
        if take:
            q = p.query[:take]
            labels, refusals, rnd, failed = self._call(m, p.x[:take], q, b, rejected, step)
            if not m.broken:
                if m.phase is not Phase.HALTED and m.engine.phase is Phase.HALTED:
                    step.events.append(Event(EventKind.HALTED, m.id, m.engine.round))
                m.round, m.phase = m.engine.round, m.engine.phase
            if p.clean and failed is None and -1 not in labels:  # the whole group, in order
                ids = b.ids
                ids_q = ids[q[0] : q[-1] + 1] if q[-1] - q[0] + 1 == len(q) else [ids[i] for i in q]
                if b.json_at:
                    js = [i in b.json_at for i in q]
                    vals = self.enc.answered(ids_q, labels, rnd, js)
                    hs = [_H_JSON if j else _H_MSGPACK for j in js]
                else:
                    vals, hs = self.enc.answered(ids_q, labels, rnd), [_H_MSGPACK] * len(q)
                step.add(m.id.encode(), vals, hs)
                step.count(m.id, "ok", len(q))
            else:
                for j, i in enumerate(q):
                    if i in rejected:
                        continue
                    if labels[j] >= 0:
                        slots[i] = (self.enc.one(_id(b, i), labels[j], "ok", rnd, None, b.content_type(i)),
                                    _headers(b, i))
                        step.count(m.id, "ok")
                    else:
                        reason = failed or Refusal(refusals[j]).reason
                        slots[i] = (self.enc.one(_id(b, i), None, "refused", rnd, reason, b.content_type(i)),
                                    _headers(b, i))
                        step.count(m.id, "refused")
        s = m.suspension
        for i in p.refused:
            if i >= cut:
                break
            assert s is not None
            slots[i] = (self.enc.one(_id(b, i), None, "refused", s.round, s.reason, b.content_type(i)), _headers(b, i))
            step.count(m.id, "refused")

    def _call(self, m: Served, x: NDArray[np.float64], q: list[int], b: Batch, rejected: dict[int, wire.Rejected],
              step: Step) -> _Answered:
        """The engine's labels and refusal codes for the queries ``q`` (their points ``x``), its
        round, and a suspension reason if the engine failed on them."""
        clients = b.clients_of(q)
        try:
            ans = m.engine.answer(x, clients)
        except InvalidInput:
            bad = _outside(m.engine, x)
            if bad is None or not bad.any():
                return self._call_one_by_one(m, x, q, b, rejected, step)
            return self._call_inside(m, x, q, bad, b, rejected, step)
        except EngineError as exc:
            step.events.append(self._suspend(m, engine_failed_reason(exc), b.offset(q[0]), True))
            s = m.suspension
            assert s is not None
            return [-1] * len(q), [0] * len(q), s.round, s.reason
        step.answered += ans.consumed
        self._released(m, ans, clients, q, b, step)
        labels, refusals = ans.labels.tolist(), ans.refusals.tolist()
        if ans.consumed < len(q):  # fewer than its capacity promised: the engine is inconsistent
            breach = RuntimeError("answer consumed fewer queries than capacity allowed")
            step.events.append(self._suspend(m, engine_failed_reason(breach), b.offset(q[ans.consumed]), True))
            s = m.suspension
            assert s is not None
            rest = len(q) - ans.consumed
            return labels + [-1] * rest, refusals + [0] * rest, ans.round, None if not rest else s.reason
        return labels, refusals, ans.round, None

    def _released(self, m: Served, ans: Answers, clients: list[bytes | None] | None, q: list[int], b: Batch,
                  step: Step) -> None:
        """What an answer released beside its labels: the burn-rate windows it completed (summed per
        round), its quota refusals (counted), and after which queries a client's quota test fired
        (Theorem Q+, remark 4: a released fact; an event names the client, never a query value)."""
        if ans.burn.size:
            m.burn.add(ans.burn)
        if ans.paused:  # the engine says the round paused in this call (released by its refusals), also
            # when the round ended in the same call (no PAUSED phase is ever seen then)
            step.events.append(Event(EventKind.PAUSED, m.id, ans.round))
        paused = int(np.count_nonzero(ans.refusals == Refusal.ROUND_PAUSED))
        if paused:
            step.paused_refused[m.id] = step.paused_refused.get(m.id, 0) + paused
        if not ans.quota_fired.size:
            return
        refused = int(np.count_nonzero(ans.refusals == Refusal.CLIENT_QUOTA))
        if refused:
            step.quota_refused[m.id] = step.quota_refused.get(m.id, 0) + refused
        fired = np.flatnonzero(ans.quota_fired).tolist()
        if not fired:
            return
        step.quota_fired[m.id] = step.quota_fired.get(m.id, 0) + len(fired)
        rnd, seen = m.quota_lines
        if rnd != ans.round:
            rnd, seen = ans.round, 0
        for j in fired:  # at most one per client and round
            seen += 1
            if seen <= QUOTA_LOG_LINES:
                who = show_client(None if clients is None else clients[j])
                step.events.append(Event(EventKind.QUOTA, m.id, rnd, f"{who} (offset {b.offset(q[j])})"))
            elif seen == QUOTA_LOG_LINES + 1:
                step.events.append(Event(EventKind.QUOTA_MANY, m.id, rnd, str(QUOTA_LOG_LINES)))
        m.quota_lines = (rnd, seen)

    def _call_inside(self, m: Served, x: NDArray[np.float64], q: list[int], bad: NDArray[np.bool_], b: Batch,
                     rejected: dict[int, wire.Rejected], step: Step) -> _Answered:
        """The engine says which queries lie outside its declared domain (a function of each query
        alone): reject those (``domain``), answer the others in one call."""
        for j in np.flatnonzero(bad).tolist():
            i = q[j]
            rejected[i] = wire.Rejected("domain", wire.MSG_DOMAIN, b.ids[i], m.id, b.content_type(i))
        keep = np.flatnonzero(~bad)
        labels, refusals = np.full(len(q), -1, np.int64), np.zeros(len(q), np.int64)
        if not keep.size:
            return labels.tolist(), refusals.tolist(), m.round, None
        lab, ref, rnd, failed = self._call(m, x[keep], [q[j] for j in keep.tolist()], b, rejected, step)
        labels[keep], refusals[keep] = lab, ref
        return labels.tolist(), refusals.tolist(), rnd, failed

    def _call_one_by_one(self, m: Served, x: NDArray[np.float64], q: list[int], b: Batch,
                         rejected: dict[int, wire.Rejected], step: Step) -> _Answered:
        """``InvalidInput`` left the engine unchanged: answer query by query (answers do not depend
        on batching) and reject the ones it refuses to take, as outside the model's domain."""
        labels, refusals, rnd = [], [], m.round
        for j, i in enumerate(q):
            one = b.clients_of([i])
            try:
                a = m.engine.answer(x[j : j + 1], one)
            except InvalidInput:
                rejected[i] = wire.Rejected("domain", wire.MSG_DOMAIN, b.ids[i], m.id, b.content_type(i))
                labels.append(-1)
                refusals.append(0)
                continue
            except EngineError as exc:
                step.events.append(self._suspend(m, engine_failed_reason(exc), b.offset(i), True))
                s = m.suspension
                assert s is not None
                rest = len(q) - j
                return labels + [-1] * rest, refusals + [0] * rest, s.round, s.reason
            step.answered += a.consumed
            self._released(m, a, one, [i], b, step)
            labels.append(int(a.labels[0]))
            refusals.append(int(a.refusals[0]))
            rnd = a.round
        return labels, refusals, rnd, None

    def _reject(self, b: Batch, i: int, rej: wire.Rejected, slots: dict[int, tuple[bytes, Headers]],
                step: Step) -> None:
        r = b.records[i]
        m = self.models.get(rej.model or "")
        if rej.id is not None:
            rnd = m.round if m is not None else 0
            slots[i] = (self.enc.one(rej.id, None, "invalid", rnd, rej.message, rej.content_type),
                        wire.label_headers(rej.content_type))
            if rej.model is not None and rej.model in self.known:
                step.count(rej.model, "invalid")
        step.dead_letters.append((r.key, r.value if r.value is not None else b"",
                                  wire.dead_letter_headers(rej.code, rej.message, r.topic, r.partition, r.offset)))
        step.invalid[rej.code] = step.invalid.get(rej.code, 0) + 1


def _outside(engine: Servable, x: NDArray[np.float64]) -> NDArray[np.bool_] | None:
    """Per query, outside the engine's declared domain (``DomainScreen``); None if it cannot say."""
    if not isinstance(engine, DomainScreen):
        return None
    try:
        bad = np.asarray(engine.outside_domain(x), dtype=bool)
    except InvalidInput:
        return None
    return bad if bad.shape == (x.shape[0],) else None


_H_MSGPACK = wire.label_headers("msgpack")
_H_JSON = wire.label_headers("json")


def _headers(b: Batch, i: int) -> list[tuple[str, bytes]]:
    return _H_JSON if i in b.json_at else _H_MSGPACK


def _id(b: Batch, i: int) -> Id:
    qid = b.ids[i]
    assert qid is not None  # a record that reached a model passed the schema: it has an id
    return qid
