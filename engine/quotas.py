"""Per-client top quotas (target-charged design; docs/privacy/genericbbl.md 5.5).

No single client can halt a round for everyone: each client k has its own AboveThreshold test on
C_k, the tops of k's answered queries in the round. After each answered query j of k the round tests

    C_k(j) + xi'_j >= c0_q + rho'_k,     c0_q = ceil(share * c0)  (the share as written, exactly),

with xi'_j ~ DLap(4/eps_q) drawn for EVERY query of the round, in order (``Purpose.QUOTA_QUERY``,
whatever happens to the query), and rho'_k ~ DLap(2/eps_q) drawn once per (round, client) from the
client's own stream (``engine.design.client_generator``: replayable and batch-independent). Once k's
test fires, every later query of k in the round is refused (``Refusal.CLIENT_QUOTA``: no label and
no top), until the round ends; every other client keeps its answers. A refused query still takes its
slot of the round's R (so rounds stay aligned between neighbouring query streams) and its noises are
drawn. The round's own halting test and hard cap are unchanged: they read the round's tops, which
quota refusals only lower.

**The client table** (per round; sorted by key): every client seen in the round, its tops C_k, whether
its test fired, and its rho'_k (drawn when the client first appears). It holds every client *seen*,
not only those with a top, so that the work of a batch depends on the batch's size and on how many
distinct clients the round has seen (a count of the query stream), never on the tops: a table of
only the clients with a top would make its size, and the time to merge a batch into it, a function
of the private counts. Its size is at most the number of distinct client ids in the round (<= R).

**Vectorized** (no Python step per query): per batch, the clients' running tops are a grouped
cumulative sum over the batch (a stable sort by client), the first firing per client a grouped
cumulative count of the firing tests, and every later query of that client is masked. The only Python
loop is one step per *new* client of the round (its threshold noise: a public count). Every numpy call
and every branch is the same whatever the counts (``tests/engine/test_constant_work.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine import fields
from everlast.engine.clients import ClientBatch
from everlast.engine.errors import CorruptState, InvalidSchedule
from everlast.engine.noise import NoiseStream, exact_scale

if TYPE_CHECKING:
    from everlast.engine.round_spec import RoundSpec

I64 = NDArray[np.int64]
B = NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Quotas:
    """The schedule-wide per-client quota setting (``Schedule.quotas``; ``None`` = off)."""

    share: float
    """s in (0, 1]: a client's test threshold is c0_q = ceil(s * c0), c0 the round's halting threshold."""
    eps: float
    """eps_q: the test's noises are DLap(4/eps_q) per query and DLap(2/eps_q) per (round, client)."""

    def __post_init__(self) -> None:
        for name in ("share", "eps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise InvalidSchedule(f"quotas.{name} must be a number")
            object.__setattr__(self, name, float(v))
        if not (math.isfinite(self.share) and 0.0 < self.share <= 1.0):
            raise InvalidSchedule("quotas.share must lie in (0, 1]")
        if not (math.isfinite(self.eps) and self.eps > 0.0):
            raise InvalidSchedule("quotas.eps must be a positive finite number")

    def to_dict(self) -> dict[str, float]:
        return {"share": self.share, "eps": self.eps}

    @classmethod
    def from_dict(cls, d: Any) -> Quotas:
        """From the schedule's ``quotas`` object (``engine.fields``: numbers only, no unknown field)."""
        return cls(**fields.read(cls, d, "quotas"))


@dataclass(frozen=True, slots=True)
class QuotaPlan:
    """The exact integers and scales of one round's quota tests."""

    c0: int
    """c0_q = ceil(share * c0), in exact rational arithmetic from the share as written (its shortest
    decimal form: 0.2 of 300 is 60, not the 61 the binary float 0.2000000000000000111 would give).
    Privacy does not depend on it (Theorem Q+ holds for every c0_q); only availability does."""
    query: Fraction
    """Scale of xi'_j: the exact rational value of 4/eps_q."""
    threshold: Fraction
    """Scale of rho'_k: the exact rational value of 2/eps_q."""


def quota_plan(quotas: Quotas, spec: RoundSpec) -> QuotaPlan:
    """The quota test of a target-charged round; ``InvalidSchedule`` when the engine cannot run it
    exactly (a scale outside [2^-20, 2^40], or no halting threshold to take a share of)."""
    if spec.halt_threshold is None:
        raise InvalidSchedule("per-client quotas need the target-charged design's halt_threshold")
    c0 = math.ceil(Fraction(repr(quotas.share)) * spec.halt_threshold)
    return QuotaPlan(max(1, c0), exact_scale(4.0 / quotas.eps), exact_scale(2.0 / quotas.eps))


def epsilon(plan: QuotaPlan) -> Fraction:
    """eps_q := 1/t'_r + 2/t'_x of the exact scales, exactly (= eps_q when the floats are exact): what
    Lemma AT charges a query for its client's test (Theorem Q+, docs/privacy/genericbbl.md 5.5). A
    certificate rounds it up."""
    return 1 / plan.threshold + 2 / plan.query


@dataclass(frozen=True, slots=True)
class ClientTable:
    """The round's clients (module docstring): parallel arrays, sorted by key."""

    keys: NDArray[np.uint64]
    tops: I64
    """C_k: tops of the client's answered queries in the round. PRIVATE (like the round's top count)."""
    fired: B
    """Whether the client's test has fired (its later queries are refused). Released by the refusals."""
    rho: I64
    """rho'_k, the client's threshold noise: a secret."""

    @classmethod
    def empty(cls) -> ClientTable:
        return cls(np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.bool_), np.zeros(0, np.int64))

    @property
    def size(self) -> int:
        return int(self.keys.size)

    def to_dict(self) -> dict[str, Any]:
        return {"keys": self.keys, "tops": self.tops, "fired": self.fired, "rho": self.rho}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ClientTable:
        try:
            t = cls(np.asarray(d["keys"], dtype=np.uint64).reshape(-1),
                    np.asarray(d["tops"], dtype=np.int64).reshape(-1),
                    np.asarray(d["fired"], dtype=np.bool_).reshape(-1),
                    np.asarray(d["rho"], dtype=np.int64).reshape(-1))
        except (KeyError, TypeError, ValueError, OverflowError) as exc:
            raise CorruptState(f"client table is malformed ({type(exc).__name__})") from None
        m = t.keys.size
        if not (t.tops.size == t.fired.size == t.rho.size == m) or bool(np.any(t.tops < 0)):
            raise CorruptState("client table's arrays do not fit together")
        if m > 1 and bool(np.any(t.keys[1:] <= t.keys[:-1])):
            raise CorruptState("client table's keys are not sorted and distinct")
        return t


@dataclass(frozen=True, slots=True)
class QuotaState:
    """What the quotas carry from one query to the next within a round."""

    table: ClientTable
    noise: NoiseStream
    """xi'_j, one per query of the round (``Purpose.QUOTA_QUERY``)."""

    def to_dict(self) -> dict[str, Any]:
        return {"table": self.table.to_dict(), "noise": self.noise.to_dict()}

    @classmethod
    def from_dict(cls, d: Any, plan: QuotaPlan, block: int) -> QuotaState:
        if not isinstance(d, Mapping) or not isinstance(d.get("table"), Mapping):
            raise CorruptState("quota state is malformed")
        table = ClientTable.from_dict(d["table"])
        noise = NoiseStream.from_dict(dict(d["noise"])) if isinstance(d.get("noise"), Mapping) else None
        if noise is None or noise.scale != plan.query or noise.block != block:
            raise CorruptState("quota noise does not match the schedule")
        return cls(table, noise)


@dataclass(frozen=True, slots=True)
class Decision:
    """A batch's quota decisions, before the round's halting test decides how much of it counts."""

    refused: B
    """Per query: refused for its client's quota (its client's test fired before it)."""
    fires: B
    """Per query: answered, and its client's test fires after it (at most one per client)."""
    codes: I64
    """Per query: its client's index among the batch's clients."""
    slots: I64
    """Per batch client: its row in ``table``."""
    table: ClientTable
    """The table with the batch's new clients added (their tops and firing still as before the batch)."""


def decide(table: ClientTable, clients: ClientBatch, is_top: B, xi: I64, plan: QuotaPlan,
           draw_rho: Callable[[NDArray[np.uint64]], I64]) -> Decision:
    """The quota tests of one batch (module docstring), every query as if the round did not halt
    inside the batch (``commit`` then keeps the part that counts). ``is_top``: each query's outcome
    is TOP; ``xi``: its xi'_j; ``draw_rho``: rho'_k for new clients' keys, in key order."""
    u = clients.keys
    m = table.keys.size
    at = np.searchsorted(table.keys, u)
    known = (at < m) & (np.append(table.keys, np.uint64(0))[at] == u)
    new = ~known
    fresh = u[new]
    rho_new = np.asarray(draw_rho(fresh), dtype=np.int64).reshape(-1)
    where = at[new]
    grown = ClientTable(np.insert(table.keys, where, fresh), np.insert(table.tops, where, 0),
                        np.insert(table.fired, where, False), np.insert(table.rho, where, rho_new))
    slots = np.searchsorted(grown.keys, u).astype(np.int64)
    g = clients.codes
    # per query, its client's state before the batch
    tops0 = grown.tops[slots][g]
    fired0 = grown.fired[slots][g]
    rho = grown.rho[slots][g]
    # group the batch by client, keeping query order inside each group
    order = np.argsort(g, kind="stable")
    gs = g[order]
    per = np.bincount(g, minlength=u.size)
    first = np.cumsum(per) - per  # each group's first sorted position

    def grouped_cumsum(x: B) -> I64:
        """Per query (batch order): x summed over its client's queries up to and including it."""
        c = np.cumsum(x[order], dtype=np.int64)
        before = np.append(np.int64(0), c)[first]  # the sum before each group
        out = np.empty_like(c)
        out[order] = c - before[gs]
        return out

    running = tops0 + grouped_cumsum(is_top)  # C_k(j), exact up to k's first firing
    test = (running + xi >= plan.c0 + rho) & ~fired0
    hits = grouped_cumsum(test)  # k's firing tests so far, this one included
    refused = fired0 | (hits - test > 0)
    fires = test & ~refused
    return Decision(refused, fires, g, slots, grown)


def commit(d: Decision, is_top: B) -> ClientTable:
    """The table after the batch: its answered tops and its firings added, per client. (When the
    round halts inside a batch, the caller decides again on the part before the halt and commits
    that: the rest of the batch is refused and counts for no client.)"""
    u = d.slots.size
    add = np.bincount(d.codes, weights=is_top & ~d.refused, minlength=u).astype(np.int64)
    fire = np.bincount(d.codes, weights=d.fires, minlength=u) > 0
    tops = d.table.tops.copy()
    tops[d.slots] += add
    fired = d.table.fired.copy()
    fired[d.slots] |= fire
    return ClientTable(d.table.keys, tops, fired, d.table.rho)


def reference(keys: list[int], is_top: list[bool], xi: list[int], plan: QuotaPlan, table: dict[int, list[int]],
              rho_of: Callable[[int], int]) -> list[bool]:
    """One query at a time, straight from the module docstring (the specification ``decide`` and
    ``commit`` are tested against; never used to serve): per query, whether it is refused for its
    client's quota. ``table`` maps a key to [tops, fired, rho] and is updated in place as if every
    query were taken (no halt)."""
    refused: list[bool] = []
    for k, top, x in zip(keys, is_top, xi, strict=True):
        row = table.setdefault(k, [0, 0, rho_of(k)])
        if row[1]:
            refused.append(True)
            continue
        refused.append(False)
        row[0] += int(top)
        if row[0] + x >= plan.c0 + row[2]:
            row[1] = 1
    return refused
