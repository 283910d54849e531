"""The wire format: query bytes -> validated query, and answers -> label record bytes.

Query record: key = model id (UTF-8); value = msgpack map
    {"id": str | int, "x": float | [float, ...], "client": optional str}
or the same as JSON when the record carries the header ``content-type: application/json``.

Label record (labels topic, same key, same content type as the query):
    {"id", "label": 0 | 1 | null, "status": "ok" | "refused" | "invalid", "round": int,
     "reason": str (only when status is not "ok")}

Encoding is deterministic (fixed key order, no timestamps), so a replay after a crash produces
byte-identical records. Rejection reasons name the field and the rule, never a value.
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


@dataclass(frozen=True, slots=True)
class Rejected:
    code: str
    """Machine-readable reason: undecodable, schema, oversized, unknown_model, dimension, non_finite,
    domain, wrong_partition."""
    message: str
    id: str | int | None
    model: str | None
    content_type: ContentType


def content_type(headers: Headers | None) -> ContentType:
    for k, v in headers or ():
        if k.lower() == "content-type" and v.split(b";")[0].strip().lower() == JSON_CT:
            return "json"
    return "msgpack"


def _reject_constant(name: str) -> Any:
    raise ValueError("non-finite JSON constant")


def decode_query(
    key: bytes | None, value: bytes | None, headers: Headers | None, *, max_bytes: int
) -> Query | Rejected:
    """Decode and check the schema of one query record (dimension is checked by the model)."""
    ct = content_type(headers)
    model = None
    if key is not None:
        try:
            model = key.decode("utf-8")
        except UnicodeDecodeError:
            model = None
    if value is None:
        return Rejected("schema", "record has no value", None, model, ct)
    if len(value) > max_bytes:
        return Rejected("oversized", f"record value exceeds {max_bytes} bytes", None, model, ct)
    try:
        if ct == "json":
            obj = json.loads(value, parse_constant=_reject_constant)
        else:
            obj = msgpack.unpackb(value, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException, RecursionError):
        return Rejected("undecodable", f"value is not valid {ct}", None, model, ct)
    if not isinstance(obj, dict):
        return Rejected("schema", "value must be a map", None, model, ct)
    qid = obj.get("id")
    if not _valid_id(qid):
        return Rejected("schema", "id must be a string (<= 256 chars) or a 64-bit integer", None, model, ct)
    assert isinstance(qid, str | int)
    if model is None:
        return Rejected("schema", "record key must be the model id (UTF-8)", qid, None, ct)
    extra = set(obj) - {"id", "x", "client"}
    if extra:
        return Rejected("schema", f"unknown fields: {', '.join(sorted(map(str, extra)))[:200]}", qid, model, ct)
    client = obj.get("client")
    if client is not None and not (isinstance(client, str) and len(client) <= MAX_CLIENT_CHARS):
        return Rejected("schema", "client must be a string of at most 256 characters", qid, model, ct)
    x, err = _coords(obj.get("x"))
    if x is None:
        return Rejected(
            "non_finite" if err == "non_finite" else "schema",
            "x has a NaN or infinite coordinate"
            if err == "non_finite"
            else "x must be a number or a non-empty list of numbers",
            qid,
            model,
            ct,
        )
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


def label_headers(ct: ContentType) -> list[tuple[str, bytes]]:
    return [("content-type", JSON_CT if ct == "json" else MSGPACK_CT)]


def dead_letter_headers(code: str, message: str, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    return [
        ("everlast-error", code.encode()),
        ("everlast-reason", message.encode()),
        ("everlast-source", f"{topic}/{partition}/{offset}".encode()),
    ]

