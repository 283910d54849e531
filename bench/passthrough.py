"""The baseline of ``bench.e2e``: a raw aiokafka echo with the daemon's I/O shape.

Consume with getmany, msgpack-decode each value, msgpack-encode a reply, produce the batch with
``send_batch`` (one batch per partition, in record batches of the daemon's size), wait for the acks,
commit. No engine, no validation.
``--no-commit``: no offset commit either (the daemon's own commit is informational, off its path).
``--from-end``: no consumer group; every partition of ``--src`` read from its end, "ready" on stderr
once positioned (implies ``--no-commit``): ``bench.gateway``'s echo in the daemon's place.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import msgpack
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from everlast.daemon.service import LABEL_BATCH_BYTES


async def main(bootstrap: str, src: str, dst: str, group: str, max_records: int, fetch_wait: int,
               commit: bool = True, from_end: bool = False) -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    if from_end:
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=fetch_wait)
    else:
        c = AIOKafkaConsumer(src, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=fetch_wait, session_timeout_ms=2000,
                             heartbeat_interval_ms=200)
    p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, max_batch_size=LABEL_BATCH_BYTES)  # the daemon's
    await c.start()
    await p.start()
    if from_end:
        commit = False
        tps = [TopicPartition(src, q) for q in sorted(await p.partitions_for(src))]
        c.assign(tps)
        await c.seek_to_end(*tps)
        for tp in tps:
            await c.position(tp)
        print("ready", file=sys.stderr, flush=True)
    try:
        while not stop.is_set():
            batch = await c.getmany(timeout_ms=100, max_records=max_records)
            futs = []
            for tp, recs in batch.items():
                b = p.create_batch()
                for r in recs:
                    q = msgpack.unpackb(r.value, raw=False)
                    out = msgpack.packb({"id": q["id"], "label": 0, "status": "ok", "round": 1})
                    if b.append(key=r.key, value=out, timestamp=None, headers=[]) is None:
                        futs.append(await p.send_batch(b, dst, partition=tp.partition))
                        b = p.create_batch()
                        b.append(key=r.key, value=out, timestamp=None, headers=[])
                if b.record_count():
                    futs.append(await p.send_batch(b, dst, partition=tp.partition))
            if futs:
                await asyncio.gather(*futs)
                if commit:
                    await c.commit()
    finally:
        await c.stop()
        await p.stop()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--max-records", type=int, default=5000)
    ap.add_argument("--fetch-wait", type=int, default=20)
    ap.add_argument("--no-commit", dest="commit", action="store_false", help="never commit offsets")
    ap.add_argument("--from-end", action="store_true", help="no group: read every partition from its end")
    a = ap.parse_args()
    asyncio.run(main(a.bootstrap, a.src, a.dst, a.group, a.max_records, a.fetch_wait, a.commit, a.from_end))
