"""Bringing a partition just assigned back to where its published answers left it: the journal's
rows after its models' checkpoints replayed through the restored state (``daemon/journal.py``),
their labels re-published byte for byte; then each model's state compared with its published mark
(``daemon/marks.py``, ``judge_marks``).

A journal row that fails its check (or a journal SQLite cannot read) stops the replay of its
partition there: the state replayed so far is exact as far as it goes (every label it re-published
is the first one's), and from there on the models rely on the broker's log. Whether that log holds
what they published is the processor's judgement at the first fetch (``Served.lost`` names what of
their own state was lost, for the reason it gives if the log does not). Nothing is written for a
partition that is not fully restored but its periodic checkpoint of that exact, earlier state.

The same judgement of the log runs again, under a running partition, after the broker went away or
came back (``recheck``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from aiokafka.errors import IllegalStateError, KafkaError

from everlast.daemon import batch as codec
from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.daemon.errors import CheckpointError
from everlast.daemon.events import Event, EventKind
from everlast.daemon.journal import Slice
from everlast.daemon.marks import Marks
from everlast.daemon.model import ModelRuntime
from everlast.daemon.owned import OwnedPartition
from everlast.daemon.partition import Served
from everlast.daemon.signals import client_tests_line, publish_guarantee
from everlast.engine.phases import Phase

if TYPE_CHECKING:
    from everlast.daemon.service import Service

log = logging.getLogger("everlast.daemon")


async def activate(svc: Service, part: int, start: int) -> tuple[list[Served], dict[str, ModelCheckpointer]]:
    """The models homed on ``part``, restored or created (``ModelRuntime.activate``). A model whose
    state cannot be restored (damaged, lost, bound to other data or configuration) is suspended alone
    (``ModelRuntime.unrestored``): the others start and serve."""
    served: list[Served] = []
    cks: dict[str, ModelCheckpointer] = {}
    jid = svc.journal.id if svc.journal is not None else None
    for mr in (svc.models[m] for m, p in svc.home.items() if p == part):
        published, s_id = (svc.marks.get(mr.id) if svc.marks is not None else None), mr.id
        try:
            with svc.heartbeat.busy():  # a creation fits on a worker thread, for as long as the data asks
                s, ck, restored = await mr.activate(
                    svc.store, start, svc.n_partitions, jid, partition=part, published=published,
                    claim_wait_s=svc.cfg.checkpoint.claim_wait_seconds)
        except CheckpointError as exc:  # this model only: the others start and serve
            svc.metrics.checkpoint_failures.inc()
            s, ck, restored = mr.unrestored(published or start, str(exc)), ModelCheckpointer(svc.store, s_id), True
            svc.log_events(part, [Event(EventKind.SUSPENDED, s.id, 0, f"not restored: {exc}")])
        if mr.adopted is not None:
            _adopted(svc, mr)
        elif mr.mechanism == "private-learner":  # its validated certificate, once fitted or restored
            publish_guarantee(svc.metrics, mr)
        served.append(s)
        cks[s.id] = ck
        state = (f" ({s.phase.value})" if s.phase is not Phase.ANSWERING else "") + (
            " (suspended)" if s.suspension is not None else "")
        rounds = f"round {s.round}" if s.engine.has_rounds else "no rounds (private learner)"
        log.info("model %s %s at offset %d on partition %d, %s%s", s.id,
                 "restored" if restored else "created", s.offset, part, rounds, state)
    return served, cks

def _adopted(svc: Service, mr: ModelRuntime) -> None:
    g = mr.guarantee
    log.warning("model %s: its checkpoint runs another schedule than the configuration (%s differ): a model "
                "keeps the schedule it was created with; the certificate of the running one: training-set "
                "epsilon %.4g, query epsilon %.4g (delta %.2g); %s. Serve the new schedule under a new model id "
                "(docs/OPERATIONS.md, 'A model halted')", mr.id, mr.adopted, g.epsilon_training,
                g.epsilon_queries, g.delta, client_tests_line(g.details))
    publish_guarantee(svc.metrics, mr)
    mr.adopted = None



async def log_bounds(svc: Service, o: OwnedPartition) -> None:
    """Where the partition's log begins (records deleted by retention?) and how far it reaches
    (a lower bound, saved with the checkpoints: a log found ending before it is another log)."""
    tp = svc.tp(o.part)
    with contextlib.suppress(KafkaError, TimeoutError):
        first = await asyncio.wait_for(svc.consumer.beginning_offsets([tp]), 10)
        o.log_start = int(first[tp])
    with contextlib.suppress(KafkaError, TimeoutError):
        end = await asyncio.wait_for(svc.consumer.end_offsets([tp]), 10)
        o.proc.saw_log_end(int(end[tp]))


async def recheck(svc: Service) -> None:
    """The broker went away or came back while the daemon ran (it may have come back empty, or with
    another log): every owned partition is judged again as at assignment before any more of its
    records are processed (``PartitionProcessor.recheck``): the record before its next offset must be
    the one processed and the high watermark must reach it, else the log was replaced (re-read from 0;
    a model whose state may lag its published answers suspended); once the broker answers, where the
    log begins too (records deleted). A running model's state holds every answer it published (the
    published marks follow it), so the judgement at assignment against those marks has nothing to add
    here. Without it a replaced log that outgrew the old one read as its continuation: its first
    records were never answered, or the partition waited for records that never come."""
    svc.recheck_due = False
    for o in list(svc.owned.values()):
        if svc.broker_ok:
            await log_bounds(svc, o)
        at = o.proc.recheck()
        with contextlib.suppress(IllegalStateError):  # no longer assigned: the next assignment judges it
            svc.consumer.seek(svc.tp(o.part), at)
    if svc.owned:
        log.info("the broker %s: the log of partitions %s is checked again before more records are processed",
                 "answers again" if svc.broker_ok else "does not answer", sorted(svc.owned))


async def replay_journal(svc: Service, o: OwnedPartition) -> None:
    """Replay the journal's rows of a partition just assigned through its restored models (the
    processor says which rows, or why none can be trusted) and re-publish their labels: the models
    come back exactly where their published answers left them, whatever the broker kept."""
    jr, proc, part = svc.journal, o.proc, o.part
    if jr is None:
        return
    topic = svc.cfg.topics.queries
    try:
        rows = await asyncio.to_thread(jr.slices, topic, part)
    except CheckpointError as exc:
        return _damaged(o, f"the journal cannot be read ({exc})")
    seqs, why = proc.journal_plan(rows)
    o.jseq = jr.position()  # rows not replayed are of no use: the next checkpoint drops them
    if why is not None:
        for m in proc.models.values():  # said if the model turns out behind its published mark
            m.lost = m.lost or f"its journal cannot vouch for it: {why}"
        if rows and proc.models:
            log.warning("partition %d: its %d journal rows are not replayed (%s); a model restored from a "
                        "periodic checkpoint relies on the broker's log", part, len(rows), why)
        return
    if not seqs:
        return
    o.jseq = seqs[0] - 1
    n, first = 0, None
    for seq in seqs:
        try:
            sl = await asyncio.to_thread(jr.read, topic, part, seq)
        except CheckpointError as exc:
            proc.replayed(whole=False)
            return _damaged(o, f"{exc}; the journal's rows from offset {proc.next_offset} on are not replayed")
        first = sl.start if first is None else first
        n += len(sl.records)
        await replay_slice(svc, o, sl)
        o.jseq = seq
    proc.replayed()
    svc.log_events(part, [Event(EventKind.JOURNAL, detail=f"{n} records, offsets {first} to {proc.next_offset - 1}")])


def _damaged(o: OwnedPartition, what: str) -> None:
    """The journal's rows of ``o`` stop being of use at ``what``: every model of the partition now
    relies on the broker's log from where it is (exact if the log holds the rest)."""
    log.error("partition %d: %s; its models rely on the broker's log from where they are (suspended if it does "
              "not hold what they published)", o.part, what)
    for m in o.models.values():
        if not m.frozen:
            m.verified, m.lost = False, m.lost or what


def judge_marks(o: OwnedPartition, marks: Marks | None, journal_note: str | None) -> list[Event]:
    """After the journal's replay: a model whose state does not reach its published mark is behind
    its published answers; it continues only from the broker's log (``Served.lost`` says why, for the
    suspension if the log lacks them), and the log must reach the mark. A model at its mark is exact
    whatever its checkpoint's kind. Marks that cannot be read (``Marks.damaged``) suspend every
    restored model whose answers change its state: how far it answered is unknown."""
    if marks is None:
        return []
    events = []
    for m in o.models.values():
        if m.frozen or m.suspension is not None:
            continue
        if not marks.known:
            if m.engine.answers_change_state and (m.offset or m.journal_seq is not None):
                events.append(o.proc.suspend_behind(m, str(marks.damaged)))
            continue
        mark = marks.get(m.id)
        if mark is None:
            continue
        if m.offset >= mark:
            # nothing this daemon published lies beyond this state; if the checkpoint was written beside
            # these marks, nothing at all (another replica's checkpoint keeps what the journal said)
            m.verified = m.verified or m.marks_id == marks.id
            continue
        m.verified = False
        m.lost = m.lost or journal_note or (
            f"the journal's rows end at offset {m.offset}: rows were lost (the file cut short, rows deleted, or the "
            "journal lost)")
        m.lost = f"its state reaches offset {m.offset}, its answers were published up to offset {mark}: {m.lost}"
        o.proc.log_end = max(o.proc.log_end, mark)  # the log must reach it (or it was another, shorter log)
    if events:
        o.ck.mark_dirty(urgent=True)
    return events


async def replay_slice(svc: Service, o: OwnedPartition, sl: Slice) -> None:
    """One journal row through the processor, its labels re-published; a round that ends inside it
    transitions (checkpointed: covers the rows before this one, this one maybe in part)."""
    c = svc.cfg.consumer
    step = o.proc.replay(codec.decode(sl.records, c.max_record_bytes, c.client_header))
    await svc.send([(o, step)], journal=False)
    svc.apply(o, step, start_transitions=False)
    while step.transitions:
        failures = await svc.transition(o.proc, step.transitions)
        step = await o.after_transition(svc, failures, replaying=True)
