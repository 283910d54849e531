"""One partition's checkpoint: when its models' state becomes durable, and in which order
(quixstreams' ``checkpointing/checkpoint.py``).

``commit()`` runs these steps, in this order:

  1. **Precondition: every answer is acknowledged.** The I/O layer stores an offset
     (``store_offset``) only after the broker acknowledged the label records of every record
     before it; ``commit`` refuses (``CommitOrderError``) while the processor has answered beyond
     the stored offset, or while a round transition runs (the engine's state is in flux).
  2. For each model: the round blob (once per round) and the reservoir chunk since the last commit.
  3. For each model: the ``live`` blob (counters, random-stream states, the offset, meta: with the
     journal's id and its last row the checkpoint covers). From here on this state is the model's
     checkpoint. (A model whose engine failed keeps its last good state; only its offset and meta,
     which records the suspension, are rewritten: it refuses every later query without its engine.)
  4. The consumer group's committed offset. Informational (restarts seek from checkpoints), so a
     failure here is ignored.
  5. For each model: the blobs of earlier rounds are deleted. (The I/O layer then drops the
     journal's rows the checkpoint covers, ``daemon/journal.py``.)

A crash between any two steps leaves every model with a consistent checkpoint (the previous
``live`` or the new one); the replay from it reproduces the published answers byte for byte.
``store_offset`` refuses offsets that do not increase (``InvalidStoredOffset``): the one way back
is ``reset`` after the processor found the log replaced.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.daemon.errors import CommitOrderError, InvalidStoredOffset
from everlast.daemon.partition import PartitionProcessor, Served, Status


class PartitionCheckpoint:
    def __init__(
        self,
        partition: int,
        checkpointers: dict[str, ModelCheckpointer],
        *,
        offset: int,
        every_queries: int,
        every_seconds: float,
        meta: dict[str, dict[str, Any]] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``offset``: the partition's next offset as restored (nothing after it is answered yet);
        ``meta``: per model, fields saved with every checkpoint (training-set size, partitions)."""
        self.partition = partition
        self.checkpointers = checkpointers
        self.offset = offset
        self.every_queries = every_queries
        self.every_seconds = every_seconds
        self.meta = meta or {}
        self.clock = clock
        self.since = 0
        self.dirty = False
        self.last = clock()
        self._log_end = 0

    def store_offset(self, offset: int, answered: int = 0) -> None:
        """Every label record before ``offset`` is acknowledged; ``answered`` queries reached an engine."""
        if offset <= self.offset:
            raise InvalidStoredOffset(
                f"partition {self.partition}: offset {offset} does not increase (stored: {self.offset})"
            )
        self.offset = offset
        self.since += answered
        self.dirty = True

    def mark_dirty(self, urgent: bool = False) -> None:
        """The state changed without new offsets (a round transition); ``urgent``: make ``due``
        true now (a suspension is saved at once, not at the next cadence)."""
        self.dirty = True
        if urgent:
            self.since = max(self.since, self.every_queries)

    def reset(self) -> None:
        """The log was replaced: offsets start over at 0."""
        self.offset = 0
        self.dirty = True

    def due(self) -> bool:
        return self.dirty and (self.since >= self.every_queries or self.clock() - self.last >= self.every_seconds)

    def blocked(self, proc: PartitionProcessor) -> str | None:
        """Why ``commit`` would refuse now (``None``: it may run)."""
        if proc.status is Status.TRANSITIONING:
            return "a round transition is running"
        if proc.next_offset != self.offset:
            return f"answers up to offset {proc.next_offset} are not acknowledged (stored: {self.offset})"
        return None

    async def commit(
        self,
        proc: PartitionProcessor,
        commit_offset: Callable[[int], Awaitable[None]] | None = None,
        *,
        handover: bool = False,
        journal: tuple[str, int] | None = None,
    ) -> None:
        """Steps 1-5 of the module docstring. ``handover``: a clean stop or a partition hand-over,
        after which this process publishes nothing more for these models: a restore from it is
        exact even if the broker loses the log (used once: the restorer rewrites it as periodic).
        ``journal``: (the journal's id, the last of its rows this state covers in full)."""
        why = self.blocked(proc)  # 1
        if why is not None:
            raise CommitOrderError(f"partition {self.partition}: cannot checkpoint: {why}")
        self._log_end = proc.log_end
        models = [m for m in proc.models.values() if not m.frozen]  # (a frozen model's store is left as it is)
        for m in models:  # 2 and 3
            ck = self.checkpointers[m.id]
            s = m.suspension
            jmeta = {"journal": journal[0], "journal_seq": journal[1]} if journal is not None else {}
            if s is not None and s.engine_failed:
                await ck.write_meta({**self.meta.get(m.id, {}), **s.to_meta(), "handover": False, **jmeta},
                                    {self.partition: m.offset})
            else:
                await ck.write(m.engine, {self.partition: m.offset}, {**self._meta(m, handover), **jmeta})
        if commit_offset is not None:  # 4
            with contextlib.suppress(Exception):
                await commit_offset(self.offset)
        for m in models:  # 5
            await self.checkpointers[m.id].prune()
        self.since = 0
        self.dirty = False
        self.last = self.clock()

    def _meta(self, m: Served, handover: bool) -> dict[str, Any]:
        out: dict[str, Any] = {**self.meta.get(m.id, {}), "handover": handover, "last_fp": m.last_fp,
                               "log_end": self._log_end}
        if m.burn.round:
            out["burn"] = m.burn.to_meta()  # the round's released burn-rate windows, summed
        if m.suspension is not None:
            out.update(m.suspension.to_meta())
        return out
