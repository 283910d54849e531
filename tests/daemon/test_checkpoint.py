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


# -- one creation per model: claimed before it is created (docs/privacy/learner.md 2, "One fit per model") --


def test_only_the_first_claim_creates_and_a_loser_restores_the_winners_state(tmp_path: Path) -> None:
    import os

    from everlast.daemon.checkpoint.blobs import EncryptedStore
    from everlast.daemon.checkpoint.model_state import ClaimPending
    from everlast.daemon.errors import CheckpointError
    from everlast.engine import codec

    for store in (DirStore(tmp_path / "plain"), EncryptedStore(DirStore(tmp_path / "sealed"), os.urandom(32))):
        a, b = ModelCheckpointer(store, "m"), ModelCheckpointer(store, "m")
        token = asyncio.run(a.claim())
        assert token is not None and asyncio.run(b.claim()) is None  # claimed second: b never creates
        with pytest.raises(ClaimPending, match="void-claim"):  # the winner is still creating it
            asyncio.run(b.load())
        with pytest.raises(CheckpointError, match=r"after waiting 0\.2 s.*void-claim.*second release"):
            asyncio.run(b.wait(0.2, poll_s=0.05))
        first = tiny_predictor(seed=1)  # the winner's creation, drawn only after its claim won
        asyncio.run(a.write_created(first, {0: 7}, {"n_train": 800}, token))
        got = asyncio.run(b.wait(5))
        assert got.offsets == {0: 7} and got.meta == {"n_train": 800}
        assert codec.pack(got.predictor.round_part()) == codec.pack(first.round_part())
        assert asyncio.run(store.names("m")) == ["created-" + token]  # "claim" is no blob; nothing of b's
        asyncio.run(a.save(first, {0: 7}))  # the winner's first checkpoint supersedes its created state
        assert "live" in asyncio.run(store.names("m"))
        assert not any(n.startswith("created-") for n in asyncio.run(store.names("m")))
        again = asyncio.run(ModelCheckpointer(store, "m").load())
        assert again is not None and codec.pack(again.predictor.round_part()) == codec.pack(first.round_part())


def test_a_claim_without_its_state_is_refused_until_an_operator_voids_it(tmp_path: Path) -> None:
    from everlast.daemon.checkpoint.model_state import ClaimPending
    from everlast.daemon.checkpoint.void import void_store_claim
    from everlast.daemon.errors import CheckpointError

    store = DirStore(tmp_path)
    assert asyncio.run(ModelCheckpointer(store, "m").claim()) is not None  # the winner dies before writing
    with pytest.raises(ClaimPending, match="second release"):
        asyncio.run(ModelCheckpointer(store, "m").load())
    assert asyncio.run(void_store_claim(store, "m")) == 1
    assert asyncio.run(ModelCheckpointer(store, "m").load()) is None  # the next start creates it
    assert asyncio.run(void_store_claim(store, "m")) == 0
    ck = ModelCheckpointer(store, "m")
    token = asyncio.run(ck.claim())
    assert token is not None
    asyncio.run(ck.write_created(tiny_predictor(seed=1), {0: 0}, {}, token))
    with pytest.raises(CheckpointError, match="its state is in the checkpoint store"):
        asyncio.run(void_store_claim(store, "m"))  # a claim with its state is never voided


def test_a_claimant_whose_claim_was_voided_while_it_created_the_model_never_serves_it(tmp_path: Path) -> None:
    """Review of 2026-11-28, G1 (its reproduction, on the directory store): A claims and creates; an
    operator voids the claim while A still runs; C claims, wins and creates. A writes its state after
    C's claim: ``confirm`` sees that its claim no longer wins, discards A's state and refuses, so A never
    serves; C's claim holds and C serves. A's state stays in the store (second claim review, E1: a
    waiting replica may have restored it, so deleting it could let a later claimant fit again), under no
    claim: a restorer takes C's, and with no claim at all the next claimant refuses to create."""
    from everlast.daemon.checkpoint.void import void_store_claim
    from everlast.daemon.errors import CheckpointError
    from everlast.engine import codec

    for voided_only in (False, True):
        store = DirStore(tmp_path / str(voided_only))
        a, c = ModelCheckpointer(store, "m"), ModelCheckpointer(store, "m")
        ta = asyncio.run(a.claim())
        assert ta is not None
        assert asyncio.run(void_store_claim(store, "m")) == 1  # the operator voids, A still creating
        tc = None if voided_only else asyncio.run(c.claim())
        assert voided_only or tc is not None  # C claims afresh and wins
        asyncio.run(a.write_created(tiny_predictor(seed=1), {0: 0}, {}, ta))
        with pytest.raises(CheckpointError, match=r"claim was voided while this replica was creating it.*serves "
                                                  r"nothing.*Stop every replica of this model"):
            asyncio.run(a.confirm(ta))
        assert "created-" + ta in asyncio.run(store.names("m"))  # kept, under no claim
        if tc is None:  # nothing is claimed, and the next claimant refuses to create over A's state
            assert asyncio.run(ModelCheckpointer(store, "m").load()) is None
            with pytest.raises(CheckpointError, match=r"under no claim"):
                asyncio.run(ModelCheckpointer(store, "m").claim())
            continue
        second = tiny_predictor(seed=2)
        asyncio.run(c.write_created(second, {0: 0}, {}, tc))
        asyncio.run(c.confirm(tc))  # C's claim holds: C serves
        got = asyncio.run(ModelCheckpointer(store, "m").load())
        assert got is not None and codec.pack(got.predictor.round_part()) == codec.pack(second.round_part())


def test_void_claim_reports_a_state_that_appeared_while_it_voided(tmp_path: Path) -> None:
    """Review of 2026-11-28, G1: ``void-claim`` reads the store again after voiding; a state written
    meanwhile (the claimant was still running) is reported, with "stop every replica" in the message."""
    from everlast.daemon.checkpoint.void import void_store_claim
    from everlast.daemon.errors import CheckpointError

    class Racing(DirStore):
        """The claimant writes its state just as the void goes through."""

        async def void_claim(self, model: str) -> int:
            token = await self.claimed(model)
            assert token is not None
            await ModelCheckpointer(self, model).write_created(tiny_predictor(seed=1), {0: 0}, {}, token)
            return await super().void_claim(model)

    store = Racing(tmp_path)
    token = asyncio.run(ModelCheckpointer(store, "m").claim())
    assert token is not None
    with pytest.raises(CheckpointError, match=rf"1 claim\(s\) voided, but its state appeared.*created-{token}.*"
                                              r"Stop every replica of this model first"):
        asyncio.run(void_store_claim(store, "m"))
    # the claimant may have found its claim intact and serve that state: no replica creates the model again
    with pytest.raises(CheckpointError, match=rf"under no claim \(created-{token}\).*does not create the model"):
        asyncio.run(ModelCheckpointer(DirStore(tmp_path), "m").claim())
    # with every replica stopped and no checkpoint, the state was never answered from: void-claim removes it
    assert asyncio.run(void_store_claim(DirStore(tmp_path), "m")) == 1  # the refused claimant's claim
    assert asyncio.run(store.names("m")) == []
    ck = ModelCheckpointer(DirStore(tmp_path), "m")
    fresh = asyncio.run(ck.claim())
    assert fresh is not None
    asyncio.run(ck.write_created(tiny_predictor(seed=2), {0: 0}, {}, fresh))
    asyncio.run(ck.confirm(fresh))


def test_the_messages_of_a_claim_without_state_say_to_stop_every_replica_first() -> None:
    from everlast.daemon.checkpoint.model_state import pending_message

    assert "stop every replica of this model first, then void the claim" in pending_message("m", 1.0)


def test_the_checkpoints_topics_compaction_lag_rule_and_the_claims_time_bound() -> None:
    """Review of 2026-11-28, item 3: a compacted topic whose reported lag is below an hour is refused; a
    claim's read-back may take a quarter of the reported lag, or 15 minutes when the broker says nothing."""
    from everlast.daemon.checkpoint.kafka_store import (
        claim_bound_s,
        compaction_lag_problem,
        elapsed_since,
        suspend_clock,
        timestamp_problem,
    )

    compact = {"cleanup.policy": "compact"}
    assert compaction_lag_problem(compact) is None  # not reported: the daemon warns
    assert compaction_lag_problem({**compact, "min.compaction.lag.ms": "0"}) == (
        "min.compaction.lag.ms=0, below 3600000")
    assert compaction_lag_problem({**compact, "min.compaction.lag.ms": "3599999"}) is not None
    assert compaction_lag_problem({**compact, "min.compaction.lag.ms": "3600000"}) is None
    assert compaction_lag_problem({"cleanup.policy": "delete", "min.compaction.lag.ms": "0"}) is None
    # the daemon refuses CreateTime on a compacted checkpoints topic (second claim review, G1)
    assert timestamp_problem({**compact, "message.timestamp.type": "CreateTime"}) == "message.timestamp.type=CreateTime"
    assert timestamp_problem({**compact, "message.timestamp.type": "LogAppendTime"}) is None
    assert timestamp_problem(compact) is None and timestamp_problem({"cleanup.policy": "delete"}) is None
    assert claim_bound_s(None) == claim_bound_s({}) == 900.0
    assert claim_bound_s({"min.compaction.lag.ms": "7200000"}) == 1800.0
    assert claim_bound_s({"min.compaction.lag.ms": "10"}) == 900.0
    t0 = suspend_clock()
    assert elapsed_since(t0) >= 0.0


def test_model_ids_that_name_a_directory_of_their_own_are_refused(tmp_path: Path) -> None:
    """Review of 2026-11-28, N4: the directory store keeps a model under <dir>/<id>."""
    from everlast.daemon.config import load
    from everlast.daemon.errors import ConfigError

    for bad in (".", ".."):
        p = tmp_path / "c.toml"
        p.write_text(f'[[models]]\nid = "{bad}"\ndata = "d.csv"\nschedule = "s.json"\n')
        with pytest.raises(ConfigError, match="directory name of its own"):
            load(p)
    p.write_text('[[models]]\nid = "..a"\ndata = "d.csv"\nschedule = "s.json"\n')
    assert load(p).models[0].id == "..a"


def test_the_checkpoints_topics_retention_rule() -> None:
    """Review G4: only settings that keep every key's last record pass; a broker that says nothing passes
    (the daemon warns)."""
    from everlast.daemon.checkpoint.kafka_store import retention_problem

    assert retention_problem({}) is None
    assert retention_problem({"cleanup.policy": "compact", "retention.ms": "1000"}) is None
    assert retention_problem({"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1"}) is None
    assert retention_problem({"cleanup.policy": "compact,delete", "retention.ms": "-1"}) == (
        "cleanup.policy=compact,delete with retention.bytes=the broker default")
    assert retention_problem({"cleanup.policy": "delete", "retention.ms": "604800000", "retention.bytes": "-1"}) == (
        "cleanup.policy=delete with retention.ms=604800000")


def test_encrypted_blobs_show_only_a_power_of_two_bucket_of_their_length(tmp_path: Path) -> None:
    """Review G3: the plaintext is padded before sealing, so the stored length is 12 + 16 + the bucket
    (the next power of two, at least 4 KiB), whatever the exact length; blobs sealed before padding read."""
    import os

    from everlast.daemon.checkpoint.blobs import EncryptedStore

    key = os.urandom(32)
    store = EncryptedStore(DirStore(tmp_path), key)
    for size, bucket in ((0, 4096), (1, 4096), (4087, 4096), (4088, 8192), (70_000, 131_072)):
        data = os.urandom(size)
        asyncio.run(store.put("m", f"b{size}", data))
        assert (tmp_path / "m" / f"b{size}").stat().st_size == 12 + 16 + bucket
        assert asyncio.run(store.get("m", f"b{size}")) == data
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce, old = os.urandom(12), b"\x81\xa1c\x05"  # msgpack {"c": 5}, sealed without padding
    asyncio.run(DirStore(tmp_path).put("m", "old", nonce + AESGCM(key).encrypt(nonce, old, b"m/old")))
    assert asyncio.run(store.get("m", "old")) == old
