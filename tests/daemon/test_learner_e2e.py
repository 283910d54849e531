"""The private learner's sample-size target end to end through the real broker: at the planner's n (`everlast plan
--mechanism private-learner --epsilon 1 --alpha 0.1 --guarantee realizable`: the labels come from a threshold),
a served private learner answers an i.i.d. stream with error <= 0.1. Also: every query gets one label,
queries outside a declared domain get `invalid` records one by one, the answers are those of the
checkpointed hypothesis, a restart restores it (never refits), and the metrics show no rounds or halts."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from everlast.cli.main import main
from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.checkpoint.blobs import DirStore
from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.engine.learner import PrivateLearner
from tests.daemon.kafka_helpers import collect_ids, create_topics, produce, query_records, running, unique
from tests.daemon.test_lifecycle import metric, scrape

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]

TARGET = 0.37  # the hidden threshold
Q = 20_000
T_ERRORS = 200
"""Lemma L2a on the seeded training set (h* has no error): P[E_S(h) >= 200] <= |H| e^{-200/2} = e^{-55}."""


def planner_n() -> int:
    res = CliRunner().invoke(main, ["plan", "--mechanism", "private-learner", "--epsilon", "1", "--alpha", "0.1",
                                    "--guarantee", "realizable", "--json"])
    assert res.exit_code == 0, res.output
    n = json.loads(res.output)["n_required"]
    assert isinstance(n, int) and n <= 5_000  # the learner's target for thresholds
    return n


def worst_error_below(x: np.ndarray, q: np.ndarray, t: int) -> float:
    """The largest error on the queries ``q`` of any threshold (either orientation, any cut) with
    fewer than ``t`` errors on the training points ``x`` (labels x >= TARGET). The training error
    is constant between consecutive training points and the query error is monotone in the cut's
    distance to TARGET, so cuts just above each training point and at each training point suffice."""
    xs, qs = np.sort(x), np.sort(q)
    cuts = np.concatenate([xs, np.nextafter(xs, np.inf), [TARGET, -np.inf, np.inf]])
    ones_below = np.searchsorted(xs, cuts, side="left") - np.searchsorted(xs, TARGET, side="left")
    e_up = np.abs(ones_below)  # 1[x >= c] vs 1[x >= TARGET]: the training points between c and TARGET
    q_up = np.abs(np.searchsorted(qs, cuts, side="left") - np.searchsorted(qs, TARGET, side="left"))
    n, m = xs.size, qs.size
    worst = 0.0
    for e, qe in ((e_up, q_up), (n - e_up, m - q_up)):  # sign +1, sign -1
        ok = e < t
        if ok.any():
            worst = max(worst, float(qe[ok].max()) / m)
    return worst


async def hypothesis(root: Path, model: str) -> PrivateLearner:
    restored = await ModelCheckpointer(DirStore(root / "ck"), model).load()
    assert restored is not None and isinstance(restored.predictor, PrivateLearner)
    return restored.predictor


async def test_served_learner_at_the_planner_n_answers_an_iid_stream_within_alpha(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    n = planner_n()
    g = np.random.default_rng(14)
    x = g.random(n)
    np.savez(tmp_path / "train.npz", x=x, y=(x >= TARGET).astype(int))
    topics = {k: unique(k) for k in ("queries", "labels", "dead_letters", "checkpoints")}
    (tmp_path / "everlast.toml").write_text(
        f'[broker]\nbootstrap_servers = "{broker.bootstrap}"\n[topics]\n'
        + "".join(f'{k} = "{v}"\n' for k, v in topics.items())
        + f'partitions = 4\n[consumer]\ngroup_id = "{unique("g")}"\nsession_timeout_ms = 2000\n'
        "heartbeat_interval_ms = 200\n"
        f'[checkpoint]\ndir = "{tmp_path / "ck"}"\nevery_queries = 5000\n[metrics]\nport = 0\n'
        f'[[models]]\nid = "pl"\ndata = "{tmp_path / "train.npz"}"\nmechanism = "private-learner"\n'
        "learner = { epsilon = 1.0, alpha = 0.1, guarantee = \"realizable\" }\n"
        f'[[models]]\nid = "pr"\ndata = "{tmp_path / "train.npz"}"\nmechanism = "private-learner"\n'
        'learner = { epsilon = 1.0, domain = { kind = "range", lo = 0.0, hi = 1.0 } }\n'
    )
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    q = g.random(Q)
    assert worst_error_below(x, q, T_ERRORS) <= 0.1  # so the test fails with probability <= e^-55
    qr = np.where(g.random(2_000) < 0.1, 1.0 + g.random(2_000), g.random(2_000))  # 10% outside [0, 1]
    records = query_records("pl", q) + query_records("pr", qr, start_id=10**6)
    cfg = tmp_path / "everlast.toml"
    async with running(cfg) as status:
        await produce(broker.bootstrap, topics["queries"], records)
        labs = await collect_ids(broker.bootstrap, topics["labels"], set(range(Q)) | {10**6 + i for i in range(2_000)})
        _, text = await asyncio.to_thread(scrape, int(str(status["metrics_port"])))  # the daemon runs in this loop
    assert status["exit_code"] == 0
    by_id = {}
    for lab in labs:
        assert by_id.setdefault(lab["id"], lab) == lab  # a duplicate only if identical
    assert len(by_id) == Q + 2_000

    got = np.array([by_id[i]["label"] for i in range(Q)])
    assert all(by_id[i]["status"] == "ok" and by_id[i]["round"] == 0 for i in range(Q))
    error = float(np.mean(got != (q >= TARGET)))
    print(f"end-to-end error at n = {n}: {error:.5f} over {Q} queries")
    assert error <= 0.1
    h1 = await hypothesis(tmp_path, "pl")
    assert np.array_equal(got, h1.answer(q).labels)  # the served answers are the checkpointed hypothesis's

    outside = (qr < 0.0) | (qr > 1.0)
    pr = [by_id[10**6 + i] for i in range(2_000)]
    assert all(p["status"] == "invalid" and p["reason"] == "x is outside the model's domain" and p["label"] is None
               for p, o in zip(pr, outside, strict=True) if o)
    assert all(p["status"] == "ok" for p, o in zip(pr, outside, strict=True) if not o)
    assert metric(text, "everlast_invalid_records_total", reason="domain") == outside.sum()
    assert metric(text, "everlast_guarantee_epsilon", model="pl", protects="training") == 1.0
    assert metric(text, "everlast_guarantee_epsilon", model="pl", protects="queries") == 0.0
    assert metric(text, "everlast_model_info", model="pl", mechanism="private-learner", rounds="none",
                  halts="never") == 1.0
    assert 'everlast_round{model="pl"}' not in text and 'everlast_model_halted{model="pl"}' not in text
    assert metric(text, "everlast_guarantee_accuracy", model="pl", quantity="alpha") <= 0.1

    # a restart restores the hypothesis (a refit would be a second release): same answers, same h
    more = query_records("pl", q[:3_000], start_id=2 * 10**6)
    async with running(cfg):
        await produce(broker.bootstrap, topics["queries"], more)
        labs2 = await collect_ids(broker.bootstrap, topics["labels"], {2 * 10**6 + i for i in range(3_000)})
    again = {lab["id"]: lab["label"] for lab in labs2 if lab["id"] >= 2 * 10**6}
    assert [again[2 * 10**6 + i] for i in range(3_000)] == got[:3_000].tolist()
    h2 = await hypothesis(tmp_path, "pl")
    assert h2.hypothesis == h1.hypothesis and h2.answered == Q + 3_000
