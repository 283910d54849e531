"""The record format: round trips in both encodings, replay as a stream, errors without values."""

from __future__ import annotations

import json
from pathlib import Path

import msgpack
import numpy as np
import pytest

from everlast.adversary_sim.recorded import (
    FORMAT,
    Record,
    RecordedStream,
    RecordError,
    read_records,
    records_from_arrays,
    write_records,
)
from everlast.adversary_sim.streams import run_stream


@pytest.mark.parametrize("suffix", [".jsonl", ".msgpack"])
def test_round_trip(tmp_path: Path, suffix: str) -> None:
    g = np.random.default_rng(0)
    x = g.random(50)
    y = (x >= 0.5).astype(np.int8)
    recs = records_from_arrays(x, y, t=np.arange(50) * 0.01, ids=[f"r-{i}" for i in range(50)])
    recs[3].answer = {"label": 1, "status": "ok", "round": 1}
    path = tmp_path / f"rec{suffix}"
    assert write_records(path, recs, header={"source": "test"}) == 50
    back = list(read_records(path))
    assert back == recs
    s = RecordedStream(path)
    assert len(s) == 50 and s.point_dim == 1
    bx, by = s.next_batch(20)
    assert np.array_equal(bx, x[:20]) and np.array_equal(by, y[:20])
    assert s.remaining == 30
    tail = s.next_records(100)
    assert [r.id for r in tail] == [f"r-{i}" for i in range(20, 50)]
    ex, ey = s.next_batch(5)
    assert ex.size == 0 and ey is None


def test_multidimensional_and_missing_labels(tmp_path: Path) -> None:
    x = np.arange(12, dtype=float).reshape(6, 2)
    path = tmp_path / "r.jsonl"
    write_records(path, records_from_arrays(x))
    s = RecordedStream(path)
    bx, by = s.next_batch(6)
    assert bx.shape == (6, 2) and np.array_equal(bx, x) and by is None


def test_reads_replay_record_lines(tmp_path: Path) -> None:
    """``everlast replay --record`` writes ``true_label`` and answer fields; both are read."""
    path = tmp_path / "replay.jsonl"
    rows = [{"id": "ab-0", "x": 0.2, "true_label": 0, "label": 0, "status": "ok", "round": 1, "reason": None},
            {"id": "ab-1", "x": 0.9, "true_label": 1, "label": -1, "status": "refused", "round": 1}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    recs = list(read_records(path))
    assert [r.y for r in recs] == [0, 1]
    assert recs[1].answer["status"] == "refused"


def test_errors_name_position_not_value(tmp_path: Path) -> None:
    secret = 123456.789
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"x": 1.0}) + "\n" + json.dumps({"x": str(secret)}) + "\n")
    with pytest.raises(RecordError) as e:
        list(read_records(path))
    assert "line 2" in str(e.value) and "123456" not in str(e.value)
    path.write_text(json.dumps({"x": 0.5, "y": 7}) + "\n")
    with pytest.raises(RecordError, match="field 'y'") as e2:
        list(read_records(path))
    assert "7" not in str(e2.value).replace("line 1", "")
    path.write_text("{not json\n")
    with pytest.raises(RecordError, match="line 1: not valid JSON"):
        list(read_records(path))
    mp = tmp_path / "bad.msgpack"
    mp.write_bytes(msgpack.packb({"x": float("nan")}))
    with pytest.raises(RecordError, match="object 1"):
        list(read_records(mp))
    with pytest.raises(RecordError, match="suffix"):
        list(read_records(tmp_path / "r.csv"))
    hdr = tmp_path / "h.jsonl"
    hdr.write_text(json.dumps({"format": "something-else/9"}) + "\n")
    with pytest.raises(RecordError, match="unknown record format"):
        list(read_records(hdr))


def test_header_only_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps({"format": FORMAT, "note": "empty"}) + "\n")
    assert list(read_records(path)) == []
    assert Record(x=1.0).to_obj() == {"x": 1.0}


def test_recorded_stream_runs_in_process(tmp_path: Path) -> None:
    from tests.engine.helpers import tiny_predictor

    x = np.random.default_rng(3).random(900)
    path = tmp_path / "q.msgpack"
    write_records(path, records_from_arrays(x, (x >= 0.5).astype(np.int8)))
    rep = run_stream(tiny_predictor(), RecordedStream(path), 10_000, batch=256)
    assert rep.queries == 900
    assert sum(r.queries for r in rep.rounds) == 900
    assert len(rep.rounds) == 2  # R = 600 per round
