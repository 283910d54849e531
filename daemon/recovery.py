"""Bringing a partition just assigned back to where its published answers left it: the journal's
rows after its models' checkpoints replayed through the restored state (``daemon/journal.py``),
their labels re-published byte for byte."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from everlast.daemon import batch as codec
from everlast.daemon.events import Event, EventKind
from everlast.daemon.journal import Slice
from everlast.daemon.owned import OwnedPartition

if TYPE_CHECKING:
    from everlast.daemon.service import Service

log = logging.getLogger("everlast.daemon")


async def replay_journal(svc: Service, o: OwnedPartition) -> None:
    """Replay the journal's rows of a partition just assigned through its restored models (the
    processor says which rows, or why none can be trusted) and re-publish their labels: the models
    come back exactly where their published answers left them, whatever the broker kept."""
    jr, proc, part = svc.journal, o.proc, o.part
    if jr is None:
        return
    topic = svc.cfg.topics.queries
    rows = await asyncio.to_thread(jr.slices, topic, part)
    seqs, why = proc.journal_plan(rows)
    o.jseq = jr.position()  # rows not replayed are of no use: the next checkpoint drops them
    if why is not None:
        if rows and proc.models:
            log.warning("partition %d: its %d journal rows are not replayed (%s); a model restored from a "
                        "periodic checkpoint relies on the broker's log", part, len(rows), why)
        return
    if not seqs:
        return
    o.jseq = seqs[0] - 1
    n, first = 0, None
    for seq in seqs:
        sl = await asyncio.to_thread(jr.read, topic, part, seq)
        first = sl.start if first is None else first
        n += len(sl.records)
        await replay_slice(svc, o, sl)
        o.jseq = seq
    proc.replayed()
    svc.log_events(part, [Event(EventKind.JOURNAL, detail=f"{n} records, offsets {first} to {proc.next_offset - 1}")])


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
