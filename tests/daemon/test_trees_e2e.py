"""The trees serving target: a depth-3 tree served by the daemon end to end, queries sent with
`everlast produce` and labels read with `everlast consume`, on Bananas (river's copy, the split of seed 0 of
`bench.accuracy`). The daemon's answers are exactly those of the Python API's model restored from the
daemon's checkpoint, hence the same accuracy; the start-up report carries both bounds."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.checkpoint.blobs import DirStore
from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.engine.learner import PrivateLearner
from everlast.engine.learner.tree import Tree
from tests.daemon.kafka_helpers import create_topics, running, unique

pytestmark = [pytest.mark.broker, pytest.mark.asyncio]
EV = [sys.executable, "-m", "everlast.cli"]


def _cli(args: list[str], stdin: str = "") -> str:
    out = subprocess.run([*EV, *args], input=stdin, capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


async def test_a_tree_is_served_end_to_end_with_the_python_apis_accuracy(broker: EmbeddedBroker,
                                                                         tmp_path: Path) -> None:
    pytest.importorskip("river")
    pytest.importorskip("sklearn")
    from bench.realdata import load

    s = load("bananas")
    np.savez(tmp_path / "train.npz", x=s.x_train, y=s.y_train.astype(int))
    topics = {k: unique(k) for k in ("queries", "labels", "dead_letters", "checkpoints")}
    cfg = tmp_path / "everlast.toml"
    cfg.write_text(
        f'[broker]\nbootstrap_servers = "{broker.bootstrap}"\n[topics]\n'
        + "".join(f'{k} = "{v}"\n' for k, v in topics.items())
        + f'partitions = 2\n[consumer]\ngroup_id = "{unique("g")}"\nsession_timeout_ms = 2000\n'
        "heartbeat_interval_ms = 200\n"
        f'[checkpoint]\ndir = "{tmp_path / "ck"}"\n[metrics]\nport = 0\n'
        f'[[models]]\nid = "tr"\ndata = "{tmp_path / "train.npz"}"\nconcept = "trees"\nd = 2\ndepth = 3\n'
        'mechanism = "private-learner"\nlearner = { epsilon = 1.0 }\n'
    )
    await create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]])
    lines = "".join(json.dumps({"id": i, "x": [float(v) for v in row]}) + "\n" for i, row in enumerate(s.x_test))
    m = len(s.y_test)
    async with running(cfg):
        sent = await asyncio.to_thread(_cli, ["produce", "-m", "tr", "-b", broker.bootstrap, "--topic",
                                              topics["queries"], "--json"], lines)
        assert json.loads(sent)["sent"] == m
        got: dict[int, dict[str, Any]] = {}
        for _ in range(60):
            out = await asyncio.to_thread(_cli, ["consume", "-m", "tr", "-b", broker.bootstrap, "--topic",
                                                 topics["labels"], "--json", "--timeout", "2"])
            got = {int(r["label"]["id"]): r for r in map(json.loads, out.splitlines())}
            if len(got) >= m:
                break
            await asyncio.sleep(0.5)
        # `everlast replay --concept trees`: points of R^d, a stump target (every tree can represent one)
        rep = await asyncio.to_thread(_cli, ["replay", "--bootstrap-servers", broker.bootstrap, "--queries-topic",
                                             topics["queries"], "--labels-topic", topics["labels"], "--model", "tr",
                                             "--concept", "trees", "--d", "2", "--queries", "300", "--json"])
        r = json.loads(rep)
        assert r["concept"] == "trees" and r["answered"] == 300, r
    assert len(got) == m
    labels = np.array([_label(got[i]) for i in range(m)])
    restored = await ModelCheckpointer(DirStore(tmp_path / "ck"), "tr").load()
    assert restored is not None and isinstance(restored.predictor, PrivateLearner)
    model = restored.predictor
    assert isinstance(model.hypothesis, Tree) and model.hypothesis.depth == 3
    # the default guarantee: a quarter held out, the validated certificate kept with the release
    v = model.validation
    assert v is not None and v.m == len(s.y_train) // 4 and v.beta == 0.01 and 0.0 < v.bound < 0.5
    api = model.answer(s.x_test).labels
    assert np.array_equal(labels, api)  # the served answers are the Python API's, label for label
    acc = float((labels == s.y_test).mean())
    print(f"served depth-3 tree on Bananas at epsilon 1: test accuracy {acc:.4f} over {m} queries")
    assert acc > 0.55  # a private fit: at least the majority class (55.2%); bench.accuracy has the mean


def _label(rec: dict[str, Any]) -> int:
    """``everlast consume --json``: {"model", "partition", "offset", "label": the label record}."""
    lab = rec["label"]
    assert rec["model"] == "tr" and lab["status"] == "ok" and lab["label"] in (0, 1), rec
    return int(lab["label"])
