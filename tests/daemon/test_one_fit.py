"""At most one fit of a model is ever answered from (docs/privacy/learner.md 2, "One fit per model"),
through a real broker with two replicas in one consumer group and the Kafka checkpoint store.

The fit runs when a replica is assigned the model's partition, inside aiokafka's assignment callback,
which sends no heartbeats meanwhile: a fit longer than the session timeout gets its replica expelled,
and the group hands the partition to the other replica, which finds no checkpoint and fits too. Two
fits of one training set are two releases; the claim (``BlobStore.claim``) lets only the first one
recorded ever answer."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everlast.daemon.broker import EmbeddedBroker
from everlast.engine.learner import PrivateLearner
from everlast.engine.learner.ordinals import value
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


async def test_two_replicas_that_both_fit_a_model_serve_only_the_first_claimed_fit(
    broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Replica A's fit is held past the session timeout; B joins, takes the partition over and fits too.
    B claims first (A is still fitting), so A, once its fit ends, loses the claim, discards its fit and
    restores B's: every answer from either replica, and after a restart, is one fit's (the queries lie
    between the two fits' cuts, where they differ)."""
    real = PrivateLearner.fit
    fits: list[PrivateLearner] = []
    entered, release = threading.Event(), threading.Event()

    def held(cls: type, *args: Any, **kwargs: Any) -> PrivateLearner:
        first = not entered.is_set()
        entered.set()
        if first:  # replica A's fit outlasts the session timeout (2 s in tests)
            release.wait(60)
        out = real(*args, **kwargs)
        fits.append(out)
        return out

    monkeypatch.setattr(PrivateLearner, "fit", classmethod(held))
    group = unique("one-fit")
    cfg_a, topics = learner_config(tmp_path / "a", broker.bootstrap, group)
    cfg_b, _ = learner_config(tmp_path / "b", broker.bootstrap, group, topics)
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    await create_topics(broker.bootstrap, [topics["checkpoints"]], partitions=1)
    async with running(cfg_a):
        for _ in range(3_000):
            if entered.is_set():
                break
            await asyncio.sleep(0.01)
        assert entered.is_set()
        async with running(cfg_b):
            for _ in range(3_000):  # B joins; A, stuck in its fit, is expelled; B gets the partition and fits
                if fits:
                    break
                await asyncio.sleep(0.01)
            assert len(fits) == 1, "the second replica never fitted: the scenario did not happen"
            release.set()
            for _ in range(3_000):
                if len(fits) == 2:
                    break
                await asyncio.sleep(0.01)
            assert len(fits) == 2
            h_b, h_a = (f.hypothesis for f in fits)
            assert h_a != h_b  # two fits on fresh entropy: the cut is uniform in a cell of ~2^41 doubles
            lo, hi = sorted((h_a.lo, h_b.lo))  # type: ignore[union-attr]
            between = np.array([value(o) for o in np.linspace(lo, hi - 1, 50).astype(np.int64)])
            xs = np.concatenate([between, np.random.default_rng(1).random(50)])
            await asyncio.sleep(5)  # the group settles
            await produce(broker.bootstrap, topics["queries"], query_records("m", xs))
            labs = await collect_ids(broker.bootstrap, topics["labels"], set(range(100)))
    # every answer, from either replica, is the same fit's
    def agrees(f: PrivateLearner, labs: list[dict[str, Any]], base: int) -> bool:
        want = f.answer(xs).labels
        return all(int(lab["label"]) == int(want[int(lab["id"]) - base]) for lab in labs
                   if base <= int(lab["id"]) < base + 100)

    assert sum(agrees(f, labs, 0) for f in fits) == 1
    assert any("claimed its creation first" in r.getMessage() for r in caplog.records)
    winner = next(f for f in fits if agrees(f, labs, 0))
    # a restart restores the winner (never the other fit)
    async with running(cfg_a):
        await produce(broker.bootstrap, topics["queries"], query_records("m", xs, start_id=1_000))
        again = await collect_ids(broker.bootstrap, topics["labels"], set(range(1_000, 1_100)))
    assert agrees(winner, again, 1_000)


async def test_concurrent_claims_on_the_checkpoints_topic_agree_on_the_first(broker: EmbeddedBroker) -> None:
    """``KafkaStore.claim``: replicas that claim the same model at once all read back the same winner,
    the claim with the lowest offset on partition 0 (the topic here has two partitions), and a later
    claim loses to it; a reader that only refreshes sees the same."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from everlast.daemon.checkpoint.kafka_store import KafkaStore

    topic = unique("ck")
    await create_topics(broker.bootstrap, [topic], partitions=2)
    producers = [AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all") for _ in range(3)]
    for p in producers:
        await p.start()
    try:
        stores = [KafkaStore(p, lambda: AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False,
                                                         fetch_max_wait_ms=50), topic, 900_000) for p in producers]
        for _ in range(3):
            model = unique("m")
            won = await asyncio.gather(stores[0].claim(model, "aa" * 16), stores[1].claim(model, "bb" * 16))
            assert won[0] == won[1] and won[0] in ("aa" * 16, "bb" * 16)
            assert await stores[0].claim(model, "cc" * 16) == won[0]
            await stores[2].refresh()
            assert await stores[2].claimed(model) == won[0]
            assert await stores[2].claimed(unique("other")) is None
            assert await stores[2].names(model) == []  # a claim is not a blob
    finally:
        for p in producers:
            await p.stop()
