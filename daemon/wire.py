"""The wire format: query bytes -> validated query, and answers -> label record bytes.

Query record: key = model id (UTF-8); value = msgpack map
    {"id": str | int, "x": float | [float, ...], "client": optional str}
or the same as JSON when the record carries the header ``content-type: application/json``.

The query's client, for the per-client quotas, is NOT the value's ``client`` field (the client writes
that, so it may name anyone; it is accepted and ignored): it is the record header the gateway sets
from the client's credential (``consumer.client_header``, default ``everlast-client``;
``daemon.batch.client_of``; ``everlast gateway``, ``daemon.gateway``, is the one that ships).

Label record (labels topic, same key, same format as the query: JSON with the header
``content-type: application/json``, msgpack without a header, as for queries):
    {"id", "label": 0 | 1 | null, "status": "ok" | "refused" | "invalid", "round": int,
     "reason": str (only when status is not "ok")}
A refusal's ``reason`` is a sentence; one for a client quota begins with the code ``client-quota:``, one
for a paused round with ``round-paused:``
(``refusal_code`` maps any reason to a short code). The fields are the same as before quotas existed,
so older readers keep working.

Encoding is deterministic (fixed key order, no timestamps), so a replay after a crash produces
byte-identical records. Rejection reasons name a field of this schema and the rule, never a value
and never a name the client chose (an unknown field is reported as such, not by its name).

``decode_query`` is the reference decoder: exact reasons, one record at a time. The daemon's hot
path (``daemon.batch``) decodes whole batches against the same schema and falls back to it for
any record it does not accept, so both always agree.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgpack

ContentType = Literal["msgpack", "json"]
JSON_CT = b"application/json"
MSGPACK_CT = b"application/msgpack"
"""Accepted on queries (anything but JSON is msgpack); label records in msgpack carry no header."""
MAX_ID_CHARS = 256
MAX_CLIENT_CHARS = 256
INT64 = (-(2**63), 2**63 - 1)

Headers = Sequence[tuple[str, bytes]]


@dataclass(frozen=True, slots=True)
class Query:
    model: str
    id: str | int
    x: tuple[float, ...]
    """The coordinates (one for scalar classes); finite floats."""
    client: str | None
    content_type: ContentType


CODES = ("undecodable", "schema", "oversized", "unknown_model", "dimension", "non_finite", "domain",
         "wrong_partition")
"""Every rejection code (the ``reason`` label of the invalid-record and dead-letter metrics)."""

MSG_NO_VALUE = "record has no value"
MSG_JSON_WITHOUT_HEADER = ("value is JSON but the record has no content-type header, so it was read as msgpack: "
                           "send JSON queries with the header content-type: application/json")
MSG_NOT_MAP = "value must be a map"
MSG_ID = "id must be a string (<= 256 chars) or a 64-bit integer"
MSG_KEY = "record key must be the model id (UTF-8)"
MSG_UNKNOWN_FIELDS = "unknown fields: the schema has only id, x and client"
MSG_CLIENT = "client must be a string of at most 256 characters"
MSG_X = "x must be a number or a non-empty list of numbers"
MSG_NON_FINITE = "x has a NaN or infinite coordinate"
MSG_UNKNOWN_MODEL = "no model with this id is served"
MSG_WRONG_PARTITION = ("record is not on its model's partition (produce with the murmur2 partitioner, keyed by "
                       "model id)")
MSG_DOMAIN = "x is outside the model's domain"


def msg_dimension(d: int) -> str:
    return f"x must have {d} coordinate(s)"


def msg_oversized(max_bytes: int) -> str:
    return f"record value exceeds {max_bytes} bytes"


@dataclass(frozen=True, slots=True)
class Rejected:
    code: str
    """Machine-readable reason, one of ``CODES``."""
    message: str
    id: str | int | None
    model: str | None
    content_type: ContentType


def content_type(headers: Headers | None) -> ContentType:
    for k, v in headers or ():
        if k.lower() == "content-type" and v.split(b";")[0].strip().lower() == JSON_CT:
            return "json"
    return "msgpack"


def model_of(key: bytes | None) -> str | None:
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _loads(value: bytes, ct: ContentType) -> Any:
    """The value as Python objects (JSON's NaN and Infinity are read as floats: a query whose x
    holds one is ``non_finite`` and keeps its id). Raises ValueError if it is not valid."""
    try:
        if ct == "json":
            return json.loads(value)
        return msgpack.unpackb(value, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError):
        raise ValueError(f"value is not valid {ct}") from None


def recover_id(value: bytes, ct: ContentType) -> str | int | None:
    """The query id of a record rejected before its schema was checked (oversized), if it has a
    valid one: so that it still gets an ``invalid`` label."""
    try:
        obj = _loads(value, ct)
    except ValueError:
        return None
    qid = obj.get("id") if isinstance(obj, dict) else None
    return qid if _valid_id(qid) else None


def decode_query(
    key: bytes | None, value: bytes | None, headers: Headers | None, *, max_bytes: int
) -> Query | Rejected:
    """Decode and check the schema of one query record (dimension is checked by the model)."""
    ct = content_type(headers)
    model = model_of(key)
    if value is None:
        return Rejected("schema", MSG_NO_VALUE, None, model, ct)
    if len(value) > max_bytes:
        return Rejected("oversized", msg_oversized(max_bytes), recover_id(value, ct), model, ct)
    try:
        obj = _loads(value, ct)
    except ValueError as exc:
        if ct == "msgpack" and value[:1] == b"{":  # JSON sent without its header: say so, answer in JSON
            return Rejected("undecodable", MSG_JSON_WITHOUT_HEADER, recover_id(value, "json"), model, "json")
        return Rejected("undecodable", str(exc), None, model, ct)
    if not isinstance(obj, dict):
        return Rejected("schema", MSG_NOT_MAP, None, model, ct)
    qid = obj.get("id")
    if not _valid_id(qid):
        return Rejected("schema", MSG_ID, None, model, ct)
    assert isinstance(qid, str | int)
    if model is None:
        return Rejected("schema", MSG_KEY, qid, None, ct)
    if not set(obj) <= {"id", "x", "client"}:
        return Rejected("schema", MSG_UNKNOWN_FIELDS, qid, model, ct)
    client = obj.get("client")
    if client is not None and not (isinstance(client, str) and len(client) <= MAX_CLIENT_CHARS):
        return Rejected("schema", MSG_CLIENT, qid, model, ct)
    x, err = _coords(obj.get("x"))
    if x is None:
        if err == "non_finite":
            return Rejected("non_finite", MSG_NON_FINITE, qid, model, ct)
        return Rejected("schema", MSG_X, qid, model, ct)
    return Query(model, qid, x, client, ct)


def _valid_id(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return INT64[0] <= v <= INT64[1]
    return isinstance(v, str) and 0 < len(v) <= MAX_ID_CHARS


def _coords(v: Any) -> tuple[tuple[float, ...] | None, str]:
    items = v if isinstance(v, list) else [v]
    if not items or len(items) > 4096:
        return None, "schema"
    out = []
    for c in items:
        if isinstance(c, bool) or not isinstance(c, int | float):
            return None, "schema"
        try:
            f = float(c)
        except OverflowError:  # an integer too large for a float is not finite either
            return None, "non_finite"
        if not math.isfinite(f):
            return None, "non_finite"
        out.append(f)
    return tuple(out), ""


def encode_label(
    qid: str | int | None, label: int | None, status: str, round_: int, reason: str | None, ct: ContentType
) -> bytes:
    rec: dict[str, Any] = {"id": qid, "label": label, "status": status, "round": int(round_)}
    if reason is not None:
        rec["reason"] = reason
    if ct == "json":
        return json.dumps(rec, separators=(",", ":"), allow_nan=False).encode()
    out = msgpack.packb(rec, use_bin_type=True)
    assert isinstance(out, bytes)
    return out


def refusal_code(reason: str | None) -> str:
    """A refused label's reason as a short code: ``client-quota``, ``round-paused``, ``halted``,
    ``exhausted`` (the engine's ``Refusal`` codes), ``suspended`` (the daemon suspended the model) or
    ``other``."""
    from everlast.engine.serving import Refusal

    if not reason:
        return "other"
    for r in Refusal:
        if r.code and (reason == r.reason or reason.startswith(r.code + ":")):
            return r.code
    if "refuses every query until an operator" in reason or "until an operator restores" in reason:
        return "suspended"
    return "other"


def label_headers(ct: ContentType) -> list[tuple[str, bytes]]:
    """JSON labels say so; msgpack, the default, carries no header (a header per record costs the
    broker and the client about as much as the rest of the record: measured 560k vs 330k records/s
    on the embedded broker)."""
    return [("content-type", JSON_CT)] if ct == "json" else []


def dead_letter_headers(code: str, message: str, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    return [
        ("everlast-error", code.encode()),
        ("everlast-reason", message.encode()),
        ("everlast-source", f"{topic}/{partition}/{offset}".encode()),
    ]

