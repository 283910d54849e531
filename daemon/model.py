"""One configured model: its configuration, schedule and guarantee (planned at start), and how
to bring it up on its partition (restored from its checkpoint, or created). While served, its
state lives in a ``daemon.partition.Served`` owned by the partition's processor."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from daemon.checkpoint.blobs import BlobStore
from daemon.checkpoint.model_state import ModelCheckpointer
from daemon.config import ModelConfig
from daemon.data import load_training
from daemon.errors import CheckpointError, ConfigError
from daemon.partition import Served, Suspension
from daemon.privacy import Guarantee, plan_model
from engine.concepts import ConceptClass, from_spec
from engine.errors import EngineError
from engine.predictor import Predictor
from engine.schedule import Schedule


@dataclass
class ModelRuntime:
    cfg: ModelConfig
    concept: ConceptClass
    schedule: Schedule
    guarantee: Guarantee
    n_train: int

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

    def meta(self, partitions: int | None) -> dict[str, Any]:
        """Fields saved with every checkpoint of this model."""
        return {"n_train": self.n_train, "partitions": partitions}

    async def activate(
        self, store: BlobStore, start_offset: int, partitions: int | None = None
    ) -> tuple[Served, ModelCheckpointer, bool]:
        """Restore from the checkpoint store, or create the predictor (its first checkpoint is
        written by the partition's ``PartitionCheckpoint`` before it answers anything, so a crash
        never re-draws the initial randomness). Returns (served, checkpointer, restored)."""
        ck = ModelCheckpointer(store, self.id)
        restored = await ck.load()
        if restored is not None:
            meta = restored.meta
            parts = meta.get("partitions")
            if parts is not None and partitions is not None and int(parts) != partitions:
                raise CheckpointError(
                    f"model {self.id}: the queries topic had {parts} partitions when this checkpoint was written "
                    f"and has {partitions} now; the model's queries would land on another partition. Restore the "
                    "partition count (docs/OPERATIONS.md, 'Partitions')."
                )
            p = restored.predictor
            served = Served(
                self.id,
                p,
                next(iter(restored.offsets.values()), start_offset),
                last_fp=meta.get("last_fp"),
                verified=bool(meta.get("handover", False)),
                suspension=Suspension.from_meta(meta, p.round),  # survives restarts until an operator acts
            )
            return served, ck, True
        x, y = load_training(self.cfg.data)
        try:
            p = Predictor.create(self.concept, self.schedule, x, y, seed=self.cfg.seed)
        except EngineError as exc:
            raise ConfigError(f"model {self.id}: {exc}") from None
        return Served(self.id, p, start_offset), ck, False

    def info(self) -> dict[str, Any]:
        return {"model": self.id, "concept": self.concept.name, "n_train": self.n_train, **self.guarantee.to_json()}
