"""Replay a query stream through Kafka against a running daemon and measure what comes back.

Produces query records (key = model id; msgpack, or JSON with its content-type header, so that the
labels come back in the same format) at a target rate or as fast as possible, consumes the labels
topic, matches answers to queries by id, and reports throughput, latency percentiles, statuses and
accuracy against the true labels when the stream has them. Adaptive streams run closed-loop: each
batch waits for its answers before the stream picks the next one.

The client must not be what it measures: each batch of queries goes to the broker as one record
batch per partition (``send_batch``, the model's partition by murmur2 as Kafka's default
partitioner), not as one awaited ``send`` per record. With ``rate`` the batches are paced (ticks of
at most 10 ms), so latency is measured at that offered rate; without it the stream is sent as fast
as the client can, and latency then measures the queue the burst builds.

Ids are ``<run>-<i>`` strings with a fresh run prefix, so labels of other runs on the same topic
are ignored (the labels consumer may also re-read part of the topic's tail).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgpack
import numpy as np
from numpy.typing import NDArray

from everlast.daemon.fetch_wait import FetchWait


class Stream(Protocol):
    """What replay needs of a stream: points (and true labels, if known) batch by batch."""

    adaptive: bool

    def next_batch(self, n: int) -> tuple[NDArray[np.float64], NDArray[np.int8] | None]: ...

    def observe(self, labels: NDArray[np.int8]) -> None: ...


@dataclass
class IIDStream:
    """I.i.d. points from a task (distribution + hidden concept)."""

    task: Any
    seed: int
    adaptive: bool = False
    _g: np.random.Generator = field(init=False)

    def __post_init__(self) -> None:
        self._g = np.random.default_rng([self.seed, 7])

    def next_batch(self, n: int) -> tuple[NDArray[np.float64], NDArray[np.int8] | None]:
        x, y = self.task.sample(self._g, n)
        return x, y

    def observe(self, labels: NDArray[np.int8]) -> None:
        pass


@dataclass
class LabelledStream:
    """The points of a labelled file, in order, with their labels as the truth (``--truth FILE``)."""

    x: NDArray[np.float64]
    y: NDArray[np.int8]
    adaptive: bool = False
    _at: int = 0

    def next_batch(self, n: int) -> tuple[NDArray[np.float64], NDArray[np.int8] | None]:
        lo, self._at = self._at, min(self._at + n, int(self.x.shape[0]))
        return self.x[lo : self._at], self.y[lo : self._at]

    def observe(self, labels: NDArray[np.int8]) -> None:
        pass


@dataclass
class ReplayReport:
    sent: int = 0
    answered: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    correct: int = 0
    scored: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    rounds: dict[int, int] = field(default_factory=dict)
    missing: int = 0
    records: list[dict[str, Any]] = field(default_factory=list)
    send_seconds: float = 0.0
    """From the first query sent to the last one acknowledged by the broker."""

    def to_json(self) -> dict[str, Any]:
        lat = np.asarray(self.latencies_ms) if self.latencies_ms else np.zeros(0)

        def pct(q: float) -> float | None:
            return float(np.percentile(lat, q)) if lat.size else None

        return {
            "sent": self.sent,
            "answered": self.answered,
            "missing": self.missing,
            "statuses": dict(sorted(self.statuses.items())),
            "rounds": {str(k): v for k, v in sorted(self.rounds.items())},
            "accuracy": (self.correct / self.scored) if self.scored else None,
            "throughput_qps": self.answered / self.seconds if self.seconds > 0 else None,
            "sent_qps": self.sent / self.send_seconds if self.send_seconds > 0 else None,
            "seconds": self.seconds,
            "latency_ms": {"p50": pct(50), "p90": pct(90), "p99": pct(99), "max": pct(100)},
        }


async def replay(
    bootstrap: str,
    queries_topic: str,
    labels_topic: str,
    model: str,
    stream: Stream,
    total: int,
    *,
    rate: float | None = None,
    batch: int = 1000,
    timeout_s: float = 120.0,
    record: bool = False,
    progress: Callable[[int], None] | None = None,
    producer_kwargs: dict[str, Any] | None = None,
    fmt: str = "msgpack",
    client: str | None = None,
    client_header: str = "everlast-client",
) -> ReplayReport:
    """``fmt``: ``msgpack`` (the daemon's fast path) or ``json`` (queries with the content-type
    header; their labels are JSON too, readable by any consumer such as kcat). ``client``: the
    client id every query carries in the header ``client_header`` (as an operator's gateway would
    set it; the per-client quotas read it); ``None``: no header, the anonymous client."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    if fmt not in ("msgpack", "json"):
        raise ValueError("fmt is msgpack or json")
    run = os.urandom(4).hex()
    kw = dict(producer_kwargs or {})
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=2, max_batch_size=1 << 19, **kw)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=10, **kw)
    await producer.start()
    await consumer.start()
    rep = ReplayReport()
    sent_at: dict[str, float] = {}
    truth: dict[str, int] = {}
    points: dict[str, Any] = {}
    got: dict[str, dict[str, Any]] = {}
    try:
        parts = await _partitions(consumer, labels_topic)
        tps = [TopicPartition(labels_topic, p) for p in parts]
        consumer.assign(tps)
        await consumer.seek_to_end(*tps)
        for tp in tps:  # force the positions now: later records belong to this run
            await consumer.position(tp)
        done = asyncio.Event()
        waiting_for: set[str] = set()
        batch_done = asyncio.Event()

        wait = FetchWait(10, "replay's labels reader")  # a long labels log stalls a short wait (embedded broker)

        async def consume() -> None:
            while not done.is_set():
                res = await consumer.getmany(timeout_ms=50, max_records=50_000)
                now = time.perf_counter()
                await wait.after(consumer, any(res.values()), tps)
                for recs in res.values():
                    for r in recs:
                        if r.key != key:  # another model's label
                            continue
                        try:
                            v = r.value
                            lab = json.loads(v) if v[:1] == b"{" else msgpack.unpackb(v, raw=False)
                        except Exception:
                            continue
                        qid = lab.get("id") if isinstance(lab, dict) else None
                        if not isinstance(qid, str) or not qid.startswith(run) or qid in got:
                            continue
                        got[qid] = lab
                        rep.latencies_ms.append((now - sent_at[qid]) * 1000.0)
                        waiting_for.discard(qid)
                        if progress is not None:
                            progress(1)
                if not waiting_for:
                    batch_done.set()

        key = model.encode()
        consumer_task = asyncio.create_task(consume())
        qparts = sorted(await producer.partitions_for(queries_topic))
        part = int(producer._partitioner(key, qparts, qparts))
        headers = ([("content-type", b"application/json")] if fmt == "json" else []) + (
            [(client_header, client.encode())] if client else [])
        encode = _json_payload if fmt == "json" else _msgpack_payload
        tick = batch if not rate or stream.adaptive else max(1, min(batch, int(rate * 0.01)))
        t0 = time.perf_counter()
        i = 0
        inflight: list[Any] = []
        while i < total:
            x, y = stream.next_batch(min(tick, total - i))
            n = int(x.shape[0])
            if n == 0:  # a recorded stream ran out
                break
            ids = [f"{run}-{i + k}" for k in range(n)]
            xs = x.tolist()
            batch_done.clear()
            waiting_for.update(ids)
            b = producer.create_batch()
            now = time.perf_counter()
            for qid, xv in zip(ids, xs, strict=True):
                value = encode(qid, xv)
                if b.append(key=key, value=value, timestamp=None, headers=headers) is None:
                    inflight.append(await producer.send_batch(b, queries_topic, partition=part))
                    b = producer.create_batch()
                    b.append(key=key, value=value, timestamp=None, headers=headers)
                sent_at[qid] = now
            inflight.append(await producer.send_batch(b, queries_topic, partition=part))
            if y is not None:
                truth.update(zip(ids, np.asarray(y).tolist(), strict=True))
            if record:
                points.update(zip(ids, xs, strict=True))
            i += n
            if stream.adaptive or len(inflight) > 64:
                await asyncio.gather(*inflight)
                inflight.clear()
            if stream.adaptive:
                await asyncio.wait_for(batch_done.wait(), timeout_s)
                stream.observe(np.asarray([_label(got[q]) for q in ids], dtype=np.int8))
            if rate:
                ahead = i / rate - (time.perf_counter() - t0)
                if ahead > 0:
                    await asyncio.sleep(ahead)
        await asyncio.gather(*inflight)
        rep.send_seconds = time.perf_counter() - t0
        # wait for the answers while they keep coming: ``timeout_s`` bounds a wait in which no label
        # arrives, not the whole drain (a daemon answering a round of millions is minutes behind a
        # producer that sends them in seconds)
        seen, deadline = len(got), time.perf_counter() + timeout_s
        while waiting_for and time.perf_counter() < deadline:
            await asyncio.sleep(0.02)
            if len(got) != seen:
                seen, deadline = len(got), time.perf_counter() + timeout_s
        rep.seconds = time.perf_counter() - t0
        done.set()
        await consumer_task
    finally:
        await producer.stop()
        await consumer.stop()
    rep.sent = len(sent_at)
    rep.answered = len(got)
    rep.missing = rep.sent - rep.answered
    for qid, lab in got.items():
        st = str(lab.get("status"))
        rep.statuses[st] = rep.statuses.get(st, 0) + 1
        rnd = int(lab.get("round", 0))
        rep.rounds[rnd] = rep.rounds.get(rnd, 0) + 1
        if st == "ok" and qid in truth:
            rep.scored += 1
            rep.correct += int(lab.get("label") == truth[qid])
        if record:
            rep.records.append({"id": qid, "x": points[qid], "true_label": truth.get(qid), **{
                k: lab.get(k) for k in ("label", "status", "round", "reason")}})
    return rep


def _msgpack_payload(qid: str, x: Any) -> bytes:
    out = msgpack.packb({"id": qid, "x": x})
    assert isinstance(out, bytes)
    return out


def _json_payload(qid: str, x: Any) -> bytes:
    return json.dumps({"id": qid, "x": x}).encode()


def _label(lab: dict[str, Any]) -> int:
    v = lab.get("label")
    return int(v) if isinstance(v, int) else -1


async def _partitions(consumer: Any, topic: str, attempts: int = 50) -> list[int]:
    """The topic's partitions, waiting for its metadata (``attempts`` tries, 50 ms apart)."""
    for _ in range(attempts):
        parts = consumer.partitions_for_topic(topic)
        if parts:
            return sorted(parts)
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.05)
    raise RuntimeError(f"topic {topic} has no partitions (does it exist?)")
