"""One broker hop's latency: a record produced (``acks=all``) until a consumer has fetched it.

    python -m bench.hop [--quick] [--waits 5,20] [--records N]

On the embedded broker (Tansu): a producer sends one record every 10 ms and waits for its
acknowledgement; a consumer with ``fetch_max_wait_ms`` = each of ``--waits`` reads them. Tansu answers a
fetch that found no records only at its max wait, so the hop costs about half that wait plus the
acknowledgement (docs/OPERATIONS.md, capacity, weighs this against the polling a shorter wait
costs). The last line is one JSON object: per wait, the ack and end-to-end (produce to fetched)
p50/p90/p99/max in ms, and the load average (the machine may be shared).
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
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from bench.e2e import create
from everlast.daemon.broker import EmbeddedBroker


def _pct(v: list[float]) -> dict[str, float]:
    p = np.percentile(np.asarray(v, dtype=np.float64), [50, 90, 99, 100])
    return {k: round(float(x), 2) for k, x in zip(("p50_ms", "p90_ms", "p99_ms", "max_ms"), p, strict=True)}


async def one(bootstrap: str, wait_ms: int, records: int) -> dict[str, Any]:
    topic = f"hop-{uuid.uuid4().hex[:8]}"
    await create(bootstrap, [topic])
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=0)
    c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, fetch_max_wait_ms=wait_ms,
                         auto_offset_reset="earliest", enable_auto_commit=False)
    await p.start()
    await c.start()
    sent: dict[int, float] = {}
    acks: list[float] = []
    e2e: list[float] = []
    try:
        async def reader() -> None:
            while len(e2e) < records:
                for recs in (await c.getmany(timeout_ms=100)).values():
                    now = time.perf_counter()
                    e2e.extend(1000 * (now - sent[int(r.key)]) for r in recs)

        task = asyncio.create_task(reader())
        await asyncio.sleep(1.0)  # the consumer has joined and fetches
        for i in range(records):
            sent[i] = time.perf_counter()
            await p.send_and_wait(topic, b"x" * 2000, key=str(i).encode())
            acks.append(1000 * (time.perf_counter() - sent[i]))
            await asyncio.sleep(0.01)
        await asyncio.wait_for(task, 60)
    finally:
        await p.stop()
        await c.stop()
    return {"fetch_max_wait_ms": wait_ms, "ack": _pct(acks), "end_to_end": _pct(e2e), "records": records}


async def run(waits: list[int], records: int) -> dict[str, Any]:
    load = os.getloadavg()[0]
    with EmbeddedBroker() as b:
        rows = [await one(b.bootstrap, w, records) for w in waits]
    return {"hop": rows, "load_avg_1m": [round(load, 2), round(os.getloadavg()[0], 2)]}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--waits", default="5,20", help="fetch_max_wait_ms values, comma-separated (default 5,20)")
    ap.add_argument("--records", type=int, default=500, help="records per wait (default 500)")
    ap.add_argument("--quick", action="store_true", help="50 records per wait (a smoke run)")
    a = ap.parse_args(argv)
    out = asyncio.run(run([int(w) for w in a.waits.split(",")], 50 if a.quick else a.records))
    for r in out["hop"]:
        print(f"fetch_max_wait_ms {r['fetch_max_wait_ms']:>4}: ack p50 {r['ack']['p50_ms']} ms, "
              f"produced to fetched p50 {r['end_to_end']['p50_ms']} / p99 {r['end_to_end']['p99_ms']} ms",
              file=sys.stderr, flush=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
