"""End-to-end daemon throughput and latency, against a raw aiokafka pass-through on the same broker.

    python -m bench.e2e [--queries N] [--quick]

Both run as subprocesses against one embedded broker: the daemon (``everlast serve``, one model)
and ``bench.passthrough`` (consume, msgpack decode/encode, ``send_batch``, commit; the same
``max_records``). Throughput: N queries produced up front, then (last - first) broker timestamp of
the outputs. Latency: an open-loop stream at half the daemon's throughput, latency = label
timestamp - query timestamp (same clock, millisecond resolution). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from daemon.broker import EmbeddedBroker

MAX_RECORDS = 5000
ROUND = {"T": 2000, "lam": 20, "R": 10**9, "c": 10**8, "eps_bt": 0.5, "delta_bt": 1e-8, "alpha": 0.1,
         "m_S": 1000, "m_D": 40_000}


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


async def create(bootstrap: str, names: list[str]) -> None:
    a = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await a.start()
    try:
        await a.create_topics([NewTopic(n, 1, 1) for n in names])
    finally:
        await a.close()


async def produce(bootstrap: str, topic: str, n: int, start: int = 0, rate: float | None = None) -> None:
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1)
    await p.start()
    g = np.random.default_rng(start)
    try:
        chunk = 500 if rate else 5000
        t0 = time.perf_counter()
        futs = []
        for i in range(start, start + n, chunk):
            b = p.create_batch()
            for j in range(i, min(i + chunk, start + n)):
                v = msgpack.packb({"id": j, "x": float(g.random())})
                if b.append(key=b"bench", value=v, timestamp=None, headers=[]) is None:
                    futs.append(await p.send_batch(b, topic, partition=0))
                    b = p.create_batch()
                    b.append(key=b"bench", value=v, timestamp=None, headers=[])
            futs.append(await p.send_batch(b, topic, partition=0))
            if rate:
                ahead = (i + chunk - start) / rate - (time.perf_counter() - t0)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await asyncio.gather(*futs)
    finally:
        await p.stop()


async def read_all(bootstrap: str, topic: str, until: int, timeout: float = 300.0) -> list[Any]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=50)
    await c.start()
    out: list[Any] = []
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        deadline = time.monotonic() + timeout
        while len(out) < until and time.monotonic() < deadline:
            batch = await c.getmany(timeout_ms=200, max_records=100_000)
            for recs in batch.values():
                out.extend(recs)
    finally:
        await c.stop()
    return out


def rate_of(recs: list[Any]) -> float:
    ts = np.array([r.timestamp for r in recs], dtype=np.float64)
    span = (ts.max() - ts.min()) / 1000.0
    return len(recs) / span if span > 0 else float("inf")


def write_config(root: Path, bootstrap: str, t: dict[str, str]) -> Path:
    g = np.random.default_rng(0)
    x = g.random(100_000)
    np.savez(root / "train.npz", x=x, y=(x >= 0.5).astype(int))
    (root / "schedule.json").write_text(json.dumps({"rounds": [ROUND], "repeat_last": True}))
    cfg = root / "everlast.toml"
    cfg.write_text(
        f'[broker]\nbootstrap_servers = "{bootstrap}"\n'
        f'[topics]\nqueries = "{t["q"]}"\nlabels = "{t["l"]}"\ndead_letters = "{t["dl"]}"\npartitions = 1\n'
        f'[consumer]\ngroup_id = "{t["g"]}"\nsession_timeout_ms = 2000\nheartbeat_interval_ms = 200\n'
        f"fetch_max_wait_ms = 20\nmax_records = {MAX_RECORDS}\n"
        f'[checkpoint]\ndir = "{root / "ck"}"\nevery_queries = 50000\nevery_seconds = 5.0\n'
        '[metrics]\nport = 0\n[log]\nlevel = "WARNING"\n'
        f'[[models]]\nid = "bench"\ndata = "{root / "train.npz"}"\nschedule = "{root / "schedule.json"}"\nseed = 1\n'
    )
    return cfg


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()


async def run(n: int) -> dict[str, Any]:
    with EmbeddedBroker() as b, tempfile.TemporaryDirectory() as tmp:
        u = uuid.uuid4().hex[:8]
        t = {"q": f"q-{u}", "l": f"l-{u}", "dl": f"dl-{u}", "g": f"g-{u}", "pin": f"pin-{u}", "pout": f"pout-{u}"}
        await create(b.bootstrap, [t["q"], t["l"], t["dl"], t["pin"], t["pout"]])
        env = {**os.environ}
        _say(f"producing {n:,} queries for each side ...")
        await produce(b.bootstrap, t["q"], n)
        await produce(b.bootstrap, t["pin"], n)

        _say("pass-through ...")
        pt = subprocess.Popen([sys.executable, "-m", "bench.passthrough", "--bootstrap", b.bootstrap, "--src",
                               t["pin"], "--dst", t["pout"], "--group", f"pg-{u}", "--max-records",
                               str(MAX_RECORDS)], env=env)
        pass_qps = rate_of(await read_all(b.bootstrap, t["pout"], n))
        stop(pt)

        _say("daemon ...")
        cfg = write_config(Path(tmp), b.bootstrap, t)
        d = subprocess.Popen([sys.executable, "-m", "cli", "serve", "--config", str(cfg)], env=env,
                             stderr=subprocess.DEVNULL)
        try:
            daemon_qps = rate_of(await read_all(b.bootstrap, t["l"], n))
            _say("latency at half the daemon's throughput ...")
            m = int(min(daemon_qps * 0.5, 50_000) * 5)  # about five seconds of traffic
            await produce(b.bootstrap, t["q"], m, start=n, rate=daemon_qps * 0.5)
            recs = await read_all(b.bootstrap, t["l"], n + m)
        finally:
            stop(d)
        qs = await read_all(b.bootstrap, t["q"], n + m)
        sent = {msgpack.unpackb(r.value)["id"]: r.timestamp for r in qs}
        lat = np.array([r.timestamp - sent[msgpack.unpackb(r.value)["id"]] for r in recs
                        if msgpack.unpackb(r.value)["id"] >= n], dtype=np.float64)
    return {
        "daemon_qps": daemon_qps,
        "passthrough_qps": pass_qps,
        "ratio": daemon_qps / pass_qps,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "queries": n,
        "latency_samples": int(lat.size),
        "latency_rate_qps": daemon_qps * 0.5,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=300_000)
    ap.add_argument("--quick", action="store_true", help="50,000 queries (a smoke run)")
    a = ap.parse_args(argv)
    print(json.dumps(asyncio.run(run(50_000 if a.quick else a.queries))))


if __name__ == "__main__":
    main()
