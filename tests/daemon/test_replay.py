"""Replay through the daemon on the test broker: every id answered, latency and accuracy reported;
and the README's main job (`everlast demo`) end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everlast.adversary_sim.iid import make_task
from everlast.adversary_sim.kafka_replay import IIDStream, replay
from everlast.cli.main import main
from everlast.daemon.broker import EmbeddedBroker
from everlast.engine.concepts import Thresholds
from tests.daemon.kafka_helpers import create_topics, running, write_config

pytestmark = [pytest.mark.broker]


@pytest.mark.asyncio
async def test_replay_reports_every_answer_latency_and_accuracy(broker: EmbeddedBroker, tmp_path: Path) -> None:
    cfg, topics = write_config(tmp_path, broker.bootstrap, ["m"])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    task = make_task(Thresholds(), "uniform", seed=0)  # the test model is trained on 1[x >= 0.5] too
    async with running(cfg):
        rep = await replay(broker.bootstrap, topics["queries"], topics["labels"], "m", IIDStream(task, 3), 30_000,
                           batch=2_000, record=True)
    out = rep.to_json()
    assert out["sent"] == out["answered"] == 30_000 and out["missing"] == 0
    assert out["statuses"] == {"ok": 30_000}
    assert out["rounds"] == {"1": 20_000, "2": 10_000}
    assert out["accuracy"] > 0.9
    assert 0 < out["latency_ms"]["p50"] <= out["latency_ms"]["p99"]
    assert len(rep.records) == 30_000 and {"id", "x", "label", "status", "round"} <= set(rep.records[0])


def test_demo_runs_end_to_end_and_prints_one_json_object() -> None:
    res = CliRunner().invoke(main, ["demo", "--queries", "20000", "--n", "100000", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["answered"] == 20_000 and out["statuses"] == {"ok": 20_000}
    g = out["guarantee"]  # the demo runs the default design: both chains proven (~0.49 and ~2.1, cli/demo.py)
    assert g["query_private"] is True and 0.4 < g["epsilon_training"] < 0.6 and 1.9 < g["epsilon_queries"] < 2.3
    lo = out["learner"]  # the private learner on the same stream, at the planner's n
    assert lo["answered"] == 20_000 and lo["statuses"] == {"ok": 20_000} and lo["rounds"] == {"0": 20_000}
    assert lo["n_train"] == 2229 and lo["accuracy"] > 0.9
    gl = lo["guarantee"]
    assert (gl["mechanism"], gl["epsilon_training"], gl["epsilon_queries"], gl["delta"]) == ("private-learner", 1.0,
                                                                                         0.0, 0.0)
    assert gl["agnostic_excess"] > 0 and "best threshold" in gl["agnostic_comparator"]
    tr = out["trees"]  # depth-3 trees on R^1, the same data and stream
    assert tr["answered"] == 20_000 and tr["statuses"] == {"ok": 20_000} and tr["accuracy"] > 0.8
    assert tr["guarantee"]["depth"] == 3 and "Theorem T1" in tr["guarantee"]["claim"]


@pytest.mark.asyncio
async def test_the_adaptive_prober_runs_closed_loop_through_kafka_and_halts_the_model(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    from everlast.adversary_sim.prober import BoundaryProber

    cfg, topics = write_config(tmp_path, broker.bootstrap, ["m"])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    prober = BoundaryProber(make_task(Thresholds(), "uniform", seed=0), seed=1)
    async with running(cfg):
        rep = await replay(broker.bootstrap, topics["queries"], topics["labels"], "m", prober, 6_000, batch=250)
    out = rep.to_json()
    assert out["missing"] == 0
    assert out["statuses"].get("refused", 0) > 0  # the round's halt budget (c = 2000) was exhausted
    assert prober.report()["refused"] == out["statuses"]["refused"]  # the stream saw its answers


@pytest.mark.asyncio
async def test_a_recorded_stream_replays_through_kafka(broker: EmbeddedBroker, tmp_path: Path) -> None:
    import numpy as np

    from everlast.adversary_sim.recorded import RecordedStream, records_from_arrays, write_records

    x = np.random.default_rng(4).random(1_500)
    path = tmp_path / "rec.jsonl"
    write_records(path, records_from_arrays(x, (x >= 0.5).astype(np.int8)))
    cfg, topics = write_config(tmp_path, broker.bootstrap, ["m"])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    async with running(cfg):
        rep = await replay(broker.bootstrap, topics["queries"], topics["labels"], "m", RecordedStream(path), 5_000,
                           batch=400)
    out = rep.to_json()
    assert out["sent"] == out["answered"] == 1_500  # the record ran out before the requested 5000
    assert out["accuracy"] > 0.9
