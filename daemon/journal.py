"""The local journal: every query record a partition processed since its last checkpoint, made
durable before the labels it produced are published. A restart replays it through the restored
state, so the models come back exactly where their published answers left them and re-publish,
byte for byte, the labels the broker may have lost -- whatever the broker kept (an embedded
broker's empty log after a restart, a Kafka topic whose retention deleted the records, a broker
that lost its disks).

Why SQLite (the standard library's ``sqlite3``): the journal needs atomic, durable appends of a
few hundred kilobytes per fetch and a prefix that is dropped at every checkpoint, from one
process, with no server to run. SQLite's write-ahead log gives exactly that (one ``fsync`` per
commit with ``synchronous=FULL``; a commit is all or nothing across a power cut); it is the most
widely deployed and tested embedded store, ships with every Python, and its file format is
stable. A hand-rolled append-only file would need its own framing, checksums and truncation
recovery; LMDB or RocksDB would add a dependency for no gain at this size.

Layout: one file, ``<checkpoint.dir>/journal.sqlite`` (mode 0600 in the 0700 checkpoint
directory; SQLite gives its ``-wal`` and ``-shm`` files the database's mode). Table ``meta`` holds
the journal's random id, which every checkpoint written beside it records (``ModelCheckpointer``
meta ``journal``): a checkpoint whose id is not the journal's (the journal was deleted, or the
model was last served by another replica) cannot rely on it. Table ``rows``: one row per
processed slice of a partition, ``(seq, topic, partition, start, end, payload)`` where ``start``
is the partition's next offset before the slice and ``end`` after it, so the rows of a partition
chain (each ``start`` is the previous ``end``) and a missing row is detected. A checkpoint of the
partition covers every row (it is taken only when every processed record is acknowledged), so it
deletes them all.

Integrity: every row is verified before it is replayed. Without a key its payload carries a SHA-256
checksum over the row's place (id/topic/partition/start/end/seq) and the payload (``digest``); with
the checkpoint key configured the payload is sealed with AES-256-GCM under a key derived from it and
the journal's id (HKDF), the nonce the row's never-reused sequence number within its session, the
associated data the row's place. A file SQLite cannot read (not a database, malformed) is moved
aside at start and a new journal begun (``open_or_set_aside``); what it held is judged against the
models' published marks (``daemon/marks.py``).

The journal holds raw queries: a secret like the checkpoints. Deleted rows are overwritten
(``secure_delete``) and the WAL file truncated after each checkpoint.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from everlast.daemon.errors import CheckpointError, CorruptCheckpoint

FILENAME = "journal.sqlite"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rows (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    topic TEXT NOT NULL, part INTEGER NOT NULL, start INTEGER NOT NULL, "end" INTEGER NOT NULL,
    payload BLOB NOT NULL, session BLOB, nonce INTEGER, digest BLOB
);
CREATE INDEX IF NOT EXISTS rows_part ON rows (topic, part, seq);
"""


@dataclass(frozen=True, slots=True)
class Record:
    """A journaled consumer record: the fields the processor reads (``daemon.batch``)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Slice:
    """The records a partition processed between two of its offsets (``start``: the next offset
    before them; ``end``: after them). Records may skip offsets (control records, gaps)."""

    start: int
    end: int
    records: Sequence[Any]


_OFFSET, _TS, _KEY, _VALUE, _HEADERS = (attrgetter(a) for a in ("offset", "timestamp", "key", "value", "headers"))


def _lengths_and_bytes(parts: list[bytes | None]) -> tuple[bytes, bytes]:
    n = len(parts)
    if None in parts:
        lens = np.fromiter((-1 if p is None else len(p) for p in parts), dtype=np.int64, count=n)
        return lens.tobytes(), b"".join(p for p in parts if p is not None)
    return np.fromiter(map(len, parts), dtype=np.int64, count=n).tobytes(), b"".join(parts)  # type: ignore[arg-type]


def _split(lens_raw: bytes, blob: bytes) -> list[bytes | None]:
    lens = np.frombuffer(lens_raw, dtype=np.int64)
    ends = np.cumsum(np.maximum(lens, 0))
    starts = ends - np.maximum(lens, 0)
    return [None if n < 0 else blob[s:e] for n, s, e in zip(lens.tolist(), starts.tolist(), ends.tolist(), strict=True)]


def encode(records: Sequence[Any]) -> bytes:
    """Columns, not one map per record: offsets and timestamps as int64 arrays, keys and values as
    lengths and one concatenation, headers only where a record has some (whole-list operations:
    about 0.1 us a record)."""
    n = len(records)
    offsets = np.fromiter(map(_OFFSET, records), dtype=np.int64, count=n)
    stamps = list(map(_TS, records))
    ts = np.asarray([-1 if t is None else t for t in stamps] if None in stamps else stamps, dtype=np.int64)
    keys = list(map(_KEY, records))
    key_col: Any = [keys[0]] if keys.count(keys[0]) == n else _lengths_and_bytes(keys)
    vl, vb = _lengths_and_bytes(list(map(_VALUE, records)))
    hs = list(map(_HEADERS, records))
    headers = {i: [list(h) for h in x] for i, x in enumerate(hs) if x} if any(hs) else {}
    out = msgpack.packb({"o": offsets.tobytes(), "t": ts.tobytes(), "k": key_col, "vl": vl, "vb": vb,
                         "h": headers}, use_bin_type=True)
    assert isinstance(out, bytes)
    return out


def decode(payload: bytes, topic: str, partition: int) -> list[Record]:
    d = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    offsets = np.frombuffer(d["o"], dtype=np.int64).tolist()
    ts = np.frombuffer(d["t"], dtype=np.int64).tolist()
    n = len(offsets)
    k = d["k"]
    keys = [k[0]] * n if isinstance(k, list) and len(k) == 1 else _split(k[0], k[1])
    values = _split(d["vl"], d["vb"])
    hs = {int(i): [(str(a), bytes(b)) for a, b in h] for i, h in d["h"].items()}
    return [Record(offsets[i], ts[i], keys[i], values[i], hs.get(i, []), topic, partition) for i in range(n)]


class _Sealer:
    """AES-256-GCM under HKDF(checkpoint key, salt = journal id + session), a fresh session per
    process; nonce = the row's sequence number within the session (never reused under one key)."""

    def __init__(self, key: bytes, journal_id: str, session: bytes) -> None:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF

        sub = HKDF(algorithm=hashes.SHA256(), length=32, salt=journal_id.encode() + session,
                   info=b"everlast journal v1").derive(key)
        self.aead = AESGCM(sub)

    def seal(self, n: int, aad: bytes, data: bytes) -> bytes:
        return self.aead.encrypt(n.to_bytes(12, "big"), data, aad)

    def open(self, n: int, aad: bytes, data: bytes) -> bytes:
        from cryptography.exceptions import InvalidTag

        try:
            return self.aead.decrypt(n.to_bytes(12, "big"), data, aad)
        except (InvalidTag, ValueError):
            raise CorruptCheckpoint("a journal row fails authentication (wrong key, or tampered)") from None


class Journal:
    """The journal file of one daemon (all its partitions). Blocking calls: the service runs them
    in a worker thread, one at a time (its lock)."""

    def __init__(self, path: Path, key: bytes | None = None) -> None:
        self.path = path
        self._mutex = threading.Lock()
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fresh = not path.exists()
            if fresh:  # created 0600 before SQLite opens it; its -wal and -shm files take this mode
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            elif path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)
            self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA secure_delete=ON")
            self.db.executescript(_SCHEMA)
            cols = {r[1] for r in self.db.execute("PRAGMA table_info(rows)")}
            if "digest" not in cols:  # a journal from before row checksums
                self.db.execute("ALTER TABLE rows ADD COLUMN digest BLOB")
            check = self.db.execute("PRAGMA quick_check").fetchall()
            if check != [("ok",)]:
                raise sqlite3.DatabaseError(f"quick_check: {str(check[0][0])[:120] if check else 'no answer'}")
            row = self.db.execute("SELECT v FROM meta WHERE k = 'id'").fetchone()
            if row is None:
                self.id = os.urandom(16).hex()
                self.db.execute("INSERT INTO meta (k, v) VALUES ('id', ?)", (self.id,))
            else:
                self.id = str(row[0])
            last = self.db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'rows'").fetchone()
            self._seq = int(last[0]) if last else 0
            """The last row number given out (never given again: rows are ordered by it)."""
        except sqlite3.DatabaseError as exc:  # not a database, malformed, a wrong schema
            with contextlib.suppress(Exception):
                self.db.close()
            raise JournalDamaged(f"cannot open the journal {path}: {_why(exc)}", _why(exc)) from None
        except (OSError, sqlite3.Error) as exc:
            raise CheckpointError(f"cannot open the journal {path}: {_why(exc)}") from None
        self.key = key
        self.session = os.urandom(16)
        self._n = 0
        """Rows sealed in this session (the nonce counter)."""
        self.sealer = _Sealer(key, self.id, self.session) if key is not None else None
        self._openers: dict[bytes, _Sealer] = {}

    def _aad(self, topic: str, part: int, start: int, end: int, seq: int) -> bytes:
        """A row's place: the journal, the partition, the offsets and the row's number (so that a row
        moved, renumbered or copied from another journal fails its check)."""
        return f"{self.id}/{topic}/{part}/{start}/{end}/{seq}".encode()

    def position(self) -> int:
        """The last row number given out: every row written so far has a number at most this."""
        return self._seq

    def append(self, topic: str, batches: Mapping[int, Sequence[Slice]]) -> dict[int, int]:
        """Make the slices of each partition durable (one transaction, fsync'd on commit); the
        caller publishes their labels only after this returns. Returns each partition's last row."""
        with self._mutex:
            rows = []
            last: dict[int, int] = {}
            for part, slices in batches.items():
                for s in slices:
                    self._seq += 1
                    last[part] = self._seq
                    data = encode(s.records)
                    nonce, aad = None, self._aad(topic, part, s.start, s.end, self._seq)
                    if self.sealer is not None:
                        self._n += 1  # counted before use: a failed commit never frees a nonce
                        nonce = self._n
                        data = self.sealer.seal(nonce, aad, data)
                    rows.append((self._seq, topic, part, s.start, s.end, data, self.session if nonce else None, nonce,
                                 None if nonce else _digest(aad, data)))
            if not rows:
                return last
            try:
                with self._txn():
                    self.db.executemany('INSERT INTO rows (seq, topic, part, start, "end", payload, session, nonce, '
                                        "digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot write the journal {self.path}: {_why(exc)}") from None
            return last

    def slices(self, topic: str, part: int) -> list[tuple[int, int, int]]:
        """(seq, start, end) of the partition's rows, in the order they were written."""
        with self._mutex:
            try:
                cur = self.db.execute('SELECT seq, start, "end" FROM rows WHERE topic = ? AND part = ? ORDER BY seq',
                                      (topic, part))
                return [(int(a), int(b), int(c)) for a, b, c in cur.fetchall()]
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot read the journal {self.path}: {_why(exc)}") from None

    def read(self, topic: str, part: int, seq: int) -> Slice:
        with self._mutex:
            try:
                row = self.db.execute('SELECT start, "end", payload, session, nonce, digest FROM rows WHERE seq = ? '
                                      "AND topic = ? AND part = ?", (seq, topic, part)).fetchone()
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot read the journal {self.path}: {_why(exc)}") from None
        if row is None:
            raise CorruptCheckpoint(f"journal row {seq} of partition {part} is gone")
        start, end, data = int(row[0]), int(row[1]), bytes(row[2])
        aad = self._aad(topic, part, start, end, seq)
        if row[3] is None:  # unsealed: its checksum
            if row[5] is None or bytes(row[5]) != _digest(aad, data):
                raise CorruptCheckpoint(f"journal row {seq} of partition {part} fails its checksum (damaged)")
        else:
            if self.key is None:
                raise CorruptCheckpoint("the journal is encrypted and no checkpoint key is configured")
            session = bytes(row[3])
            opener = self._openers.get(session)
            if opener is None:
                opener = self._openers[session] = _Sealer(self.key, self.id, session)
            data = opener.open(int(row[4]), aad, data)
        try:
            return Slice(start, end, decode(data, topic, part))
        except (ValueError, KeyError, TypeError, IndexError):
            raise CorruptCheckpoint(f"journal row {seq} of partition {part} is malformed") from None

    def clear(self, topic: str, part: int, upto: int) -> None:
        """A checkpoint of the partition covers its rows up to ``upto``: drop them (overwritten on disk)."""
        with self._mutex:
            try:
                with self._txn():
                    self.db.execute("DELETE FROM rows WHERE topic = ? AND part = ? AND seq <= ?", (topic, part, upto))
                with contextlib.suppress(sqlite3.Error):  # old page images leave the WAL file
                    self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error as exc:
                raise CheckpointError(f"cannot write the journal {self.path}: {_why(exc)}") from None

    def close(self) -> None:
        with self._mutex, contextlib.suppress(sqlite3.Error):
            self.db.close()

    @contextlib.contextmanager
    def _txn(self) -> Any:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")


def _digest(aad: bytes, data: bytes) -> bytes:
    h = hashlib.sha256(b"everlast journal row v1/")
    h.update(aad)
    h.update(b"/")
    h.update(data)
    return h.digest()


def open_or_set_aside(path: Path, key: bytes | None) -> tuple[Journal, str | None]:
    """The journal at ``path``; if its file is damaged (not a database, malformed), it is moved aside
    (``<name>.damaged-<time>``, with its -wal and -shm files, for an operator to inspect) and a new
    journal started: returns it and what happened, in words (the models it held rows of cannot be
    replayed from it; the caller judges them against their published marks)."""
    try:
        return Journal(path, key), None
    except JournalDamaged as exc:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = path.with_name(f"{path.name}.damaged-{stamp}")
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{path}{suffix}", f"{aside}{suffix}")
        return Journal(path, key), f"the journal file was damaged ({exc.why}); moved aside to {aside.name}"


class JournalDamaged(CheckpointError):
    """The journal's file cannot be read as a journal (not a database, or malformed)."""

    retriable = False

    def __init__(self, message: str, why: str) -> None:
        super().__init__(message)
        self.why = why


def _why(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__ + (
        f" ({exc})" if isinstance(exc, sqlite3.Error) else "")
