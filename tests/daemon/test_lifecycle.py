"""SIGTERM drains and exits 0; a restart resumes exactly where the clean stop left off; metrics
and health endpoints report what was produced."""

from __future__ import annotations

import asyncio
import re
import signal
import urllib.request
from pathlib import Path

import msgpack
import numpy as np
import pytest

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
from tests.daemon.test_crash import start_daemon

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]


async def test_sigterm_drains_and_a_restart_resumes_without_replay(broker: EmbeddedBroker, tmp_path: Path) -> None:
    cfg, topics = write_config(tmp_path, broker.bootstrap, ["m"])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    xs = np.random.default_rng(2).random(30_000)
    await produce(broker.bootstrap, topics["queries"], query_records("m", xs[:20_000]))
    log = tmp_path / "d.log"
    proc = start_daemon(cfg, log)
    assert len(await collect(broker.bootstrap, topics["labels"], until=20_000)) >= 20_000
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0, log.read_text()[-2000:]  # (a hung drain raises TimeoutExpired)
    assert "stopped cleanly" in log.read_text()
    await produce(broker.bootstrap, topics["queries"], query_records("m", xs[20_000:], start_id=20_000))
    proc = start_daemon(cfg, log)
    recs = await collect(broker.bootstrap, topics["labels"], until=30_000)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    ids = [msgpack.unpackb(r.value)["id"] for r in recs]
    assert sorted(ids) == list(range(30_000))  # exactly one label each: the clean stop checkpointed


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def metric(text: str, name: str, **labels: str) -> float:
    sel = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    pat = re.compile(rf"^{re.escape(name)}(\{{(.*)\}})? (\S+)$", re.M)
    for m in pat.finditer(text):
        got = dict(kv.split("=", 1) for kv in (m.group(2) or "").split(",") if kv)
        if all(got.get(k) == f'"{v}"' for k, v in labels.items()):
            return float(m.group(3))
    raise AssertionError(f"{name}{{{sel}}} not exported")


async def test_metrics_match_what_was_produced(broker: EmbeddedBroker, tmp_path: Path) -> None:
    cfg_path, topics = write_config(tmp_path, broker.bootstrap, ["m"])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    xs = np.random.default_rng(4).random(25_000)
    bad = [(b"m", msgpack.packb({"id": "bad", "x": [1.0, 2.0]}), []), (b"m", b"\xc1", [])]
    async with running(cfg_path) as status:
        await produce(broker.bootstrap, topics["queries"], query_records("m", xs) + bad)
        await collect(broker.bootstrap, topics["labels"], until=25_001)
        await asyncio.sleep(0.3)
        await check_metrics(int(status["metrics_port"]))  # type: ignore[call-overload]
    assert status["exit_code"] == 0


async def check_metrics(port: int) -> None:
    code, text = await asyncio.to_thread(scrape, port)
    assert code == 200
    assert metric(text, "everlast_queries_total", model="m", status="ok") == 25_000
    assert metric(text, "everlast_queries_total", model="m", status="invalid") == 1
    assert metric(text, "everlast_invalid_records_total", reason="dimension") == 1
    assert metric(text, "everlast_dead_letters_total", reason="undecodable") == 1
    assert metric(text, "everlast_round", model="m") == 2
    assert metric(text, "everlast_rounds_completed_total", model="m") == 1
    assert metric(text, "everlast_round_queries_answered", model="m") == 5_000
    assert metric(text, "everlast_round_queries_allowed", model="m") == 20_000
    assert metric(text, "everlast_round_halts_allowed", model="m") == 2_000
    assert metric(text, "everlast_model_halted", model="m") == 0
    assert "everlast_round_halts_used{" not in text  # private unless explicitly exposed
    assert metric(text, "everlast_guarantee_delta", model="m", protects="training") > 0
    assert (await asyncio.to_thread(scrape, port, "/healthz"))[0] == 200
    assert (await asyncio.to_thread(scrape, port, "/readyz"))[0] == 200
    allowed = {
        "model": {"m"},
        "status": {"ok", "refused", "invalid"},
        "protects": {"training", "queries"},
        "mechanism": {"generic-bbl", "private-learner"},
        "concept": {"thresholds", "intervals", "stumps"},
        "rounds": {"yes", "none"},
        "halts": {"possible", "never"},
        "domain": {"", "float64", "range", "grid"},
        "quotas": {"on", "off"},
        "burn": {"on", "off"},
        "quantity": {"alpha", "beta"},
        "reason": {
            "undecodable",
            "schema",
            "oversized",
            "unknown_model",
            "dimension",
            "non_finite",
            "domain",
            "wrong_partition",
        },
    }
    for line in text.splitlines():  # label values come from fixed sets: never a query value or a client id
        if line.startswith("everlast_") and "{" in line:
            for k, v in re.findall(r'(\w+)="([^"]*)"', line.split("} ")[0]):
                assert k in ("le", "version", "partition") or v in allowed[k], line


async def test_an_unreadable_checkpoint_suspends_that_model_and_leaves_its_store_as_it_is(
        broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong key (or a checkpoint that fails authentication): the model is suspended with the reason
    (in /readyz, the metrics and its refusals), its checkpoint is left as it is for an operator (never
    overwritten, never created again), and the daemon keeps running."""
    import os

    cfg_path, topics = write_config(tmp_path, broker.bootstrap, ["m"])
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    monkeypatch.setenv("EVERLAST_CHECKPOINT_KEY", os.urandom(32).hex())
    async with running(cfg_path):
        await produce(broker.bootstrap, topics["queries"], query_records("m", np.linspace(0, 1, 500)))
        await collect(broker.bootstrap, topics["labels"], until=500)
    store = tmp_path / "ck" / "m"
    before = {p.name: p.read_bytes() for p in store.iterdir()}
    monkeypatch.setenv("EVERLAST_CHECKPOINT_KEY", os.urandom(32).hex())  # the wrong key
    async with running(cfg_path) as status:
        await produce(broker.bootstrap, topics["queries"], query_records("m", np.linspace(0, 1, 20), start_id=500))
        got = decode_labels(await collect(broker.bootstrap, topics["labels"], until=520))
        port = int(status["metrics_port"])  # type: ignore[call-overload]
        text = (await asyncio.to_thread(scrape, port))[1]
        ready = await asyncio.to_thread(scrape, port, "/readyz")
    new = [lab for lab in got if lab["id"] >= 500]
    assert {lab["status"] for lab in new} == {"refused"} and "fails authentication" in new[0]["reason"]
    assert metric(text, "everlast_checkpoint_failures_total") == 1
    assert metric(text, "everlast_model_suspended", model="m") == 1
    assert ready[0] == 503 and "fails authentication" in ready[1]
    assert {p.name: p.read_bytes() for p in store.iterdir()} == before


@pytest.mark.parametrize("mechanism", ["private-learner", "generic-bbl"])
async def test_health_and_metrics_answer_while_a_new_model_is_built(broker: EmbeddedBroker, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   mechanism: str) -> None:
    """A new model's fit (the private learner) or first round (GenericBBL) takes a time that depends on
    its training data; it runs on a worker thread, so /healthz, /readyz and /metrics answer meanwhile
    (docs/privacy/learner.md 2). The build is held on an event inside this process (the broker is real):
    had it run on the event loop, nothing could answer, the hold would run out and the test says so."""
    import threading

    from everlast.engine.learner import PrivateLearner
    from everlast.engine.predictor import Predictor

    owner, name = (PrivateLearner, "fit") if mechanism == "private-learner" else (Predictor, "create")
    real = getattr(owner, name)
    entered, release = threading.Event(), threading.Event()
    ran_out: list[bool] = []

    def held(cls: type, *args: object, **kwargs: object) -> object:
        entered.set()
        ran_out.append(not release.wait(30))
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, classmethod(held))
    if mechanism == "generic-bbl":
        cfg_path, topics = write_config(tmp_path, broker.bootstrap, ["m"])
    else:
        x = np.random.default_rng(5).random(3_000)
        np.savez(tmp_path / "m.npz", x=x, y=(x >= 0.5).astype(int))
        cfg_path, topics = write_config(tmp_path, broker.bootstrap, [], extra=(
            f'[[models]]\nid = "m"\ndata = "{tmp_path / "m.npz"}"\nmechanism = "private-learner"\n'
            "learner = { epsilon = 1.0 }\n"))
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    async with running(cfg_path) as status:
        port = int(status["metrics_port"])  # type: ignore[call-overload]
        for _ in range(6_000):  # until the daemon is assigned its partitions and starts the build
            if entered.is_set():
                break
            await asyncio.sleep(0.01)
        assert entered.is_set()
        health = await asyncio.to_thread(scrape, port, "/healthz")
        ready = await asyncio.to_thread(scrape, port, "/readyz")
        during = await asyncio.to_thread(scrape, port)
        release.set()
        assert not any(ran_out), "the build ran on the event loop: nothing answered while it ran"
        assert health == (200, "ok\n")
        assert ready == (503, "not ready: starting\n")
        assert during[0] == 200 and metric(during[1], "everlast_models_active") == 0
        for _ in range(600):  # the build finishes, the model is served
            if (await asyncio.to_thread(scrape, port, "/readyz"))[0] == 200:
                break
            await asyncio.sleep(0.1)
        assert metric((await asyncio.to_thread(scrape, port))[1], "everlast_models_active") == 1
        await produce(broker.bootstrap, topics["queries"], query_records("m", np.linspace(0, 1, 50)))
        assert len(await collect(broker.bootstrap, topics["labels"], until=50)) == 50
    assert status["exit_code"] == 0
