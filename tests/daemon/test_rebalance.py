"""Two replicas in one consumer group with the Kafka checkpoint store: stop one, and the other takes
over its models from the shared store and continues with identical answers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from aiokafka.partitioner import DefaultPartitioner

from everlast.daemon.broker import EmbeddedBroker
from tests.daemon.kafka_helpers import (
    collect,
    create_topics,
    decode_labels,
    produce,
    query_records,
    running,
    write_config,
)
from tests.daemon.test_e2e import reference

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]


def one_model_per_partition(n: int = 4) -> list[str]:
    part, found = DefaultPartitioner(), {}
    i = 0
    while len(found) < n:
        name = f"model-{i}"
        found.setdefault(part(name.encode(), list(range(n)), list(range(n))), name)
        i += 1
    return [found[p] for p in range(n)]


async def test_stopping_a_replica_hands_its_models_over_with_identical_continuation(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    models = one_model_per_partition()
    cfg_a, topics = write_config(tmp_path / "a", broker.bootstrap, models, store="kafka", group="shared-g")
    cfg_b, _ = write_config(tmp_path / "b", broker.bootstrap, models, store="kafka", group="shared-g", topics=topics)
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    await create_topics(broker.bootstrap, [topics["checkpoints"]], partitions=1)
    g = np.random.default_rng(5)
    xs = {m: g.random(12_000) for m in models}

    def batch(lo: int, hi: int) -> list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]:
        out = []
        for k, m in enumerate(models):
            out += query_records(m, xs[m][lo:hi], start_id=k * 100_000 + lo)
        return out

    async with running(cfg_a) as st_a:
        async with running(cfg_b) as st_b:
            svc_a, svc_b = st_a["service"], st_b["service"]
            for _ in range(200):  # both replicas own partitions
                if svc_a.owned and svc_b.owned and len(svc_a.owned | svc_b.owned) == 4:  # type: ignore[attr-defined]
                    break
                await asyncio.sleep(0.05)
            assert svc_a.owned and svc_b.owned  # type: ignore[attr-defined]
            await produce(broker.bootstrap, topics["queries"], batch(0, 6_000))
            await collect(broker.bootstrap, topics["labels"], until=4 * 6_000)
        assert st_b["exit_code"] == 0
        for _ in range(200):  # the survivor takes every partition over
            if len(svc_a.owned) == 4:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.05)
        assert len(svc_a.owned) == 4  # type: ignore[attr-defined]
        await produce(broker.bootstrap, topics["queries"], batch(6_000, 12_000))
        recs = await collect(broker.bootstrap, topics["labels"], until=4 * 12_000)
    by_id: dict[int, dict[str, object]] = {}
    for lab in decode_labels(recs):
        assert by_id.setdefault(lab["id"], lab) == lab  # duplicates only if identical
    assert len(by_id) == 4 * 12_000
    for k, m in enumerate(models):
        got = np.array([by_id[k * 100_000 + i]["label"] for i in range(12_000)])
        assert np.array_equal(got, reference(tmp_path / "a", m, 100 + k, xs[m])), m
