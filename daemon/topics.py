"""Topic preflight at start: create the daemon's topics when asked (``topics.create``), and refuse
a Kafka checkpoints topic whose settings would let a model be created twice (``check_checkpoints``)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from everlast.daemon.config import Config
from everlast.daemon.errors import ConfigError

log = logging.getLogger("everlast.daemon")

_WHERE = "(docs/OPERATIONS.md, 'Checkpoint topic')"


def _admin_kw(kw: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kw.items() if k != "retry_backoff_ms"}


async def ensure_topics(cfg: Config, kw: dict[str, Any]) -> None:
    """Create the queries, labels and dead-letter topics (and the compacted checkpoints topic of the
    Kafka store) that do not exist yet."""
    if not cfg.topics.create:
        return
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    from everlast.daemon.checkpoint.kafka_store import MIN_COMPACTION_LAG_MS

    t = cfg.topics
    admin = AIOKafkaAdminClient(**_admin_kw(kw))
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [NewTopic(name, t.partitions, 1) for name in (t.queries, t.labels, t.dead_letters)
               if name not in existing]
        if cfg.checkpoint.store == "kafka" and t.checkpoints not in existing:
            new.append(NewTopic(t.checkpoints, 1, 1, topic_configs={
                "cleanup.policy": "compact", "min.compaction.lag.ms": str(MIN_COMPACTION_LAG_MS),
                # the lag counts on the broker's clock, not a replica's (docs/privacy/learner.md 2)
                "message.timestamp.type": "LogAppendTime"}))
        if new:
            await admin.create_topics(new)  # "already exists" comes back as an error code, not a raise
    finally:
        await admin.close()


async def _describe(topic: str, kw: dict[str, Any], quietly: Any) -> dict[str, str] | None:
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    admin = AIOKafkaAdminClient(**_admin_kw(kw))
    try:
        await admin.start()
        got = await asyncio.wait_for(admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]), 30)
        return {str(e[0]): str(e[1]) for r in got for res in r.resources if res[0] == 0 for e in res[4]
                if e[1] is not None}
    except Exception as exc:  # the broker may not implement DescribeConfigs
        log.warning("cannot read the configuration of the checkpoints topic %s (%s); it must never delete "
                    "records by retention %s", topic, type(exc).__name__, _WHERE)
        return None
    finally:
        await quietly(admin.close)


async def check_checkpoints(cfg: Config, kw: dict[str, Any], quietly: Any) -> float | None:
    """Refuse to start when the Kafka checkpoints topic deletes records by retention: a model whose
    claim and state expire would be created again, a second release of its training data
    (``kafka_store.retention_problem``), or is compacted with a ``min.compaction.lag.ms`` below an
    hour (``kafka_store.compaction_lag_problem``: the claim's argument needs it). A broker that does
    not describe the topic's configuration (Tansu describes only the settings given at creation) gets
    a warning. Returns how long a claim's read-back may take (``kafka_store.claim_bound_s``; None:
    no Kafka store)."""
    if cfg.checkpoint.store != "kafka":
        return None
    from everlast.daemon.checkpoint.kafka_store import claim_bound_s

    topic = cfg.topics.checkpoints
    configs = await _describe(topic, kw, quietly)
    bound = claim_bound_s(configs)
    if configs is not None:
        judge(topic, configs)
    return float(bound)


def judge(topic: str, configs: dict[str, str]) -> None:
    """Raise ``ConfigError`` for a checkpoints topic that could lose a claim; warn where the broker
    does not say enough."""
    from everlast.daemon.checkpoint.kafka_store import (
        MIN_COMPACTION_LAG_MS,
        compaction_lag_problem,
        retention_problem,
        timestamp_problem,
    )

    problem = retention_problem(configs)
    if problem is not None:
        raise ConfigError(
            f"the checkpoints topic {topic} deletes records by retention ({problem}): a model whose claim and "
            "state expire would be created again, a second release of its training data. Set cleanup.policy="
            f"compact (or retention.ms=-1 and retention.bytes=-1) on it {_WHERE}")
    lag_problem = compaction_lag_problem(configs)
    if lag_problem is not None:
        raise ConfigError(
            f"the checkpoints topic {topic} is compacted with {lag_problem}: the cleaner could remove a claim's "
            "first record while a replica reads its own claim back, and two replicas could both create a model "
            f"(a second release of its training data). Set min.compaction.lag.ms={MIN_COMPACTION_LAG_MS} or more "
            f"on it {_WHERE}")
    if "compact" in configs.get("cleanup.policy", "") and "min.compaction.lag.ms" not in configs:
        log.warning("the broker does not report min.compaction.lag.ms of the compacted checkpoints topic %s; it "
                    "must be at least %d so that no claim is compacted while it is read back %s", topic,
                    MIN_COMPACTION_LAG_MS, _WHERE)
    if timestamp_problem(configs) is not None:
        raise ConfigError(
            f"the compacted checkpoints topic {topic} has message.timestamp.type=CreateTime: the compaction lag "
            "then counts on the replicas' clocks, and one running slow shortens it below what the claim's "
            "argument needs (two replicas could both create a model). Set message.timestamp.type=LogAppendTime "
            f"on it {_WHERE}")
    if "cleanup.policy" not in configs:
        log.warning("the broker does not say how the checkpoints topic %s is cleaned; it must never delete "
                    "records by retention %s", topic, _WHERE)
