"""Malformed records: an `invalid` label when they carry a usable id, always a dead letter with the
reason in its headers; the daemon keeps going and the valid records around them are answered."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import msgpack
import pytest

from everlast.daemon import wire
from everlast.daemon.app import serve
from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.config import load
from tests.daemon.kafka_helpers import collect, create_topics, decode_labels, produce, write_config

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]

JSON = [("content-type", b"application/json")]


def bad_records(model: bytes) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]], str, bool]]:
    """(key, value, headers, expected dead-letter reason, expect an invalid label)"""
    p = msgpack.packb
    return [
        (model, b"\xc1\xc1", [], "undecodable", False),
        (model, b'{"id": 1, "x": ', JSON, "undecodable", False),
        (model, b'{"id": 2, "x": NaN}', JSON, "non_finite", True),
        (model, b'{"id": "nohdr", "x": 0.5}', [], "undecodable", True),  # JSON without its content-type header
        (model, p({"x": 0.5}), [], "schema", False),
        (model, p({"id": True, "x": 0.5}), [], "schema", False),
        (model, p({"id": "s1", "x": "0.5"}), [], "schema", True),
        (model, p({"id": "s2", "x": [0.1, 0.2]}), [], "dimension", True),
        (model, p({"id": "s3", "x": math.nan}), [], "non_finite", True),
        (model, p({"id": "s4", "x": math.inf}), [], "non_finite", True),
        (model, p({"id": "s5", "x": 0.5, "client": "c" * 70_000}), [], "oversized", True),
        (model, p({"id": "s6", "x": 0.5, "secret-field-name": 1}), [], "schema", True),
        (b"no-such-model", p({"id": "s7", "x": 0.5}), [], "unknown_model", True),
        (model, None, [], "schema", False),
        (model, p([1, 2, 3]), [], "schema", False),
    ]


async def test_malformed_records_are_dead_lettered_and_the_rest_is_answered(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    cfg_path, topics = write_config(tmp_path, broker.bootstrap, ["m"])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    bad = bad_records(b"m")
    records, n_ok = [], 0
    for i, (k, v, h, _, _) in enumerate(bad):
        records.append((b"m", msgpack.packb({"id": f"ok-{i}", "x": i / 20}), []))
        records.append((k, v, h))
        n_ok += 1
    records.append((b"m", json.dumps({"id": "json-ok", "x": 0.9, "client": "kcat"}).encode(), JSON))
    n_invalid_labels = sum(1 for b in bad if b[4])
    stop = asyncio.Event()
    task = asyncio.create_task(serve(load(cfg_path), stop, handle_signals=False))
    await produce(broker.bootstrap, topics["queries"], records)
    labels = decode_labels(await collect(broker.bootstrap, topics["labels"], until=n_ok + 1 + n_invalid_labels))
    dead = await collect(broker.bootstrap, topics["dead_letters"], until=len(bad))
    stop.set()
    assert await asyncio.wait_for(task, 60) == 0
    by_id: dict[object, dict[str, object]] = {}
    for lab in labels:  # a rebalance may replay a partition: duplicates must be identical
        assert by_id.setdefault(lab["id"], lab) == lab
    assert all(by_id[f"ok-{i}"]["status"] == "ok" for i in range(len(bad)))
    assert by_id["json-ok"]["status"] == "ok" and by_id["json-ok"]["label"] == 1
    invalid = {lab["id"]: lab for lab in labels if lab["status"] == "invalid"}
    assert set(invalid) == {2, "nohdr"} | {f"s{i}" for i in (1, 2, 3, 4, 5, 6, 7)}  # every recoverable id
    assert invalid["nohdr"]["reason"] == wire.MSG_JSON_WITHOUT_HEADER  # says what to do, answered in JSON
    assert all(lab["label"] is None and lab["reason"] for lab in invalid.values())
    assert invalid[2]["reason"] == wire.MSG_NON_FINITE and invalid["s5"]["reason"].startswith("record value exceeds")
    assert "secret" not in invalid["s6"]["reason"]  # reasons name schema fields, never the client's
    by_source: dict[bytes, tuple[bytes | None, tuple[tuple[str, bytes], ...]]] = {}
    for r in dead:
        src = dict(r.headers)["everlast-source"]
        assert by_source.setdefault(src, (r.value, tuple(r.headers))) == (r.value, tuple(r.headers))
    reasons = sorted(dict(h)["everlast-error"].decode() for _, h in by_source.values())
    assert reasons == sorted(b[3] for b in bad)
    for _, h in by_source.values():  # the reason never quotes the record's content
        assert b"0.5" not in dict(h)["everlast-reason"] and b"secret" not in dict(h)["everlast-reason"]
