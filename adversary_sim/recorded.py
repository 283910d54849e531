"""Recorded query streams: the record format, and replaying a record as a stream.

A record is a sequence of objects, one per query, with these keys (all but ``x`` optional):

    id          str or int   the query's id (``everlast replay`` uses "<run>-<i>")
    x           number or list of numbers   the point (point_dim 1: a number; else a list)
    y           0 or 1       its true label, if known (``true_label`` is read as an alias)
    t           number       timestamp in seconds (any origin; replays keep the gaps)
    label, status, round, reason, latency_ms    an answer, when the record also holds one

Two encodings, chosen by the file name: JSON lines (``.jsonl``/``.json``/``.ndjson``: one object per
line) or msgpack (``.msgpack``/``.mpk``/``.msg``: a concatenation of maps). An optional first object
``{"format": "everlast-record/1", ...}`` is a header (metadata); readers skip it. ``everlast replay
--record`` writes this format (JSON lines); ``RecordedStream`` replays it in-process or through
Kafka (``adversary_sim.kafka_replay.Stream``).

Errors name the line or object number and the field, never a value (records may hold user data).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from everlast.adversary_sim.streams import Labels, Points

FORMAT = "everlast-record/1"
JSON_SUFFIXES = (".jsonl", ".json", ".ndjson")
MSGPACK_SUFFIXES = (".msgpack", ".mpk", ".msg")
ANSWER_KEYS = ("label", "status", "round", "reason", "latency_ms")


class RecordError(ValueError):
    """A record file is malformed (the message names the position and field only)."""


@dataclass(slots=True)
class Record:
    x: float | list[float]
    id: str | int | None = None
    y: int | None = None
    t: float | None = None
    answer: dict[str, Any] = field(default_factory=dict)

    def to_obj(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.id is not None:
            out["id"] = self.id
        out["x"] = self.x
        if self.y is not None:
            out["y"] = self.y
        if self.t is not None:
            out["t"] = self.t
        out.update({k: v for k, v in self.answer.items() if v is not None})
        return out


def _encoding(path: Path) -> str:
    suf = path.suffix.lower()
    if suf in JSON_SUFFIXES:
        return "jsonl"
    if suf in MSGPACK_SUFFIXES:
        return "msgpack"
    raise RecordError(f"cannot tell the record encoding from the file suffix {suf!r} "
                      f"(use one of {', '.join(JSON_SUFFIXES + MSGPACK_SUFFIXES)})")


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise RecordError(f"{where}: field 'x' must be a number or a list of numbers")
    f = float(v)
    if not math.isfinite(f):
        raise RecordError(f"{where}: field 'x' must be finite")
    return f


def parse(obj: Any, where: str) -> Record | None:
    """One decoded object -> Record (None for a header)."""
    if not isinstance(obj, dict):
        raise RecordError(f"{where}: a record must be an object")
    if "format" in obj and "x" not in obj:
        if obj["format"] != FORMAT:
            raise RecordError(f"{where}: unknown record format (expected {FORMAT})")
        return None
    if "x" not in obj:
        raise RecordError(f"{where}: missing field 'x'")
    xv = obj["x"]
    x: float | list[float]
    if isinstance(xv, list):
        if not xv:
            raise RecordError(f"{where}: field 'x' is an empty list")
        x = [_number(v, where) for v in xv]
    else:
        x = _number(xv, where)
    rid = obj.get("id")
    if rid is not None and (isinstance(rid, bool) or not isinstance(rid, str | int)):
        raise RecordError(f"{where}: field 'id' must be a string or an integer")
    yv = obj.get("y", obj.get("true_label"))
    if yv is not None and (isinstance(yv, bool) or yv not in (0, 1)):
        raise RecordError(f"{where}: field 'y' must be 0, 1 or absent")
    tv = obj.get("t", obj.get("ts"))
    if tv is not None:
        if isinstance(tv, bool) or not isinstance(tv, int | float) or not math.isfinite(float(tv)):
            raise RecordError(f"{where}: field 't' must be a finite number")
        tv = float(tv)
    answer = {k: obj[k] for k in ANSWER_KEYS if k in obj}
    return Record(x=x, id=rid, y=None if yv is None else int(yv), t=tv, answer=answer)


def read_records(path: str | Path) -> Iterator[Record]:
    """Records of a file, in order (a header, if any, is skipped)."""
    p = Path(path)
    enc = _encoding(p)
    if enc == "jsonl":
        with p.open("r", encoding="utf-8") as f:
            for i, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    raise RecordError(f"line {i}: not valid JSON") from None
                rec = parse(obj, f"line {i}")
                if rec is not None:
                    yield rec
    else:
        with p.open("rb") as fb:
            unpacker = msgpack.Unpacker(fb, raw=False, strict_map_key=False)
            i = 0
            try:
                for obj in unpacker:
                    i += 1
                    rec = parse(obj, f"object {i}")
                    if rec is not None:
                        yield rec
            except (msgpack.exceptions.ExtraData, msgpack.exceptions.FormatError,
                    msgpack.exceptions.StackError, ValueError) as exc:
                if isinstance(exc, RecordError):
                    raise
                raise RecordError(f"object {i + 1}: not valid msgpack") from None


def write_records(path: str | Path, records: Iterable[Record | dict[str, Any]], *,
                  header: dict[str, Any] | None = None) -> int:
    """Write records (``Record`` or plain objects with the keys above); returns how many."""
    p = Path(path)
    enc = _encoding(p)

    def encode(obj: dict[str, Any]) -> bytes:
        if enc == "jsonl":
            return (json.dumps(obj, allow_nan=False) + "\n").encode("utf-8")
        packed = msgpack.packb(obj, use_bin_type=True)
        assert isinstance(packed, bytes)
        return packed

    n = 0
    with p.open("wb") as f:
        if header is not None:
            f.write(encode({"format": FORMAT, **header}))
        for r in records:
            obj = r.to_obj() if isinstance(r, Record) else dict(r)
            if parse(obj, f"record {n + 1}") is None:
                raise RecordError(f"record {n + 1}: missing field 'x'")
            f.write(encode(obj))
            n += 1
    return n


def records_from_arrays(x: Points, y: Labels | None = None, t: Any = None, ids: Any = None) -> list[Record]:
    """Records for points ``x`` (n,) or (n, d), optional labels, timestamps and ids (default 0..n-1)."""
    n = x.shape[0]
    out = []
    for i in range(n):
        xv: float | list[float] = float(x[i]) if x.ndim == 1 else [float(v) for v in x[i]]
        out.append(Record(x=xv, id=int(i) if ids is None else ids[i],
                          y=None if y is None else int(y[i]), t=None if t is None else float(t[i])))
    return out


class RecordedStream:
    """Replay a record as a stream (non-adaptive). ``next_batch`` returns fewer than n points (and
    then none) once the record is exhausted; ``remaining`` says how many are left. The true labels
    are returned when every record of the batch has one, else None."""

    adaptive = False

    def __init__(self, source: str | Path | Iterable[Record], point_dim: int | None = None) -> None:
        recs = list(read_records(source)) if isinstance(source, str | Path) else list(source)
        self.records = recs
        dims = {1 if not isinstance(r.x, list) else len(r.x) for r in recs}
        if len(dims) > 1:
            raise RecordError("records mix points of different dimensions")
        self.point_dim = point_dim if point_dim is not None else (dims.pop() if dims else 1)
        self.pos = 0

    def __len__(self) -> int:
        return len(self.records)

    @property
    def remaining(self) -> int:
        return len(self.records) - self.pos

    def _batch(self, n: int) -> list[Record]:
        chunk = self.records[self.pos : self.pos + max(0, n)]
        self.pos += len(chunk)
        return chunk

    def next_records(self, n: int) -> list[Record]:
        """The next n records themselves (ids and timestamps, for a rate-faithful replay)."""
        return self._batch(n)

    def next_batch(self, n: int) -> tuple[Points, Labels | None]:
        return self.to_arrays(self._batch(n))

    def to_arrays(self, chunk: list[Record]) -> tuple[Points, Labels | None]:
        shape = (len(chunk),) if self.point_dim == 1 else (len(chunk), self.point_dim)
        x: Points = np.asarray([r.x for r in chunk], dtype=np.float64).reshape(shape)
        if chunk and all(r.y is not None for r in chunk):
            return x, np.asarray([r.y for r in chunk], dtype=np.int8)
        return x, None

    def observe(self, labels: Labels) -> None:
        pass
