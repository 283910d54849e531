"""End to end through a real broker: every query gets one label, equal to an in-process run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from everlast.daemon.app import serve
from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.config import load
from everlast.daemon.data import load_training
from everlast.engine.concepts import Thresholds
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import Schedule
from tests.daemon.kafka_helpers import collect, create_topics, decode_labels, produce, query_records, write_config

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]


def reference(root: Path, model: str, seed: int, xs: np.ndarray) -> np.ndarray:
    x, y = load_training(root / f"{model}.npz")
    sched = Schedule.from_dict(json.loads((root / f"{model}.schedule.json").read_text()))
    p = Predictor.create(Thresholds(), sched, x, y, seed=seed)
    return p.answer_all(xs).labels


async def test_two_models_100k_queries_match_the_engine(broker: EmbeddedBroker, tmp_path: Path) -> None:
    models = ["alpha", "beta"]
    cfg_path, topics = write_config(tmp_path, broker.bootstrap, models)
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    g = np.random.default_rng(3)
    xs = {m: g.random(50_000) for m in models}
    records = []
    for i in range(50_000):  # interleave the two models' streams
        for k, m in enumerate(models):
            records.extend(query_records(m, xs[m][i : i + 1], start_id=k * 1_000_000 + i))
    cfg = load(cfg_path)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(cfg, stop, handle_signals=False))
    await produce(broker.bootstrap, topics["queries"], records)
    recs = await collect(broker.bootstrap, topics["labels"], until=100_000, timeout=120)
    stop.set()
    assert await asyncio.wait_for(task, 60) == 0
    labels = decode_labels(recs)
    by_id = {}
    for rec, lab in zip(recs, labels, strict=True):
        assert lab["status"] == "ok"
        assert lab["id"] not in by_id or by_id[lab["id"]] == lab  # duplicates only if identical
        by_id[lab["id"]] = lab
        assert rec.key.decode() in models
    assert len(by_id) == 100_000
    for k, m in enumerate(models):
        ref = reference(tmp_path, m, 100 + k, xs[m])
        got = np.array([by_id[k * 1_000_000 + i]["label"] for i in range(50_000)])
        assert np.array_equal(got, ref), m
        rounds = {by_id[k * 1_000_000 + i]["round"] for i in range(50_000)}
        assert rounds == {1, 2, 3}
