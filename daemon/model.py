"""One served model: its configuration, schedule and guarantee, and (while this replica owns its
partition) the live predictor with its checkpointer."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from daemon.checkpoint.blobs import BlobStore
from daemon.checkpoint.model_state import ModelCheckpointer
from daemon.config import ModelConfig
from daemon.data import load_training
from daemon.errors import CheckpointError, ConfigError
from daemon.privacy import Guarantee, plan_model
from engine.concepts import ConceptClass, from_spec
from engine.errors import EngineError
from engine.predictor import Predictor
from engine.schedule import Schedule
from engine.serving import Servable


@dataclass
class ModelRuntime:
    cfg: ModelConfig
    concept: ConceptClass
    schedule: Schedule
    guarantee: Guarantee
    n_train: int
    predictor: Servable | None = None
    checkpointer: ModelCheckpointer | None = None
    offset: int = 0
    """Next input offset this model has not processed (on its home partition)."""
    since_checkpoint: int = 0
    last_checkpoint: float = field(default_factory=time.monotonic)
    transitioning: bool = False
    unverified_restore: bool = False
    """Restored from a periodic checkpoint and not yet seen the log at that offset (answers may have
    been published beyond the checkpoint; only a replay from an intact log reproduces them)."""
    last_fp: str | None = None
    """Fingerprint of the last record processed on the home partition (saved with the checkpoint)."""
    partitions: int | None = None
    """Partition count of the queries topic this model was placed with (saved with the checkpoint)."""
    suspended: str | None = None
    """Why the model refuses (set when its state can no longer be proven consistent)."""

    @property
    def id(self) -> str:
        return self.cfg.id

    @classmethod
    def prepare(cls, cfg: ModelConfig) -> ModelRuntime:
        """At start: read the training set's size, plan or certify the schedule. Raises
        ``ConfigError`` (saying what would work) when the targets cannot be met."""
        concept = from_spec({"name": cfg.concept, "d": cfg.d})
        x, _y = load_training(cfg.data)
        n = int(x.shape[0])
        schedule, guarantee = plan_model(cfg, concept, n)
        if n < schedule.initial_size:
            raise ConfigError(
                f"model {cfg.id}: the training set has {n} examples but the schedule needs "
                f"{schedule.initial_size} (lambda_1 * T_1)"
            )
        return cls(cfg, concept, schedule, guarantee, n)

    async def activate(self, store: BlobStore, start_offset: int, partitions: int | None = None) -> bool:
        """Restore from the checkpoint store, or create the predictor and checkpoint it *before*
        answering anything (so a crash never re-draws the initial randomness). Returns True if
        restored."""
        self.checkpointer = ModelCheckpointer(store, self.id)
        self.partitions = partitions
        restored = await self.checkpointer.load()
        if restored is not None:
            self.predictor = restored.predictor
            self.offset = next(iter(restored.offsets.values()), start_offset)
            self.unverified_restore = not restored.meta.get("handover", False)
            self.last_fp = restored.meta.get("last_fp")
            self.suspended = restored.meta.get("suspended")  # survives restarts until an operator acts
            parts = restored.meta.get("partitions")
            if parts is not None and partitions is not None and int(parts) != partitions:
                raise CheckpointError(
                    f"model {self.id}: the queries topic had {parts} partitions when this checkpoint was written "
                    f"and has {partitions} now; the model's queries would land on another partition. Restore the "
                    "partition count (docs/OPERATIONS.md, 'Partitions')."
                )
            return True
        x, y = load_training(self.cfg.data)
        try:
            self.predictor = Predictor.create(self.concept, self.schedule, x, y, seed=self.cfg.seed)
        except EngineError as exc:
            raise ConfigError(f"model {self.id}: {exc}") from None
        self.offset = start_offset
        return False

    def deactivate(self) -> None:
        self.predictor = None
        self.checkpointer = None

    async def checkpoint(self, partition: int, handover: bool = False) -> None:
        """``handover``: written at a clean stop or a partition hand-over, when no answer has been
        published beyond it; a restore from it is exact even if the broker has lost the log."""
        assert self.predictor is not None and self.checkpointer is not None
        meta = {"n_train": self.n_train, "handover": handover, "last_fp": self.last_fp,
                "suspended": self.suspended, "partitions": self.partitions}
        await self.checkpointer.save(self.predictor, {partition: self.offset}, meta)
        self.since_checkpoint = 0
        self.last_checkpoint = time.monotonic()

    def stack(self, xs: list[tuple[float, ...]]) -> NDArray[np.float64]:
        """Per-record coordinate tuples as the engine's batch layout (one conversion per batch)."""
        arr = np.asarray(xs, dtype=np.float64).reshape(len(xs), self.concept.point_dim)
        return arr[:, 0] if self.concept.point_dim == 1 else arr

    def info(self) -> dict[str, Any]:
        return {"model": self.id, "concept": self.concept.name, "n_train": self.n_train, **self.guarantee.to_json()}
