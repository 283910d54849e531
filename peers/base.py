"""The interface every peer implements, its privacy-accounting value, and the pieces peers share.

Interface (``StreamPredictor``): ``answer(x)`` takes a batch of query points and returns one int8
label per point, 0 or 1 when answered from data, -1 when refused. Once a peer's budget is spent
it refuses every further query -- it never answers from data again. ``answered`` counts the
queries answered from data so far; ``exhausted`` says the budget is spent.

Every peer is seeded and deterministic: its answers are a function of (seed, training set, query
sequence) only, and of nothing else -- not of how the sequence is cut into batches (each random
stream is consumed in a fixed order per query; ``engine.rng`` explains why PCG64 makes this hold).

Neighbouring relation (all peers): two training sets of the same size that differ in one example
(substitution). For the subsample-and-aggregate peers the chunks are fixed positions of a
data-independent random permutation, so a substitution changes exactly one chunk, hence at most
one classifier, hence the vote count on any query by at most 1 (sensitivity 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts import ConceptClass, Ensemble
from everlast.engine.concepts.base import check_labels
from everlast.engine.errors import InvalidInput

I8 = NDArray[np.int8]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

SUBSTITUTION = "substitution: training sets of equal size differing in one example"
REFUSED = -1


class PeerError(ValueError):
    """Root of the errors peers raise (messages never contain data values)."""


class OutsideDomain(PeerError, InvalidInput):
    """A point is not in the peer's finite domain (the grid of the private learner)."""


class InfiniteDomain(PeerError):
    """The method needs a finite domain and was given none (private learning of thresholds)."""


class UnsupportedConcept(PeerError):
    """The peer is implemented for another concept class only."""


class TooFewExamples(PeerError):
    """The training set cannot feed the peer's design; ``required`` says how many it needs."""

    def __init__(self, given: int, required: int, what: str) -> None:
        super().__init__(f"{what}: the training set has {given} examples, at least {required} are needed")
        self.given = given
        self.required = required


@dataclass(frozen=True, slots=True)
class PrivacyAccounting:
    """What a peer guarantees, in numbers and in words.

    ``(epsilon, delta)`` is the differential-privacy guarantee for the *training set* over the whole
    interaction -- every query the peer will ever answer from data, against an adaptive querier --
    under ``neighbouring``. ``epsilon = inf`` means no guarantee.
    """

    epsilon: float
    delta: float
    protects_queries: bool
    """True when the answers given to everyone else reveal nothing about one querier's point."""
    note: str
    """Plain words: what is protected, by which theorem, and what is not."""
    max_queries: int | None = None
    """Queries answered from data before the peer refuses: exactly this many for the per-query
    peers (Dwork-Feldman, Dagan-Feldman), at most this many for the sparse-vector peer (it also
    stops at its cutoff); ``None``: no limit."""
    per_query_epsilon: float | None = None
    """The pure-DP parameter one answer (or one sparse-vector instance) costs, when that is the unit."""
    accountants: tuple[tuple[str, float | None], ...] = ()
    """Epsilon at ``delta`` from each composition accountant evaluated (``None``: not evaluated)."""
    accountant_used: str | None = None
    """The accountant whose bound is the tightest at the budget (the one ``epsilon`` comes from)."""
    neighbouring: str = SUBSTITUTION
    extra: tuple[tuple[str, float], ...] = field(default=())
    """Other numbers of the accounting (mechanism parameters), for reports."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict (inf stays a float; ``cli.common.emit_json`` turns it into null)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "protects_queries": self.protects_queries,
            "note": self.note,
            "max_queries": self.max_queries,
            "per_query_epsilon": self.per_query_epsilon,
            "accountants": dict(self.accountants),
            "accountant_used": self.accountant_used,
            "neighbouring": self.neighbouring,
            **{k: v for k, v in self.extra},
        }


@runtime_checkable
class StreamPredictor(Protocol):
    """Answer a stream of queries; refuse (label -1) once the budget is spent."""

    @property
    def name(self) -> str:
        """Registry name of the method."""
        ...

    @property
    def privacy(self) -> PrivacyAccounting:
        """The guarantee for the training set (fixed at construction)."""
        ...

    @property
    def answered(self) -> int:
        """Queries answered from data so far."""
        ...

    @property
    def exhausted(self) -> bool:
        """True once every further query will be refused."""
        ...

    def answer(self, x: Any) -> I8:
        """One label per query: 0/1 answered from data, -1 refused."""
        ...


# --- finite domains ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Grid:
    """The finite domain X = {lo + k (hi - lo) / (size - 1) : k = 0..size-1} (size >= 2)."""

    lo: float
    hi: float
    size: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise PeerError("grid bounds must be finite with lo < hi")
        if self.size < 2 or self.size > 2**62:
            raise PeerError("grid size must be between 2 and 2^62")

    @property
    def step(self) -> float:
        return (self.hi - self.lo) / (self.size - 1)

    def points(self, k: I64) -> F64:
        """Grid points of indices ``k``."""
        return self.lo + k.astype(np.float64) * self.step

    def index(self, x: F64, what: str = "query") -> I64:
        """The grid index of each point; raises ``OutsideDomain`` (naming the position only) for a
        point that is not a grid point (tolerance: 1e-9 of a step, for float round-off)."""
        k = np.rint((x - self.lo) / self.step)
        bad = (k < 0) | (k > self.size - 1) | (np.abs(self.lo + k * self.step - x) > 1e-9 * self.step)
        if bad.any():
            raise OutsideDomain(
                f"{what} point at position {int(np.argmax(bad))} is not a point of the grid domain "
                f"(the private learner is defined on a finite grid only)"
            )
        return k.astype(np.int64)

    def snap(self, x: F64) -> F64:
        """The nearest grid point of each point (clipped to [lo, hi]): to put task samples on the grid."""
        k = np.clip(np.rint((x - self.lo) / self.step), 0, self.size - 1).astype(np.int64)
        return self.points(k)


# --- subsample-and-aggregate, shared by the ensemble peers --------------------------------------


def training_set(concept: ConceptClass, x: Any, y: Any) -> tuple[F64, I8]:
    """Validated training points and labels (``engine`` errors, no values in messages)."""
    xs = concept.validate_points(x, "training")
    if xs.shape[0] == 0:
        raise InvalidInput("the training set is empty")
    return xs, check_labels(y, xs.shape[0])


def fit_ensemble(concept: ConceptClass, x: F64, y: I8, T: int, lam: int, rng: np.random.Generator) -> Ensemble:
    """Subsample-and-aggregate's first half: a data-independent random permutation of the
    positions, the first T * lam of them cut into T chunks of lam, one ERM classifier per chunk
    (``ConceptClass.fit``, vectorized over chunks)."""
    n = x.shape[0]
    if T < 1 or lam < 1:
        raise PeerError("the ensemble needs T >= 1 chunks of lam >= 1 examples")
    if T * lam > n:
        raise TooFewExamples(n, T * lam, f"{T} chunks of {lam}")
    pick = rng.permutation(n)[: T * lam]
    return concept.fit(x[pick].reshape(T, lam, *x.shape[1:]), y[pick].reshape(T, lam))


def majority(votes: I64, T: int) -> I8:
    """Plain majority 1[2 v > T] (a tie goes to 0)."""
    return (2 * votes > T).astype(np.int8)


def distance_to_instability(votes: I64, T: int) -> I64:
    """How many classifiers can change without flipping ``majority`` (Thakurta-Smith 2013):
    v - floor(T/2) - 1 when 2v > T, else floor(T/2) - v. Sensitivity 1 in the ensemble; a value
    >= 1 means one substituted example cannot change the majority."""
    h = T // 2
    return np.where(2 * votes > T, votes - h - 1, h - votes).astype(np.int64)


def refusals(n: int) -> I8:
    return np.full(n, REFUSED, dtype=np.int8)


def streams(seed: int | None, names: tuple[str, ...]) -> dict[str, np.random.Generator]:
    """Independent PCG64 streams spawned from one root seed, one per purpose, in ``names`` order."""
    root = np.random.SeedSequence(seed)
    return {nm: np.random.Generator(np.random.PCG64(ss)) for nm, ss in zip(names, root.spawn(len(names)), strict=True)}


class PeerState:
    """What every peer carries: its accounting (fixed at construction) and how many queries it has
    answered from data. Subclasses set ``_privacy`` and ``_answered`` in ``__init__``."""

    _privacy: PrivacyAccounting
    _answered: int

    @property
    def privacy(self) -> PrivacyAccounting:
        return self._privacy

    @property
    def answered(self) -> int:
        return self._answered


class BudgetedPeer(PeerState):
    """A peer that answers exactly ``budget`` queries from data (the count its accounting allows),
    then refuses every further one. Subclasses also set ``budget`` and ``concept``."""

    budget: int
    concept: ConceptClass

    @property
    def exhausted(self) -> bool:
        return self._answered >= self.budget

    def _admit(self, x: Any) -> tuple[F64, int, I8]:
        """Validated points, how many of them the budget still covers (a prefix), and the output
        array with every label refused (the caller fills in the first k)."""
        xs = self.concept.validate_points(x)
        n = xs.shape[0]
        return xs, min(n, self.budget - self._answered), refusals(n)
