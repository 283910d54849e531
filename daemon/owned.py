"""One assigned partition, owned by this process: its processor, its checkpoint, its running round
transition, its journal position and its log bounds, and the order of the calls between them.

The service (``daemon/service.py``) performs the I/O (``PartitionIO``: produce, checkpoint, act on
the consumer); this object says in which order. The order that matters most, after a round's
transitions: **transition done -> checkpoint (the new round, before it answers anything) -> resume
the parked records -> send their records -> apply (store the offset, resume the partition)**, in
``after_transition``, the one place it is written. A revocation is ``hand_over``: the last
checkpoint, unless the state is in flux, and the processor refuses every later call."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Protocol

from everlast.daemon.checkpoint.checkpoint import PartitionCheckpoint
from everlast.daemon.events import Event
from everlast.daemon.partition import PartitionProcessor, Served, Step

log = logging.getLogger("everlast.daemon")

Transition = asyncio.Task[dict[str, BaseException]]


class PartitionIO(Protocol):
    """What an ``OwnedPartition`` asks of the I/O layer."""

    async def commit(self, o: OwnedPartition, handover: bool = False, stop: asyncio.Event | None = None) -> None: ...

    async def send(self, steps: list[tuple[OwnedPartition, Step]], journal: bool = True) -> None: ...

    def apply(self, o: OwnedPartition, step: Step, start_transitions: bool = True) -> None: ...

    def log_events(self, part: int, events: list[Event]) -> None: ...


@dataclass(eq=False)
class OwnedPartition:
    part: int
    proc: PartitionProcessor
    ck: PartitionCheckpoint
    transition: Transition | None = None
    """The round transitions running in a worker thread (the processor parks records meanwhile)."""
    jseq: int = 0
    """The last journal row whose records are processed in full (what a checkpoint covers)."""
    log_start: int | None = None
    """Until the first feed: the log's first offset, as the broker said at assignment."""
    log_end: int = 0
    """The log's end as last asked (for the lag gauge only)."""
    opened: bool = False
    """Fully restored: the journal is replayed and the first checkpoint written. Until then no
    hand-over checkpoint is written (a state not fully restored must never look exact)."""

    @property
    def models(self) -> dict[str, Served]:
        return self.proc.models

    def take_log_start(self) -> int | None:
        start, self.log_start = self.log_start, None
        return start

    def start_transition(self, task: Transition) -> None:
        self.transition = task

    def finished_transition(self) -> Transition | None:
        """The transition task if it has finished (taken: the caller acts on its result)."""
        task = self.transition
        if task is None or not task.done():
            return None
        self.transition = None
        return task

    def due(self) -> bool:
        """A periodic checkpoint is due and may run now."""
        return self.transition is None and self.ck.due() and self.ck.blocked(self.proc) is None

    async def after_transition(self, io: PartitionIO, failures: dict[str, BaseException],
                               replaying: bool = False) -> Step:
        """The round transitions have run (``failures``: the models whose transition raised): the
        processor takes the new rounds, they are checkpointed before they answer anything, the
        parked records are processed, their labels sent, and the step applied. Returns that step
        (``replaying``: a journal replay, whose records are in the journal already and whose new
        transitions the caller runs itself)."""
        io.log_events(self.part, self.proc.transition_done(failures))
        self.ck.mark_dirty()
        await io.commit(self)
        step = self.proc.resume()
        await io.send([(self, step)], journal=not replaying)
        io.apply(self, step, start_transitions=not replaying)
        return step

    async def hand_over(self, io: PartitionIO, give_up: asyncio.Event, journaled: bool) -> str | None:
        """The last checkpoint of this partition before another owner takes it (or the daemon
        stops); then the processor refuses every call. Returns what the checkpoint does not cover
        (``None``: every published answer)."""
        try:
            return await self._last_checkpoint(io, give_up, journaled)
        finally:
            self.proc.revoke()

    async def _last_checkpoint(self, io: PartitionIO, give_up: asyncio.Event, journaled: bool) -> str | None:
        part, task = self.part, self.transition
        self.transition = None
        if not self.opened:
            log.warning("partition %d: not fully restored; no hand-over checkpoint (the next owner restores from "
                        "the previous one%s)", part, " and the journal" if journaled else "")
            return f"partition {part}: not fully restored" if self.models else None
        if task is not None and task.done() and task.exception() is None:
            io.log_events(part, self.proc.transition_done(task.result()))
        elif task is not None:
            task.cancel()  # still running (or failed): the state is in flux, no checkpoint
            return f"partition {part}: a round transition did not finish"
        why = self.ck.blocked(self.proc)
        if why is not None:
            log.warning("partition %d: no checkpoint at hand-over (%s); the next owner replays from the previous "
                        "one%s", part, why, " and the journal" if journaled else "")
            return f"partition {part}: {why}"
        try:
            await io.commit(self, handover=True, stop=give_up)
        except Exception as exc:
            log.error("partition %d: checkpoint at hand-over failed (%s); the next owner replays from the previous "
                      "one", part, type(exc).__name__)
            if self.models:  # (a partition without models has nothing to cover)
                return f"partition {part}: the hand-over checkpoint failed ({type(exc).__name__})"
        return None


def running(owned: dict[int, OwnedPartition]) -> list[Transition]:
    """The transitions still running, for a bounded wait before a hand-over."""
    return [o.transition for o in owned.values() if o.transition is not None and not o.transition.done()]


def drop_lag(metrics_lag: object, part: int) -> None:
    """A gauge of a partition this process no longer owns would go stale."""
    with contextlib.suppress(KeyError, AttributeError):
        metrics_lag.remove(str(part))  # type: ignore[attr-defined]
