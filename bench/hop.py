"""One broker hop's latency: a record produced (``acks=all``) until a consumer has fetched it.

    python -m bench.hop [--quick] [--waits 5,20] [--records N] [--history 0,2000,8000,16000]

On the embedded broker (Tansu): a producer sends one record every 10 ms and waits for its
acknowledgement; a consumer with ``fetch_max_wait_ms`` = each of ``--waits`` reads them. Tansu answers a
fetch that found no records only at its max wait, so the hop costs about half that wait plus the
acknowledgement (docs/OPERATIONS.md, capacity, weighs this against the polling a shorter wait
costs). ``--history``: the partition first holds that many record batches of 100 records (what
requests of 100 queries leave behind); Tansu walks a partition's batches for each fetch, so the hop
grows with them, and a wait shorter than the walk fetches nothing (``stalled``). The last line is one
JSON object: per history and wait, the ack and end-to-end (produce to fetched) p50/p90/p99/max in ms
(null if nothing was fetched), how many records were fetched, and the load average (the machine may
be shared).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from typing import Any

import numpy as np
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from bench.e2e import create
from everlast.daemon.broker import EmbeddedBroker

STALL_S = 30.0
"""How long the reader may take, after the last record is acknowledged, before the hop is reported
``stalled`` (the broker answered its fetches empty: ``daemon/fetch_wait.py``)."""


def _pct(v: list[float]) -> dict[str, float]:
    p = np.percentile(np.asarray(v, dtype=np.float64), [50, 90, 99, 100])
    return {k: round(float(x), 2) for k, x in zip(("p50_ms", "p90_ms", "p99_ms", "max_ms"), p, strict=True)}


async def fill(bootstrap: str, topic: str, batches: int, value: bytes = b"x" * 40) -> None:
    """``batches`` record batches of 100 records of ``value`` on partition 0 (one per gateway request)."""
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    await p.start()
    try:
        futs = []
        for _ in range(batches):
            b = p.create_batch()
            for _ in range(100):
                if b.append(key=b"m", value=value, timestamp=None, headers=[]) is None:
                    raise ValueError("100 records of this value do not fit one record batch")
            futs.append(await p.send_batch(b, topic, partition=0))
            if len(futs) > 200:
                await asyncio.gather(*futs)
                futs.clear()
        await asyncio.gather(*futs)
    finally:
        await p.stop()


async def one(bootstrap: str, wait_ms: int, records: int, history: int = 0) -> dict[str, Any]:
    topic = f"hop-{uuid.uuid4().hex[:8]}"
    await create(bootstrap, [topic])
    await fill(bootstrap, topic, history)
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, fetch_max_wait_ms=wait_ms, enable_auto_commit=False)
    await p.start()
    await c.start()
    tp = TopicPartition(topic, 0)
    c.assign([tp])
    await c.seek_to_end(tp)
    await c.position(tp)
    sent: dict[int, float] = {}
    acks: list[float] = []
    e2e: list[float] = []
    try:
        async def reader() -> None:
            while len(e2e) < records:
                for recs in (await c.getmany(timeout_ms=100)).values():
                    now = time.perf_counter()
                    e2e.extend(1000 * (now - sent[int(r.key)]) for r in recs if r.key.isdigit())

        task = asyncio.create_task(reader())
        await asyncio.sleep(1.0)  # the consumer fetches
        for i in range(records):
            sent[i] = time.perf_counter()
            await p.send_and_wait(topic, b"x" * 2000, key=str(i).encode(), partition=0)
            acks.append(1000 * (time.perf_counter() - sent[i]))
            await asyncio.sleep(0.01)
        done, _ = await asyncio.wait([task], timeout=STALL_S)
        task.cancel()
    finally:
        await p.stop()
        await c.stop()
    return {"fetch_max_wait_ms": wait_ms, "history_batches": history, "ack": _pct(acks),
            "end_to_end": _pct(e2e) if e2e else None, "records": records, "received": len(e2e),
            "stalled": not done}


async def run(waits: list[int], records: int, histories: list[int]) -> dict[str, Any]:
    load = os.getloadavg()[0]
    with EmbeddedBroker() as b:
        rows = [await one(b.bootstrap, w, records, h) for h in histories for w in waits]
    return {"hop": rows, "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--waits", default="5,20", help="fetch_max_wait_ms values, comma-separated (default 5,20)")
    ap.add_argument("--records", type=int, default=500, help="records per wait (default 500)")
    ap.add_argument("--history", default="0",
                    help="record batches (of 100 records) the partition holds before the hop is measured, "
                         "comma-separated (default 0)")
    ap.add_argument("--quick", action="store_true", help="50 records per wait (a smoke run)")
    a = ap.parse_args(argv)
    out = asyncio.run(run([int(w) for w in a.waits.split(",")], 50 if a.quick else a.records,
                          [int(h) for h in a.history.split(",")]))
    for r in out["hop"]:
        e = r["end_to_end"]
        hop = "nothing fetched" if e is None else f"p50 {e['p50_ms']} / p99 {e['p99_ms']} ms"
        print(f"history {r['history_batches']:>6} batches, fetch_max_wait_ms {r['fetch_max_wait_ms']:>4}: ack p50 "
              f"{r['ack']['p50_ms']} ms, produced to fetched {hop}, {r['received']} of {r['records']} fetched"
              f"{' (stalled)' if r['stalled'] else ''}", file=sys.stderr, flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
