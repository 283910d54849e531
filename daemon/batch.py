"""The hot path's codec: a fetched batch of query records in, label records out.

Decoding runs msgspec (C) against the query schema of ``daemon.wire`` once per record and keeps
the results as parallel lists, with the record indices grouped by record key (a model's queries
share its key), and each record's client: the value of its client header (``client_of``), which
the operator's gateway sets. A record msgspec does not accept goes through the reference decoder
``wire.decode_query``, which names the exact reason and recovers the id where it can; so the
fast path never accepts what the reference rejects, and never loses a reason. Checks that need
arrays (finiteness, the model's dimension) are the processor's, vectorized per model.

Encoding builds label records from per-(format, status, label, round, reason) templates around
the packed id: the same bytes ``wire.encode_label`` produces (both are a msgpack map, or a JSON
object, of the same keys in the same order), pinned by tests/daemon/test_label_bytes.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Annotated, Any

import msgpack
import msgspec
import numpy as np
from numpy.typing import NDArray

from everlast.daemon import wire

Id = str | int


class _Query(msgspec.Struct, forbid_unknown_fields=True):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=wire.MAX_ID_CHARS)] | Annotated[
        int, msgspec.Meta(ge=wire.INT64[0], le=wire.INT64[1])
    ]
    x: float | Annotated[list[float], msgspec.Meta(min_length=1, max_length=4096)]
    client: Annotated[str, msgspec.Meta(max_length=wire.MAX_CLIENT_CHARS)] | None = None


_MSGPACK = msgspec.msgpack.Decoder(_Query)
_JSON = msgspec.json.Decoder(_Query)
_DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError)


@dataclass(slots=True)
class Batch:
    """One partition's fetched records, decoded. Index i refers to ``records[i]`` everywhere."""

    records: Sequence[Any]
    """The consumer records (offset, key, value, headers, timestamp, topic, partition)."""
    ids: list[Id | None]
    x: list[Any]
    """For a record that passed the schema: a finite float (one coordinate) or a list of at least
    two finite floats; None otherwise."""
    groups: dict[bytes | None, list[int]]
    """Record indices per record key, in record order."""
    rejected: dict[int, wire.Rejected] = field(default_factory=dict)
    """Records the schema rejects, and why."""
    json_at: set[int] = field(default_factory=set)
    """Records in JSON (the others are msgpack)."""
    xarr: NDArray[np.float64] | None = None
    """Every record's coordinate, when each record passed the schema with exactly one."""
    clients: list[bytes | None] | None = None
    """Each record's client (``client_of``: the client header's value; None: the anonymous client);
    ``None`` when no record names one (every query is the anonymous client's)."""

    def __len__(self) -> int:
        return len(self.records)

    def offset(self, i: int) -> int:
        return int(self.records[i].offset)

    def content_type(self, i: int) -> wire.ContentType:
        return "json" if i in self.json_at else "msgpack"

    def tail(self, start: int) -> Batch:
        """The records from index ``start`` on (rare: a round's end or a re-delivery)."""
        if start <= 0:
            return self
        groups: dict[bytes | None, list[int]] = {}
        for k, idx in self.groups.items():
            kept = [i - start for i in idx if i >= start]
            if kept:
                groups[k] = kept
        return Batch(
            self.records[start:],
            self.ids[start:],
            self.x[start:],
            groups,
            {i - start: r for i, r in self.rejected.items() if i >= start},
            {i - start for i in self.json_at if i >= start},
            None if self.xarr is None else self.xarr[start:],
            None if self.clients is None else self.clients[start:],
        )

    def clients_of(self, idx: list[int]) -> list[bytes | None] | None:
        """The clients of the records ``idx`` (ascending), in order; ``None``: all anonymous."""
        cs = self.clients
        if cs is None or not idx:
            return None
        if idx[-1] - idx[0] + 1 == len(idx):
            return cs[idx[0] : idx[-1] + 1]
        return list(itemgetter(*idx)(cs)) if len(idx) > 1 else [cs[idx[0]]]


def client_of(headers: Any, name: str) -> bytes | None:
    """The record's client id: the value of its last header ``name`` (exact, case-sensitive, as Kafka's
    ``Headers.lastHeader``: a gateway that appends its own header overrides any a client sent), or
    ``None`` (the anonymous client) when there is none or it is empty."""
    if not headers:
        return None
    for k, v in reversed(headers):
        if k == name:
            return bytes(v) if v else None
    return None


def _is_json(headers: Any) -> bool:
    return bool(headers) and wire.content_type(headers) == "json"


CLIENT_HEADER = "everlast-client"
"""The default client header (``consumer.client_header``)."""


def decode(records: Sequence[Any], max_bytes: int, client_header: str = CLIENT_HEADER) -> Batch:
    """Decode and check the schema of a fetched batch (offset order); each record's client is the
    value of its header ``client_header`` (``client_of``)."""
    hs = [r.headers for r in records]
    clients = _only_clients(hs, client_header)
    if clients is not None:  # the common batch with quotas: one header per record, the client's
        b = _decode_clean(records, max_bytes) or _decode_each(records, max_bytes)
        if b"" in clients:
            clients = [c or None for c in clients]
        b.clients = clients
        return b
    headers = any(hs)
    b = (None if headers and any(map(_is_json, hs)) else _decode_clean(records, max_bytes)) or _decode_each(
        records, max_bytes)
    if headers:
        named = [client_of(h, client_header) for h in hs]
        if any(c is not None for c in named):
            b.clients = named
    return b


_FIRST, _SECOND = itemgetter(0), itemgetter(1)


def _only_clients(hs: list[Any], name: str) -> list[bytes | None] | None:
    """Every record's client when each record carries exactly one header, the client's (list
    operations at C speed, no Python step per record); ``None`` for any other batch."""
    if not hs or not hs[0] or set(map(len, hs)) != {1}:
        return None
    firsts = list(map(_FIRST, hs))
    if set(map(_FIRST, firsts)) != {name}:
        return None
    return list(map(_SECOND, firsts))


def _decode_clean(records: Sequence[Any], max_bytes: int) -> Batch | None:
    """The common batch, in whole-list operations: msgpack records (no header but a client's) that
    all pass the schema with one finite coordinate. ``None`` for any other batch (decoded record by
    record)."""
    values = [r.value for r in records]
    if None in values or max(map(len, values)) > max_bytes:
        return None
    dec = _MSGPACK.decode
    try:
        qs = [dec(v) for v in values]
    except _DECODE_ERRORS:
        return None
    xs = [q.x for q in qs]
    try:
        xarr = np.array(xs, dtype=np.float64)
    except ValueError:
        return None
    if xarr.ndim != 1 or not np.isfinite(xarr).all():
        return None
    keys = [r.key for r in records]
    first = keys[0]
    if keys.count(first) == len(keys):
        groups = {first: list(range(len(keys)))}
    else:
        groups = {}
        for i, k in enumerate(keys):
            g = groups.get(k)
            if g is None:
                g = groups[k] = []
            g.append(i)
    if any(wire.model_of(k) is None for k in groups):
        return None
    return Batch(records, [q.id for q in qs], xs, groups, xarr=xarr)


def _decode_each(records: Sequence[Any], max_bytes: int) -> Batch:
    n = len(records)
    ids: list[Id | None] = [None] * n
    xs: list[Any] = [None] * n
    groups: dict[bytes | None, list[int]] = {}
    batch = Batch(records, ids, xs, groups)
    for i, r in enumerate(records):
        key = r.key
        g = groups.get(key)
        if g is None:
            g = groups[key] = []
        g.append(i)
        value = r.value
        headers = r.headers
        js = _is_json(headers)
        if js:
            batch.json_at.add(i)
        if value is not None and len(value) <= max_bytes:
            try:
                q = (_JSON if js else _MSGPACK).decode(value)
            except _DECODE_ERRORS:
                pass
            else:
                x = q.x
                # ``v - v`` is 0.0 for a finite float and NaN (truthy) for NaN or infinity; a
                # non-finite record falls through to the reference for its exact reason
                if isinstance(x, float):
                    if not x - x:
                        ids[i] = q.id
                        xs[i] = x
                        continue
                elif not any(v - v for v in x):
                    ids[i] = q.id
                    xs[i] = x if len(x) > 1 else x[0]
                    continue
        dec = wire.decode_query(key, value, headers, max_bytes=max_bytes)
        if isinstance(dec, wire.Rejected):
            batch.rejected[i] = dec
            ids[i] = dec.id
        else:  # the reference accepts what msgspec did not (e.g. an integer x beyond float range)
            ids[i] = dec.id
            xs[i] = dec.x[0] if len(dec.x) == 1 else list(dec.x)
    for key, idx in groups.items():  # a record whose key is no model id (checked once per key)
        if wire.model_of(key) is None:
            for i in idx:
                if i not in batch.rejected:
                    batch.rejected[i] = wire.Rejected("schema", wire.MSG_KEY, ids[i], None, batch.content_type(i))
                    xs[i] = None
    return batch


# -- encoding ---------------------------------------------------------------------------------

_PACK_ID = msgspec.msgpack.Encoder().encode


def _pack(v: Any) -> bytes:
    out = msgpack.packb(v, use_bin_type=True)
    assert isinstance(out, bytes)
    return out


class LabelEncoder:
    """Label records from cached templates: prefix + packed id + suffix."""

    def __init__(self) -> None:
        self._cache: dict[tuple[bool, int | None, str, int, str | None], tuple[bytes, bytes]] = {}

    def _template(
        self, js: bool, label: int | None, status: str, round_: int, reason: str | None
    ) -> tuple[bytes, bytes]:
        k = (js, label, status, round_, reason)
        t = self._cache.get(k)
        if t is None:
            rest: dict[str, Any] = {"label": label, "status": status, "round": int(round_)}
            if reason is not None:
                rest["reason"] = reason
            if js:
                body = "".join(f",{json.dumps(a)}:{json.dumps(b, allow_nan=False)}" for a, b in rest.items())
                t = (b'{"id":', (body + "}").encode())
            else:
                head = bytes([0x80 | (len(rest) + 1)]) + _pack("id")
                t = (head, b"".join(_pack(a) + _pack(b) for a, b in rest.items()))
            if len(self._cache) > 4096:  # reasons and rounds are few; bound it anyway
                self._cache.clear()
            self._cache[k] = t
        return t

    def one(self, qid: Id, label: int | None, status: str, round_: int, reason: str | None,
            ct: wire.ContentType) -> bytes:
        js = ct == "json"
        pre, suf = self._template(js, label, status, round_, reason)
        return pre + (json.dumps(qid).encode() if js else _PACK_ID(qid)) + suf

    def answered(self, ids: Sequence[Id | None], labels: Sequence[int], round_: int,
                 json_at: Sequence[bool] | None = None) -> list[bytes]:
        """``ok`` records for answered queries (labels 0/1), msgpack unless ``json_at`` says JSON."""
        if json_at is None or not any(json_at):
            pre, suf0 = self._template(False, 0, "ok", round_, None)
            sufs = (suf0, self._template(False, 1, "ok", round_, None)[1])
            pack = _PACK_ID
            return [pre + pack(q) + sufs[lab] for q, lab in zip(ids, labels, strict=True)]
        return [self.one(q, int(lab), "ok", round_, None, "json" if js else "msgpack")  # type: ignore[arg-type]
                for q, lab, js in zip(ids, labels, json_at, strict=True)]
