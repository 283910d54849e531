"""How far each model has answered, as this daemon knows it itself: its *published mark*, the
partition offset below which every query it processed may have a published label. Written and
made durable (``fdatasync``) before the labels of a batch are produced, beside the journal, in a
file of its own (``<checkpoint.dir>/published.marks``), so that losing or damaging the journal (or
the checkpoint) never loses the mark with it.

At a start, a model whose restored state (its checkpoint, plus the journal's rows replayed) does not
reach its mark is *behind its published answers*: it may continue only from the broker's log, which
then must hold every record from the state's offset to the mark (``PartitionProcessor``: a log
that ends before the mark, or lost or deleted those records, suspends it with a reason naming what
was lost). It never answers from a state behind what it published.

The file: two slots of ``SLOT`` bytes, written alternately; each holds ``MAGIC``, a sequence number,
the marks (msgpack: model id -> offset) and a SHA-256 checksum of the rest. A read takes the slot with
the highest sequence number. A written slot that fails its checksum makes the whole file untrusted
(``damaged``): it may have held the newest marks, so the other slot cannot vouch for the last batch.
Then every model restored beside it is judged behind (the caller suspends those whose answers change
their state); the same for a file found empty. The marks hold model ids and offsets
only (no secret); the checksum guards against damage, not against someone who can write the
directory (who could delete it all).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import msgpack

from everlast.daemon.errors import CheckpointError

FILENAME = "published.marks"
_ID = ""
"""The key of the file's own id among the marks (no model id is empty)."""


def _new_id() -> int:
    return int.from_bytes(os.urandom(7), "big")
MAGIC = b"EVPM"
SLOT = 1 << 18
"""Bytes per slot: room for the marks of about 5,000 models."""
_HEAD = 4 + 8 + 4


def _slot(seq: int, marks: dict[str, int]) -> bytes:
    body = bytes(msgpack.packb(marks, use_bin_type=True))
    raw = MAGIC + seq.to_bytes(8, "big") + len(body).to_bytes(4, "big") + body
    if len(raw) + 32 > SLOT:
        raise CheckpointError(f"too many models for the published marks file ({len(marks)})")
    return raw + hashlib.sha256(raw).digest()


def _read_slot(raw: bytes) -> tuple[int, dict[str, int]] | None:
    if raw[:4] != MAGIC or len(raw) < _HEAD + 32:
        return None
    n = int.from_bytes(raw[12:16], "big")
    end = _HEAD + n
    if end + 32 > len(raw) or hashlib.sha256(raw[:end]).digest() != raw[end : end + 32]:
        return None
    try:
        marks = msgpack.unpackb(raw[_HEAD:end], raw=False)
        return int.from_bytes(raw[4:12], "big"), {str(k): int(v) for k, v in marks.items()}
    except (ValueError, TypeError, AttributeError):
        return None


def _create(path: Path) -> None:
    """A new file holding one slot of no marks, created whole (written, fsync'd, renamed): a file that
    exists was always written."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, _slot(0, {_ID: _new_id()}))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class Marks:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.damaged: str | None = None
        """Why the file's marks could not be read (then ``values`` is empty and every model is behind)."""
        self.values: dict[str, int] = {}
        self.seq = 0
        self.id = ""
        """This file's id (recorded by every checkpoint written beside it: only a checkpoint with
        this id is vouched for as exact by reaching its mark; a new id when the file is damaged)."""
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not path.exists():
                _create(path)
            self.fd = os.open(path, os.O_RDWR)
            self._load()
        except OSError as exc:
            raise CheckpointError(f"cannot open the published marks {path}: {exc.strerror}") from None

    def _load(self) -> None:
        raws = [os.pread(self.fd, SLOT, i * SLOT) for i in range(2)]
        written = [r for r in raws if r.strip(b"\0")]  # a slot never written reads as zeros (or nothing)
        good = [s for s in map(_read_slot, written) if s is not None]
        if not written:
            self.damaged = "the published marks file is empty (truncated?)"
        elif len(good) < len(written):
            # a slot that fails its checksum may have held the newest marks (bit rot after its batch was
            # published) as well as a write torn by a power cut: the other slot cannot vouch for the last batch
            self.damaged = "the published marks file is damaged (a slot fails its checksum)"
        else:
            self.seq, self.values = max(good)
        ident = self.values.pop(_ID, None) if self.damaged is None else None
        self.id = str(ident if ident is not None else _new_id())

    @property
    def known(self) -> bool:
        """The marks can be trusted (the file read back whole, or was new)."""
        return self.damaged is None

    def get(self, model: str) -> int | None:
        return self.values.get(model)

    def publish(self, marks: dict[str, int]) -> None:
        """Record ``marks`` (merged into the others) durably: the caller produces the labels of the
        records below them only after this returns. Blocking (one ``fdatasync``)."""
        if all(self.values.get(k) == v for k, v in marks.items()) and self.damaged is None:
            return
        values = {**self.values, **marks}
        seq = self.seq + 1
        raw = _slot(seq, {**values, _ID: int(self.id)})
        try:
            os.pwrite(self.fd, raw, (seq % 2) * SLOT)
            os.fdatasync(self.fd)
        except OSError as exc:
            raise CheckpointError(f"cannot write the published marks {self.path}: {exc.strerror}") from None
        self.seq, self.values = seq, values
        self.damaged = None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
