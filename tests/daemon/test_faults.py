"""Fault injection at the state layers, in process (no broker; milliseconds each): every kind of damage
to every kind of checkpoint blob, to journal rows and the journal file, and to the published marks,
with and without the checkpoint key, is detected before the state is used; a restored model whose
state does not reach its published mark is never served from that state unless the broker's log
holds what it published, and is suspended alone, with a reason naming what was lost, when it does
not. The mutant that ignores the marks is kept as a test: the same check fails on it.

The daemon-level cases (a real `everlast serve`, kill -9, the damage, restarts) are in
tests/daemon/test_faults_daemon.py."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from everlast.daemon.checkpoint.blobs import DirStore, EncryptedStore, sealed
from everlast.daemon.checkpoint.checkpoint import PartitionCheckpoint
from everlast.daemon.checkpoint.model_state import ClaimPending, ModelCheckpointer
from everlast.daemon.errors import CheckpointError, CorruptCheckpoint
from everlast.daemon.events import EventKind
from everlast.daemon.journal import Journal, Slice, open_or_set_aside
from everlast.daemon.marks import SLOT, Marks
from everlast.daemon.owned import OwnedPartition
from everlast.daemon.partition import PartitionProcessor, Served
from everlast.daemon.recovery import judge_marks
from tests.daemon.fakes import FakeEngine, feed, labels_of, queries
from tests.engine.helpers import tiny_predictor

KEYS = [None, bytes(range(32))]
KEYED = ["no key", "key"]


# -- damage -----------------------------------------------------------------------------------------


def flip(b: bytes, at: float = 0.5) -> bytes:
    i = min(len(b) - 1, int(len(b) * at))
    return b[:i] + bytes([b[i] ^ 0x10]) + b[i + 1 :]


def truncate(b: bytes) -> bytes:
    return b[: len(b) // 2]


def garbage(b: bytes) -> bytes:
    i = len(b) // 3
    return b[:i] + np.random.default_rng(3).bytes(min(64, len(b) - i)) + b[i + 64 :]


def empty(b: bytes) -> bytes:
    return b""


DAMAGE: dict[str, Callable[[bytes], bytes]] = {"bit": flip, "truncated": truncate, "garbage": garbage,
                                               "empty": empty, "first bit": lambda b: flip(b, 0.0)}


# -- checkpoint blobs --------------------------------------------------------------------------------


def saved(root: Path, key: bytes | None) -> ModelCheckpointer:
    p = tiny_predictor(seed=5)
    p.answer(np.random.default_rng(1).random(300))  # the reservoir fills: a res chunk is written
    assert p.reservoir_filled > 0
    ck = ModelCheckpointer(sealed(DirStore(root), key), "m")
    asyncio.run(ck.save(p, {0: 300}, {"handover": False}))
    return ck


@pytest.mark.parametrize("key", KEYS, ids=KEYED)
@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("blob", ["live", "round", "res"])
def test_every_damage_to_every_blob_is_detected_before_use(tmp_path: Path, blob: str, damage: str,
                                                           key: bytes | None) -> None:
    saved(tmp_path, key)
    (path,) = [p for p in (tmp_path / "m").iterdir() if p.name.startswith(blob)]
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    with pytest.raises(CorruptCheckpoint):
        asyncio.run(ModelCheckpointer(sealed(DirStore(tmp_path), key), "m").load())


@pytest.mark.parametrize("key", KEYS, ids=KEYED)
@pytest.mark.parametrize("damage", ["bit", "truncated", "garbage"])
def test_damage_to_a_new_models_first_state_is_detected(tmp_path: Path, damage: str, key: bytes | None) -> None:
    ck = ModelCheckpointer(sealed(DirStore(tmp_path), key), "m")
    token = asyncio.run(ck.claim())
    assert token is not None
    asyncio.run(ck.write_created(tiny_predictor(seed=5), {0: 0}, {}, token))
    path = tmp_path / "m" / f"created-{token}"
    path.write_bytes(DAMAGE[damage](path.read_bytes()))
    with pytest.raises(CorruptCheckpoint):
        asyncio.run(ModelCheckpointer(sealed(DirStore(tmp_path), key), "m").load())


@pytest.mark.parametrize("key", KEYS, ids=KEYED)
def test_an_undamaged_checkpoint_restores_the_same_state(tmp_path: Path, key: bytes | None) -> None:
    saved(tmp_path, key)
    back = asyncio.run(ModelCheckpointer(sealed(DirStore(tmp_path), key), "m").load())
    assert back is not None and back.offsets == {0: 300}
    p = tiny_predictor(seed=5)
    p.answer(np.random.default_rng(1).random(300))
    xs = np.random.default_rng(2).random(500)
    assert np.array_equal(back.predictor.answer(xs).labels, p.answer(xs).labels)


@pytest.mark.parametrize("blob", ["round", "res"])
def test_a_deleted_blob_is_detected_and_a_deleted_live_leaves_a_claim_without_state(tmp_path: Path,
                                                                                   blob: str) -> None:
    saved(tmp_path, None)
    for p in (tmp_path / "m").iterdir():
        if p.name.startswith(blob):
            p.unlink()
    with pytest.raises(CorruptCheckpoint):
        asyncio.run(ModelCheckpointer(DirStore(tmp_path), "m").load())
    (tmp_path / "m" / "live").unlink()
    (tmp_path / "m" / "claim").write_text("t0")
    with pytest.raises(ClaimPending):
        asyncio.run(ModelCheckpointer(DirStore(tmp_path), "m").load())


def test_a_blob_moved_to_another_name_or_model_fails_its_checksum(tmp_path: Path) -> None:
    saved(tmp_path, None)
    (tmp_path / "n").mkdir()
    for p in (tmp_path / "m").iterdir():
        (tmp_path / "n" / p.name).write_bytes(p.read_bytes())
    with pytest.raises(CorruptCheckpoint, match="fails its checksum"):
        asyncio.run(ModelCheckpointer(DirStore(tmp_path), "n").load())


def test_an_unframed_blob_is_refused_unless_the_store_authenticates_it(tmp_path: Path) -> None:
    from everlast.engine import codec

    DirStore(tmp_path)._put("m", "live", codec.pack({"live": {}}))
    with pytest.raises(CorruptCheckpoint, match="no checksum"):
        asyncio.run(ModelCheckpointer(DirStore(tmp_path), "m").load())
    assert EncryptedStore.authenticated and not getattr(DirStore(tmp_path), "authenticated", False)


# -- journal rows and the journal file ------------------------------------------------------------------


def journal_with_rows(root: Path, key: bytes | None) -> tuple[Journal, list[int]]:
    j = Journal(root / "journal.sqlite", key)
    seqs = []
    for k in range(3):
        last = j.append("q", {0: [Slice(10 * k, 10 * k + 10, queries("m", [0.1 * i for i in range(10)], 10 * k))],
                              1: [Slice(5 * k, 5 * k + 5, queries("o", [0.3] * 5, 5 * k))]})
        seqs.append(last[0])
    return j, seqs


ROW_DAMAGE = {
    "payload bit": "UPDATE rows SET payload = ? WHERE seq = ?",
    "moved (start)": "UPDATE rows SET start = start + 1 WHERE seq = ? AND ? IS NOT NULL",
    "renumbered": "UPDATE rows SET seq = seq + 100 WHERE seq = ? AND ? IS NOT NULL",
    "checksum removed": "UPDATE rows SET digest = NULL, session = NULL WHERE seq = ? AND ? IS NOT NULL",
    "payload swapped": "UPDATE rows SET payload = ? WHERE seq = ?",
}


@pytest.mark.parametrize("key", KEYS, ids=KEYED)
@pytest.mark.parametrize("damage", list(ROW_DAMAGE))
def test_every_damage_to_a_journal_row_is_detected_before_replay(tmp_path: Path, damage: str,
                                                                 key: bytes | None) -> None:
    j, seqs = journal_with_rows(tmp_path, key)
    j.close()
    db = sqlite3.connect(tmp_path / "journal.sqlite")
    seq = seqs[1]
    payload = bytes(db.execute("SELECT payload FROM rows WHERE seq = ?", (seq,)).fetchone()[0])
    other = bytes(db.execute("SELECT payload FROM rows WHERE seq = ?", (seqs[2],)).fetchone()[0])
    arg = flip(payload) if damage == "payload bit" else other if damage == "payload swapped" else 1
    db.execute(ROW_DAMAGE[damage], (arg, seq) if "?" in ROW_DAMAGE[damage].split("WHERE")[0] else (seq, arg))
    db.commit()
    db.close()
    j = Journal(tmp_path / "journal.sqlite", key)
    assert [len(j.read("q", 0, s).records) for s in (seqs[0], seqs[2]) if damage != "payload swapped"
            or s != seqs[2]]  # the other rows still read
    target = seq + 100 if damage == "renumbered" else seq
    with pytest.raises(CorruptCheckpoint):
        j.read("q", 0, target)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty header"])
def test_a_journal_file_sqlite_cannot_read_is_set_aside_and_a_new_one_begun(tmp_path: Path, damage: str) -> None:
    j, _ = journal_with_rows(tmp_path, None)
    old_id = j.id
    j.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    j.close()
    path = tmp_path / "journal.sqlite"
    raw = path.read_bytes()
    path.write_bytes(bytes(100) + raw[100:] if damage == "empty header" else DAMAGE[damage](raw))
    try:
        jr, note = open_or_set_aside(path, None)
    except CheckpointError:
        pytest.fail("a damaged journal file stops the daemon")
    if note is None:  # SQLite read the damaged file as a journal: whatever rows it still has must verify
        for _seq, _a, _b in jr.slices("q", 0):
            with pytest.raises(CorruptCheckpoint):
                jr.read("q", 0, _seq)
        return
    assert "damaged" in note and jr.id != old_id and jr.slices("q", 0) == []
    assert any(p.name.startswith("journal.sqlite.damaged-") for p in tmp_path.iterdir())


# -- the published marks -----------------------------------------------------------------------------


def test_the_marks_survive_a_restart_and_any_damage_makes_them_untrusted(tmp_path: Path) -> None:
    path = tmp_path / "published.marks"
    m = Marks(path)
    assert m.known and m.get("a") is None
    for k in range(1, 6):
        m.publish({"a": 10 * k, "b": k})
    m.close()
    again = Marks(path)
    assert again.known and again.values == {"a": 50, "b": 5}
    raw = path.read_bytes()
    for at in (20, SLOT + 20, len(raw) - 1):  # either slot, and the checksum itself
        path.write_bytes(raw[:at] + bytes([raw[at] ^ 1]) + raw[at + 1 :])
        assert not Marks(path).known, at
    path.write_bytes(raw[:10])
    assert not Marks(path).known
    path.write_bytes(b"")
    assert not Marks(path).known
    path.unlink()
    assert Marks(path).known  # no file: a new daemon, or marks deleted by an operator (docs/OPERATIONS.md)


# -- judged against the marks ----------------------------------------------------------------------------


def restored(offset: int, mark: int | None, marks_path: Path, damaged: bool = False) -> OwnedPartition:
    """A model restored at ``offset`` (its checkpoint plus the journal replayed) whose published mark
    is ``mark``."""
    m = Marks(marks_path)
    if mark is not None:
        m.publish({"g": mark})
    m.close()
    if damaged:
        raw = marks_path.read_bytes()
        marks_path.write_bytes(raw[:20] + bytes([raw[20] ^ 1]) + raw[21:])
    s = Served("g", FakeEngine(R=10_000), offset, verified=True, journal_seq=1)  # the journal replayed whole
    proc = PartitionProcessor(0, [s], {"g"}, 0)
    ck = PartitionCheckpoint(0, {}, offset=offset, every_queries=10, every_seconds=60.0)
    return OwnedPartition(0, proc, ck)


def outcome(o: OwnedPartition, highwater: int, judge: Callable[..., list] = judge_marks,  # type: ignore[type-arg]
            path: Path | None = None) -> tuple[str, str, int]:
    """Judge, then the first fetch (the broker's log ends at ``highwater``; empty: the embedded
    broker after a restart). Returns ("suspended", reason, offset) or ("serves", "", offset): the
    offset the state reached before the fetch."""
    marks = Marks(path) if path is not None else None
    events = judge(o, marks, None)
    reached = o.models["g"].offset
    step = o.proc.feed(None, highwater)
    m = o.models["g"]
    if m.suspension is not None:
        kinds = [e.kind for e in events + step.events]
        assert EventKind.SUSPENDED in kinds
        return "suspended", m.suspension.reason, reached
    return "serves", "", reached


def safe(mark: int, result: tuple[str, str, int], highwater: int) -> bool:
    """Never an answer from a state behind the published ones: either suspended, or the state reaches
    the mark (it answered exactly as far as it published), or the broker's log holds every record
    from the state on (it replays them exactly)."""
    return result[0] == "suspended" or result[2] >= mark or highwater >= mark


CASES = {  # (restored offset, published mark, the log's end)
    "journal cut short, broker empty": (60, 100, 0),
    "journal lost, broker empty": (0, 100, 0),
    "journal cut short, broker holds it": (60, 100, 120),
    "exact, broker empty": (100, 100, 0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_model_behind_its_published_mark_is_served_only_from_a_log_that_holds_them(tmp_path: Path,
                                                                                    case: str) -> None:
    offset, mark, hw = CASES[case]
    path = tmp_path / "published.marks"
    o = restored(offset, mark, path)
    result = outcome(o, hw, path=path)
    assert safe(mark, result, hw), (case, result)
    if offset < mark and hw < mark:
        assert result[0] == "suspended" and "journal" in result[1] and "broker" in result[1], result
        assert f"published up to offset {mark}" in result[1]
    else:
        assert result[0] == "serves"


def test_damaged_marks_suspend_a_restored_model_that_cannot_tell_how_far_it_answered(tmp_path: Path) -> None:
    path = tmp_path / "published.marks"
    o = restored(100, 100, path, damaged=True)
    result = outcome(o, 0, path=path)
    assert result[0] == "suspended" and "marks file is damaged" in result[1]
    assert o.models["g"].suspension is not None and o.models["g"].suspension.engine_failed  # state kept as it is


def test_mutant_a_daemon_that_ignores_the_published_marks_serves_from_rewound_state(tmp_path: Path) -> None:
    """The guard above, run against a daemon that does not judge its models against their marks:
    the journal cut short with the broker's log gone then answers from a state 40 queries behind
    what it published (the check ``safe`` fails), where the real daemon suspends the model."""
    offset, mark, hw = CASES["journal cut short, broker empty"]
    path = tmp_path / "published.marks"
    o = restored(offset, mark, path)
    result = outcome(o, hw, judge=lambda *_: [], path=path)
    assert result == ("serves", "", offset) and not safe(mark, result, hw)
    labs = labels_of(feed(o.proc, queries("g", [0.7, 0.2], 0), 2))
    assert [d["status"] for d in labs] == ["ok", "ok"]  # answers drawn from the rewound state


def test_a_frozen_model_bounds_nothing_and_its_checkpoint_is_never_written(tmp_path: Path) -> None:
    """A model whose state could not be restored (``Served.frozen``) beside a healthy one: the
    partition starts where the healthy one is, the frozen one refuses only queries after its mark
    (those before were answered already: no second record), and a checkpoint writes only the other."""
    from everlast.daemon.checkpoint.blobs import DirStore as Store
    from everlast.daemon.model import Unrestored
    from everlast.daemon.partition import Suspension

    bad = Served("bad", Unrestored("generic-bbl", 1), 7, frozen=True, broken=True)
    bad.suspension = Suspension("its checkpoint fails its checksum", 0, 7, True)
    good = Served("good", FakeEngine(R=1000), 5, journal_seq=0)
    proc = PartitionProcessor(0, [bad, good], {"bad", "good"}, 0)
    assert proc.next_offset == 5 and proc.journal_plan([]) == ([], None)
    step = feed(proc, queries("bad", [0.1, 0.2, 0.3], 5) + queries("good", [0.9], 8))
    labs = labels_of(step)
    assert sorted((d["id"], d["status"]) for d in labs) == [(7, "refused"), (8, "ok")]
    store = Store(tmp_path)
    cks = {m: ModelCheckpointer(store, m) for m in ("bad", "good")}
    ck = PartitionCheckpoint(0, cks, offset=5, every_queries=10, every_seconds=60.0)
    ck.store_offset(proc.next_offset, step.answered)
    asyncio.run(ck.commit(proc))
    assert sorted(os.listdir(tmp_path)) == ["good"]


def test_a_partition_not_fully_restored_gets_no_hand_over_checkpoint(tmp_path: Path) -> None:
    """A start that fails (or a revocation) before a partition's journal is replayed: its hand-over
    writes nothing (a partial state must never look exact) and says so; once opened, it does."""

    class IO:
        def __init__(self) -> None:
            self.commits: list[bool] = []

        async def commit(self, o: OwnedPartition, handover: bool = False, stop: object = None) -> None:
            self.commits.append(handover)

        async def send(self, steps: object, journal: bool = True) -> None: ...

        def apply(self, o: OwnedPartition, step: object, start_transitions: bool = True) -> None: ...

        def log_events(self, part: int, events: object) -> None: ...

    def owned() -> OwnedPartition:
        proc = PartitionProcessor(0, [Served("g", FakeEngine(), 0)], {"g"}, 0)
        return OwnedPartition(0, proc, PartitionCheckpoint(0, {}, offset=0, every_queries=10, every_seconds=60.0))

    io, o = IO(), owned()
    why = asyncio.run(o.hand_over(io, asyncio.Event(), journaled=True))  # type: ignore[arg-type]
    assert why == "partition 0: not fully restored" and io.commits == []
    o = owned()
    o.opened = True
    assert asyncio.run(o.hand_over(io, asyncio.Event(), journaled=True)) is None  # type: ignore[arg-type]
    assert io.commits == [True]


def test_the_metrics_say_what_a_suspension_lost() -> None:
    from everlast.daemon.metrics import Metrics
    from everlast.daemon.model import checkpoint_lost
    from everlast.daemon.partition import (
        LOG_DELETED_REASON,
        LOG_LOST_REASON,
        Suspension,
        behind_reason,
        engine_failed_reason,
    )
    from everlast.daemon.signals import lost_of, publish

    said = {
        behind_reason("its journal cannot vouch for it: ...", "the broker's log does not hold them"): "journal",
        behind_reason("the published marks file is damaged (a slot fails its checksum)", "..."): "marks",
        "checkpoint m/live fails its checksum (damaged)": "checkpoint",
        "checkpoint m/live fails authentication (wrong key, or tampered)": "checkpoint",
        checkpoint_lost("m", 100): "checkpoint",
        "model m: its checkpoint is bound to other data or configuration (the training data ...)": "configuration",
        LOG_LOST_REASON: "broker",
        LOG_DELETED_REASON: "broker",
        engine_failed_reason(RuntimeError()): "engine",
    }
    assert {r: lost_of(r) for r in said} == said
    g = Metrics()
    s = Served("m", FakeEngine(), 0)
    s.suspension = Suspension(LOG_LOST_REASON, 0, 0, False)
    publish(g, s, None, False)
    from prometheus_client import generate_latest

    text = generate_latest(g.registry).decode()
    assert 'everlast_model_suspended_lost{lost="broker",model="m"} 1.0' in text
    assert 'everlast_model_suspended_lost{lost="journal",model="m"} 0.0' in text


def test_a_checkpoint_is_bound_to_its_training_data_and_configuration(tmp_path: Path) -> None:
    """A start whose training file or model settings differ from the checkpoint's refuses the model,
    saying what changed and how to serve the new one (a new id) or keep the old one; the same data
    under the same settings restores. (The schedule is not bound: a model keeps its own.)"""
    from everlast.daemon.config import ModelConfig
    from everlast.daemon.model import ModelRuntime
    from tests.daemon.kafka_helpers import write_model_files

    data, sched = write_model_files(tmp_path, "m", seed=0)
    (tmp_path / "o").mkdir()
    other, _ = write_model_files(tmp_path / "o", "m", seed=1)  # the same size, other points
    runtime = ModelRuntime.prepare(ModelConfig(id="m", data=data, schedule=sched))
    meta = runtime.meta(4)
    runtime.check_bound(meta)  # the same: restores
    with pytest.raises(CheckpointError, match="the training data") as e:
        ModelRuntime.prepare(ModelConfig(id="m", data=other, schedule=sched)).check_bound(meta)
    assert "new model id" in str(e.value) and "restore its data file" in str(e.value)
    with pytest.raises(CheckpointError, match="concept: checkpoint 'thresholds', configuration 'intervals'"):
        ModelRuntime.prepare(ModelConfig(id="m", data=data, schedule=sched, concept="intervals")).check_bound(meta)
    assert runtime.data_fp not in str(e.value)  # no hash of the training data in a message


@pytest.mark.parametrize("beside", [True, False], ids=["written beside these marks", "another replica's"])
def test_reaching_the_mark_vouches_only_for_a_checkpoint_written_beside_the_marks(tmp_path: Path,
                                                                                 beside: bool) -> None:
    """A periodic checkpoint at the model's mark, written beside this daemon's marks: exact, even when
    its journal is gone. Written by another replica (the Kafka store; this daemon's mark is older):
    the mark cannot vouch for what that replica published, so it relies on the broker's log, as
    before (the empty log then suspends it)."""
    path = tmp_path / "published.marks"
    m = Marks(path)
    m.publish({"g": 100})
    s = Served("g", FakeEngine(R=10_000), 120 if not beside else 100, verified=False,
               marks_id=m.id if beside else None)
    m.close()
    o = OwnedPartition(0, PartitionProcessor(0, [s], {"g"}, 0),
                       PartitionCheckpoint(0, {}, offset=s.offset, every_queries=10, every_seconds=60.0))
    judge_marks(o, Marks(path), None)
    o.proc.feed(None, 0)  # the broker's log is empty
    assert (s.suspension is None) == beside, s.suspension
