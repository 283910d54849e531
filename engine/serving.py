"""What a served mechanism offers the daemon: one protocol, whatever the mechanism.

The daemon never reads a mechanism's internals. It asks:
  * ``capacity``: how many queries ``answer`` consumes before a transition is due (0: call
    ``transition`` first; ``None``: unbounded, e.g. a refusing predictor or a fixed hypothesis);
  * ``answer(x)``: labels, and per query a ``Refusal`` code saying why it was refused (if it was);
  * ``transition()``: the CPU-heavy step between rounds (never due for a mechanism without rounds);
  * the checkpoint split: ``round_part()`` (large, fixed until the next transition),
    ``live_part()`` (small, changes with every query) and the append-only reservoir
    (``reservoir_filled``, ``reservoir_points``); ``engine.restore.restore`` inverts them.

Every part is a plain dict of values and numpy arrays tagged with its ``format``; ``restore``
dispatches on that tag. The parts hold secrets (data, RNG state): store them like keys.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from everlast.engine.phases import Phase


class Refusal(enum.IntEnum):
    """Why a query got no label (``Answers.refusals``); NONE for an answered query."""

    NONE = 0
    HALTED = 1
    """A state written before rounds paused, whose round had failed: it refuses for good. No
    predictor of this engine halts: a round whose halt test fires pauses (``ROUND_PAUSED``)."""
    EXHAUSTED = 2
    """The schedule has ended (a schedule that does not repeat its last round)."""
    CLIENT_QUOTA = 3
    """The query's client has spent its share of the round's halt budget (``engine.quotas``): its
    queries are refused until the round ends; other clients are answered."""
    ROUND_PAUSED = 4
    """The round's halt budget is spent (its noisy halting test fired): every query is refused until
    the round's R_i positions are taken; the queries still enter D-hat at its positions, and the next
    round serves again (docs/privacy/genericbbl.md 16)."""

    @property
    def reason(self) -> str:
        """A sentence for a refusal record."""
        return _REASONS[self]

    @property
    def code(self) -> str:
        """A short machine-readable name: ``halted``, ``exhausted``, ``client-quota``, ``round-paused``
        ('' if answered)."""
        return _CODES[self]


_REASONS = {
    Refusal.NONE: "",
    Refusal.HALTED: "the predictor has failed (a round's halt budget was spent) and refuses every query",
    Refusal.EXHAUSTED: "the schedule has ended; the predictor refuses every query",
    Refusal.CLIENT_QUOTA: ("client-quota: this client's share of the round's halt budget is spent; its queries "
                           "are refused until the round ends"),
    Refusal.ROUND_PAUSED: ("round-paused: the round's halt budget is spent; every query is refused until the "
                           "round ends, then the next round answers again"),
}
_CODES = {Refusal.NONE: "", Refusal.HALTED: "halted", Refusal.EXHAUSTED: "exhausted",
          Refusal.CLIENT_QUOTA: "client-quota", Refusal.ROUND_PAUSED: "round-paused"}


def _no_burn() -> NDArray[np.int64]:
    return np.zeros((0, 3), dtype=np.int64)


def _no_fires() -> NDArray[np.bool_]:
    return np.zeros(0, dtype=np.bool_)


@dataclass(frozen=True, slots=True)
class Answers:
    """A mechanism's response to one ``answer`` call."""

    labels: NDArray[np.int8]
    """0 or 1 per consumed query, or -1 for a refusal (never a label computed from data)."""
    outcomes: NDArray[np.int8]
    """The mechanism's internal outcome per consumed query (BetweenThresholds: L=0, R=1, TOP=2,
    refused=-1). Private diagnostics: top vs R is *not* part of the released label."""
    round: int
    """The round these queries were answered in (0 for a mechanism without rounds)."""
    consumed: int
    """How many queries of the batch were consumed (answered or refused). Fewer than given only
    when a round ended inside the batch: call ``transition`` and resubmit the rest."""
    refusals: NDArray[np.int8]
    """Per consumed query, a ``Refusal`` code (0 where answered)."""
    burn: NDArray[np.int64] = field(default_factory=_no_burn)
    """The burn-rate releases of the windows this call completed (``engine.burn``), one row each:
    (round, window, noisy_tops), window = its index in the round (queries [w W, (w + 1) W)). Released
    (differentially private, docs/privacy/genericbbl.md 5.5): publishable. Empty when the schedule has
    no ``burn`` setting."""
    quota_fired: NDArray[np.bool_] = field(default_factory=_no_fires)
    """With per-client quotas: per consumed query, True where its client's quota test fired after it
    (the query was answered; the client's later queries in the round are refused with
    ``Refusal.CLIENT_QUOTA``). Released (docs/privacy/genericbbl.md 5.5, remark 4): a server may log
    which client it was. Empty when the schedule has no quotas."""
    paused: int = 0
    """How many rounds paused in this call: 1 when the round's halting test fired here before the
    round's last position (its later queries are refused ``Refusal.ROUND_PAUSED``; released by those
    refusals), also when the round ends inside the same call. ``answer_all``: the rounds that paused."""

    @property
    def refused(self) -> NDArray[np.bool_]:
        return self.labels < 0


@dataclass(frozen=True, slots=True)
class RoundInfo:
    """A round's counters, for a mechanism that has rounds (``Servable.round_info``)."""

    answered: int
    """Queries the round has taken so far (public: a count of queries): answered, or refused for a
    client quota (``Refusal.CLIENT_QUOTA``: such a query keeps its slot of the round's R)."""
    allowed: int
    """R_i: queries the round answers before its transition (public: from the schedule)."""
    halt_cap: int
    """c_i: the most tops the round may spend (public: from the schedule)."""
    tops: int
    """Tops spent so far. PRIVATE in the queries (it moves with any one query's outcome): never
    publish it while the round runs, unless an operator chose to (``metrics.expose_halts_used``)."""


@runtime_checkable
class Servable(Protocol):
    """The interface the daemon serves (``engine.predictor.Predictor``, the private learner)."""

    @property
    def mechanism(self) -> str:
        """``generic-bbl`` or ``private-learner``: names the mechanism in logs, metrics and configs."""

    @property
    def has_rounds(self) -> bool:
        """False for a mechanism that never transitions, halts or refuses (its round is always 0)."""

    @property
    def answers_change_state(self) -> bool:
        """True when answering moves the state later answers depend on (GenericBBL: its noise
        streams, reservoir and halt count), so that a replay must start from the state that
        answered; False when every answer is a fixed function of the released state and the query
        (the private learner): any of its checkpoints answers exactly as the process that wrote it."""

    @property
    def point_dim(self) -> int: ...

    @property
    def phase(self) -> Phase: ...

    @property
    def round(self) -> int: ...

    @property
    def capacity(self) -> int | None: ...

    def round_info(self) -> RoundInfo | None:
        """The round's counters (``None`` for a mechanism without rounds)."""

    def answer(self, x: Any, clients: Any = None) -> Answers:
        """Answer queries in order; ``clients``: who sent them (``engine.clients.ClientIds``: one id for
        the batch, one per query, ``None`` = the shared anonymous client). Read only by a schedule
        with per-client quotas."""

    def transition(self) -> None: ...

    def round_part(self) -> dict[str, Any]: ...

    def live_part(self) -> dict[str, Any]: ...

    @property
    def reservoir_filled(self) -> int: ...

    def reservoir_points(self, start: int, end: int) -> NDArray[np.float64]: ...


@runtime_checkable
class DomainScreen(Protocol):
    """A served mechanism with a declared domain (the private learner): it says which queries of a
    batch ``answer`` would refuse as outside it, as a function of each query and the public domain
    alone, so that a server rejects those queries one by one and answers the rest."""

    def outside_domain(self, x: Any) -> NDArray[np.bool_]:
        """Per query, True if it lies outside the domain; raises ``InvalidInput`` for malformed input."""
