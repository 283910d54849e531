"""Void a model's claim whose state never reached the store (``everlast void-claim``).

A model is claimed before it is created (docs/privacy/learner.md 2, "One fit per model"). If the
replica that won the claim died while creating the model, the claim stays without its state and
every replica refuses the model (``ModelCheckpointer.wait``): the daemon never creates it again on
its own. Voiding the claim lets the next start create it: fresh randomness drawn from the same
training set. If the lost creation was ever answered from (its checkpoint was lost, not just never
written), that is a second release of the training set, which no certificate charges: the operator
chooses it knowingly (docs/OPERATIONS.md, "A claim without its state"). Every replica of the model must
be stopped first: a claimant still creating it would otherwise finish after the void (its
``ModelCheckpointer.confirm`` then discards its state, and ``void_store_claim`` reports it)."""

from __future__ import annotations

from typing import Any

from everlast.daemon.checkpoint.blobs import BlobStore, DirStore
from everlast.daemon.checkpoint.model_state import CREATED
from everlast.daemon.config import Config
from everlast.daemon.errors import CheckpointError, ConfigError


async def void_store_claim(store: BlobStore, model: str) -> int:
    """Remove the claims on ``model`` if its state is not in ``store``; returns how many were removed.
    Raises ``CheckpointError`` when the model has a checkpoint or its winner's first state (nothing
    to void: the model restores), or, after voiding, when a state appeared meanwhile. Every replica of
    the model must be stopped first (docs/OPERATIONS.md, "A claim without its state")."""
    await store.refresh()
    names = await store.names(model)
    claimed = set(await store.claim_tokens(model))
    if "live" in names or any(n[len(CREATED):] in claimed for n in names if n.startswith(CREATED)):
        raise CheckpointError(f"model {model}: its state is in the checkpoint store; its claim is not void "
                              "(the model restores from it)")
    # A created state under no claim (its claim was voided while its replica still ran, and that replica
    # stopped before any ``live``) was never answered from: with every replica stopped, it goes too, so
    # that the next claimant may create the model (``ModelCheckpointer.claim`` refuses while it is there).
    await store.delete(model, _states(names))
    n = await store.void_claim(model)
    # Read the store again after the void is written (review of 2026-11-28, G1): a claimant still running
    # writes its state, then re-reads its claim (``ModelCheckpointer.confirm``); of the two read-backs at
    # least one sees the other's write. A state seen here means a replica was still creating the model.
    await store.refresh()
    appeared = _states(await store.names(model))
    if appeared:
        raise CheckpointError(
            f"model {model}: {n} claim(s) voided, but its state appeared in the checkpoint store meanwhile "
            f"({', '.join(appeared)}): a replica was still creating it. That replica re-reads its claim before it "
            "serves: if it saw the void it discarded its state and stopped, having answered nothing; if not, it "
            "may serve it, and no replica creates the model while that state is in the store. Stop every replica "
            "of this model first, then run `everlast void-claim` again: it refuses if the model has a checkpoint "
            "(it restores from it), else it removes the state, which was never answered from (docs/OPERATIONS.md, "
            "'A claim without its state')")
    return n


def _states(names: list[str]) -> list[str]:
    return [s for s in names if s == "live" or s.startswith(CREATED)]


async def void_claim(cfg: Config, model: str) -> int:
    """``void_store_claim`` on the store ``cfg`` configures (no key needed: claims are not encrypted)."""
    if model not in {m.id for m in cfg.models}:
        raise ConfigError(f"no model {model!r} in the configuration")
    ck = cfg.checkpoint
    if ck.store == "dir":
        return await void_store_claim(DirStore(ck.dir), model)
    if not cfg.broker.bootstrap_servers:
        raise ConfigError("the Kafka checkpoint store needs broker.bootstrap_servers (or --bootstrap-servers)")
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from everlast.daemon.checkpoint.kafka_store import KafkaStore

    kw: dict[str, Any] = cfg.broker.aiokafka_kwargs()
    producer = AIOKafkaProducer(**kw, acks="all")
    await producer.start()
    try:
        store = KafkaStore(producer, lambda: AIOKafkaConsumer(**kw, enable_auto_commit=False, fetch_max_wait_ms=50),
                           cfg.topics.checkpoints, ck.max_chunk_bytes)
        return await void_store_claim(store, model)
    finally:
        await producer.stop()
