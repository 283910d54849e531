"""``everlast replay --truth`` (the replay-accuracy target): a model trained on 1[x >= 0.37] is reported at its real
accuracy, within sampling error; without --truth the output says the accuracy is against the
replay's own synthetic concept (the distribution's median), not the model's. ``everlast report
--truth`` scores a replay's query record the same way."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy.stats import binom

from everlast.cli.main import main
from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.checkpoint.blobs import DirStore
from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.engine.learner import PrivateLearner
from tests.daemon.kafka_helpers import create_topics, unique
from tests.daemon.test_crash import start_daemon

pytestmark = [pytest.mark.broker]

T = 0.37
Q = 20_000
ALPHA = 1e-6
"""Two-sided level of the sampling-error check (binomial, the model's answers being a fixed function)."""


def test_replay_reports_the_real_accuracy_against_the_users_concept(broker: EmbeddedBroker, tmp_path: Path) -> None:
    import asyncio

    x = np.random.default_rng(37).random(3_000)
    np.savez(tmp_path / "train.npz", x=x, y=(x >= T).astype(int))
    topics = {k: unique(k) for k in ("queries", "labels", "dead_letters", "checkpoints")}
    cfg = tmp_path / "everlast.toml"
    cfg.write_text(
        f'[broker]\nbootstrap_servers = "{broker.bootstrap}"\n[topics]\n'
        + "".join(f'{k} = "{v}"\n' for k, v in topics.items())
        + f'partitions = 4\n[consumer]\ngroup_id = "{unique("g")}"\nsession_timeout_ms = 2000\n'
        "heartbeat_interval_ms = 200\n"
        f'[checkpoint]\ndir = "{tmp_path / "ck"}"\n[metrics]\nport = 0\n'
        f'[[models]]\nid = "m37"\ndata = "{tmp_path / "train.npz"}"\nmechanism = "private-learner"\n'
        "learner = { epsilon = 1.0 }\n"
    )
    asyncio.run(create_topics(broker.bootstrap, [topics["queries"], topics["labels"], topics["dead_letters"]]))
    proc = start_daemon(cfg, tmp_path / "d.log")
    base = ["replay", "--bootstrap-servers", broker.bootstrap, "--queries-topic", topics["queries"],
            "--labels-topic", topics["labels"], "--model", "m37", "--queries", str(Q), "--seed", "5"]
    try:
        mine = CliRunner().invoke(main, [*base, "--truth", str(T), "--json", "--record", str(tmp_path / "r.jsonl")])
        theirs = CliRunner().invoke(main, [*base, "--json"])
        text = CliRunner().invoke(main, [*base, "--queries", "2000"])
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    for r in (mine, theirs, text):
        assert r.exit_code == 0, r.output
    out, synth = json.loads(mine.stdout), json.loads(theirs.stdout)
    assert out["answered"] == Q and out["accuracy_is_the_models"] and "1[x >= 0.37]" in out["accuracy_against"]
    assert not synth["accuracy_is_the_models"] and "synthetic" in synth["accuracy_against"]
    assert "--truth" in synth["accuracy_against"] and "synthetic" in text.output and "--truth" in text.output

    restored = asyncio.run(ModelCheckpointer(DirStore(tmp_path / "ck"), "m37").load())
    assert restored is not None and isinstance(restored.predictor, PrivateLearner)
    grid = np.random.default_rng(0).random(4_000_000)  # its real accuracy on the uniform distribution
    real = float(np.mean(restored.predictor.answer(grid).labels == (grid >= T)))
    k = round(out["accuracy"] * Q)
    assert binom.cdf(k, Q, real) > ALPHA / 2 and binom.sf(k - 1, Q, real) > ALPHA / 2, (out["accuracy"], real)
    print(f"reported {out['accuracy']:.5f}, real {real:.5f}; against the synthetic median: {synth['accuracy']:.4f}")
    assert abs(synth["accuracy"] - real) > 0.05  # what the replay printed before --truth: another concept's score

    rep = CliRunner().invoke(main, ["report", str(tmp_path / "r.jsonl"), "--out", str(tmp_path / "rep"),
                                    "--truth", str(T)])
    assert rep.exit_code == 0, rep.output
    assert f"Accuracy: {out['accuracy']:.4f} over {Q:,} answers, against your concept 1[x >= 0.37]" in rep.output
