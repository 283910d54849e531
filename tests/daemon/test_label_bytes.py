"""Known-answer bytes of label records, pinned as produced before the batch codec existed
(``daemon/wire.py`` at aace039). A replay after a crash must publish byte-identical records, so the
encoding may never drift: if one of these fails, the change breaks every consumer that deduplicates
by bytes. Regenerate them only together with a documented wire-format change."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everlast.daemon import wire
from everlast.daemon.batch import LabelEncoder

HALTED = "the predictor has failed (a round's halt budget was spent) and refuses every query"
SCHEMA = "x must be a number or a non-empty list of numbers"

# (id, label, status, round, reason) -> (msgpack bytes, JSON bytes)
KNOWN: list[tuple[tuple[str | int, int | None, str, int, str | None], bytes, bytes]] = [
    (
        ("q-1", 1, "ok", 3, None),
        b"\x84\xa2id\xa3q-1\xa5label\x01\xa6status\xa2ok\xa5round\x03",
        b'{"id":"q-1","label":1,"status":"ok","round":3}',
    ),
    (
        (7, None, "refused", 2, HALTED),
        b"\x85\xa2id\x07\xa5label\xc0\xa6status\xa7refused\xa5round\x02\xa6reason\xd9R" + HALTED.encode(),
        b'{"id":7,"label":null,"status":"refused","round":2,"reason":"' + HALTED.encode() + b'"}',
    ),
    (
        ("s6", None, "invalid", 1, SCHEMA),
        b"\x85\xa2id\xa2s6\xa5label\xc0\xa6status\xa7invalid\xa5round\x01\xa6reason\xd91" + SCHEMA.encode(),
        b'{"id":"s6","label":null,"status":"invalid","round":1,"reason":"' + SCHEMA.encode() + b'"}',
    ),
    # edges of the id encodings: non-ASCII (JSON escapes it, msgpack keeps UTF-8), a uint64, a
    # negative fixint, characters JSON must escape
    (
        ("\u00e9t\u00e9", 0, "ok", 12, None),
        b"\x84\xa2id\xa5\xc3\xa9t\xc3\xa9\xa5label\x00\xa6status\xa2ok\xa5round\x0c",
        b'{"id":"\\u00e9t\\u00e9","label":0,"status":"ok","round":12}',
    ),
    (
        (2**40, 1, "ok", 300, None),
        b"\x84\xa2id\xcf\x00\x00\x01\x00\x00\x00\x00\x00\xa5label\x01\xa6status\xa2ok\xa5round\xcd\x01,",
        b'{"id":1099511627776,"label":1,"status":"ok","round":300}',
    ),
    (
        (-5, 0, "ok", 1, None),
        b"\x84\xa2id\xfb\xa5label\x00\xa6status\xa2ok\xa5round\x01",
        b'{"id":-5,"label":0,"status":"ok","round":1}',
    ),
    (
        ('a"b\\c\n', None, "invalid", 0, "id must be a string"),
        b'\x85\xa2id\xa6a"b\\c\n\xa5label\xc0\xa6status\xa7invalid\xa5round\x00\xa6reason\xb3id must be a string',
        b'{"id":"a\\"b\\\\c\\n","label":null,"status":"invalid","round":0,"reason":"id must be a string"}',
    ),
]


@pytest.mark.parametrize(("args", "packed", "js"), KNOWN)
def test_label_records_keep_their_exact_bytes(
    args: tuple[str | int, int | None, str, int, str | None], packed: bytes, js: bytes
) -> None:
    assert wire.encode_label(*args, "msgpack") == packed
    assert wire.encode_label(*args, "json") == js


@pytest.mark.parametrize(("args", "packed", "js"), KNOWN)
def test_the_batch_encoder_writes_the_same_bytes(
    args: tuple[str | int, int | None, str, int, str | None], packed: bytes, js: bytes
) -> None:
    enc = LabelEncoder()
    assert enc.one(*args, "msgpack") == packed
    assert enc.one(*args, "json") == js
    qid, label, status, rnd, _ = args
    if status == "ok":
        assert label is not None
        assert enc.answered([qid], [label], rnd) == [packed]
        assert enc.answered([qid, qid], [label, label], rnd, [True, False]) == [js, packed]


ids = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(min_size=1, max_size=256))


@settings(max_examples=300, deadline=None)
@given(qid=ids, label=st.sampled_from([0, 1, None]), status=st.sampled_from(["ok", "refused", "invalid"]),
       rnd=st.integers(0, 2**40), reason=st.one_of(st.none(), st.text(max_size=300)))
def test_batch_encoding_equals_the_reference_for_any_record(
    qid: str | int, label: int | None, status: str, rnd: int, reason: str | None
) -> None:
    enc = LabelEncoder()
    for ct in ("msgpack", "json"):
        assert enc.one(qid, label, status, rnd, reason, ct) == wire.encode_label(qid, label, status, rnd, reason, ct)
