"""One configured model: its configuration, mechanism and guarantee (planned at start), and how
to bring it up on its partition (restored from its checkpoint, or created). While served, its
state lives in a ``daemon.partition.Served`` owned by the partition's processor.

Two mechanisms (``ModelConfig.mechanism``): GenericBBL (``generic-bbl``, the default: a schedule,
planned or certified) and the generic private learner (``private-learner``: one hypothesis released
by the exponential mechanism when the model is first created, then restored from its checkpoint
forever -- never refitted, because a second fit with fresh randomness is a second release). A
checkpoint is only ever served under the configuration that wrote it: another mechanism, or a
learner with other settings, is refused (its certificate would not be the one reported)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from everlast.daemon.checkpoint.blobs import BlobStore
from everlast.daemon.checkpoint.model_state import ClaimPending, ModelCheckpointer, Restored
from everlast.daemon.config import ModelConfig
from everlast.daemon.data import dimension_error, load_training
from everlast.daemon.errors import CheckpointError, ConfigError
from everlast.daemon.partition import BurnTally, Served, Suspension
from everlast.daemon.privacy import Guarantee, capacity_summary, certify_running, learner_guarantee, plan_model
from everlast.engine.concepts import ConceptClass, from_spec
from everlast.engine.errors import EngineError, InvalidState
from everlast.engine.learner.domain import Domain
from everlast.engine.learner.model import PrivateLearner, check_epsilon, concept_spec, validator_spec
from everlast.engine.learner.validate import MIN_HOLDOUT, holdout_size
from everlast.engine.phases import Phase
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import Schedule
from everlast.engine.serving import RoundInfo, Servable

log = logging.getLogger("everlast.daemon")


def learner_spec(cfg: ModelConfig) -> dict[str, Any]:
    """The learner's class as configured (trees carry their depth); raises ``InvalidInput``."""
    return concept_spec({"name": cfg.concept, "d": cfg.d, **({"depth": cfg.depth} if cfg.concept == "trees" else {})})


REFIT = ("not served, never refitted: a fit of the same data under a new model id is a second release, and the two "
         "releases' epsilons add up")
"""The learner's accuracy refusals end with this (docs/OPERATIONS.md, 'Serving the private learner')."""


@dataclass
class ModelRuntime:
    cfg: ModelConfig
    concept: ConceptClass
    schedule: Schedule | None
    """GenericBBL's schedule (None for the private learner)."""
    guarantee: Guarantee
    n_train: int
    domain: Domain | None = None
    """The private learner's declared domain (None for GenericBBL)."""
    adopted: str | None = None
    """Set when a restored checkpoint runs another schedule than the configuration's: what differs
    (``schedule`` and ``guarantee`` are then the checkpoint's; ``Service`` logs it)."""
    data_fp: str = ""
    """SHA-256 of the training set (points and labels, their shapes and types): saved with every
    checkpoint (never logged: a hash of the data is not published), compared at restore."""
    identity: dict[str, Any] = field(default_factory=dict)
    """The configuration that makes the model what it is (mechanism, class, dimension, the learner's
    settings; not the schedule, which a model keeps from its creation): saved and compared too."""

    @property
    def id(self) -> str:
        return self.cfg.id

    @property
    def mechanism(self) -> str:
        return self.cfg.mechanism

    @classmethod
    def prepare(cls, cfg: ModelConfig) -> ModelRuntime:
        """At start: read the training set's size, plan or certify the schedule (GenericBBL) or the
        learner's certificate. Raises ``ConfigError`` (saying what would work) when the targets
        cannot be met."""
        concept = from_spec(validator_spec(learner_spec(cfg)) if cfg.concept == "trees" else
                            {"name": cfg.concept, "d": cfg.d})
        x, y = load_training(cfg.data)
        wrong = dimension_error(cfg.data, x, cfg.concept, cfg.d)
        if wrong is not None:
            raise ConfigError(f"model {cfg.id}: {wrong}")
        n = int(x.shape[0])
        if cfg.mechanism == "private-learner":
            m = cls._prepare_learner(cfg, concept, x, y)
        else:
            schedule, guarantee = plan_model(cfg, concept, n)
            if n < schedule.initial_size:
                raise ConfigError(
                    f"model {cfg.id}: the training set has {n} examples but the schedule needs "
                    f"{schedule.initial_size} (lambda_1 * T_1)"
                )
            log.info("model %s: %s", cfg.id, capacity_summary(cfg, concept, schedule))
            m = cls(cfg, concept, schedule, guarantee, n)
        m.data_fp, m.identity = data_fingerprint(x, y), identity_of(cfg)
        return m

    @classmethod
    def _prepare_learner(cls, cfg: ModelConfig, concept: ConceptClass, x: Any, y: Any) -> ModelRuntime:
        """Validate what ``PrivateLearner.fit`` will take (so that a bad training set stops the start,
        not an assignment), check the domain against the data, and compute the certificate."""
        from everlast.engine.concepts.base import check_labels

        lc = cfg.learner
        assert lc is not None
        try:
            learner_spec(cfg)
            domain = Domain.from_spec(lc.domain_spec())
            xs = concept.validate_points(x, "training")
            n = int(xs.shape[0])
            if n == 0:
                raise ConfigError(f"model {cfg.id}: the training set is empty")
            check_labels(y, n)
            check_epsilon(lc.epsilon, n)
            domain.positions(xs, "training")
        except EngineError as exc:
            raise ConfigError(f"model {cfg.id}: {exc}") from None
        # No check of the domain against the data: whether the daemon starts must not depend on the
        # training set (a refusal that neighbouring data sets can flip is a release no theorem covers;
        # docs/privacy/learner.md 1). A grid gets a start-up warning, the same for every data set.
        g = learner_guarantee(cfg, n, domain.size, domain.describe(), domain.kind)
        return cls(cfg, concept, None, g, n, domain)

    def meta(self, partitions: int | None) -> dict[str, Any]:
        """Fields saved with every checkpoint of this model."""
        out: dict[str, Any] = {"n_train": self.n_train, "partitions": partitions, "mechanism": self.mechanism,
                               "data_fp": self.data_fp, "identity": self.identity}
        if self.cfg.learner is not None and self.mechanism == "private-learner":
            out["guarantee"] = self.cfg.learner.guarantee  # checked on restore (``check_restored``)
        return out

    def unrestored(self, offset: int, reason: str) -> Served:
        """The model when its state cannot be served (``Served.frozen``): suspended with ``reason``,
        its engine a placeholder that is never called. ``offset``: where its published answers end
        (its queries before it get nothing more; from it on, refusals)."""
        engine = Unrestored(self.mechanism, int(self.concept.point_dim))
        s = Served(self.id, engine, offset, frozen=True, broken=True)
        s.suspension = Suspension(reason, 0, offset, True)
        return s

    async def activate(
        self, store: BlobStore, start_offset: int, partitions: int | None = None, journal: str | None = None,
        partition: int = 0, claim_wait_s: float = 300.0, published: int | None = None,
    ) -> tuple[Served, ModelCheckpointer, bool]:
        """Restore from the checkpoint store, or create the model (GenericBBL: its predictor; the
        learner: its one fit, on OS entropy) on ``partition``. The first checkpoint is written by the
        partition's ``PartitionCheckpoint`` before it answers anything, so a crash never re-draws the
        initial randomness of anything published. ``journal``: the id of this daemon's journal (a
        checkpoint written beside it says which of its rows it covers). Returns (served,
        checkpointer, restored).

        A model is claimed before it is created (``ModelCheckpointer.claim``; docs/privacy/learner.md 2,
        "One fit per model"): only the replica whose claim the store records first fits it (or builds
        GenericBBL's first round), so which fit is released never depends on how long a fit takes. A
        replica that loses the claim, or finds the model claimed but its state not yet written, never
        creates it: it waits up to ``claim_wait_s`` for the winner's state and restores it (returned as
        restored), or raises ``CheckpointError`` naming the operator's procedure. The winner serves its
        creation only if its claim still wins once its state is written (``ModelCheckpointer.confirm``:
        an operator may have voided it meanwhile).

        A creation runs on a worker thread (``create_engine``): the learner's fit and GenericBBL's
        first round take a time that depends on the training data, and the event loop keeps
        answering /healthz, /readyz and /metrics meanwhile. When it finishes is still visible (the
        model becomes ready then): a timing channel no theorem covers (docs/privacy/learner.md 2,
        docs/privacy/genericbbl.md 8)."""
        ck = ModelCheckpointer(store, self.id)
        try:
            # The Kafka store's view is refreshed once per assignment, so it may be stale here (an earlier
            # model's fit took long): harmless, since nothing is decided from it -- ``claim`` and ``wait``
            # re-read the store before they decide (review of 2026-11-28, N3).
            restored = await ck.load()
        except ClaimPending:
            if published:  # this daemon claimed and answered it: its state is lost, not on its way
                raise CheckpointError(checkpoint_lost(self.id, published)) from None
            restored = await self._wait(ck, claim_wait_s, "claimed by a replica whose state is not in the store yet")
        if restored is not None:
            return self.validated(self._restored(restored, start_offset, partitions, journal)), ck, True
        if published:  # creating it again would be a second release of its training data
            raise CheckpointError(checkpoint_lost(self.id, published))
        token = await ck.claim()
        if token is None:
            restored = await self._wait(ck, claim_wait_s, "another replica claimed it first")
            return self.validated(self._restored(restored, start_offset, partitions, journal)), ck, True
        log.info("model %s: no checkpoint, creation claimed: %s on its %d training examples (off the event loop; "
                 "/healthz and /metrics keep answering)", self.id,
                 "fitting the private learner" if self.mechanism == "private-learner" else "building round 1",
                 self.n_train)
        engine = await asyncio.to_thread(self.create_engine)
        meta = {**self.meta(partitions), "handover": False}
        for attempt in range(6):  # the claim is this replica's alone: a state not written leaves the model refused
            try:
                await ck.write_created(engine, {partition: start_offset}, meta, token)
                break
            except CheckpointError as exc:
                if attempt == 5:
                    raise
                log.warning("model %s: cannot write its first state (%s); retrying", self.id, type(exc).__name__)
                await asyncio.sleep(0.5 * 2**attempt)
        await ck.confirm(token)  # the claim still wins (not voided meanwhile): only then is anything served
        return self.validated(Served(self.id, engine, start_offset)), ck, False

    def validated(self, s: Served) -> Served:
        """The learner's released model, once fitted or restored: its validated certificate (Theorem V,
        docs/privacy/learner.md 10) joins the guarantee's details (public: a post-processing of the
        release), the start-up report says it, a constant model is warned of, and under guarantee =
        "validated" a fit whose certificate misses ``alpha`` (its margin over the measured holdout error)
        or ``max_error`` is suspended -- never refitted (a refit is a second release)."""
        p = s.engine
        if not isinstance(p, PrivateLearner):
            return s
        lc = self.cfg.learner
        assert lc is not None
        dt = self.guarantee.details
        v = p.validation
        constant = p.constant()
        dt["constant"] = constant
        if constant and p.domain.size > 1:
            log.warning("model %s: the released model labels every point alike (a constant model) although the "
                        "class holds non-constant ones: epsilon or n is too small for this domain; a public "
                        "per-feature range (domain = { kind = \"bins\", lo = [..], hi = [..] }) spends no "
                        "probability on cuts outside it (docs/privacy/learner.md 1, 10)", self.id)
        if v is None:
            dt["validated"] = None
            if lc.guarantee == "validated":
                log.warning("model %s: no validated certificate (holdout = %g of n = %d holds fewer than the "
                            "%d examples a certificate needs)", self.id, lc.holdout_share, self.n_train, MIN_HOLDOUT)
            return s
        margin = v.bound - max(v.noisy_errors, 0) / v.m
        dt["validated"] = {**v.to_dict(), "margin": margin, "sentence": v.sentence()}
        log.info("model %s: %s", self.id, v.sentence())
        if lc.guarantee != "validated" or s.suspension is not None:
            return s
        why = None
        if lc.alpha is not None and margin > lc.alpha:
            why = (f"margin {margin:.3g} over the measured holdout error exceeds alpha = {lc.alpha:g} "
                   f"({v.sentence()}); {REFIT}")
        elif lc.max_error is not None and v.bound > lc.max_error:
            why = f"{v.sentence()} exceeds max_error = {lc.max_error:g}; {REFIT}"
        if why is not None:
            log.warning("model %s: refused: %s", self.id, why)
            s.suspension = Suspension(f"accuracy: {why}"[:400], 0, s.offset, False)
        return s

    async def _wait(self, ck: ModelCheckpointer, timeout_s: float, why: str) -> Restored:
        log.warning("model %s: %s: waiting up to %g s for its state; this replica never creates it (one release "
                    "of the training set; docs/privacy/learner.md 2)", self.id, why, timeout_s)
        return await ck.wait(timeout_s)

    def _restored(self, restored: Restored, start_offset: int, partitions: int | None, journal: str | None) -> Served:
        meta = restored.meta
        parts = meta.get("partitions")
        if parts is not None and partitions is not None and int(parts) != partitions:
            raise CheckpointError(
                f"model {self.id}: the queries topic had {parts} partitions when this checkpoint was written "
                f"and has {partitions} now; the model's queries would land on another partition. Restore the "
                "partition count (docs/OPERATIONS.md, 'Partitions')."
            )
        p = restored.predictor
        self.check_restored(p, meta.get("guarantee"))  # the mechanism and the learner's settings, in their own words
        self.check_bound(meta)  # then the data and the rest of the configuration
        if not isinstance(p, PrivateLearner):
            self._adopt(getattr(p, "schedule", None))  # only for a checkpoint that is served
        return Served(
            self.id,
            p,
            next(iter(restored.offsets.values()), start_offset),
            last_fp=meta.get("last_fp"),
            log_end=int(meta.get("log_end", 0)),
            verified=bool(meta.get("handover", False)),
            suspension=Suspension.from_meta(meta, p.round),  # survives restarts until an operator acts
            burn=BurnTally.from_meta(meta.get("burn")),
            journal_seq=int(meta.get("journal_seq", 0)) if journal is not None and meta.get("journal") == journal
            else None,
            marks_id=None if meta.get("marks") is None else str(meta["marks"]),
        )

    def create_engine(self) -> Servable:
        """Read the training set and build the model's engine: the learner's one fit (on OS entropy)
        or GenericBBL's predictor. Blocking and CPU-bound: ``activate`` runs it on a worker thread."""
        x, y = load_training(self.cfg.data)
        try:
            if self.cfg.mechanism == "private-learner":
                lc = self.cfg.learner
                assert lc is not None and self.domain is not None
                # seed=None: 256 bits of OS entropy per generator (trees: per node). Privacy rests on two
                # assumptions (docs/privacy/learner.md 2, 7, 8): the OS generator is indistinguishable from
                # uniform bits, and PCG64's words from such a seed serve as the sampler's fair bits (a heuristic
                # about PCG64, not a cryptographic one). The config refuses a seed: a seeded fit has no claim.
                return PrivateLearner.fit(learner_spec(self.cfg), x, y, epsilon=lc.epsilon,
                                          domain=self.domain, seed=None, holdout=lc.holdout_share,
                                          beta=lc.validation_beta)
            assert self.schedule is not None
            return Predictor.create(self.concept, self.schedule, x, y, seed=self.cfg.seed)
        except EngineError as exc:
            raise ConfigError(f"model {self.id}: {exc}") from None

    def check_bound(self, meta: dict[str, Any]) -> None:
        """Refuse a checkpoint made from other training data or another configuration than this one:
        say what changed, and how to serve the new one (a new model id) or keep the old one."""
        changed = []
        fp = meta.get("data_fp")
        if fp and fp != self.data_fp:
            changed.append(f"the training data (the file {self.cfg.data} holds other data than the checkpoint's "
                           "model was made from)")
        was = meta.get("identity")
        if isinstance(was, dict):
            changed += [f"{k}: checkpoint {was.get(k)!r}, configuration {self.identity.get(k)!r}"
                        for k in sorted(set(was) | set(self.identity)) if was.get(k) != self.identity.get(k)]
        if not fp:
            log.warning("model %s: its checkpoint records no fingerprint of its training data and configuration "
                        "(written by an earlier version): they cannot be checked this once; its next checkpoint "
                        "records them", self.id)
        if changed:
            raise CheckpointError(
                f"model {self.id}: its checkpoint is bound to other data or configuration ({'; '.join(changed)}). A "
                "model never changes its training set or configuration. To serve the new ones, give them a new model "
                "id (a new run on the data, whose privacy cost composes with the old one's); to keep the old model, "
                "restore its data file and configuration (docs/OPERATIONS.md, 'A model refused at start')")

    def check_restored(self, p: Servable, guarantee: str | None = None) -> None:
        """Refuse a checkpoint written under another mechanism or, for the learner, other settings
        (epsilon, class, domain, n, the held-out size, validation_beta and -- when the checkpoint's
        metadata records it, ``guarantee`` -- the guarantee): the model would serve a release whose
        certificate is not the one this configuration reports."""
        if p.mechanism != self.mechanism:
            raise CheckpointError(
                f"model {self.id}: its checkpoint holds a {p.mechanism} model but the configuration says "
                f"mechanism = \"{self.mechanism}\"; a checkpoint is never served under another mechanism's "
                f"certificate. Restore the configuration (mechanism = \"{p.mechanism}\"), or serve the new "
                "mechanism under a new model id (docs/OPERATIONS.md, 'Losing the key, or starting a model afresh')."
            )
        if not isinstance(p, PrivateLearner):
            return
        lc = self.cfg.learner
        assert lc is not None and self.domain is not None
        v = p.validation
        want: dict[str, Any] = {"epsilon": lc.epsilon, "concept": learner_spec(self.cfg),
                                "domain": self.domain.describe(), "n": self.n_train,
                                "holdout": holdout_size(self.n_train, lc.holdout_share)}
        have: dict[str, Any] = {"epsilon": p.epsilon, "concept": p.spec, "domain": p.domain.describe(),
                                "n": p.n_train, "holdout": 0 if v is None else v.m}
        if v is not None:  # no holdout: no beta was used
            want["validation_beta"], have["validation_beta"] = lc.validation_beta, v.beta
        if guarantee is not None:  # checkpoints written before the guarantee was recorded carry none
            want["guarantee"], have["guarantee"] = lc.guarantee, guarantee
        diff = [k for k in want if want[k] != have[k]] or ([] if p.domain == self.domain else ["domain"])
        if diff:
            said = ", ".join(f"{k}: checkpoint {have[k]!r}, configuration {want[k]!r}" for k in diff)
            raise CheckpointError(
                f"model {self.id}: its checkpoint was fitted with other settings ({said}). The fitted hypothesis "
                "is never refitted (a new fit is a second release: another epsilon on the same data). Restore "
                "the configuration; a fit under a new model id is a second release of the same data, and the "
                "two releases' epsilons add up (docs/OPERATIONS.md, 'Serving the private learner')."
            )

    def _adopt(self, running: Any) -> None:
        """A GenericBBL model keeps the schedule it was created with (its checkpoint holds it). When
        the configuration now says otherwise (quotas or the burn-rate signal added or removed, other
        rounds), the certificate reported is recomputed for the schedule that runs: every number
        printed is the running mechanism's."""
        if not isinstance(running, Schedule) or self.schedule is None or running == self.schedule:
            return
        a, b = running.to_dict(), self.schedule.to_dict()
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        self.adopted = ", ".join(diff) or "the schedule"
        self.schedule = running
        self.guarantee = certify_running(self.cfg, running, self.n_train)

    def info(self) -> dict[str, Any]:
        return {"model": self.id, "concept": self.cfg.concept, "n_train": self.n_train, **self.guarantee.to_json()}


def checkpoint_lost(model: str, published: int) -> str:
    return (f"model {model}: its checkpoint is lost (the store holds no state of it), but this daemon published "
            f"its answers up to offset {published} (its published mark): creating it again would draw fresh "
            "randomness from its training data, a second release. Restore a backup of its checkpoint taken after "
            "those answers, or retire the model (docs/OPERATIONS.md, 'A model refused at start')")


def data_fingerprint(x: Any, y: Any) -> str:
    """SHA-256 of a training set: its points and labels with their types and shapes."""
    h = hashlib.sha256(b"everlast training set v1")
    for a in (np.ascontiguousarray(x), np.ascontiguousarray(y)):
        h.update(f"/{a.dtype.str}/{a.shape}/".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def identity_of(cfg: ModelConfig) -> dict[str, Any]:
    """The public settings a model is made of (compared at restore; the schedule is not: a model keeps
    the one it was created with, ``ModelRuntime._adopt``), as plain JSON values (as they read back)."""
    out: dict[str, Any] = {"mechanism": cfg.mechanism, "concept": cfg.concept, "d": cfg.d}
    if cfg.concept == "trees":
        out["depth"] = cfg.depth
    if cfg.learner is not None:
        out["learner"] = {"epsilon": cfg.learner.epsilon, "domain": cfg.learner.domain_spec()}
    return dict(json.loads(json.dumps(out, default=str)))


class Unrestored:
    """The engine of a model whose state could not be restored (``Served.frozen``): it says what the
    processor needs to refuse its queries (its dimension, no rounds) and raises on anything else."""

    has_rounds = False
    answers_change_state = True
    phase = Phase.ANSWERING
    round = 0
    capacity: int | None = None
    reservoir_filled = 0

    def __init__(self, mechanism: str, point_dim: int) -> None:
        self.mechanism = mechanism
        self.point_dim = point_dim

    def round_info(self) -> RoundInfo | None:
        return None

    def _never(self, *_: Any) -> Any:
        raise InvalidState("the model's state was not restored: it is never called")

    answer = transition = round_part = live_part = reservoir_points = _never
