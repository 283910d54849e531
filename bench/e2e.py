"""End-to-end daemon throughput and latency, against a raw aiokafka pass-through on the same broker.

    python -m bench.e2e [--queries N] [--quick] [--watchdog SECONDS]

Both run as subprocesses against one embedded broker: the daemon (``everlast serve``, one model of
the default design) and ``bench.passthrough`` (consume, msgpack decode/encode, ``send_batch``,
commit; the same ``max_records``). Throughput: N queries produced up front, then (last - first)
broker timestamp of the outputs; the two sides alternate ``--repeats`` times on fresh topics and
the medians are reported (a shared machine's load moves between runs). Each side's CPU time per
record (user + system, from the first output to the last) is reported too: it is steadier than
throughput when other work shares the cores. Latency: an open-loop stream at half the daemon's
throughput, latency = label timestamp - query timestamp (same clock, millisecond resolution).
Prints one JSON object on stdout (progress on stderr), with the load average before and after.

It cannot hang or fail silently: each side's stderr goes to a file that is printed when the run
fails, a subprocess that exits early fails the run at once, and a watchdog bounds every wait.
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

from everlast.daemon.broker import EmbeddedBroker
from everlast.engine.planner.fill import fill_tests
from everlast.engine.schedule import RoundSpec, Schedule

MAX_RECORDS = 5000
BULK_FETCH_WAIT_MS = 100
"""The readers' fetch wait. The embedded broker (Tansu) walks a partition's record batches for each
fetch and answers empty once that takes longer than the fetch's max wait: at 5 ms a partition of
~13,000 batches (5·10^6 labels in the producer's 16 kB batches) came back empty at every fetch, so a
5 ms reader never read a planned round's labels. The records' broker timestamps, not the reader's
clock, give every rate and latency here, so a longer wait changes no figure."""
# One long round of the default design (its tests filled in as `everlast complete` does): no
# transition during the run, so the figure is the steady-state hot path.
ROUND = {"T": 2000, "lam": 20, "R": 10**9, "c": 10**8, "eps_bt": 0.5, "delta_bt": 1e-8, "alpha": 0.1,
         "m_S": 1000, "m_D": 40_000}


class BenchFailed(RuntimeError):
    """The run did not complete; the message says where, with the subprocesses' stderr."""


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Side:
    """A subprocess with its stderr kept in a file (printed if the run fails)."""

    def __init__(self, name: str, argv: list[str], log: Path) -> None:
        self.name, self.log = name, log
        self._fh = log.open("wb")
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._fh, env={**os.environ})

    def cpu_s(self) -> float:
        """User + system CPU seconds of the process so far (Linux /proc; 0 elsewhere)."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise BenchFailed(f"{self.name} exited early with code {code}")

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.send_signal(signal.SIGUSR1)  # the daemon dumps every thread's stack
                time.sleep(1.0)
                self.proc.kill()
                self.proc.wait()
        self._fh.close()
        return self.proc.returncode

    def tail(self, n: int = 6000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.name} stderr ({self.log}) ---\n{text[-n:]}"


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


async def read_all(bootstrap: str, topic: str, until: int, deadline: float, watch: list[Side],
                   cpu: list[float] | None = None) -> list[Any]:
    """Every record of ``topic`` until ``until`` have arrived; fails (never returns a partial list)
    when a watched subprocess exits or the watchdog's deadline passes. ``cpu`` receives the first
    watched process's CPU seconds when the first record arrived and when the last did."""
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=BULK_FETCH_WAIT_MS)
    await c.start()
    out: list[Any] = []
    try:
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        await c.seek_to_beginning(tp)
        while len(out) < until:
            for s in watch:
                s.check()
            if time.monotonic() > deadline:
                raise BenchFailed(f"watchdog: {len(out):,} of {until:,} records on {topic} before the deadline")
            batch = await c.getmany(timeout_ms=200, max_records=100_000)
            for recs in batch.values():
                if cpu is not None and not out and recs and watch:
                    cpu.append(watch[0].cpu_s())
                out.extend(recs)
        if cpu is not None and watch:
            cpu.append(watch[0].cpu_s())
    finally:
        await c.stop()
    return out


def rate_of(recs: list[Any]) -> float:
    ts = np.array([r.timestamp for r in recs], dtype=np.float64)
    span = (ts.max() - ts.min()) / 1000.0
    return len(recs) / span if span > 0 else float("inf")


def write_config(root: Path, bootstrap: str, t: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    g = np.random.default_rng(0)
    x = g.random(100_000)
    np.savez(root / "train.npz", x=x, y=(x >= 0.5).astype(int))
    sched = Schedule((fill_tests(RoundSpec.from_dict(ROUND)),))
    (root / "schedule.json").write_text(json.dumps(sched.to_dict()))
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


async def run(n: int, repeats: int, watchdog_s: float, root: Path) -> dict[str, Any]:
    load_before = os.getloadavg()
    deadline = time.monotonic() + watchdog_s
    sides: list[Side] = []
    runs: list[dict[str, float]] = []
    with EmbeddedBroker() as b:
        try:
            for r in range(repeats):
                u = uuid.uuid4().hex[:8]
                t = {"q": f"q-{u}", "l": f"l-{u}", "dl": f"dl-{u}", "g": f"g-{u}", "pin": f"pin-{u}",
                     "pout": f"pout-{u}"}
                await create(b.bootstrap, [t["q"], t["l"], t["dl"], t["pin"], t["pout"]])
                _say(f"run {r + 1}/{repeats}: producing {n:,} queries for each side ...")
                await produce(b.bootstrap, t["q"], n)
                await produce(b.bootstrap, t["pin"], n)

                _say("pass-through ...")
                pt = Side("pass-through", [sys.executable, "-m", "bench.passthrough", "--bootstrap", b.bootstrap,
                                           "--src", t["pin"], "--dst", t["pout"], "--group", f"pg-{u}",
                                           "--max-records", str(MAX_RECORDS)], root / f"passthrough-{r}.stderr")
                sides.append(pt)
                pt_cpu: list[float] = []
                pass_qps = rate_of(await read_all(b.bootstrap, t["pout"], n, deadline, [pt], pt_cpu))
                pt.stop()

                _say("daemon ...")
                cfg = write_config(root / f"run-{r}", b.bootstrap, t)
                d = Side("daemon", [sys.executable, "-m", "everlast.cli", "serve", "--config", str(cfg)],
                         root / f"daemon-{r}.stderr")
                sides.append(d)
                d_cpu: list[float] = []
                daemon_qps = rate_of(await read_all(b.bootstrap, t["l"], n, deadline, [d], d_cpu))
                runs.append({"daemon_qps": daemon_qps, "passthrough_qps": pass_qps, "ratio": daemon_qps / pass_qps,
                             "daemon_cpu_us": 1e6 * (d_cpu[1] - d_cpu[0]) / n,
                             "passthrough_cpu_us": 1e6 * (pt_cpu[1] - pt_cpu[0]) / n})
                if r < repeats - 1:
                    if d.stop() != 0:
                        raise BenchFailed("daemon did not stop cleanly")
                    continue
                _say("latency at half the daemon's throughput ...")
                rate = float(np.median([x["daemon_qps"] for x in runs])) * 0.5
                m = int(min(rate, 50_000) * 5)  # about five seconds of traffic
                await produce(b.bootstrap, t["q"], m, start=n, rate=rate)
                recs = await read_all(b.bootstrap, t["l"], n + m, deadline, [d])
                code = d.stop()
                if code != 0:
                    raise BenchFailed(f"daemon stopped with code {code}")
                qs = await read_all(b.bootstrap, t["q"], n + m, deadline, [])
        except BaseException:
            for s in sides:
                s.stop()
                _say(s.tail())
            raise
    sent = {msgpack.unpackb(r.value)["id"]: r.timestamp for r in qs}
    lat = np.array([r.timestamp - sent[i] for r in recs if (i := msgpack.unpackb(r.value)["id"]) >= n],
                   dtype=np.float64)

    def med(k: str) -> float:
        return float(np.median([x[k] for x in runs]))

    return {
        "daemon_qps": med("daemon_qps"),
        "passthrough_qps": med("passthrough_qps"),
        "ratio": med("ratio"),
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "queries": n,
        "repeats": repeats,
        "daemon_cpu_us_per_record": med("daemon_cpu_us"),
        "passthrough_cpu_us_per_record": med("passthrough_cpu_us"),
        "cpu_ratio": float(np.median([x["passthrough_cpu_us"] / x["daemon_cpu_us"] for x in runs])),
        "runs": runs,
        "latency_samples": int(lat.size),
        "latency_rate_qps": rate,
        "load_avg_1m": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=300_000)
    ap.add_argument("--quick", action="store_true", help="50,000 queries, one run (a smoke run)")
    ap.add_argument("--repeats", type=int, default=3, help="runs of each side, alternating (default 3)")
    ap.add_argument("--watchdog", type=float, default=600.0, help="fail after this many seconds (default 600)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="everlast-e2e-") as tmp:
        try:
            out = asyncio.run(run(50_000 if a.quick else a.queries, 1 if a.quick else a.repeats, a.watchdog, Path(tmp)))
        except BenchFailed as exc:
            _say(f"bench.e2e failed: {exc}")
            sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
