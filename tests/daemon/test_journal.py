"""The journal (``daemon/journal.py``): records round-trip byte for byte (what the processor reads
of them, and so their fingerprints and labels), rows chain per partition, a checkpoint drops the
rows it covers, the file is private, and with a key every row is sealed (and a wrong key or a
tampered row is refused, never read)."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from everlast.daemon.errors import CorruptCheckpoint
from everlast.daemon.journal import Journal, Slice, decode, encode
from everlast.daemon.partition import fingerprint
from tests.daemon.fakes import JSON_H, Rec, queries


def recs() -> list[Rec]:
    out = queries("m", [0.1, 0.9, 0.5], 10) + queries("other", [0.3], 13, json_=True)
    out.append(Rec(15, None, None, [("x", b"\x00\xff")]))  # no key, no value: still journaled as it was
    return out


FIELDS = ("offset", "timestamp", "key", "value", "headers")


def test_records_round_trip_with_their_fingerprints() -> None:
    rs = recs()
    back = decode(encode(rs), "q", 0)
    assert [tuple(getattr(r, f) for f in FIELDS) for r in back] == [tuple(getattr(r, f) for f in FIELDS) for r in rs]
    assert [fingerprint(r) for r in back] == [fingerprint(r) for r in rs]
    assert back[3].headers == JSON_H and {r.topic for r in back} == {"q"}
    same_key = queries("m", [0.2] * 5, 0)
    assert [r.key for r in decode(encode(same_key), "q", 0)] == [b"m"] * 5


def test_rows_chain_per_partition_and_a_checkpoint_drops_what_it_covers(tmp_path: Path) -> None:
    j = Journal(tmp_path / "journal.sqlite")
    last = j.append("q", {0: [Slice(10, 13, recs()[:3])], 1: [Slice(0, 1, recs()[3:4])]})
    last2 = j.append("q", {0: [Slice(13, 16, recs()[3:])]})
    assert last[0] < last[1] < last2[0] == j.position()
    assert [(a, b) for _, a, b in j.slices("q", 0)] == [(10, 13), (13, 16)]
    assert [r.offset for r in j.read("q", 0, last2[0]).records] == [13, 15]
    j.clear("q", 0, last[0])
    assert [(a, b) for _, a, b in j.slices("q", 0)] == [(13, 16)] and len(j.slices("q", 1)) == 1
    jid = j.id
    j.close()
    again = Journal(tmp_path / "journal.sqlite")
    assert again.id == jid and again.position() == last2[0]  # numbers are never given out twice
    assert again.append("q", {0: [Slice(16, 17, recs()[:1])]})[0] > last2[0]


def test_the_file_is_private_and_sealed_with_a_key(tmp_path: Path) -> None:
    key = os.urandom(32)
    j = Journal(tmp_path / "ck" / "journal.sqlite", key)
    seq = j.append("q", {0: [Slice(10, 13, recs()[:3])]})[0]
    assert stat.S_IMODE((tmp_path / "ck" / "journal.sqlite").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "ck").stat().st_mode) == 0o700
    raw = b"".join(p.read_bytes() for p in (tmp_path / "ck").iterdir())
    assert recs()[0].value not in raw  # no query bytes in the file (nor its WAL)
    assert [r.value for r in j.read("q", 0, seq).records] == [r.value for r in recs()[:3]]
    j.close()
    with pytest.raises(CorruptCheckpoint, match="fails authentication"):
        Journal(tmp_path / "ck" / "journal.sqlite", os.urandom(32)).read("q", 0, seq)
    with pytest.raises(CorruptCheckpoint, match="no checkpoint key"):
        Journal(tmp_path / "ck" / "journal.sqlite").read("q", 0, seq)
    db = sqlite3.connect(tmp_path / "ck" / "journal.sqlite")
    db.execute("UPDATE rows SET start = 11")  # a row moved to another place of the log
    db.commit()
    db.close()
    with pytest.raises(CorruptCheckpoint, match="fails authentication"):
        Journal(tmp_path / "ck" / "journal.sqlite", key).read("q", 0, seq)
