"""Daemon pieces without a broker: configuration errors, wire decoding, checkpoint stores
(atomic, 0600, AES-GCM, incremental), structured logs."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import stat
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest

from everlast.daemon import logs, wire
from everlast.daemon.checkpoint.blobs import DirStore, EncryptedStore, key_from_env
from everlast.daemon.checkpoint.model_state import ModelCheckpointer
from everlast.daemon.config import load
from everlast.daemon.errors import CheckpointError, ConfigError, CorruptCheckpoint
from tests.daemon.kafka_helpers import write_model_files
from tests.engine.helpers import run_in_batches, tiny_predictor


def write(tmp: Path, body: str) -> Path:
    p = tmp / "c.toml"
    p.write_text(body)
    return p


def test_config_errors_name_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"consumer\.max_records"):
        load(write(tmp_path, "[consumer]\nmax_records = 0\n"))
    with pytest.raises(ConfigError, match="exactly one of 'schedule'"):
        load(write(tmp_path, '[[models]]\nid = "m"\ndata = "d.csv"\n'))
    with pytest.raises(ConfigError, match=r"models\.0\.id"):
        load(write(tmp_path, '[[models]]\nid = "bad id!"\ndata = "d.csv"\nschedule = "s.json"\n'))
    with pytest.raises(ConfigError, match="sasl_mechanism"):
        load(write(tmp_path, '[broker]\nsecurity_protocol = "SASL_SSL"\n'))
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path / "missing.toml")


def test_environment_and_flags_override_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = write(tmp_path, '[consumer]\nfetch_max_wait_ms = 30\n'
                        '[[models]]\nid = "m"\ndata = "d.csv"\nschedule = "s.json"\n')
    assert load(p).models[0].data == tmp_path / "d.csv"  # relative to the file
    monkeypatch.setenv("EVERLAST_CONSUMER__FETCH_MAX_WAIT_MS", "7")
    assert load(p).consumer.fetch_max_wait_ms == 7
    assert load(p, {"consumer": {"fetch_max_wait_ms": 3}}).consumer.fetch_max_wait_ms == 3


@pytest.mark.slow  # the refusal plans what would work
def test_targets_that_need_more_data_refuse_to_start_and_say_what_would_work(tmp_path: Path) -> None:
    from everlast.daemon.model import ModelRuntime

    data, _ = write_model_files(tmp_path, "m", n=1000)
    cfg = load(write(tmp_path, f'[[models]]\nid = "m"\ndata = "{data}"\n'
                               "targets = { epsilon = 1.0, delta = 1e-6, alpha = 0.1 }\n"))
    t0 = time.process_time()
    with pytest.raises(ConfigError) as err:
        ModelRuntime.prepare(cfg.models[0])
    assert time.process_time() - t0 < 5.0  # refused before the planner's search (seconds to minutes)
    msg = str(err.value)
    assert re.search(r"GenericBBL cannot meet epsilon = 1.0 at alpha = 0.1 with n = 1,000: any of its schedules "
                     r"needs at least [\d,]+ examples", msg), msg
    # it names what works: the private learner at the planner's n (more than 1,000 here), and how to serve it
    assert "The private learner would certify them with 5,780 examples" in msg  # agnostic, a priori
    assert 'guarantee = "agnostic"' in msg
    assert "2,229 examples when the labels come from the class" in msg  # realizable
    assert 'mechanism = "private-learner"' in msg
    data2, _ = write_model_files(tmp_path, "m2", n=6_000)
    cfg = load(write(tmp_path, f'[[models]]\nid = "m2"\ndata = "{data2}"\n'
                               "targets = { epsilon = 1.0, delta = 1e-6, alpha = 0.1 }\n"))
    with pytest.raises(ConfigError, match=r"The private learner certifies these targets with the data given \(5,780 "
                                          r"examples needed, 6,000 given\)"):
        ModelRuntime.prepare(cfg.models[0])


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 8.0])
def test_the_quick_refusals_floor_is_below_the_planners_n(epsilon: float) -> None:
    """``bbl_floor`` refuses without planning: it must never refuse what the planner would serve."""
    from everlast.daemon.privacy import bbl_floor
    from everlast.engine.planner import Targets, plan

    t = Targets(epsilon=epsilon, delta=1e-6, alpha=0.1, halt_budget="split-votes")
    p = plan(t)
    assert bbl_floor(t) <= p.rounds[0].lam * p.rounds[0].T <= p.n_required


@pytest.mark.parametrize(("value", "ct", "code"), [
    (msgpack.packb({"id": 1, "x": 0.5}), "msgpack", None),
    (msgpack.packb({"id": "a", "x": [1, 2.5]}), "msgpack", None),
    (json.dumps({"id": 1, "x": 0.5}).encode(), "json", None),
    (b"\xc1", "msgpack", "undecodable"),
    (msgpack.packb({"id": 1, "x": float("inf")}), "msgpack", "non_finite"),
    (json.dumps({"id": 1, "x": 10**400}).encode(), "json", "non_finite"),
    (msgpack.packb({"id": 1, "x": []}), "msgpack", "schema"),
    (msgpack.packb({"id": 2**63, "x": 0.5}), "msgpack", "schema"),
    (msgpack.packb({"id": "", "x": 0.5}), "msgpack", "schema"),
    (msgpack.packb({"id": 1, "x": True}), "msgpack", "schema"),
])
def test_decode_query(value: bytes, ct: str, code: str | None) -> None:
    headers = [("Content-Type", b"application/json; charset=utf-8")] if ct == "json" else []
    got = wire.decode_query(b"m", value, headers, max_bytes=1024)
    if code is None:
        assert isinstance(got, wire.Query) and got.content_type == ct
    else:
        assert isinstance(got, wire.Rejected) and got.code == code


def test_json_without_its_header_gets_an_answer_saying_so() -> None:
    got = wire.decode_query(b"m", b'{"id": "q1", "x": 0.5}', [], max_bytes=1024)
    assert isinstance(got, wire.Rejected) and got.code == "undecodable"
    assert (got.message, got.id, got.content_type) == (wire.MSG_JSON_WITHOUT_HEADER, "q1", "json")


def test_dir_store_writes_atomically_with_mode_0600(tmp_path: Path) -> None:
    store = DirStore(tmp_path / "ck")
    asyncio.run(store.put("m", "live", b"x" * 10))
    asyncio.run(store.put("m", "live", b"y" * 5))
    f = tmp_path / "ck" / "m" / "live"
    assert f.read_bytes() == b"yyyyy"
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "ck" / "m").stat().st_mode) == 0o700
    assert [p.name for p in (tmp_path / "ck" / "m").iterdir()] == ["live"]  # no temp files left


def test_encrypted_store_authenticates_and_binds_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K", os.urandom(32).hex())
    key = key_from_env("K")
    assert key is not None
    inner = DirStore(tmp_path)
    store = EncryptedStore(inner, key)
    asyncio.run(store.put("m", "live", b"secret state"))
    raw = (tmp_path / "m" / "live").read_bytes()
    assert b"secret" not in raw
    assert asyncio.run(store.get("m", "live")) == b"secret state"
    (tmp_path / "m" / "other").write_bytes(raw)  # a blob moved under another name
    with pytest.raises(CorruptCheckpoint):
        asyncio.run(store.get("m", "other"))
    with pytest.raises(CorruptCheckpoint):
        asyncio.run(EncryptedStore(inner, os.urandom(32)).get("m", "live"))
    monkeypatch.setenv("K", "zz")
    with pytest.raises(CheckpointError):
        key_from_env("K")


def test_incremental_checkpoints_restore_identical_continuations(tmp_path: Path) -> None:
    qs = np.random.default_rng(2).random(2600)
    ref = run_in_batches(tiny_predictor(), qs, [])
    p = tiny_predictor()
    ck = ModelCheckpointer(DirStore(tmp_path), "m")
    out = []
    for lo, hi in [(0, 250), (250, 700), (700, 1300), (1300, 2600)]:
        out.append(run_in_batches(p, qs[lo:hi], []))
        asyncio.run(ck.save(p, {0: hi}))
        restored = asyncio.run(ModelCheckpointer(DirStore(tmp_path), "m").load())
        assert restored is not None and restored.offsets == {0: hi}
        p = restored.predictor
    assert np.array_equal(np.concatenate(out), ref)
    names = sorted(os.listdir(tmp_path / "m"))
    assert names[0].startswith("live") and all(n.split("-")[1] == "5" for n in names[1:])  # old rounds pruned


def test_json_logs_carry_no_exception_text(capsys: pytest.CaptureFixture[str]) -> None:
    logs.setup("json", "INFO")
    log = logging.getLogger("everlast.test")
    try:
        raise ValueError("secret 0.123456789")
    except ValueError:
        log.exception("model %s failed", "m")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    rec = json.loads(line)
    assert rec["msg"] == "model m failed" and rec["error"] == "ValueError"
    assert "0.123456789" not in line
    logging.getLogger().handlers.clear()


def test_training_data_formats(tmp_path: Path) -> None:
    from everlast.daemon.data import load_training

    x = np.random.default_rng(0).random(50)
    y = (x > 0.5).astype(int)
    np.savetxt(tmp_path / "t.csv", np.c_[x, y], delimiter=",", header="x,y", comments="")
    np.savez(tmp_path / "t.npz", x=x, y=y)
    for name in ("t.csv", "t.npz"):
        gx, gy = load_training(tmp_path / name)
        assert np.allclose(gx, x) and np.array_equal(gy, y)
    (tmp_path / "bad.csv").write_text("x,y\n0.1\n")
    with pytest.raises(ConfigError, match=r"bad\.csv"):
        load_training(tmp_path / "bad.csv")


@pytest.mark.parametrize(("text", "message"), [
    ("", r"the file is empty: a CSV training set has one example per line"),
    ("x,y\n", r"a header but no data rows"),
    ("x,y\n0.1,1\n0.2,abc\n", r"line 3, column 2: not a number$"),
    ("x,y\n0.1,1\n\n# a comment\n0.2,1,3\n", r"line 5 has 3 columns, line 2 has 2"),
    ("x,y\n0.1,1\n0.3,2\n0.4,0.5\n", r"line 3, column 2: the label must be 0 or 1 \(2 such rows\)"),
    ("0.1,1\n\nnan,0\n", r"line 3, column 1: a coordinate is NaN or infinite \(1 such row\)"),
    ("a,b,y\n0.1,0.2,1\n0.3,inf,0\n", r"line 3, column 2: a coordinate is NaN or infinite"),
    ("x,y\n0.1,\n", r"line 2, column 2: not a number \(empty\)"),
    ("x\n0.1\n", r"line 2 has 1 column; a CSV training set needs the coordinates and then a label column"),
])
def test_training_data_errors_name_the_line_and_column_and_no_warning_leaks(tmp_path: Path, text: str,
                                                                           message: str) -> None:
    import warnings

    from everlast.daemon.data import load_training

    (tmp_path / "t.csv").write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "input contained no data" would fail here
        with pytest.raises(ConfigError, match=message) as err:
            load_training(tmp_path / "t.csv")
    assert "abc" not in str(err.value) and "0.2" not in str(err.value)  # never a value


def test_array_errors_name_the_row_and_dimension_errors_say_what_fits(tmp_path: Path) -> None:
    from everlast.daemon.data import load_training
    from everlast.daemon.model import ModelRuntime

    x = np.random.default_rng(1).random(10)
    x[6] = np.nan
    np.savez(tmp_path / "nan.npz", x=x, y=np.zeros(10))
    with pytest.raises(ConfigError, match=r"nan\.npz: row 6 \(0-based\): a coordinate is NaN"):
        load_training(tmp_path / "nan.npz")
    np.savez(tmp_path / "short.npz", x=np.zeros(10), y=np.zeros(9))
    with pytest.raises(ConfigError, match=r"10 points but 9 labels"):
        load_training(tmp_path / "short.npz")
    (tmp_path / "two.csv").write_text("a,b,y\n0.1,0.2,1\n0.3,0.4,0\n")
    cfg = load(write(tmp_path, f'[[models]]\nid = "m"\ndata = "{tmp_path / "two.csv"}"\nconcept = "thresholds"\n'
                               'mechanism = "private-learner"\nlearner = { epsilon = 1.0 }\n'))
    with pytest.raises(ConfigError, match=r'model m: .*two\.csv: the training set has 2 coordinates per example; '
                                          r'concept = "thresholds" takes 1\. Concept = "stumps" with d = 2 takes it'):
        ModelRuntime.prepare(cfg.models[0])
    one = tmp_path / "one.csv"
    one.write_text("x,y\n0.1,1\n0.3,0\n")
    cfg = load(write(tmp_path, f'[[models]]\nid = "m"\ndata = "{one}"\nconcept = "stumps"\nd = 3\n'
                               'mechanism = "private-learner"\nlearner = { epsilon = 1.0 }\n'))
    with pytest.raises(ConfigError, match=r'has 1 coordinate per example; concept = "stumps" with d = 3 takes 3\. '
                                          r'Concept = "thresholds" or "intervals"'):
        ModelRuntime.prepare(cfg.models[0])
    # trees take R^d like stumps (a trees model with d > 1 used to be refused as if it took 1 coordinate)
    cfg = load(write(tmp_path, f'[[models]]\nid = "m"\ndata = "{one}"\nconcept = "trees"\nd = 3\ndepth = 2\n'
                               'mechanism = "private-learner"\nlearner = { epsilon = 1.0 }\n'))
    with pytest.raises(ConfigError, match=r'has 1 coordinate per example; concept = "trees" with d = 3 takes 3\. '):
        ModelRuntime.prepare(cfg.models[0])


def test_a_schedule_that_certifies_nothing_is_refused(tmp_path: Path) -> None:
    """The paper's design on a band too narrow for Theorem B's gap condition: no training-set epsilon
    at all (a target-charged round always certifies one: K = R steps)."""
    import json

    from everlast.daemon.model import ModelRuntime

    data, sched = write_model_files(tmp_path, "m", round_={**{"T": 200, "lam": 20, "R": 20_000, "c": 5_000},
                                                          "eps_bt": 0.5, "delta_bt": 1e-8, "alpha": 0.1,
                                                          "m_S": 400, "m_D": 10_000})
    doc = json.loads(sched.read_text())
    doc.update({"design": "paper", "halting": "paper", "restarts": "per-top"})
    for r in doc["rounds"]:
        r.update({"halt_eps": None, "halt_threshold": None})
    sched.write_text(json.dumps(doc))
    cfg = load(write(tmp_path, f'[[models]]\nid = "m"\ndata = "{data}"\nschedule = "{sched}"\n'))
    with pytest.raises(ConfigError, match="certifies no training-set guarantee"):
        ModelRuntime.prepare(cfg.models[0])


def test_client_errors_are_rate_limited_and_say_how_many_were_dropped() -> None:
    now = [0.0]
    f = logs.RateLimit(every_s=10.0, clock=lambda: now[0])

    def rec(name: str, level: int, msg: str = "Unable connect to node %s") -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, msg, ("111",), None)

    assert f.filter(rec("aiokafka.conn", logging.ERROR))
    assert not any(f.filter(rec("aiokafka.conn", logging.ERROR)) for _ in range(900))
    assert f.filter(rec("everlast.daemon", logging.ERROR))  # the daemon's own errors always pass
    assert f.filter(rec("everlast.daemon", logging.INFO))
    now[0] = 11.0
    r = rec("aiokafka.conn", logging.ERROR)
    assert f.filter(r) and r.getMessage() == "Unable connect to node 111 (900 similar messages suppressed)"


def test_the_checkpoint_root_is_made_private(tmp_path: Path) -> None:
    root = tmp_path / "ck"
    root.mkdir(mode=0o755)
    os.chmod(root, 0o755)
    DirStore(root).secure_root()
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    DirStore(tmp_path / "new" / "ck").secure_root()
    assert stat.S_IMODE((tmp_path / "new" / "ck").stat().st_mode) == 0o700


def test_start_up_warns_about_unencrypted_checkpoints_and_exposed_halts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from everlast.daemon.app import warn_operator

    monkeypatch.delenv("EVERLAST_CHECKPOINT_KEY", raising=False)
    cfg = load(write(tmp_path, "[metrics]\nexpose_halts_used = true\n"))
    with caplog.at_level(logging.WARNING, logger="everlast.daemon"):
        warn_operator(cfg)
    text = caplog.text
    assert "NOT encrypted" in text and "expose_halts_used is on" in text
    caplog.clear()
    monkeypatch.setenv("EVERLAST_CHECKPOINT_KEY", os.urandom(32).hex())
    with caplog.at_level(logging.WARNING, logger="everlast.daemon"):
        warn_operator(load(write(tmp_path, "")))
    assert caplog.text == ""


def test_labelled_series_exist_at_zero_and_process_metrics_are_exported() -> None:
    from prometheus_client import generate_latest

    from everlast.daemon.metrics import Metrics

    m = Metrics()
    m.declare(["m"])
    text = generate_latest(m.registry).decode()
    assert 'everlast_queries_total{model="m",status="refused"} 0.0' in text
    for code in wire.CODES:
        assert f'everlast_dead_letters_total{{reason="{code}"}} 0.0' in text
    assert "process_cpu_seconds_total" in text and "process_resident_memory_bytes" in text


def test_the_heartbeat_counts_work_on_a_worker_thread_as_progress() -> None:
    """/healthz stays up while the loop awaits a new model's build (its length depends on the data)."""
    from everlast.daemon.metrics import Heartbeat

    h = Heartbeat(stall_s=0.0)  # every moment without a beat is a stall
    assert not h.alive()
    with h.busy():
        assert h.alive()
        with h.busy():
            assert h.alive()
        assert h.alive()
    assert not h.alive()
