"""The daemon serving a planned GenericBBL schedule at its real size, through Kafka on the embedded broker.

    python -m bench.planned [--epsilon 8] [--alpha 0.1] [--round2 20000] [--quick] [--watchdog SECONDS]

The model is what ``everlast plan --epsilon E --alpha A`` plans and ``everlast serve`` runs for
``targets = { epsilon = E, delta = 1e-6, alpha = A }`` (the default burn-rate signal included): its
training file has exactly n_required rows (``train.npz``: x uniform on [0, 1), y = [x >= 1/2]), so
the daemon plans, refuses nothing and builds round 1 at start. Then, against one embedded broker:

1. ``passthrough_qps``: ``bench.passthrough`` (consume, msgpack decode/encode, ``send_batch``,
   commit) over R_1 records, the raw aiokafka baseline, measured in the same run;
2. ``ready_s``: from the daemon's start to its first label (it plans, reads n_required rows and
   builds round 1 first; R_1 queries are waiting on the topic);
3. ``daemon_qps``: round 1's R_1 labels over the span of their broker timestamps, read back through
   a plain aiokafka consumer (every label of the round: the client side at this size is part of
   what is measured); ``ratio`` = daemon_qps / passthrough_qps;
4. ``transition_s``: the gap between round 1's last label and round 2's first;
5. ``p50_ms`` and ``p99_ms``: an open-loop stream at half ``daemon_qps`` for about five seconds in
   round 2 (label timestamp - query timestamp);
6. ``peak_rss_bytes``: the daemon's VmHWM at the end;
7. ``identical``: the same queries answered in-process by ``Predictor.create`` on the same schedule,
   data and seed (the daemon's ``ModelRuntime``), every label record compared byte for byte.

``--quick`` serves a small planned target (epsilon 40, alpha 0.45) for CI. The last line is one JSON
object with ``ready_s``, ``peak_rss_bytes``, ``daemon_qps``, ``passthrough_qps``, ``ratio``,
``transition_s``, ``p50_ms``, ``p99_ms`` and ``identical``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from numpy.typing import NDArray

from bench.e2e import BULK_FETCH_WAIT_MS, BenchFailed, Side, create, rate_of, read_all
from everlast.daemon.broker import EmbeddedBroker

MAX_RECORDS = 5000
QUICK = {"epsilon": 40.0, "alpha": 0.45, "round2": 5000}


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def queries(n: int, seed: int = 7) -> NDArray[np.float64]:
    return np.random.default_rng([seed, 11]).random(n)


async def produce(bootstrap: str, topic: str, x: NDArray[np.float64], start: int, rate: float | None = None) -> None:
    """Queries {"id": start + j, "x": x[j]} (msgpack), in batches of 5,000 (500 when paced at ``rate``)."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=1, max_batch_size=1 << 19)
    await p.start()
    try:
        chunk = 500 if rate else 5000
        t0 = time.perf_counter()
        futs = []
        xs = x.tolist()
        for i in range(0, len(xs), chunk):
            b = p.create_batch()
            for j in range(i, min(i + chunk, len(xs))):
                v = msgpack.packb({"id": start + j, "x": xs[j]})
                if b.append(key=b"planned", value=v, timestamp=None, headers=[]) is None:
                    futs.append(await p.send_batch(b, topic, partition=0))
                    b = p.create_batch()
                    b.append(key=b"planned", value=v, timestamp=None, headers=[])
            futs.append(await p.send_batch(b, topic, partition=0))
            if len(futs) > 200:
                await asyncio.gather(*futs)
                futs.clear()
            if rate:
                ahead = (i + chunk) / rate - (time.perf_counter() - t0)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await asyncio.gather(*futs)
    finally:
        await p.stop()


class Labels:
    """Every label record of the labels topic, kept as arrays (id -> value bytes, round, timestamp)."""

    def __init__(self, size: int) -> None:
        self.value: list[bytes | None] = [None] * size
        self.round = np.full(size, -1, np.int64)
        self.ts = np.zeros(size, np.int64)
        self.count = 0

    async def read(self, bootstrap: str, topic: str, until: int, deadline: float, watch: list[Side]) -> None:
        """Read on from where the last call stopped until ``until`` distinct ids have arrived."""
        c = getattr(self, "_c", None)
        if c is None:
            c = self._c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                           fetch_max_wait_ms=BULK_FETCH_WAIT_MS)
            await c.start()
            tp = TopicPartition(topic, 0)
            c.assign([tp])
            await c.seek_to_beginning(tp)
        last = time.monotonic()
        while self.count < until:
            for s in watch:
                s.check()
            if time.monotonic() > deadline:
                raise BenchFailed(f"watchdog: {self.count:,} of {until:,} labels before the deadline")
            if time.monotonic() - last > 120.0:
                raise BenchFailed(f"no label for 120 s after {self.count:,} of {until:,}")
            batch = await c.getmany(timeout_ms=200, max_records=100_000)
            for recs in batch.values():
                if recs:
                    last = time.monotonic()
                for r in recs:
                    d = msgpack.unpackb(r.value)
                    i = int(d["id"])
                    if 0 <= i < len(self.value) and self.value[i] is None:
                        self.value[i] = r.value
                        self.round[i] = int(d.get("round", 0))
                        self.ts[i] = r.timestamp
                        self.count += 1

    async def close(self) -> None:
        c = getattr(self, "_c", None)
        if c is not None:
            await c.stop()


def write_config(root: Path, bootstrap: str, t: dict[str, str], epsilon: float, alpha: float) -> Path:
    cfg = root / "everlast.toml"
    cfg.write_text(
        f'[broker]\nbootstrap_servers = "{bootstrap}"\n'
        f'[topics]\nqueries = "{t["q"]}"\nlabels = "{t["l"]}"\ndead_letters = "{t["dl"]}"\npartitions = 1\n'
        f'[consumer]\ngroup_id = "{t["g"]}"\nsession_timeout_ms = 10000\nheartbeat_interval_ms = 1000\n'
        f"fetch_max_wait_ms = 20\nmax_records = {MAX_RECORDS}\n"
        f'[checkpoint]\ndir = "{root / "ck"}"\nevery_queries = 1000000\nevery_seconds = 30.0\n'
        '[metrics]\nport = 0\n[log]\nlevel = "INFO"\n'
        f'[[models]]\nid = "planned"\ndata = "{root / "train.npz"}"\nseed = 1\n'
        f"targets = {{ epsilon = {epsilon}, delta = 1e-6, alpha = {alpha} }}\n"
    )
    return cfg


def plan_size(epsilon: float, alpha: float) -> tuple[int, int]:
    """(n_required, R_1) as ``everlast plan`` reports them (the daemon's defaults)."""
    from click.testing import CliRunner

    from everlast.cli.plan import plan_cmd

    res = CliRunner().invoke(plan_cmd, ["--epsilon", str(epsilon), "--alpha", str(alpha), "--json", "--no-ablation",
                                        "--no-designs"], catch_exceptions=False)
    d = json.loads(res.output)
    return int(d["n_required"]), int(d["schedule"][0]["R"])


def in_process(cfg_path: Path, x: NDArray[np.float64]) -> tuple[list[bytes], NDArray[np.int64]]:
    """The label records the same model answers in-process (the daemon's ModelRuntime and engine)."""
    from everlast.daemon.config import load
    from everlast.daemon.model import ModelRuntime
    from everlast.daemon.wire import encode_label
    from everlast.engine.phases import Phase
    from everlast.engine.predictor import Predictor

    rt = ModelRuntime.prepare(load(cfg_path).models[0])
    p = rt.create_engine()
    assert isinstance(p, Predictor)
    out: list[bytes] = []
    rounds = np.zeros(x.size, np.int64)
    pos = 0
    while pos < x.size:
        if p.phase is Phase.TRANSITION_DUE:  # as Predictor.answer_all
            p.transition()
        res = p.answer(x[pos:pos + 1_000_000])
        labels = res.labels.tolist()
        for k, lab in enumerate(labels):
            status = "ok" if lab >= 0 else "refused"
            out.append(encode_label(pos + k, lab if lab >= 0 else None, status, res.round, None, "msgpack"))
        rounds[pos:pos + res.consumed] = res.round
        pos += res.consumed
    return out, rounds


def vm_hwm(pid: int) -> int:
    """Peak resident set size of a live process (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


async def run(epsilon: float, alpha: float, round2: int, watchdog_s: float, root: Path) -> dict[str, Any]:
    load_before = os.getloadavg()
    deadline = time.monotonic() + watchdog_s
    _say(f"planning epsilon = {epsilon:g}, alpha = {alpha:g} as `everlast plan` does ...")
    n, R1 = plan_size(epsilon, alpha)
    _say(f"n_required = {n:,}, R_1 = {R1:,}: writing the training file ...")
    g = np.random.default_rng(20261202)
    xt = g.random(n)
    np.savez(root / "train.npz", x=xt, y=(xt >= 0.5).astype(np.int8))
    del xt
    lat_n = 0
    sides: list[Side] = []
    u = uuid.uuid4().hex[:8]
    t = {"q": f"q-{u}", "l": f"l-{u}", "dl": f"dl-{u}", "g": f"g-{u}", "pin": f"pin-{u}", "pout": f"pout-{u}"}
    first = R1 + round2
    x = queries(first)
    labels = Labels(first + 400_000)
    with EmbeddedBroker() as b:
        try:
            await create(b.bootstrap, [t["q"], t["l"], t["dl"], t["pin"], t["pout"]])
            _say(f"producing {R1:,} records for the pass-through ...")
            await produce(b.bootstrap, t["pin"], x[:R1], 0)
            pt = Side("pass-through", [sys.executable, "-m", "bench.passthrough", "--bootstrap", b.bootstrap,
                                       "--src", t["pin"], "--dst", t["pout"], "--group", f"pg-{u}",
                                       "--max-records", str(MAX_RECORDS)], root / "passthrough.stderr")
            sides.append(pt)
            recs = await read_all(b.bootstrap, t["pout"], R1, deadline, [pt])
            pass_qps = rate_of(recs)
            del recs
            pt.stop()
            _say(f"pass-through: {pass_qps:,.0f} records/s; producing {first:,} queries for the daemon ...")
            await produce(b.bootstrap, t["q"], x, 0)
            cfg = write_config(root, b.bootstrap, t, epsilon, alpha)
            _say("daemon ...")
            started_ms = time.time() * 1000.0
            d = Side("daemon", [sys.executable, "-m", "everlast.cli", "serve", "--config", str(cfg)],
                     root / "daemon.stderr")
            sides.append(d)
            await labels.read(b.bootstrap, t["l"], 1, deadline, [d])
            ready_s = (int(labels.ts[: first][labels.round[: first] >= 0].min()) - started_ms) / 1000.0
            _say(f"ready after {ready_s:.1f} s; reading round 1's {R1:,} labels ...")
            await labels.read(b.bootstrap, t["l"], first, deadline, [d])
            r1 = labels.round[:first] == 1
            daemon_qps = rate_of([_Ts(int(v)) for v in labels.ts[:first][r1]])
            r2 = labels.round[:first] == 2
            transition_s = ((int(labels.ts[:first][r2].min()) - int(labels.ts[:first][r1].max())) / 1000.0
                            if r2.any() else float("nan"))
            rate = daemon_qps * 0.5
            lat_n = int(min(rate, 50_000) * 5)
            _say(f"daemon: {daemon_qps:,.0f} labels/s; latency at {rate:,.0f} q/s ({lat_n:,} queries) ...")
            xl = queries(lat_n, seed=8)
            await produce(b.bootstrap, t["q"], xl, first, rate=rate)
            await labels.read(b.bootstrap, t["l"], first + lat_n, deadline, [d])
            peak = vm_hwm(d.proc.pid)
            qc = AIOKafkaConsumer(bootstrap_servers=b.bootstrap, enable_auto_commit=False,
                                  fetch_max_wait_ms=BULK_FETCH_WAIT_MS)
            await qc.start()
            try:
                tp = TopicPartition(t["q"], 0)
                qc.assign([tp])
                qc.seek(tp, first)
                sent: dict[int, int] = {}
                while len(sent) < lat_n:
                    got = await qc.getmany(timeout_ms=500, max_records=100_000)
                    for rs in got.values():
                        for r in rs:
                            sent[int(msgpack.unpackb(r.value)["id"])] = r.timestamp
            finally:
                await qc.stop()
            await labels.close()
            code = d.stop()
            if code != 0:
                raise BenchFailed(f"daemon stopped with code {code}")
        except BaseException:
            for s in sides:
                s.stop()
                _say(s.tail())
            raise
    lat = np.array([labels.ts[i] - sent[i] for i in range(first, first + lat_n)], dtype=np.float64)
    _say("answering the same queries in-process ...")
    allx = np.concatenate([x, queries(lat_n, seed=8)])
    want, _ = in_process(cfg, allx)
    same = sum(1 for i in range(allx.size) if labels.value[i] == want[i])
    return {
        "ready_s": ready_s,
        "peak_rss_bytes": peak,
        "daemon_qps": daemon_qps,
        "passthrough_qps": pass_qps,
        "ratio": daemon_qps / pass_qps,
        "transition_s": transition_s,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "identical": same == allx.size,
        "labels_compared": int(allx.size),
        "labels_identical": int(same),
        "epsilon": epsilon,
        "alpha": alpha,
        "n_required": n,
        "R_1": R1,
        "round1_labels": int(r1.sum()),
        "round2_labels": int((labels.round == 2).sum()),
        "latency_rate_qps": rate,
        "load_avg_1m": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }


class _Ts:
    __slots__ = ("timestamp",)

    def __init__(self, ts: int) -> None:
        self.timestamp = ts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epsilon", type=float, default=8.0)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--round2", type=int, default=20_000,
                    help="queries of round 2 sent with round 1's (default 20,000)")
    ap.add_argument("--quick", action="store_true", help="a small planned target (epsilon 40, alpha 0.45), for CI")
    ap.add_argument("--watchdog", type=float, default=3600.0, help="fail after this many seconds (default 3600)")
    a = ap.parse_args(argv)
    eps, alpha, r2 = ((QUICK["epsilon"], QUICK["alpha"], int(QUICK["round2"])) if a.quick
                      else (a.epsilon, a.alpha, a.round2))
    with tempfile.TemporaryDirectory(prefix="everlast-planned-") as tmp:
        try:
            out = asyncio.run(run(eps, alpha, r2, a.watchdog, Path(tmp)))
        except BenchFailed as exc:
            _say(f"bench.planned failed: {exc}")
            sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
