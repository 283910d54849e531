"""The batch decoder agrees with the reference decoder (``wire.decode_query``) on every record:
same acceptance, same id and coordinates, same rejection code and reason."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everlast.daemon import batch, wire

JSON_H = [("content-type", b"application/json")]


@dataclass
class Rec:
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    offset: int = 0


def as_tuple(x: Any) -> tuple[float, ...]:
    return tuple(x) if isinstance(x, list) else (x,)


def check_agrees(recs: list[Rec], max_bytes: int = 200) -> None:
    b = batch.decode(recs, max_bytes)
    assert sorted(i for idx in b.groups.values() for i in idx) == list(range(len(recs)))
    for i, r in enumerate(recs):
        ref = wire.decode_query(r.key, r.value, r.headers, max_bytes=max_bytes)
        assert b.content_type(i) == ref.content_type
        if isinstance(ref, wire.Rejected):
            assert i in b.rejected, (r, ref)
            assert b.rejected[i] == ref and b.ids[i] == ref.id
        else:
            assert i not in b.rejected, (r, b.rejected.get(i))
            assert b.ids[i] == ref.id and type(b.ids[i]) is type(ref.id)
            got = as_tuple(b.x[i])
            assert len(got) == len(ref.x)
            assert all((math.isnan(a) and math.isnan(c)) or a == c for a, c in zip(got, ref.x, strict=True))


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**64), 2**64), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5), st.binary(max_size=3),
)
xs = st.one_of(scalars, st.lists(st.one_of(st.floats(), st.integers(-(2**70), 2**70), st.booleans()), max_size=4))
ids = st.one_of(st.integers(-(2**64) + 1, 2**64 - 1), st.text(max_size=300), st.booleans(), st.none(), st.floats())
maps = st.fixed_dictionaries(
    {}, optional={"id": ids, "x": xs, "client": st.one_of(st.none(), st.text(max_size=300), st.integers()),
                  "extra": st.integers()},
)


def pack(obj: Any, as_json: bool) -> bytes | None:
    try:
        return json.dumps(obj).encode() if as_json else msgpack.packb(obj)
    except (TypeError, ValueError, OverflowError):
        return None


coords = st.one_of(st.floats(), st.integers(-(2**66), 2**66))
valid_ish = st.fixed_dictionaries(
    {"id": st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(min_size=1, max_size=3)),
     "x": st.one_of(coords, st.lists(coords, min_size=1, max_size=3))},
    optional={"client": st.text(max_size=3)},
)


@settings(max_examples=500, deadline=None)
@given(objs=st.lists(st.tuples(st.one_of(valid_ish, maps, scalars), st.booleans(),
                               st.sampled_from([b"m", None, b"\xff"])), min_size=1, max_size=8))
def test_the_batch_decoder_agrees_with_the_reference(objs: list[tuple[Any, bool, bytes | None]]) -> None:
    recs = []
    for i, (obj, as_json, key) in enumerate(objs):
        v = pack(obj, as_json)
        if v is not None:
            recs.append(Rec(key, v, JSON_H if as_json else [], i))
    if recs:
        check_agrees(recs)


@pytest.mark.parametrize("value", [
    b"\xc1", b"", b'{"id": 1, "x": ', b'{"id": 2, "x": NaN}', b'{"id": 3, "x": [1, Infinity]}',
    b'{"id": 4, "x": 1e400}', b'{"id": 5, "x": 100000000000000000000000000000000000000000000000000000000000000'
    b'000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000'
    b'000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000'
    b'00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000}',
    b'{"id": 6, "x": 0.5, "client": "c", "secret-name": 1}', b'[1, 2]', b'{"id": 7, "x": 0.5}',
])
def test_json_edge_cases_agree(value: bytes) -> None:
    check_agrees([Rec(b"m", value, JSON_H)], max_bytes=10_000)


def test_nan_in_a_json_body_keeps_its_id_and_unknown_field_names_are_not_echoed() -> None:
    b = batch.decode([Rec(b"m", b'{"id": 2, "x": NaN}', JSON_H),
                      Rec(b"m", msgpack.packb({"id": 3, "x": 0.5, "secret-name": 1}), [])], 10_000)
    assert b.rejected[0].code == "non_finite" and b.rejected[0].id == 2
    assert b.rejected[1].code == "schema" and b.rejected[1].id == 3 and "secret" not in b.rejected[1].message


def test_an_oversized_record_keeps_its_id() -> None:
    big = msgpack.packb({"id": "big", "x": 0.5, "client": "c" * 1000})
    b = batch.decode([Rec(b"m", big, []), Rec(b"m", b"\xc1" * 2000, [])], 500)
    assert b.rejected[0].code == "oversized" and b.rejected[0].id == "big"
    assert b.rejected[1].code == "oversized" and b.rejected[1].id is None


def test_tail_keeps_groups_rejections_and_formats_aligned() -> None:
    recs = [Rec(b"a", msgpack.packb({"id": 0, "x": 0.1}), [], 10), Rec(b"b", b"\xc1", [], 11),
            Rec(b"a", json.dumps({"id": 2, "x": 0.3}).encode(), JSON_H, 12), Rec(b"b", b"\xc1", [], 13)]
    t = batch.decode(recs, 1000).tail(1)
    assert len(t) == 3 and t.offset(0) == 11
    assert t.groups == {b"b": [0, 2], b"a": [1]}
    assert set(t.rejected) == {0, 2} and t.json_at == {1} and t.ids[1] == 2
