"""At most one fit of a model is ever answered from (docs/privacy/learner.md 2, "One fit per model"),
through a real broker with two replicas in one consumer group and the Kafka checkpoint store.

The fit runs when a replica is assigned the model's partition, inside aiokafka's assignment callback,
which sends no heartbeats meanwhile: a fit longer than the session timeout gets its replica expelled,
and the group hands the partition to the other replica, which finds no checkpoint. Two fits of one
training set are two releases, and a race between finished fits would release the one that finished
first (its law conditioned on a data-dependent duration); so a model is claimed before it is fitted
(``BlobStore.claim``), and only the replica whose claim is recorded first ever fits it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everlast.daemon.broker import EmbeddedBroker
from everlast.engine.learner import PrivateLearner
from tests.daemon.kafka_helpers import (
    collect_ids,
    create_topics,
    produce,
    query_records,
    running,
    unique,
    write_config,
)

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]


def learner_config(root: Path, bootstrap: str, group: str,
                   topics: dict[str, str] | None = None) -> tuple[Path, dict[str, str]]:
    x = np.random.default_rng(5).random(3_000)
    root.mkdir(parents=True, exist_ok=True)
    np.savez(root / "m.npz", x=x, y=(x >= 0.5).astype(int))
    return write_config(root, bootstrap, [], store="kafka", group=group, topics=topics, extra=(
        f'[[models]]\nid = "m"\ndata = "{root / "m.npz"}"\nmechanism = "private-learner"\n'
        "learner = { epsilon = 1.0 }\n"))


async def test_a_replica_that_finds_the_model_claimed_never_fits_it_and_serves_the_claimants_fit(
    broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Replica A claims the model and fits, held past the session timeout; B joins and takes the
    partition over from the expelled A (the "zombie" A holds the claim). B finds the model claimed
    without its state and waits, never fitting; once A's fit is written, B restores it. Every answer,
    from either replica and after a restart, is the one fit's, and the checkpoints topic never holds a
    second fit."""
    real = PrivateLearner.fit
    fits: list[PrivateLearner] = []
    entered, release = threading.Event(), threading.Event()

    def held(cls: type, *args: Any, **kwargs: Any) -> PrivateLearner:
        entered.set()
        release.wait(60)  # replica A's fit outlasts the session timeout (2 s in tests)
        out = real(*args, **kwargs)
        fits.append(out)
        return out

    monkeypatch.setattr(PrivateLearner, "fit", classmethod(held))
    group = unique("one-fit")
    cfg_a, topics = learner_config(tmp_path / "a", broker.bootstrap, group)
    cfg_b, _ = learner_config(tmp_path / "b", broker.bootstrap, group, topics)
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    await create_topics(broker.bootstrap, [topics["checkpoints"]], partitions=1)

    def waited() -> bool:
        return any("this replica never creates it" in r.getMessage() for r in caplog.records)

    xs = np.random.default_rng(1).random(100)
    with caplog.at_level(logging.WARNING, logger="everlast.daemon"):
        async with running(cfg_a):
            for _ in range(3_000):
                if entered.is_set():
                    break
                await asyncio.sleep(0.01)
            assert entered.is_set()
            async with running(cfg_b):
                for _ in range(3_000):  # B joins; A, stuck in its fit, is expelled; B gets the partition and waits
                    if waited():
                        break
                    await asyncio.sleep(0.01)
                assert waited(), "the second replica never found the model claimed: the scenario did not happen"
                release.set()
                for _ in range(3_000):
                    if fits:
                        break
                    await asyncio.sleep(0.01)
                await asyncio.sleep(5)  # the group settles
                await produce(broker.bootstrap, topics["queries"], query_records("m", xs))
                labs = await collect_ids(broker.bootstrap, topics["labels"], set(range(100)))
    assert len(fits) == 1, "a second fit was made"
    want = fits[0].answer(xs).labels
    assert all(int(lab["label"]) == int(want[int(lab["id"])]) for lab in labs if int(lab["id"]) < 100)
    # the topic: one created-* state ever written, the claim's
    created = {k.split("/")[1] for k in await topic_keys(broker.bootstrap, topics["checkpoints"])
               if k.count("/") == 1 and k.split("/")[1].startswith("created-")}
    claims = {k.split("/")[2] for k in await topic_keys(broker.bootstrap, topics["checkpoints"]) if "/claim/" in k}
    assert len(claims) >= 1 and len(created) == 1
    # a restart restores the one fit
    async with running(cfg_a):
        await produce(broker.bootstrap, topics["queries"], query_records("m", xs, start_id=1_000))
        again = await collect_ids(broker.bootstrap, topics["labels"], set(range(1_000, 1_100)))
    assert all(int(lab["label"]) == int(want[int(lab["id"]) - 1_000]) for lab in again
               if 1_000 <= int(lab["id"]) < 1_100) and len(fits) == 1



@contextlib.asynccontextmanager
async def kafka_stores(broker: EmbeddedBroker, n: int = 1, partitions: int = 1) -> AsyncIterator[tuple[str, list[Any]]]:
    """A fresh checkpoints topic and ``n`` ``KafkaStore``s on it, each with its own producer (acks=all)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from everlast.daemon.checkpoint.kafka_store import KafkaStore

    topic = unique("ck")
    await create_topics(broker.bootstrap, [topic], partitions=partitions)
    producers = [AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all") for _ in range(n)]
    for p in producers:
        await p.start()
    try:
        yield topic, [KafkaStore(p, lambda: AIOKafkaConsumer(bootstrap_servers=broker.bootstrap,
                                                             enable_auto_commit=False, fetch_max_wait_ms=50),
                                 topic, 900_000) for p in producers]
    finally:
        for p in producers:
            await p.stop()

async def topic_keys(bootstrap: str, topic: str) -> list[str]:
    """Every record key on ``topic`` (all partitions), in order per partition."""
    from aiokafka import AIOKafkaConsumer

    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False)
    await c.start()
    try:
        out: list[str] = []
        while True:
            batch = await c.getmany(timeout_ms=1_000)
            if not batch:
                return out
            out += [r.key.decode() for recs in batch.values() for r in recs if r.key is not None]
    finally:
        await c.stop()


async def test_concurrent_claims_on_the_checkpoints_topic_agree_on_the_first(broker: EmbeddedBroker) -> None:
    """``KafkaStore.claim``: replicas that claim the same model at once all read back the same winner,
    the claim with the lowest offset on partition 0 (the topic here has two partitions), and a later
    claim loses to it; a reader that only refreshes sees the same."""
    async with kafka_stores(broker, 3, partitions=2) as (_, stores):
        for _ in range(3):
            model = unique("m")
            won = await asyncio.gather(stores[0].claim(model, "aa" * 16), stores[1].claim(model, "bb" * 16))
            assert won[0] == won[1] and won[0] in ("aa" * 16, "bb" * 16)
            assert await stores[0].claim(model, "cc" * 16) == won[0]
            await stores[2].refresh()
            assert await stores[2].claimed(model) == won[0]
            assert await stores[2].claimed(unique("other")) is None
            assert await stores[2].names(model) == []  # a claim is not a blob


async def test_claims_are_ordered_by_their_first_record_and_restorers_read_the_one_claimed_state(
    broker: EmbeddedBroker,
) -> None:
    """``KafkaStore.refresh``'s rule (review E2): a claim sits at its key's first record, so a copy of a
    claim (A, B, A: the producer is not idempotent, and a copy can land even after its acknowledgement)
    never moves it; a key whose last record is a tombstone holds no claim; voiding tombstones every claim.
    A restorer does not use the order at all: it restores the one claimed ``created-*`` state (only the
    claimant that won writes one), and refuses two."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from everlast.daemon.checkpoint.kafka_store import KafkaStore
    from everlast.daemon.checkpoint.model_state import ModelCheckpointer
    from everlast.daemon.errors import CheckpointError
    from everlast.engine import codec
    from tests.engine.helpers import tiny_predictor

    topic = unique("ck")
    await create_topics(broker.bootstrap, [topic], partitions=1)
    p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    await p.start()
    try:
        store = KafkaStore(p, lambda: AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                                       fetch_max_wait_ms=50), topic, 900_000)

        async def record(model: str, token: str, value: bytes | None) -> None:
            await p.send_and_wait(topic, key=f"{model}/claim/{token}".encode(), value=value, partition=0)

        a, b, c = "aa" * 16, "bb" * 16, "cc" * 16
        for token in (a, b, a):  # A's write was appended twice
            await record("m", token, token.encode())
        await store.refresh()
        assert await store.claimed("m") == a and await store.claim_tokens("m") == [a, b]
        assert await store.claim("m", c) == a
        await record("m", a, None)  # an operator tombstones A's key: no claim, before compaction or after
        await store.refresh()
        assert await store.claimed("m") == b
        assert await store.void_claim("m") == 2  # B and C
        await store.refresh()
        assert await store.claimed("m") is None and store.claims == {}
        # a restorer reads the claimed state whatever the order says
        await record("n", a, a.encode())
        await record("n", b, b.encode())
        first = tiny_predictor(seed=1)
        await ModelCheckpointer(store, "n").write_created(first, {0: 5}, {}, b)
        await store.refresh()
        got = await ModelCheckpointer(store, "n").load()
        assert got is not None and codec.pack(got.predictor.round_part()) == codec.pack(first.round_part())
        await ModelCheckpointer(store, "n").write_created(tiny_predictor(seed=2), {0: 5}, {}, a)
        await store.refresh()
        with pytest.raises(CheckpointError, match="2 claimed creations"):
            await ModelCheckpointer(store, "n").load()
    finally:
        await p.stop()


async def test_a_checkpoints_topic_that_deletes_by_retention_is_refused_at_start(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Review G4: a model whose claim and state expired would be fitted again on the next start (a second
    release), so the daemon refuses a checkpoints topic with finite retention before it serves anything."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    from everlast.daemon.app import serve
    from everlast.daemon.config import load
    from everlast.daemon.errors import ConfigError

    cfg_path, topics = learner_config(tmp_path, broker.bootstrap, unique("g"))
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topics["checkpoints"], 1, 1, topic_configs={
            "cleanup.policy": "delete", "retention.ms": "604800000"})])
    finally:
        await admin.close()
    cfg = load(cfg_path, {"metrics": {"exit_linger_s": 0}})
    with pytest.raises(ConfigError, match=r"deletes records by retention \(cleanup.policy=delete with retention.ms="
                                          r"604800000 and retention.bytes=the broker default\).*second release"):
        await asyncio.wait_for(serve(cfg, asyncio.Event(), {}, handle_signals=False), 60)


async def test_the_encrypted_store_over_kafka_claims_pads_and_restores(broker: EmbeddedBroker) -> None:
    """Review G6: ``EncryptedStore`` over ``KafkaStore`` through the broker: the claimant's state, sealed and
    padded (the topic's value holds the bucket, not the length), is what a second replica restores; a
    second claim loses."""
    import os

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from everlast.daemon.checkpoint.blobs import EncryptedStore
    from everlast.daemon.checkpoint.kafka_store import KafkaStore
    from everlast.daemon.checkpoint.model_state import ModelCheckpointer
    from everlast.engine import codec
    from tests.engine.helpers import tiny_predictor

    topic, key = unique("ck"), os.urandom(32)
    await create_topics(broker.bootstrap, [topic], partitions=1)
    producers = [AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all") for _ in range(2)]
    for p in producers:
        await p.start()
    try:
        a, b = (EncryptedStore(KafkaStore(p, lambda: AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50), topic, 900_000), key)
            for p in producers)
        ca, cb = ModelCheckpointer(a, "m"), ModelCheckpointer(b, "m")
        token = await ca.claim()
        assert token is not None and await cb.claim() is None
        first = tiny_predictor(seed=1)
        await ca.write_created(first, {0: 3}, {"n_train": 800}, token)
        got = await cb.wait(10)
        assert codec.pack(got.predictor.round_part()) == codec.pack(first.round_part()) and got.offsets == {0: 3}
        raw = await b.inner.get("m", "created-" + token)
        assert raw is not None and len(raw) - 28 >= 4096 and (len(raw) - 28) & (len(raw) - 29) == 0
    finally:
        for p in producers:
            await p.stop()


async def test_a_claim_read_back_too_late_is_not_decided(broker: EmbeddedBroker) -> None:
    """Review of 2026-11-28, item 3: ``KafkaStore.claim`` times its write and read-back on a clock that
    counts suspend; past ``claim_bound_s`` (here 0) it refuses without deciding, so nothing is created,
    and its claim stays: a later claimant loses to it and waits."""
    from everlast.daemon.errors import CheckpointError

    async with kafka_stores(broker) as (_, (store,)):
        store.claim_bound_s = 0.0
        with pytest.raises(CheckpointError, match=r"read back .* s after it was written.*does not decide.*void-claim"):
            await store.claim("m", "aa" * 16)
        store.claim_bound_s = 900.0
        assert await store.claim("m", "bb" * 16) == "aa" * 16


async def test_the_daemon_creates_the_checkpoints_topic_for_the_claim_and_refuses_a_short_lag(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Review of 2026-11-28, item 3: the daemon creates the checkpoints topic compacted, with an hour's
    ``min.compaction.lag.ms`` and broker-side timestamps (``LogAppendTime``); a compacted topic whose
    reported lag is below an hour is refused at start, before anything is served."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    from everlast.daemon.app import serve
    from everlast.daemon.config import load
    from everlast.daemon.errors import ConfigError

    cfg_path, topics = learner_config(tmp_path / "a", broker.bootstrap, unique("g"))
    async with running(cfg_path):
        pass
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        got = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topics["checkpoints"])])
        configs = {str(e[0]): str(e[1]) for r in got for res in r.resources for e in res[4] if e[1] is not None}
        assert configs.get("cleanup.policy") == "compact" and configs.get("min.compaction.lag.ms") == "3600000"
        assert configs.get("message.timestamp.type") == "LogAppendTime"
        cfg_b, topics_b = learner_config(tmp_path / "b", broker.bootstrap, unique("g"))
        await admin.create_topics([NewTopic(topics_b["checkpoints"], 1, 1, topic_configs={
            "cleanup.policy": "compact", "min.compaction.lag.ms": "60000"})])
    finally:
        await admin.close()
    cfg = load(cfg_b, {"metrics": {"exit_linger_s": 0}})
    with pytest.raises(ConfigError, match=r"compacted with min.compaction.lag.ms=60000, below 3600000"):
        await asyncio.wait_for(serve(cfg, asyncio.Event(), {}, handle_signals=False), 60)
