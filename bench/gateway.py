"""The gateway's throughput and latency, against direct Kafka produce/consume through the same daemon.

    python -m bench.gateway [--requests N] [--quick] [--concurrency K] [--watchdog SECONDS]

One embedded broker, one daemon (``everlast serve``, the model of ``bench.e2e``: one long round of the
default design) and one gateway (``everlast gateway``), each a subprocess. Two clients take turns on
fresh query ids, each with K requests in flight, 100 queries a request:

- direct: what ``everlast produce`` and ``everlast consume`` do, in one process -- produce the batch to
  the queries topic (murmur2, the model id as key, the client header set), read the labels topic and
  match the labels by id;
- gateway: ``POST /v1/models/bench/predict`` with the 100 queries (aiohttp's client, keep-alive).

Throughput: queries answered per second over N requests (the median of ``--repeats`` alternations).
Latency: requests at half the gateway's throughput, open loop (sent on a fixed schedule), from
sending a request to its response, through the gateway, then direct, then through the gateway again
with the daemon stopped and a bare echo answering in its place (``bench.passthrough --from-end``: no
engine, journal or marks; the same topics, with their history): ``echo_*`` is the floor of the path
on this broker and machine, what latency no daemon could get under. The last line is one JSON
object: ``gateway_qps``, ``direct_qps``, ``ratio`` (gateway / direct), ``p50_ms``, ``p99_ms``,
``direct_p50_ms``, ``direct_p99_ms``, ``echo_p50_ms``, ``echo_p99_ms`` and the load average before
and after (the machine may be shared).
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
from numpy.typing import NDArray

from bench.e2e import MAX_RECORDS, BenchFailed, Side, _say, create, write_config
from everlast.daemon.broker import EmbeddedBroker, free_port

BATCH = 100
MODEL = "bench"


async def _wait_http(url: str, deadline: float, sides: list[Side]) -> None:
    import aiohttp

    async with aiohttp.ClientSession() as s:
        while True:
            for sd in sides:
                sd.check()
            if time.monotonic() > deadline:
                raise BenchFailed(f"watchdog: {url} never answered 200")
            try:
                async with s.get(url) as r:
                    if r.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)


class Direct:
    """Produce batches keyed by the model, read labels from the labels topic, match by id."""

    def __init__(self, bootstrap: str, queries: str, labels: str) -> None:
        self.bootstrap, self.queries, self.labels = bootstrap, queries, labels
        self.waiting: dict[str, asyncio.Future[None]] = {}
        self.left: dict[str, int] = {}

    async def __aenter__(self) -> Direct:
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
        from aiokafka.partitioner import DefaultPartitioner

        self.p = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=0,
                                  partitioner=DefaultPartitioner())
        self.c = AIOKafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5)
        await self.p.start()
        await self.c.start()
        tp = TopicPartition(self.labels, 0)
        self.c.assign([tp])
        await self.c.seek_to_end(tp)
        await self.c.position(tp)
        self.task = asyncio.create_task(self._read())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.p.stop()
        await self.c.stop()

    async def _read(self) -> None:
        while True:
            for recs in (await self.c.getmany(timeout_ms=100, max_records=50_000)).values():
                for r in recs:
                    rid = msgpack.unpackb(r.value, raw=False)["id"]
                    req = rid.rsplit("-", 1)[0] if isinstance(rid, str) else None
                    if req in self.left:
                        self.left[req] -= 1
                        if self.left[req] == 0:
                            del self.left[req]
                            self.waiting.pop(req).set_result(None)

    async def request(self, req: str, x: list[float]) -> None:
        fut = asyncio.get_running_loop().create_future()
        self.waiting[req] = fut
        self.left[req] = len(x)
        b = self.p.create_batch()
        hdr = [("everlast-client", b"bench")]
        for k, v in enumerate(x):
            b.append(key=MODEL.encode(), value=msgpack.packb({"id": f"{req}-{k}", "x": v}), timestamp=None,
                     headers=hdr)
        await (await self.p.send_batch(b, self.queries, partition=0))
        await fut


class Http:
    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = f"{url}/v1/models/{MODEL}/predict", key

    async def __aenter__(self) -> Http:
        import aiohttp

        self.s = aiohttp.ClientSession(headers={"Authorization": f"Bearer {self.key}"},
                                       connector=aiohttp.TCPConnector(limit=256))
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.s.close()

    async def request(self, req: str, x: list[float]) -> None:
        body = json.dumps({"queries": [{"id": f"{req}-{k}", "x": v} for k, v in enumerate(x)]})
        async with self.s.post(self.url, data=body, headers={"Content-Type": "application/json"}) as r:
            out = await r.json()
            if r.status != 200 or len(out["labels"]) != len(x):
                raise BenchFailed(f"gateway answered {r.status}: {str(out)[:300]}")


async def closed_loop(client: Any, requests: int, concurrency: int, g: np.random.Generator, tag: str,
                      sides: list[Side]) -> float:
    """Queries per second with ``concurrency`` requests in flight, over ``requests`` requests."""
    xs = g.random((requests, BATCH)).tolist()
    nxt = iter(range(requests))

    async def worker() -> None:
        for i in nxt:
            await client.request(f"{tag}{i}", xs[i])

    t0 = time.perf_counter()
    tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
    while not all(t.done() for t in tasks):
        for s in sides:
            s.check()
        await asyncio.wait(tasks, timeout=1.0)
    for t in tasks:
        t.result()
    return requests * BATCH / (time.perf_counter() - t0)


async def open_loop(client: Any, rate_rps: float, seconds: float, g: np.random.Generator, tag: str) -> list[float]:
    """Latencies (ms) of requests sent on a fixed schedule of ``rate_rps`` requests a second."""
    n = max(20, int(rate_rps * seconds))
    xs = g.random((n, BATCH)).tolist()
    lat: list[float] = []

    async def one(i: int) -> None:
        t = time.perf_counter()
        await client.request(f"{tag}{i}", xs[i])
        lat.append(1000 * (time.perf_counter() - t))

    t0 = time.perf_counter()
    tasks = []
    for i in range(n):
        ahead = t0 + i / rate_rps - time.perf_counter()
        if ahead > 0:
            await asyncio.sleep(ahead)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    return lat


class Gateway(Side):
    """``everlast gateway`` on ``cfg``'s topics, with one key and no rate limit of its own."""

    def __init__(self, cfg: Path, key: str, log: Path, name: str = "gateway") -> None:
        from everlast.daemon.gateway.auth import key_hash

        self.port, mport = free_port(), free_port()
        env = {"EVERLAST_GATEWAY__KEYS": json.dumps([{"client": "bench", "sha256": key_hash(key)}]),
               "EVERLAST_GATEWAY__MAX_QUERIES": str(BATCH), "EVERLAST_GATEWAY__CLIENT_QPS": "1e9",
               "EVERLAST_GATEWAY__CLIENT_BURST": str(10**9), "EVERLAST_GATEWAY__CLIENT_INFLIGHT": "1024",
               "EVERLAST_GATEWAY__TIMEOUT_S": "60"}
        os.environ.update(env)
        try:
            super().__init__(name, [sys.executable, "-m", "everlast.cli", "gateway", "--config", str(cfg),
                                         "--port", str(self.port), "--metrics-port", str(mport)], log)
        finally:
            for k in env:
                os.environ.pop(k, None)



async def echo_latency(bootstrap: str, t: dict[str, str], url: str, key: str, rate: float, seconds: float,
                       g: np.random.Generator, deadline: float, sides: list[Side], root: Path) -> NDArray[np.float64]:
    """Latencies (ms) at ``rate`` requests a second through the same gateway, topics and broker, the
    daemon replaced by a bare echo (``bench.passthrough --from-end``: decode, reply, produce with
    acks; no engine, journal, marks or commit): the floor of the path the daemon sits in (HTTP, the
    gateway, two broker hops on topics with the same history), measured on the same machine."""
    echo = Side("echo", [sys.executable, "-m", "bench.passthrough", "--bootstrap", bootstrap, "--src", t["q"],
                         "--dst", t["l"], "--group", "-", "--max-records", str(MAX_RECORDS), "--from-end"],
                root / "echo.stderr")
    sides.append(echo)
    while b"ready" not in echo.log.read_bytes():
        echo.check()
        if time.monotonic() > deadline:
            raise BenchFailed("watchdog: the echo never positioned itself")
        await asyncio.sleep(0.1)
    async with Http(url, key) as http:
        await closed_loop(http, 20, 4, g, "we", sides)  # warm-up, as for the daemon's paths
        return np.array(await open_loop(http, rate, seconds, g, "elat-"), dtype=np.float64)


async def run(requests: int, repeats: int, concurrency: int, latency_s: float, watchdog_s: float,
              root: Path) -> dict[str, Any]:
    from everlast.daemon.gateway.auth import new_key

    load_before = os.getloadavg()
    deadline = time.monotonic() + watchdog_s
    sides: list[Side] = []
    g = np.random.default_rng(0)
    with EmbeddedBroker() as b:
        try:
            u = uuid.uuid4().hex[:8]
            t = {"q": f"q-{u}", "l": f"l-{u}", "dl": f"dl-{u}", "g": f"g-{u}"}
            await create(b.bootstrap, [t["q"], t["l"], t["dl"]])
            cfg = write_config(root, b.bootstrap, t)
            d = Side("daemon", [sys.executable, "-m", "everlast.cli", "serve", "--config", str(cfg)],
                     root / "daemon.stderr")
            sides.append(d)
            key = new_key()
            gw = Gateway(cfg, key, root / "gateway.stderr")
            sides.append(gw)
            url = f"http://127.0.0.1:{gw.port}"
            _say("waiting for the daemon and the gateway ...")
            await _wait_http(f"{url}/readyz", deadline, sides)
            runs = []
            async with Direct(b.bootstrap, t["q"], t["l"]) as direct, Http(url, key) as http:
                # warm-up: the daemon's first fetches, both paths' connections
                await closed_loop(direct, 20, 4, g, "wd", sides)
                await closed_loop(http, 20, 4, g, "wg", sides)
                for r in range(repeats):
                    _say(f"run {r + 1}/{repeats}: {requests} requests of {BATCH} queries, {concurrency} in flight ...")
                    cpu0 = (d.cpu_s(), gw.cpu_s(), time.process_time())
                    dq = await closed_loop(direct, requests, concurrency, g, f"d{r}-", sides)
                    cpu1 = (d.cpu_s(), gw.cpu_s(), time.process_time())
                    gq = await closed_loop(http, requests, concurrency, g, f"g{r}-", sides)
                    cpu2 = (d.cpu_s(), gw.cpu_s(), time.process_time())
                    per = 1e6 / (requests * BATCH)
                    cpu = {"direct": {"daemon": per * (cpu1[0] - cpu0[0]), "client": per * (cpu1[2] - cpu0[2])},
                           "gateway": {"daemon": per * (cpu2[0] - cpu1[0]), "gateway": per * (cpu2[1] - cpu1[1]),
                                       "client": per * (cpu2[2] - cpu1[2])}}
                    runs.append({"direct_qps": dq, "gateway_qps": gq, "ratio": gq / dq, "cpu_us_per_query": cpu})
                    _say(f"  direct {dq:,.0f} queries/s, gateway {gq:,.0f} queries/s")
                gq = float(np.median([x["gateway_qps"] for x in runs]))
                rate = gq / 2 / BATCH
                _say(f"latency at half the gateway's throughput ({rate:.1f} requests/s) ...")
                lat = np.array(await open_loop(http, rate, latency_s, g, "lat-"), dtype=np.float64)
                dlat = np.array(await open_loop(direct, rate, latency_s, g, "dlat-"), dtype=np.float64)
            sides.remove(d)
            if d.stop() not in (0, None):
                raise BenchFailed("the daemon did not stop cleanly")
            _say("the path's floor: the same rate, the daemon replaced by a bare echo ...")
            elat = await echo_latency(b.bootstrap, t, url, key, rate, latency_s, g, deadline, sides, root)
            for s in sides:
                if s.stop() not in (0, None):
                    raise BenchFailed(f"{s.name} did not stop cleanly")
        except BaseException:
            for s in sides:
                s.stop()
                _say(s.tail())
            raise

    def med(k: str) -> float:
        return float(np.median([x[k] for x in runs]))

    return {
        "gateway_qps": med("gateway_qps"),
        "direct_qps": med("direct_qps"),
        "ratio": med("ratio"),
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "direct_p50_ms": float(np.percentile(dlat, 50)),
        "direct_p99_ms": float(np.percentile(dlat, 99)),
        "echo_p50_ms": float(np.percentile(elat, 50)),
        "echo_p99_ms": float(np.percentile(elat, 99)),
        "queries_per_request": BATCH,
        "requests": requests,
        "concurrency": concurrency,
        "repeats": repeats,
        "runs": runs,
        "latency_rate_rps": rate,
        "latency_samples": int(lat.size),
        "load_avg_1m": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
        "cpus": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=600, help="requests per throughput run (default 600)")
    ap.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    ap.add_argument("--repeats", type=int, default=3, help="alternations of the two sides (default 3)")
    ap.add_argument("--latency-seconds", type=float, default=10.0, help="length of the latency run (default 10)")
    ap.add_argument("--quick", action="store_true", help="100 requests, one run, 3 s of latency (a smoke run)")
    ap.add_argument("--watchdog", type=float, default=600.0, help="fail after this many seconds (default 600)")
    a = ap.parse_args(argv)
    if a.quick:
        a.requests, a.repeats, a.latency_seconds = 100, 1, 3.0
    with tempfile.TemporaryDirectory(prefix="everlast-gateway-bench-") as tmp:
        try:
            out = asyncio.run(run(a.requests, a.repeats, a.concurrency, a.latency_seconds, a.watchdog, Path(tmp)))
        except BenchFailed as exc:
            _say(f"bench.gateway failed: {exc}")
            sys.exit(1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
