"""Fault injection against a real `everlast serve` on its embedded broker (which dies with it and
comes back empty, so nothing of the broker's history can cover for lost state): two GenericBBL
models on two partitions answer a stream, the daemon is killed (-9), its state is damaged (a journal
row, the journal's rows cut short, the journal file, the journal lost with and without a checkpoint,
the live checkpoint blob; with and without the key), and it is restarted twice. Every case ends in exact
recovery (every label published again is byte-identical to the first one, and the new queries get
the labels of an uninterrupted run) or in the suspension of just the damaged model, with a reason
naming what was lost, while the other one answers; never in an answer drawn from a state behind the
published ones. A second daemon on the same directory refuses to start within 10 s, naming the
first one's pid. The mutant that ignores the published marks is kept as a test: the same checks
fail on it."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from everlast.daemon.broker import free_port
from tests.daemon.daemon_process import ROOT, Daemon
from tests.daemon.kafka_helpers import write_model_files
from tests.daemon.test_e2e import reference
from tests.daemon.test_lifecycle import metric, scrape

pytestmark = [pytest.mark.broker, pytest.mark.asyncio, pytest.mark.slow]

N = 1_200
"""Queries per model answered before the kill (all in the journal: no periodic checkpoint), in
``CHUNKS`` batches, each answered before the next is sent (so the journal holds several rows)."""
CHUNKS = 4
NEW = 300
"""New queries per model in each life after the fault (ids from ``1_000_000 * life``)."""
LIVES = 2
KEY = "11" * 32


def two_partitions() -> tuple[str, str]:
    """Two model ids that Kafka's default partitioner puts on different partitions of four."""
    part = DefaultPartitioner()
    first = "g1"
    home = part(first.encode(), [0, 1, 2, 3], [0, 1, 2, 3])
    for k in range(2, 100):
        other = f"g{k}"
        if part(other.encode(), [0, 1, 2, 3], [0, 1, 2, 3]) != home:
            return first, other
    raise AssertionError("no second partition")


A, B = two_partitions()
MODELS = (A, B)
SEEDS = {A: 100, B: 200}


@dataclass
class Run:
    d: Daemon
    key: bool
    mutant: bool = False
    first: dict[str, dict[int, bytes]] = field(default_factory=lambda: {m: {} for m in MODELS})
    xs: dict[str, np.ndarray] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = self.d.env()
        if self.key:
            env["EVERLAST_CHECKPOINT_KEY"] = KEY
        return env

    def start(self) -> subprocess.Popen[bytes]:
        log = (self.d.root / "serve.log").open("ab")
        code = ("import everlast.daemon.service as s; s.judge_marks = lambda *a, **k: []; " if self.mutant else "") + (
            "import sys; from everlast.cli.main import main; sys.argv = ['everlast', 'serve', '--config', "
            f"{str(self.d.root / 'everlast.toml')!r}]; main()")
        self.d.proc = subprocess.Popen([sys.executable, "-c", code], cwd=self.d.root, env=self.env(),
                                       stdout=log, stderr=subprocess.STDOUT)
        return self.d.proc


def configure(root: Path, key: bool, mutant: bool = False) -> Run:
    root.mkdir(parents=True, exist_ok=True)
    d = Daemon(root, free_port(), free_port(), root / "run")
    text = (f"[broker]\nembedded_port = {d.port}\n"
            "[consumer]\nsession_timeout_ms = 2000\nheartbeat_interval_ms = 200\n"
            f'[checkpoint]\ndir = "{root / "checkpoints"}"\nevery_queries = 1000000\nevery_seconds = 3600\n'
            f"[metrics]\nport = {d.metrics_port}\n")
    for i, m in enumerate(MODELS):
        data, sched = write_model_files(root, m, seed=i)
        text += f'[[models]]\nid = "{m}"\ndata = "{data}"\nschedule = "{sched}"\nseed = {SEEDS[m]}\n'
    (root / "everlast.toml").write_text(text)
    g = np.random.default_rng(7)
    return Run(d, key, mutant, xs={m: g.random(N + LIVES * NEW) for m in MODELS})


def readyz(port: int) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return int(r.status), r.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode()
    except (urllib.error.URLError, OSError):
        return 0, ""


async def settled(run: Run, timeout: float = 120.0) -> tuple[int, str]:
    """Started, and past 'starting' and 'checking the log': ready, or not ready for a suspension."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert run.d.proc is not None
        if run.d.proc.poll() is not None:
            raise AssertionError(f"the daemon exited: {run.d.log()[-3000:]}")
        code, body = await asyncio.to_thread(readyz, run.d.metrics_port)
        if code == 200 or "suspended" in body:
            return code, body
        await asyncio.sleep(0.2)
    raise AssertionError(f"not settled: {run.d.log()[-3000:]}")


async def produce(bootstrap: str, model: str, xs: np.ndarray, id0: int) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await p.start()
    try:
        for k, x in enumerate(xs):
            await p.send("everlast.queries", msgpack.packb({"id": id0 + k, "x": float(x)}), key=model.encode())
        await p.flush()
    finally:
        await p.stop()


async def read_labels(bootstrap: str, until: Any, seconds: float) -> dict[str, dict[int, bytes]]:
    """Every label on the labels topic from its beginning, first bytes per (model, id), until
    ``until(seen)`` or ``seconds`` pass."""
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20)
    await c.start()
    seen: dict[str, dict[int, bytes]] = {m: {} for m in MODELS}
    try:
        tps = [TopicPartition("everlast.labels", p) for p in range(4)]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not until(seen):
            for recs in (await c.getmany(timeout_ms=100, max_records=10_000)).values():
                for r in recs:
                    seen[r.key.decode()].setdefault(msgpack.unpackb(r.value)["id"], r.value)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(c.stop(), 5)
    return seen


async def first_life(run: Run) -> None:
    """Start, answer N queries per model, read every label, kill -9."""
    run.start()
    await settled(run)
    step = N // CHUNKS
    for k in range(step, N + 1, step):
        for m in MODELS:
            await produce(run.d.bootstrap, m, run.xs[m][k - step : k], k - step)
        run.first = await read_labels(run.d.bootstrap, lambda s, k=k: all(len(s[m]) >= k for m in MODELS), 90)
    assert all(len(run.first[m]) == N for m in MODELS), {m: len(v) for m, v in run.first.items()}
    assert run.d.proc is not None
    run.d.proc.send_signal(signal.SIGKILL)
    run.d.proc.wait()
    run.d.proc = None


@dataclass
class After:
    ready: tuple[int, str]
    again: dict[str, dict[int, bytes]]
    new: dict[str, dict[int, dict[str, Any]]]
    log: str
    life: int
    metrics: str = ""


async def next_life(run: Run, life: int = 1) -> After:
    """Restart, read what is published again, send NEW fresh queries per model, read their labels,
    stop. (``verdict`` right after: it reads the checkpoint this life left.)"""
    run.start()
    base, lo = 1_000_000 * life, N + (life - 1) * NEW
    try:
        ready = await settled(run)
        again = await read_labels(run.d.bootstrap, lambda s: False, 2.0)
        for m in MODELS:
            await produce(run.d.bootstrap, m, run.xs[m][lo : lo + NEW], base)
        done = await read_labels(run.d.bootstrap, lambda s: all(
            sum(1 for i in s[m] if i >= base) >= NEW for m in MODELS), 60)
        metrics = (await asyncio.to_thread(scrape, run.d.metrics_port))[1]
    finally:
        assert run.d.stop() in (0, 1), run.d.log()[-3000:]
    for m in MODELS:  # every label published so far, first bytes
        for i, v in done[m].items():
            run.first[m].setdefault(i, v)
    new = {m: {i - base: msgpack.unpackb(v) for i, v in done[m].items() if i >= base} for m in MODELS}
    return After(ready, again, new, run.d.log(), life, metrics)


def verdict(run: Run, after: After) -> dict[str, str]:
    """Per model: "exact" (every label published again is the first one's, every new query answered
    as an uninterrupted run answers it) or "suspended: <reason>" (every new query refused with it).
    Raises AssertionError on anything else: above all an answer drawn from a rewound state."""
    out = {}
    for m in MODELS:
        first, again, new = run.first[m], after.again[m], after.new[m]
        assert all(again[i] == first[i] for i in again.keys() & first.keys()), f"{m}: a label published again differs"
        assert len(new) == NEW, f"{m}: {NEW - len(new)} new queries without a label"
        statuses = {v["status"] for v in new.values()}
        if statuses == {"ok"}:
            # the restored model's state counts every answer published before the fault, and the new ones
            answered, published = answer_count(run, m), N + after.life * NEW
            assert answered == published, f"{m}: answered from a state behind its published answers ({answered} " \
                f"answers in its state, {published} published)"
            ref = reference(run.d.root, m, SEEDS[m], run.xs[m])
            got = np.array([new[i]["label"] for i in range(NEW)])
            lo = N + (after.life - 1) * NEW
            assert np.array_equal(got, ref[lo : lo + NEW]), f"{m}: answered from a state behind its published answers"
            out[m] = "exact"
        else:
            assert statuses == {"refused"}, (m, statuses)
            (reason,) = {v["reason"] for v in new.values()}
            out[m] = f"suspended: {reason}"
    return out


def answer_count(run: Run, model: str) -> int:
    """The queries the model's state has answered, from its checkpoint after the clean stop."""
    from everlast.daemon.checkpoint.blobs import DirStore, sealed
    from everlast.daemon.checkpoint.model_state import ModelCheckpointer

    store = sealed(DirStore(run.d.root / "checkpoints"), bytes.fromhex(KEY) if run.key else None)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:  # (called from the test's event loop)
        restored = pool.submit(asyncio.run, ModelCheckpointer(store, model).load()).result()
    assert restored is not None
    info = restored.predictor.round_info()
    assert info is not None and restored.predictor.round == 1
    return int(info.answered)


DAMAGES = ["journal row bit", "journal rows cut", "journal file garbage", "journal lost", "journal and checkpoint lost",
           "live blob bit"]


def damage(root: Path, kind: str, part_of_a: int) -> None:
    ck = root / "checkpoints"
    j = ck / "journal.sqlite"
    if kind in ("journal row bit", "journal rows cut"):
        db = sqlite3.connect(j)
        rows = db.execute("SELECT seq, payload FROM rows WHERE part = ? ORDER BY seq", (part_of_a,)).fetchall()
        assert len(rows) >= 2, rows
        if kind == "journal row bit":
            seq, payload = rows[len(rows) // 2]
            b = bytearray(payload)
            b[len(b) // 2] ^= 0x04
            db.execute("UPDATE rows SET payload = ? WHERE seq = ?", (bytes(b), seq))
        else:
            db.execute("DELETE FROM rows WHERE part = ? AND seq >= ?", (part_of_a, rows[len(rows) // 2][0]))
        db.commit()
        db.close()
    elif kind == "journal file garbage":
        for p in ck.glob("journal.sqlite*"):
            raw = p.read_bytes()
            p.write_bytes(raw[:100] + np.random.default_rng(1).bytes(4096) + raw[4196:])
    elif kind in ("journal lost", "journal and checkpoint lost"):
        for p in ck.glob("journal.sqlite*"):
            p.unlink()
        if kind == "journal and checkpoint lost":
            for p in (ck / A).iterdir():
                if p.name != "claim":
                    p.unlink()
    elif kind == "live blob bit":
        p = ck / A / "live"
        raw = bytearray(p.read_bytes())
        raw[len(raw) // 2] ^= 0x01
        p.write_bytes(bytes(raw))


EXPECT = {  # damage -> (what A's reason must name, whether B must be exact, the metrics' lost label)
    "journal row bit": ("journal", True, "journal"),
    "journal rows cut": ("journal", True, "journal"),
    "journal file garbage": ("journal", False, "journal"),
    "journal lost": ("journal", False, "journal"),
    "journal and checkpoint lost": ("checkpoint is lost", False, "checkpoint"),
    "live blob bit": (f"{A}/live fails", True, "checkpoint"),  # its checksum, or with the key its authentication
}


CASES = [(k, False) for k in DAMAGES] + [("journal row bit", True), ("live blob bit", True)]
"""The key changes only how rows and blobs are checked (AES-GCM instead of SHA-256): two cases cover it;
every kind of blob, with and without the key, is in tests/daemon/test_faults.py."""


@pytest.mark.parametrize(("kind", "key"), CASES, ids=[f"{k}-{'key' if y else 'no key'}" for k, y in CASES])
async def test_damage_ends_in_exact_recovery_or_the_suspension_of_the_damaged_model(tmp_path: Path, kind: str,
                                                                                   key: bool) -> None:
    run = configure(tmp_path, key)
    await first_life(run)
    part = DefaultPartitioner()(A.encode(), [0, 1, 2, 3], [0, 1, 2, 3])
    damage(tmp_path, kind, part)
    what, b_exact, lost = EXPECT[kind]
    for life in range(1, LIVES + 1):  # the second restart: the verdict holds (the suspension is persisted)
        after = await next_life(run, life)
        v = verdict(run, after)
        print(kind, "key" if key else "no key", v)
        assert v[A].startswith("suspended") and what in v[A], (kind, v[A])
        if b_exact:
            assert v[B] == "exact", (kind, v[B])
        else:  # its rows were in the damaged or lost journal too: suspended, with the same kind of reason
            assert v[B].startswith("suspended") and "journal" in v[B], (kind, v[B])
        assert after.ready[0] == 503 and A in after.ready[1] and what in after.ready[1], after.ready
        assert metric(after.metrics, "everlast_model_suspended", model=A) == 1
        assert metric(after.metrics, "everlast_model_suspended_lost", model=A, lost=lost) == 1
        assert "Traceback" not in after.log, after.log[-3000:]


async def test_an_undamaged_restart_recovers_exactly_from_the_journal(tmp_path: Path) -> None:
    run = configure(tmp_path, False)
    await first_life(run)
    after = await next_life(run)
    assert verdict(run, after) == {A: "exact", B: "exact"}
    assert all(len(after.again[m]) == N for m in MODELS)  # every label published again, from the journal
    assert after.ready[0] == 200


async def test_mutant_a_daemon_that_ignores_the_published_marks_answers_from_rewound_state(tmp_path: Path) -> None:
    """The checks above against a daemon whose start skips the published marks: with the journal's
    rows cut short, it answers the new queries from a state hundreds of answers behind the
    published ones, and ``verdict`` catches it."""
    run = configure(tmp_path, False, mutant=True)
    await first_life(run)
    damage(tmp_path, "journal rows cut", DefaultPartitioner()(A.encode(), [0, 1, 2, 3], [0, 1, 2, 3]))
    after = await next_life(run)
    with pytest.raises(AssertionError, match="behind its"):
        verdict(run, after)


async def test_a_second_daemon_on_the_same_directory_refuses_within_10_s_and_the_first_keeps_serving(
        tmp_path: Path) -> None:
    run = configure(tmp_path, False)
    run.start()
    await settled(run)
    first = run.d.proc
    assert first is not None
    try:
        other = tmp_path / "other.toml"
        text = (tmp_path / "everlast.toml").read_text()
        other.write_text(text.replace(f"embedded_port = {run.d.port}", f"embedded_port = {free_port()}").replace(
            f"port = {run.d.metrics_port}", f"port = {free_port()}"))
        t0 = time.monotonic()
        second = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "everlast.cli", "serve", "--config",
                                                          str(other)], cwd=tmp_path, env=run.env(),
                                         capture_output=True, text=True, timeout=60)
        took = time.monotonic() - t0
        err = second.stderr.strip().splitlines()
        assert second.returncode != 0 and took < 10, (took, second.stderr[-2000:])
        assert len([line for line in err if line.startswith("Error")]) == 1 and "Traceback" not in second.stderr
        assert f"pid {first.pid}" in second.stderr and "in use by another everlast daemon" in second.stderr
        # the first one serves on
        await produce(run.d.bootstrap, A, np.full(50, 0.3), 5_000_000)
        got = await read_labels(run.d.bootstrap, lambda s: sum(1 for i in s[A] if i >= 5_000_000) >= 50, 60)
        assert sum(1 for i in got[A] if i >= 5_000_000) == 50 and first.poll() is None
    finally:
        assert run.d.stop() == 0, run.d.log()[-3000:]


async def test_a_metrics_port_clash_is_a_one_line_error(tmp_path: Path) -> None:
    import socket

    run = configure(tmp_path, False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", run.d.metrics_port))
        s.listen()
        out = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "everlast.cli", "serve", "--config",
                                                       str(tmp_path / "everlast.toml")], cwd=tmp_path,
                                      env=run.env(), capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr[-3000:]
    assert f"cannot serve metrics on 127.0.0.1:{run.d.metrics_port}" in out.stderr


_ = (ROOT, os)


async def test_a_full_disk_stalls_the_answers_and_loses_nothing(tmp_path: Path) -> None:
    """The disk fills (the daemon's file-size limit drops below its files: every write that grows one
    fails, as on a full disk): the daemon publishes nothing it has not journaled, says so on
    /readyz, and once there is room answers everything, byte-identical across a kill -9 and restart."""
    import resource

    run = configure(tmp_path, False)
    proc = run.start()
    await settled(run)
    for m in MODELS:
        await produce(run.d.bootstrap, m, run.xs[m][: N // 2], 0)
    half = await read_labels(run.d.bootstrap, lambda s: all(len(s[m]) >= N // 2 for m in MODELS), 60)
    assert all(len(half[m]) == N // 2 for m in MODELS)
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))  # the disk is full
    for m in MODELS:
        await produce(run.d.bootstrap, m, run.xs[m][N // 2 : N], N // 2)
    stalled = await read_labels(run.d.bootstrap, lambda s: False, 4.0)
    code, body = await asyncio.to_thread(readyz, run.d.metrics_port)
    assert all(len(stalled[m]) == N // 2 for m in MODELS), "a label was published that the journal does not hold"
    assert code == 503 and "checkpoint writes fail" in body, body
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))  # room
    run.first = await read_labels(run.d.bootstrap, lambda s: all(len(s[m]) >= N for m in MODELS), 90)
    assert all(len(run.first[m]) == N for m in MODELS)
    assert all(run.first[m][i] == half[m][i] for m in MODELS for i in half[m])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run.d.proc = None
    after = await next_life(run)
    assert verdict(run, after) == {A: "exact", B: "exact"}
