"""One model's checkpoint on a blob store: what changed since the last save, and restore.

Blobs (all msgpack via ``engine.codec``):
  ``round-K``        {"format", "concept", "schedule", "round_state"}: written once per round
  ``res-K-START``    {"start", "end", "points"}: D-hat points appended since the previous save
  ``live``           {"live" (engine live state without reservoir points), "offsets", "round",
                      "round_digest", "meta"}: written at every save, last (it commits the rest)
  ``created-TOKEN``  {"round_part", "live_part", "points", "offsets", "meta"}: a new model's first
                     state, written once by the replica whose claim TOKEN won; deleted once a
                     ``live`` exists
A write puts the round blob (if new), the reservoir chunk (if any), then ``live``; older rounds
are pruned only after the new ``live`` is durable, so a crash at any point leaves a consistent
checkpoint. The order across a partition's models is ``PartitionCheckpoint``'s
(``daemon/checkpoint/checkpoint.py``).

**One fit per model** (docs/privacy/learner.md 2, "One fit per model"). Creating a model draws fresh
randomness (the learner's fit, GenericBBL's first round); two replicas can both set out to create it
(Kafka's group membership is not a lock), and two creations are two releases. So a model is *claimed
before it is created* (``claim``): a random token is recorded in the store (``BlobStore.claim``: the
first claim recorded wins, the same for every replica), and only the replica whose token won draws
any randomness; it writes the new state as ``created-TOKEN`` (``write_created``), re-reads the store
to check that its claim still wins (``confirm``: not voided by an operator meanwhile), and goes on to
its first checkpoint. A loser never creates: it waits, bounded, for the winner's state (``wait``: the
``live`` checkpoint if one exists, else ``created-TOKEN``) and restores it, or refuses. A claim whose
state never appears (the winner died while creating) is refused until an operator voids it
(``everlast void-claim``, docs/OPERATIONS.md "A claim without its state"). Which replica wins
depends on when each one claimed, never on the data or on any fit.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from everlast.daemon.checkpoint.blobs import BlobStore, frame, unframe
from everlast.daemon.errors import CheckpointError, CorruptCheckpoint
from everlast.engine import codec
from everlast.engine.errors import CorruptState
from everlast.engine.restore import restore
from everlast.engine.serving import Servable


@dataclass
class Restored:
    predictor: Servable
    offsets: dict[int, int]
    meta: dict[str, Any]


@dataclass
class ModelCheckpointer:
    store: BlobStore
    model: str
    _round_written: int | None = None
    _round_digest: str = ""
    _res_written: int = 0
    _live: dict[str, Any] | None = None
    saves: int = field(default=0)

    async def _put(self, name: str, data: bytes) -> None:
        await self.store.put(self.model, name, frame(self.model, name, data))

    async def _get(self, name: str) -> bytes | None:
        """The blob, its checksum verified (``CorruptCheckpoint`` if it fails)."""
        raw = await self.store.get(self.model, name)
        if raw is None:
            return None
        return unframe(self.model, name, raw, bool(getattr(self.store, "authenticated", False)))

    async def save(self, p: Servable, offsets: dict[int, int], meta: dict[str, Any] | None = None) -> None:
        """``write`` then ``prune`` (a partition's ``PartitionCheckpoint`` runs them as separate steps)."""
        await self.write(p, offsets, meta)
        await self.prune()

    async def write(self, p: Servable, offsets: dict[int, int], meta: dict[str, Any] | None = None) -> None:
        """The round blob if the round is new, the reservoir chunk since the last write, then
        ``live`` (which makes them this model's checkpoint)."""
        k = p.round
        if self._round_written != k:
            blob = codec.pack(p.round_part())
            await self._put(f"round-{k}", blob)
            self._round_written, self._round_digest, self._res_written = k, hashlib.sha256(blob).hexdigest(), 0
        filled = p.reservoir_filled
        if filled > self._res_written:
            chunk = codec.pack(
                {"start": self._res_written, "end": filled, "points": p.reservoir_points(self._res_written, filled)}
            )
            await self._put(f"res-{k}-{self._res_written:015d}", chunk)
            self._res_written = filled
        live = {
            "live": p.live_part(),
            "offsets": {str(tp): int(o) for tp, o in offsets.items()},
            "round": k,
            "round_digest": self._round_digest,
            "meta": meta or {},
        }
        await self._put("live", codec.pack(live))
        self._live = live
        self.saves += 1

    async def write_meta(self, meta: dict[str, Any], offsets: dict[int, int] | None = None) -> None:
        """Update the meta (and the offsets) of ``live`` around the engine state last written or
        loaded (for a model whose engine failed: its state is not read again; the last good one
        stays, and it refuses every query from its suspension on without it)."""
        if self._live is None:
            raise CheckpointError(f"model {self.model}: no checkpoint to annotate")
        self._live = {**self._live, "meta": {**self._live.get("meta", {}), **meta}}
        if offsets is not None:
            self._live["offsets"] = {str(tp): int(o) for tp, o in offsets.items()}
        await self._put("live", codec.pack(self._live))
        self.saves += 1

    async def prune(self) -> None:
        """Delete the blobs of earlier rounds (after ``live`` names the current one), and a new
        model's ``created-*`` state (``live`` has superseded it)."""
        k = self._round_written
        stale = [n for n in await self.store.names(self.model)
                 if _round_of(n) not in (None, k) or n.startswith(CREATED)]
        if stale:
            await self.store.delete(self.model, stale)

    async def claim(self) -> str | None:
        """Claim the creation of this model before anything of it is drawn: record a fresh token
        (128 random bits) and return it if it is the first claim the store holds for the model (this
        replica creates it: ``write_created``), None if another replica's claim came first (this
        replica never creates it: ``wait`` for the winner's state)."""
        token = os.urandom(16).hex()
        if await self.store.claim(self.model, token) != token:
            return None
        # The store as the claim's read-back left it: a state here under no claim is a creation whose claim
        # an operator voided while its replica still ran; that replica may have found its claim intact
        # (``confirm``) and serve it. Creating the model again could then be a second release: refuse.
        orphans = [n for n in await self.store.names(self.model) if n == "live" or n.startswith(CREATED)]
        if orphans:
            raise CheckpointError(
                f"model {self.model}: a state of it is in the checkpoint store under no claim ({', '.join(orphans)}): "
                "its claim was voided while a replica was still creating it, and that replica may serve it. This "
                "replica does not create the model. Stop every replica of this model first, then run `everlast "
                "void-claim` (it removes a creation that was never answered from; docs/OPERATIONS.md, 'A claim "
                "without its state')")
        return token

    async def write_created(self, p: Servable, offsets: dict[int, int], meta: dict[str, Any], token: str) -> None:
        """Write the winner's new state ``p`` as ``created-TOKEN`` (``token``: the claim ``claim``
        returned), so that a replica which lost the claim, or this one after a crash, restores it."""
        filled = p.reservoir_filled
        blob = codec.pack({"round_part": p.round_part(), "live_part": p.live_part(),
                           "points": p.reservoir_points(0, filled) if filled else None,
                           "offsets": {str(t): int(o) for t, o in offsets.items()}, "meta": meta})
        await self._put(CREATED + token, blob)

    async def confirm(self, token: str) -> None:
        """After ``write_created``, before anything of the new state is served or ``live`` is written:
        re-read the store (``BlobStore.refresh``) and check that ``token`` is still the winning claim
        (review of 2026-11-28, G1). An operator may have voided it while this replica was creating the
        model (``everlast void-claim`` while it still ran), and another replica may have claimed and
        created it since. Then this replica serves nothing of it and a ``CheckpointError`` stops the
        model. The state is *kept* in the store (second claim review, E1): a replica waiting on the
        claim may already have restored it, and deleting it would let a later claimant find an empty
        store and fit again, so that two fits could both be answered. A ``created-*`` under no claim
        makes every later claimant refuse to create the model; only ``everlast void-claim``, with every
        replica stopped, removes it. The write and the read are ordered like ``void-claim``'s
        tombstones and its read-back (``void.void_store_claim``): of the two, at least one sees the
        other's write, so either this replica sees the void, or the void sees this state."""
        await self.store.refresh()
        won = await self.store.claimed(self.model)
        if won == token:
            return
        raise CheckpointError(
            f"model {self.model}: its claim was voided while this replica was creating it"
            + (" and another replica has claimed it since" if won is not None else "")
            + ": this replica serves nothing of this creation, which stays in the store so that no replica "
            "creates the model again. Stop every replica of this model, then run `everlast void-claim` "
            "(docs/OPERATIONS.md, 'A claim without its state')"
        )

    async def load(self) -> Restored | None:
        """The model's checkpoint: ``live`` and its round; without one, the winning claim's
        ``created-*`` state (a creation not yet checkpointed). None: nothing was claimed, and nothing
        was ever drawn or answered. Raises ``ClaimPending`` when the model is claimed but its state is
        not in the store (yet: the winner is creating it; or never: ``wait``)."""
        raw = await self._get("live")
        if raw is None:
            return await self._load_created()
        try:
            live = codec.unpack(raw)
            k = int(live["round"])
            rblob = await self._get(f"round-{k}")
            if rblob is None or hashlib.sha256(rblob).hexdigest() != live["round_digest"]:
                raise CorruptCheckpoint(f"checkpoint of model {self.model}: round {k} is missing or does not match")
            rnd = codec.unpack(rblob)
            filled = int(live["live"].get("reservoir_filled", 0))
            points = await self._reservoir(k, filled)
            p = restore(rnd, dict(live["live"]), points)
        except CorruptState as exc:
            raise CorruptCheckpoint(f"checkpoint of model {self.model}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptCheckpoint(f"checkpoint of model {self.model} is malformed ({type(exc).__name__})") from None
        self._round_written, self._round_digest, self._res_written = k, live["round_digest"], filled
        self._live = live
        offsets = {int(tp): int(o) for tp, o in live["offsets"].items()}
        return Restored(p, offsets, dict(live.get("meta", {})))

    async def wait(self, timeout_s: float, poll_s: float = 0.5) -> Restored:
        """The state of a model another replica claimed: re-read the store (``BlobStore.refresh``)
        until ``load`` finds it, for at most ``timeout_s``; then a ``CheckpointError`` naming the
        operator's procedure. Never creates the model."""
        deadline = time.monotonic() + timeout_s
        while True:
            await self.store.refresh()
            try:
                restored = await self.load()
            except ClaimPending:
                restored = None
            if restored is not None:
                return restored
            if time.monotonic() >= deadline:
                raise CheckpointError(pending_message(self.model, timeout_s))
            await asyncio.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
            poll_s = min(poll_s * 2, 5.0)

    async def _load_created(self) -> Restored | None:
        """The claimed ``created-*`` state. Only the replica that won the claim writes one, so there is
        at most one whatever claim it is under: a restorer never needs the claims' order (which the
        Kafka store's compaction could change), only that the state's token is a claim."""
        tokens = await self.store.claim_tokens(self.model)
        if not tokens:
            return None
        names = set(await self.store.names(self.model))
        states = [t for t in tokens if CREATED + t in names]
        if not states:
            raise ClaimPending(pending_message(self.model, None))
        if len(states) > 1:
            raise CheckpointError(f"model {self.model}: {len(states)} claimed creations in the checkpoint store (one "
                                  "is ever written: was the store merged from two?); restore the store")
        raw = await self._get(CREATED + states[0])
        if raw is None:
            raise ClaimPending(pending_message(self.model, None))
        try:
            c = codec.unpack(raw)
            pts = c["points"]
            p = restore(c["round_part"], dict(c["live_part"]),
                        np.zeros(0) if pts is None else np.asarray(pts, dtype=np.float64))
            offsets = {int(tp): int(o) for tp, o in c["offsets"].items()}
            meta = dict(c["meta"])
        except CorruptState as exc:
            raise CorruptCheckpoint(f"checkpoint of model {self.model}: {exc}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CorruptCheckpoint(f"checkpoint of model {self.model} is malformed ({type(exc).__name__})") from None
        return Restored(p, offsets, meta)

    async def _reservoir(self, k: int, filled: int) -> np.ndarray:
        names = sorted(n for n in await self.store.names(self.model) if n.startswith(f"res-{k}-"))
        parts, pos = [], 0
        for n in names:
            if pos >= filled:
                break
            raw = await self._get(n)
            if raw is None:
                continue
            c = codec.unpack(raw)
            if int(c["start"]) != pos:
                continue  # a stale chunk from an interrupted save
            parts.append(np.asarray(c["points"], dtype=np.float64))
            pos = int(c["end"])
        if pos < filled:
            raise CorruptCheckpoint(f"checkpoint of model {self.model}: reservoir chunks are missing")
        if not parts:
            return np.zeros(0)
        pts = np.concatenate(parts)
        return pts[:filled]


CREATED = "created-"


class ClaimPending(CheckpointError):
    """A model is claimed but neither its checkpoint nor its first state is in the store."""


def pending_message(model: str, waited: float | None) -> str:
    """Why a claimed model without its state is refused, and what an operator can do."""
    return (
        f"model {model}: its creation was claimed but neither its checkpoint nor its first state is in the store"
        + (f" after waiting {waited:g} s" if waited is not None else "")
        + ". Another replica may still be creating it (wait, or raise checkpoint.claim_wait_seconds); if the "
        "replica that claimed it died while creating it, or the store lost its state, it is never created "
        "again silently. To create it anyway, stop every replica of this model first, then void the claim "
        f"(`everlast void-claim --config FILE {model}`): that draws fresh randomness from the training set, "
        "a second release of it if the lost creation was ever answered from (docs/OPERATIONS.md, 'A claim "
        "without its state'); or serve the data under a new model id (docs/OPERATIONS.md, 'Losing the key, or "
        "starting a model afresh')"
    )


def _round_of(name: str) -> int | None:
    if name.startswith("round-"):
        return int(name.split("-")[1])
    if name.startswith("res-"):
        return int(name.split("-")[1])
    return None
