"""One model's checkpoint on a blob store: what changed since the last save, and restore.

Blobs (all msgpack via ``engine.codec``):
  ``round-K``        {"format", "concept", "schedule", "round_state"}: written once per round
  ``res-K-START``    {"start", "end", "points"}: D-hat points appended since the previous save
  ``live``           {"live" (engine live state without reservoir points), "offsets", "round",
                      "round_digest", "meta"}: written at every save, last (it commits the rest)
A write puts the round blob (if new), the reservoir chunk (if any), then ``live``; older rounds
are pruned only after the new ``live`` is durable, so a crash at any point leaves a consistent
checkpoint. The order across a partition's models is ``PartitionCheckpoint``'s
(``daemon/checkpoint/checkpoint.py``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from everlast.daemon.checkpoint.blobs import BlobStore
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
            await self.store.put(self.model, f"round-{k}", blob)
            self._round_written, self._round_digest, self._res_written = k, hashlib.sha256(blob).hexdigest(), 0
        filled = p.reservoir_filled
        if filled > self._res_written:
            chunk = codec.pack(
                {"start": self._res_written, "end": filled, "points": p.reservoir_points(self._res_written, filled)}
            )
            await self.store.put(self.model, f"res-{k}-{self._res_written:015d}", chunk)
            self._res_written = filled
        live = {
            "live": p.live_part(),
            "offsets": {str(tp): int(o) for tp, o in offsets.items()},
            "round": k,
            "round_digest": self._round_digest,
            "meta": meta or {},
        }
        await self.store.put(self.model, "live", codec.pack(live))
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
        await self.store.put(self.model, "live", codec.pack(self._live))
        self.saves += 1

    async def prune(self) -> None:
        """Delete the blobs of earlier rounds (after ``live`` names the current one)."""
        k = self._round_written
        stale = [n for n in await self.store.names(self.model) if _round_of(n) not in (None, k)]
        if stale:
            await self.store.delete(self.model, stale)

    async def load(self) -> Restored | None:
        raw = await self.store.get(self.model, "live")
        if raw is None:
            return None
        try:
            live = codec.unpack(raw)
            k = int(live["round"])
            rblob = await self.store.get(self.model, f"round-{k}")
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

    async def _reservoir(self, k: int, filled: int) -> np.ndarray:
        names = sorted(n for n in await self.store.names(self.model) if n.startswith(f"res-{k}-"))
        parts, pos = [], 0
        for n in names:
            if pos >= filled:
                break
            raw = await self.store.get(self.model, n)
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


def _round_of(name: str) -> int | None:
    if name.startswith("round-"):
        return int(name.split("-")[1])
    if name.startswith("res-"):
        return int(name.split("-")[1])
    return None
