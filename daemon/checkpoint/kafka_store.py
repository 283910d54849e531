"""A blob store on a Kafka topic, so a model's checkpoint follows its partition to another replica.

A blob is written as chunks of at most ``max_chunk_bytes``, each under its own key
``<model>/<name>/<blob-id>/<i>``, then a manifest ``{"blob", "n"}`` under ``<model>/<name>``; the
previous blob's chunks are then deleted with tombstones. Every key's newest record is all a
reader needs, so the topic is safe under ``cleanup.policy=compact`` (which bounds its size on
Apache Kafka), and correct without it (Tansu never compacts): a reader keeps the newest record
per key itself, never relies on ``end_offsets`` (it reads up to the high watermark seen in fetch
responses), and ignores a manifest whose chunks are not all present.

Claims (``claim``): a record ``<model>/claim/<token>`` on partition 0. A claim's position is the
offset of the *first* record under its key, the claim with the lowest position wins, and a key whose
last record is a tombstone (``void_claim``, an operator's act) holds no claim. The producer is not
idempotent (Tansu does not implement it), so a retried write may append a claim twice, even after
its acknowledgement; a copy never moves a claim's first record. A claimant decides that it won only
after its write is acknowledged and it has re-read the topic up to a high watermark past it, so it
has read every record below its own: of two claimants, the one whose first record is later has read
the other's, and lost. Compaction keeps a key's last record only, so it could hide a first record
behind a later copy; but Apache Kafka's cleaner lets a record supersede an older one only once it is
itself past ``min.compaction.lag.ms`` (an hour: the daemon creates the topic so, with
``message.timestamp.type=LogAppendTime``, and refuses a lower lag the broker reports), and a claimant
decides only if its read-back ended within a quarter of that lag after it wrote its claim, timed on a
clock that counts suspend (``claim_bound_s``; otherwise it refuses without deciding). Only claimants
use the order: a replica that restores a model reads the one claimed ``created-*`` state, whichever
claim it is under (docs/privacy/learner.md 2, "One fit per model").
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable
from typing import Any

import msgpack

from everlast.daemon.errors import CheckpointError

MIN_COMPACTION_LAG_MS = 3_600_000
"""``min.compaction.lag.ms`` of the checkpoints topic, at least: a record supersedes an older one under
its key only once it is itself an hour old, so a claim's first record stays visible to every claimant
reading back its own claim within the lag (docs/privacy/learner.md 2, "One fit per model")."""

CLAIM_BOUND_UNKNOWN_S = 900.0
"""The longest a claim's read-back may take when the broker does not report the topic's lag: a quarter
of ``MIN_COMPACTION_LAG_MS``."""


def suspend_clock() -> tuple[float, float]:
    """Two readings for timing a claim's read-back: a clock that keeps counting while the machine is
    suspended (Linux's CLOCK_BOOTTIME; elsewhere the monotonic clock, which may not) and the wall
    clock, which also moves while a virtual machine is paused (a paused guest's BOOTTIME stands still:
    second claim review, G2). ``elapsed_since`` takes the larger of the two spans."""
    boot = time.clock_gettime(time.CLOCK_BOOTTIME) if sys.platform == "linux" else time.monotonic()
    return boot, time.time()


def elapsed_since(t0: tuple[float, float]) -> float:
    """The longer of the suspend-counting and the wall-clock spans since ``suspend_clock()`` gave ``t0``."""
    now = suspend_clock()
    return max(now[0] - t0[0], now[1] - t0[1])


def compaction_lag_problem(configs: dict[str, str]) -> str | None:
    """Why a compacted checkpoints topic's ``min.compaction.lag.ms`` (as the broker describes it) breaks
    the claim's argument (None: not compacted, the lag not reported, or at least an hour)."""
    if "compact" not in {p.strip() for p in configs.get("cleanup.policy", "").split(",")}:
        return None
    lag = configs.get("min.compaction.lag.ms")
    if lag is None:
        return None
    if not lag.isdigit() or int(lag) < MIN_COMPACTION_LAG_MS:
        return f"min.compaction.lag.ms={lag}, below {MIN_COMPACTION_LAG_MS}"
    return None


def timestamp_problem(configs: dict[str, str]) -> str | None:
    """Why a compacted checkpoints topic's timestamps break the claim's argument: with ``CreateTime``
    the compaction lag counts on the replicas' clocks, and one running slow shortens it (second claim
    review, G1). None: not compacted, ``LogAppendTime``, or not reported."""
    if "compact" not in {p.strip() for p in configs.get("cleanup.policy", "").split(",")}:
        return None
    if configs.get("message.timestamp.type") == "CreateTime":
        return "message.timestamp.type=CreateTime"
    return None


def claim_bound_s(configs: dict[str, str] | None) -> float:
    """How long a claim's read-back may take (``KafkaStore.claim``): a quarter of the topic's reported
    ``min.compaction.lag.ms``, or ``CLAIM_BOUND_UNKNOWN_S`` when the broker does not report it."""
    lag = (configs or {}).get("min.compaction.lag.ms")
    if lag is None or not lag.isdigit() or int(lag) < MIN_COMPACTION_LAG_MS:
        return CLAIM_BOUND_UNKNOWN_S
    return int(lag) / 4_000


def retention_problem(configs: dict[str, str]) -> str | None:
    """What makes the checkpoints topic lose records on its own, from its configuration as the broker
    describes it (None: nothing, or the broker did not say: ``cleanup.policy`` absent). A model whose
    claim, ``live`` and rounds expire would be created again on the next start: a second release of its
    training data (docs/privacy/learner.md 2, "One fit per model"). Only ``cleanup.policy=compact``, or
    ``delete`` with ``retention.ms`` and ``retention.bytes`` both -1, keep every key's last record."""
    policy = configs.get("cleanup.policy")
    if policy is None or "delete" not in {p.strip() for p in policy.split(",")}:
        return None
    finite = [f"{k}={configs.get(k, 'the broker default')}" for k in ("retention.ms", "retention.bytes")
              if configs.get(k) != "-1"]
    return f"cleanup.policy={policy} with {' and '.join(finite)}" if finite else None


class KafkaStore:
    def __init__(self, producer: Any, consumer_factory: Any, topic: str, max_chunk_bytes: int) -> None:
        self.producer = producer
        self.consumer_factory = consumer_factory  # () -> an unstarted AIOKafkaConsumer without a group
        self.topic = topic
        self.max_chunk = max_chunk_bytes
        self.cache: dict[str, bytes] = {}
        self.raw: dict[str, bytes] = {}
        self.manifests: dict[str, tuple[str, int]] = {}
        self.claims: dict[str, list[tuple[int, str]]] = {}
        """Per model, its claims as (offset on partition 0, token), as of the last ``refresh``."""
        self.claim_bound_s = CLAIM_BOUND_UNKNOWN_S
        """The longest a claim's read-back may take, from before its write (``claim_bound_s``)."""

    async def refresh(self, timeout_s: float = 30.0) -> None:
        """Re-read the whole topic (after a rebalance another replica may have written)."""
        from aiokafka import TopicPartition

        consumer = self.consumer_factory()
        await consumer.start()
        try:
            parts = consumer.partitions_for_topic(self.topic) or set()
            if not parts:
                await consumer._client.force_metadata_update()
                parts = consumer.partitions_for_topic(self.topic) or set()
            tps = [TopicPartition(self.topic, p) for p in sorted(parts)]
            if not tps:
                self.cache, self.claims = {}, {}
                return
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            newest: dict[str, bytes | None] = {}
            first_claim: dict[str, int | None] = {}  # claim key -> its first record's offset (None: tombstoned)
            deadline = time.monotonic() + timeout_s
            while True:
                batch = await consumer.getmany(timeout_ms=200, max_records=10_000)
                for tp, recs in batch.items():
                    for r in recs:
                        key = r.key.decode() if r.key is not None else ""
                        newest[key] = r.value
                        parts_of = key.split("/")
                        if tp.partition == 0 and len(parts_of) == 3 and parts_of[1] == "claim":
                            if r.value is None:
                                first_claim[key] = None
                            elif first_claim.get(key) is None:
                                first_claim[key] = int(r.offset)
                done = True
                for tp in tps:
                    hw = consumer.highwater(tp)
                    if hw is None or await consumer.position(tp) < hw:
                        done = False
                if done:
                    break
                if time.monotonic() > deadline:
                    raise CheckpointError("timed out reading the checkpoint topic")
            self.raw = {k: v for k, v in newest.items() if v is not None}
            claims: dict[str, list[tuple[int, str]]] = {}
            for key, offset in first_claim.items():
                if offset is not None:
                    model, _, token = key.split("/")
                    claims.setdefault(model, []).append((offset, token))
            self.claims = {m: sorted(c) for m, c in claims.items()}
            self.cache = self._assemble()
            self.manifests = {}
            for k in self.cache:
                man = msgpack.unpackb(self.raw[k], raw=False)
                self.manifests[k] = (str(man["blob"]), int(man["n"]))
        finally:
            await consumer.stop()

    def _assemble(self) -> dict[str, bytes]:
        """Blobs from manifests whose chunks are all present (an interrupted write is ignored)."""
        out: dict[str, bytes] = {}
        for key, value in self.raw.items():
            if key.count("/") != 1:
                continue  # a chunk
            try:
                man = msgpack.unpackb(value, raw=False)
                parts = [self.raw.get(f"{key}/{man['blob']}/{i}") for i in range(int(man["n"]))]
            except (ValueError, TypeError, KeyError, msgpack.UnpackException):
                continue
            if all(p is not None for p in parts):
                out[key] = b"".join(p for p in parts if p is not None)
        return out

    async def put(self, model: str, name: str, data: bytes) -> None:
        key = f"{model}/{name}"
        blob = os.urandom(8).hex()
        chunks = [data[i : i + self.max_chunk] for i in range(0, len(data), self.max_chunk)] or [b""]
        old = self.manifests.get(key)
        try:
            futs = [await self.producer.send(self.topic, key=f"{key}/{blob}/{i}".encode(), value=c)
                    for i, c in enumerate(chunks)]
            for f in futs:
                await f
            man = msgpack.packb({"blob": blob, "n": len(chunks)})
            await (await self.producer.send(self.topic, key=key.encode(), value=man))
            if old is not None:  # the previous blob's chunks are dead: tombstone them
                futs = [await self.producer.send(self.topic, key=f"{key}/{old[0]}/{i}".encode(), value=None)
                        for i in range(old[1])]
                for f in futs:
                    await f
        except Exception as exc:  # KafkaError and timeouts: the caller retries by policy
            raise CheckpointError(f"cannot write checkpoint {key} to Kafka ({type(exc).__name__})") from None
        self.manifests[key] = (blob, len(chunks))
        self.cache[key] = data

    async def get(self, model: str, name: str) -> bytes | None:
        return self.cache.get(f"{model}/{name}")

    async def claim(self, model: str, token: str) -> str:
        """Write the claim to partition 0, wait for the broker's acknowledgement, re-read the topic
        (``refresh``: up to a high watermark past the claim), check that the claim's own record was read
        back, and return the first claim on ``model``. Refuses to decide (``CheckpointError``; the claim
        stays, without state, and the model is refused until an operator voids it) when the read-back
        ended more than ``claim_bound_s`` after the write began, on ``elapsed_since``: the cleaner could
        then have removed an earlier claim's first record (docs/privacy/learner.md 2, "One fit per
        model")."""
        t0 = suspend_clock()
        try:
            await (await self.producer.send(self.topic, key=f"{model}/claim/{token}".encode(),
                                            value=token.encode(), partition=0))
        except Exception as exc:  # KafkaError and timeouts: the caller retries by policy
            raise CheckpointError(f"cannot write the claim of {model} to Kafka ({type(exc).__name__})") from None
        await self.refresh()
        took = elapsed_since(t0)
        if took > self.claim_bound_s:
            raise CheckpointError(
                f"the claim of {model} was read back {took:.0f} s after it was written, more than "
                f"{self.claim_bound_s:g} s (a quarter of the checkpoints topic's min.compaction.lag.ms): this "
                "replica does not decide whether it won and does not create the model. Its claim stays without "
                "state, so the model is refused: stop every replica of this model, then `everlast void-claim` it "
                "(docs/OPERATIONS.md, 'A claim without its state')")
        won = await self.claimed(model)
        if won is None or all(t != token for _, t in self.claims.get(model, [])):
            raise CheckpointError(f"the claim of {model} was not read back from the checkpoints topic")
        return won

    async def claimed(self, model: str) -> str | None:
        c = self.claims.get(model)
        return c[0][1] if c else None

    async def claim_tokens(self, model: str) -> list[str]:
        return [t for _, t in self.claims.get(model, [])]

    async def void_claim(self, model: str) -> int:
        """Tombstone every claim key of ``model`` (read by the last ``refresh``)."""
        keys = [f"{model}/claim/{t}" for _, t in self.claims.get(model, [])]
        try:
            futs = [await self.producer.send(self.topic, key=k.encode(), value=None, partition=0) for k in keys]
            for f in futs:
                await f
        except Exception as exc:  # KafkaError and timeouts
            raise CheckpointError(f"cannot void the claim of {model} on Kafka ({type(exc).__name__})") from None
        self.claims.pop(model, None)
        return len(keys)

    async def names(self, model: str) -> list[str]:
        prefix = f"{model}/"
        return sorted(k[len(prefix) :] for k in self.cache if k.startswith(prefix))

    async def delete(self, model: str, names: Iterable[str]) -> None:
        for n in names:
            key = f"{model}/{n}"
            if key not in self.cache:
                continue
            blob, count = self.manifests.pop(key, ("", 0))
            keys = [key] + [f"{key}/{blob}/{i}" for i in range(count)]
            futs = [await self.producer.send(self.topic, key=k.encode(), value=None) for k in keys]
            for f in futs:
                await f
            self.cache.pop(key, None)
