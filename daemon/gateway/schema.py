"""A predict request's body -> validated queries, or a ``Problem`` naming the field.

The body is JSON: one query ``{"id": ..., "x": ...}`` or a batch ``{"queries": [{"id": ..., "x": ...},
...]}``. A query's fields are the wire schema's (``daemon.wire``): ``id`` a string or a 64-bit
integer, ``x`` a number or a list of numbers; a ``client`` field is accepted and ignored (the client
is the credential's, ``auth``), as the daemon ignores it in a record. The gateway's own rules on top:
an id of at most ``MAX_ID_CHARS`` characters (the client's prefix must fit the wire's 256), the
model's dimension and (private learner) its declared domain, at most ``max_queries`` queries, and no
id twice in one request. Any problem rejects the whole request before anything is produced.

The fast path decodes with msgspec (C) and checks arrays with numpy; a body it does not accept goes
through ``_explain``, which walks the body in Python only to name the first bad field. Messages
name the field and the rule, never a value and never a name the client chose.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Annotated, Any

import msgspec
import numpy as np
from numpy.typing import NDArray

from everlast.daemon import wire
from everlast.daemon.gateway.auth import MAX_CLIENT_CHARS
from everlast.engine.learner.domain import Domain

MAX_ID_CHARS = wire.MAX_ID_CHARS - MAX_CLIENT_CHARS - 2
"""A query id's characters at the gateway: the record's id is ``<client>:<tag><id>`` (``relay``)."""
MAX_X = 4096

Id = str | int


class _Q(msgspec.Struct, forbid_unknown_fields=True):
    id: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_ID_CHARS)] | Annotated[
        int, msgspec.Meta(ge=wire.INT64[0], le=wire.INT64[1])]
    x: float | Annotated[list[float], msgspec.Meta(min_length=1, max_length=MAX_X)]
    client: Any = None


_LIST = list[_Q]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """What the gateway checks of a model's queries (from its configuration; no training data)."""

    id: str
    dim: int
    domain: Domain | None = None


@dataclass(frozen=True, slots=True)
class Problem:
    """A rejected request: HTTP status, a code, the field (a JSON path such as ``queries[3].x``) and
    the rule it breaks."""

    status: int
    code: str
    field: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "field": self.field, "message": self.message}}


@dataclass(frozen=True, slots=True)
class Parsed:
    ids: list[Id]
    x: NDArray[np.float64]
    """(n,) for a one-coordinate model, (n, d) otherwise."""
    single: bool


MSG_ID = f"id must be a string of 1-{MAX_ID_CHARS} characters or a 64-bit integer"
MSG_X = f"x must be a number or a non-empty list of at most {MAX_X} numbers"


def parse(body: bytes, spec: ModelSpec, max_queries: int) -> Parsed | Problem:
    try:
        obj = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return _explain(body, spec, max_queries)
    single = not (isinstance(obj, dict) and "queries" in obj)
    if single:
        items = [obj]
    else:
        items = obj["queries"]
        if set(obj) - {"queries", "client"}:
            return Problem(422, "schema", "body", "unknown fields: a batch has only queries (and an ignored client)")
        if isinstance(items, list) and len(items) > max_queries:
            return _too_many(max_queries)
    try:
        qs = msgspec.convert(items, _LIST)
    except msgspec.ValidationError:
        return _explain(body, spec, max_queries)
    if not qs:
        return Problem(422, "schema", "queries", "queries must hold at least one query")
    ids = [q.id for q in qs]
    xs = [q.x for q in qs]
    arr = _array(xs, spec.dim)
    if arr is None:  # scalars and one-coordinate lists mixed (accepted, as by the daemon), or a wrong dimension
        rows = [x if isinstance(x, list) else [x] for x in xs]
        if any(len(r) != spec.dim for r in rows):
            return _explain(body, spec, max_queries)
        arr = np.array(rows, dtype=np.float64).reshape((len(rows),) if spec.dim == 1 else (len(rows), spec.dim))
    if not np.isfinite(arr).all():
        return _explain(body, spec, max_queries)
    bad = _ids_or_domain(ids, arr, spec, single)
    return bad if bad is not None else Parsed(ids, arr, single)


def _array(xs: list[Any], d: int) -> NDArray[np.float64] | None:
    try:
        arr = np.array(xs, dtype=np.float64)
    except (ValueError, TypeError):  # ragged: scalars and lists mixed, or lists of several lengths
        return None
    n = len(xs)
    if d == 1:
        if arr.ndim == 1:
            return arr
        if arr.shape == (n, 1):
            return arr.reshape(n)
        return None
    return arr if arr.shape == (n, d) else None


def _field(single: bool, i: int, name: str | None = None) -> str:
    base = "" if single else f"queries[{i}]"
    if name is None:
        return base or "body"
    return f"{base}.{name}" if base else name


def _too_many(max_queries: int) -> Problem:
    return Problem(413, "too_many_queries", "queries", f"a request holds at most {max_queries} queries "
                                                       "(gateway.max_queries): split it")


def _ids_or_domain(ids: list[Id], arr: NDArray[np.float64], spec: ModelSpec, single: bool) -> Problem | None:
    tags = [f"i{v}" if isinstance(v, int) else "s" + v for v in ids]
    if len(set(tags)) != len(tags):
        seen: dict[str, int] = {}
        for j, t in enumerate(tags):
            if t in seen:
                return Problem(422, "duplicate_id", _field(single, j, "id"),
                               f"id repeats the id of queries[{seen[t]}]: each query of a request needs its own id")
            seen[t] = j
    if spec.domain is not None:
        out = spec.domain.outside(arr)
        if out.any():
            return Problem(422, "domain", _field(single, int(np.argmax(out)), "x"), wire.MSG_DOMAIN)
    return None


def _explain(body: bytes, spec: ModelSpec, max_queries: int) -> Problem:
    """The first problem of a body the fast path refused (Python's JSON reads NaN and Infinity, so a
    non-finite coordinate is named as such)."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return Problem(400, "undecodable", "body", "the body is not valid JSON (UTF-8)")
    single = not (isinstance(obj, dict) and "queries" in obj)
    if single:
        items: Any = [obj]
    else:
        items = obj["queries"]
        if not isinstance(items, list):
            return Problem(422, "schema", "queries", "queries must be a list of queries")
        if len(items) > max_queries:
            return _too_many(max_queries)
        if not items:
            return Problem(422, "schema", "queries", "queries must hold at least one query")
    for i, q in enumerate(items):
        if not isinstance(q, dict):
            return Problem(422, "schema", _field(single, i),
                           "a query must be an object {id, x}" + ("" if single else "; a batch is {queries: [...]}"))
        if set(q) - {"id", "x", "client"}:
            return Problem(422, "schema", _field(single, i), wire.MSG_UNKNOWN_FIELDS)
        qid = q.get("id")
        if "id" not in q or not _valid_id(qid):
            return Problem(422, "schema", _field(single, i, "id"), MSG_ID)
        if "x" not in q:
            return Problem(422, "schema", _field(single, i, "x"), MSG_X)
        v = q["x"]
        coords = v if isinstance(v, list) else [v]
        if not coords or len(coords) > MAX_X or any(isinstance(c, bool) or not isinstance(c, int | float)
                                                   for c in coords):
            return Problem(422, "schema", _field(single, i, "x"), MSG_X)
        if not all(_finite(c) for c in coords):
            return Problem(422, "non_finite", _field(single, i, "x"), wire.MSG_NON_FINITE)
        if len(coords) != spec.dim:
            return Problem(422, "dimension", _field(single, i, "x"), wire.msg_dimension(spec.dim))
    return Problem(422, "schema", "body", "the body does not match the schema")  # not reached for valid JSON


def _valid_id(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return wire.INT64[0] <= v <= wire.INT64[1]
    return isinstance(v, str) and 0 < len(v) <= MAX_ID_CHARS


def _finite(c: int | float) -> bool:
    try:
        return math.isfinite(float(c))
    except OverflowError:
        return False


# -- the Open Inference Protocol's v2 REST shape -------------------------------------------------------

V2_DATATYPES = frozenset({"FP64", "FP32", "FP16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32",
                          "UINT64"})
MAX_V2_ID_CHARS = 128


def v2_query_id(request_id: str, i: int) -> str:
    """The query id of row i of a v2 request: a replayed request id returns the rows' first labels."""
    return f"v2/{request_id}/{i}"


def parse_v2(body: bytes, spec: ModelSpec, max_queries: int) -> tuple[str, Parsed] | Problem:
    """``{"id": ..., "inputs": [{"name", "shape": [n] or [n, d], "datatype", "data"}]}``: one input
    tensor of n rows (n queries). The request id is required: it names the rows' query ids."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):
        return Problem(400, "undecodable", "body", "the body is not valid JSON (UTF-8)")
    if not isinstance(obj, dict):
        return Problem(422, "schema", "body", "the body must be an inference request object {id, inputs}")
    rid = obj.get("id")
    if not (isinstance(rid, str) and 0 < len(rid) <= MAX_V2_ID_CHARS):
        return Problem(422, "schema", "id", f"id is required: a string of 1-{MAX_V2_ID_CHARS} characters (it names "
                                            "the rows' queries; a replayed id returns their first labels)")
    inputs = obj.get("inputs")
    if not (isinstance(inputs, list) and len(inputs) == 1 and isinstance(inputs[0], dict)):
        return Problem(422, "schema", "inputs", "inputs must hold exactly one tensor {name, shape, datatype, data}")
    t = inputs[0]
    shape = t.get("shape")
    if not (isinstance(shape, list) and len(shape) in (1, 2) and all(isinstance(v, int) and not isinstance(v, bool)
                                                                    and v >= 1 for v in shape)):
        return Problem(422, "schema", "inputs[0].shape", "shape must be [n] or [n, d] with positive integers")
    n, d = shape[0], shape[1] if len(shape) == 2 else 1
    if n > max_queries:
        return Problem(413, "too_many_queries", "inputs[0].shape", f"a request holds at most {max_queries} rows "
                                                                   "(gateway.max_queries): split it")
    if d != spec.dim:
        return Problem(422, "dimension", "inputs[0].shape", wire.msg_dimension(spec.dim))
    if t.get("datatype") not in V2_DATATYPES:
        return Problem(422, "schema", "inputs[0].datatype", "datatype must be a numeric tensor type (FP64, FP32, "
                                                            "INT64, ...)")
    try:
        arr = np.asarray(t.get("data"), dtype=np.float64).reshape(-1)
    except (ValueError, TypeError, OverflowError):
        return Problem(422, "schema", "inputs[0].data", "data must be numbers (flat, row-major, or nested)")
    if arr.size != n * d:
        return Problem(422, "schema", "inputs[0].data", "data must hold shape's product of numbers")
    if not np.isfinite(arr).all():
        return Problem(422, "non_finite", "inputs[0].data", wire.MSG_NON_FINITE)
    x = arr if d == 1 else arr.reshape(n, d)
    if spec.domain is not None:
        out = spec.domain.outside(x)
        if out.any():
            return Problem(422, "domain", "inputs[0].data", wire.MSG_DOMAIN)
    return rid, Parsed([v2_query_id(rid, i) for i in range(n)], x, False)
