"""The partition checkpoint owns the commit order: numbered steps, offsets that only increase, no
checkpoint of answers the broker has not acknowledged (no broker needed)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pytest

from everlast.daemon.checkpoint.blobs import DirStore
from everlast.daemon.checkpoint.checkpoint import PartitionCheckpoint
from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.daemon.errors import CommitOrderError, InvalidStoredOffset
from everlast.daemon.partition import PartitionProcessor, Served, Suspension
from tests.daemon.fakes import feed, queries
from tests.engine.helpers import tiny_predictor


class Recording(DirStore):
    """A directory store that records the order of its writes and deletes."""

    def __init__(self, root: Path, ops: list[str]) -> None:
        super().__init__(root)
        self.ops = ops

    async def put(self, model: str, name: str, data: bytes) -> None:
        self.ops.append(f"put {model}/{name.split('-0')[0]}")
        await super().put(model, name, data)

    async def delete(self, model: str, names: Iterable[str]) -> None:
        names = list(names)
        self.ops.append(f"delete {model}/{','.join(sorted(n.split('-0')[0] for n in names))}")
        await super().delete(model, names)


def setup(tmp: Path, ops: list[str], every: int = 10) -> tuple[PartitionProcessor, PartitionCheckpoint]:
    store = Recording(tmp, ops)
    ms = [Served("a", tiny_predictor(seed=1), 0), Served("b", tiny_predictor(seed=2), 0)]
    proc = PartitionProcessor(0, ms, {"a", "b"}, 0)
    ck = PartitionCheckpoint(0, {m.id: ModelCheckpointer(store, m.id) for m in ms}, offset=0,
                             every_queries=every, every_seconds=3600.0, meta={"a": {"n_train": 800}})
    return proc, ck


def test_offsets_must_increase() -> None:
    ck = PartitionCheckpoint(0, {}, offset=10, every_queries=5, every_seconds=60.0)
    ck.store_offset(12, answered=2)
    with pytest.raises(InvalidStoredOffset, match="12 does not increase"):
        ck.store_offset(12)
    with pytest.raises(InvalidStoredOffset):
        ck.store_offset(3)
    ck.reset()  # a replaced log: the one way back
    ck.store_offset(1)
    assert ck.offset == 1


def test_due_by_queries_or_time_and_only_when_something_changed() -> None:
    now = [0.0]
    ck = PartitionCheckpoint(0, {}, offset=0, every_queries=5, every_seconds=60.0, clock=lambda: now[0])
    now[0] = 100.0
    assert not ck.due()  # nothing changed
    ck.store_offset(3, answered=3)
    assert ck.due()
    now[0] = 0.0
    assert not ck.due()
    ck.store_offset(5, answered=2)
    assert ck.due()
    ck.since, ck.dirty = 0, False
    ck.mark_dirty()
    assert not ck.due()
    ck.mark_dirty(urgent=True)  # a suspension is saved at once
    assert ck.due()


def test_commit_runs_its_steps_in_order(tmp_path: Path) -> None:
    ops: list[str] = []
    proc, ck = setup(tmp_path, ops)

    async def commit_offset(offset: int) -> None:
        ops.append(f"consumer commit {offset}")

    asyncio.run(ck.commit(proc, commit_offset))  # at assignment: before anything is answered
    step = feed(proc, queries("a", list(np.linspace(0, 1, 5)), 0) + queries("b", list(np.linspace(0, 1, 5)), 5))
    assert len(step.label_records()) == 10
    with pytest.raises(CommitOrderError, match="not acknowledged"):  # 1: acks first
        asyncio.run(ck.commit(proc, commit_offset))
    ck.store_offset(proc.next_offset, step.answered)  # the labels were acknowledged
    ops.clear()
    asyncio.run(ck.commit(proc, commit_offset))
    assert ops == ["put a/res-1", "put a/live", "put b/res-1", "put b/live", "consumer commit 10"]
    assert not ck.dirty


def test_commit_refuses_during_a_transition_and_prunes_old_rounds_after_live(tmp_path: Path) -> None:
    ops: list[str] = []
    proc, ck = setup(tmp_path, ops)
    asyncio.run(ck.commit(proc))
    step = feed(proc, queries("a", list(np.linspace(0, 1, 700)), 0))  # tiny rounds end at 600 queries
    ck.store_offset(proc.next_offset, step.answered)
    assert step.transitions == ["a"]
    assert ck.blocked(proc) == "a round transition is running"
    proc.models["a"].engine.transition()
    proc.transition_done({})
    ops.clear()
    asyncio.run(ck.commit(proc))
    assert ops[:3] == ["put a/round-2", "put a/live", "put b/live"] and ops[-1] == "delete a/round-1"


def test_a_suspended_engine_keeps_its_last_good_state_and_the_suspension_survives_a_restore(tmp_path: Path) -> None:
    ops: list[str] = []
    proc, ck = setup(tmp_path, ops)
    asyncio.run(ck.commit(proc))
    m = proc.models["a"]
    m.suspension = Suspension("the model's engine failed (InvalidState)", 1, 0, True)
    m.broken = True
    step = feed(proc, queries("a", [0.5, 0.6], 0))
    ck.store_offset(proc.next_offset, step.answered)
    ops.clear()
    asyncio.run(ck.commit(proc, handover=True))
    assert ops == ["put a/live", "put b/live"]
    restored = asyncio.run(ModelCheckpointer(DirStore(tmp_path), "a").load())
    assert restored is not None
    # the last good engine state, at the partition's offset: a suspended model refuses every query
    # from its suspension on without its engine, so its offset moves with the partition's (the
    # journal's rows then chain from one offset for every model)
    assert restored.offsets == {0: 2}
    s = Suspension.from_meta(restored.meta, 1)
    assert s == m.suspension and restored.meta["handover"] is False and restored.meta["n_train"] == 800
    b = asyncio.run(ModelCheckpointer(DirStore(tmp_path), "b").load())
    assert b is not None and b.meta["handover"] is True and b.offsets == {0: 2}


# -- one creation per model: the claim (docs/privacy/learner.md 2, "In the daemon") --------------------


def test_the_first_claimed_creation_is_the_models_and_a_losers_state_is_deleted(tmp_path: Path) -> None:
    import os

    from everlast.daemon.checkpoint.blobs import EncryptedStore
    from everlast.engine import codec

    for store in (DirStore(tmp_path / "plain"), EncryptedStore(DirStore(tmp_path / "sealed"), os.urandom(32))):
        first, second = tiny_predictor(seed=1), tiny_predictor(seed=2)
        a, b = ModelCheckpointer(store, "m"), ModelCheckpointer(store, "m")
        assert asyncio.run(a.create(first, {0: 7}, {"n_train": 800})) is True
        assert asyncio.run(b.create(second, {0: 9}, {"n_train": 800})) is False  # claimed second: discarded
        names = asyncio.run(store.names("m"))
        assert len(names) == 1 and names[0].startswith("created-")  # the loser's state is gone; "claim" is no blob
        got = asyncio.run(ModelCheckpointer(store, "m").load())  # the winner crashed before its first live
        assert got is not None and got.offsets == {0: 7} and got.meta == {"n_train": 800}
        assert codec.pack(got.predictor.round_part()) == codec.pack(first.round_part())
        asyncio.run(a.save(first, {0: 7}))  # the winner's first checkpoint supersedes its created state
        assert "live" in asyncio.run(store.names("m"))
        assert not any(n.startswith("created-") for n in asyncio.run(store.names("m")))
        again = asyncio.run(ModelCheckpointer(store, "m").load())
        assert again is not None and codec.pack(again.predictor.round_part()) == codec.pack(first.round_part())


def test_a_claimed_creation_whose_state_is_gone_is_refused_not_created_again(tmp_path: Path) -> None:
    from everlast.daemon.errors import CheckpointError

    store = DirStore(tmp_path)
    asyncio.run(ModelCheckpointer(store, "m").create(tiny_predictor(seed=1), {0: 0}, {}))
    asyncio.run(store.delete("m", asyncio.run(store.names("m"))))  # the state deleted, the claim left
    with pytest.raises(CheckpointError, match="second release"):
        asyncio.run(ModelCheckpointer(store, "m").load())
