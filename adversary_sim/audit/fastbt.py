"""A round of either design for many independent games at once (vectorized over trials).

The audit plays the game of Figure 1 thousands of times. Replaying a round game by game through the
predictor costs one set of canonical noise blocks per game (engine.noise) and, under the paper's
design, one Python step per top; here one numpy operation covers a block of query positions across
all games.

The rules are the engine's own, on integer vote counts (engine.between_thresholds):
  * target-charged: ``bt.outcomes_tct`` (L if v + z < lo, R if v + z > hi, TOP otherwise), then the
    round fails after the first query with C + xi >= c0 + rho_h or C >= c;
  * paper: TOP iff s >= mu with s = min(v + nu - lo, hi - v - nu), else L iff v + nu - lo < mu, else
    R; a fresh mu after every top that does not fail the round; failure at the c-th top.

The noise comes from a :class:`Noises` source, and every draw goes through the engine's exact
discrete Laplace sampler at the round's exact scales (``engine.design.noise_plan``):
  * :class:`EngineNoise` draws each game's noise from the predictor's own streams
    (``engine.design.RoundNoise`` started from the game's root entropy), so a game here answers
    exactly what ``Predictor.answer`` answers for that seed (tests/adversary/test_audit.py checks it
    outcome for outcome, for both designs);
  * :class:`BulkNoise` draws the same laws with ``engine.noise.sample`` from one generator per
    world, without the canonical blocks (what makes it fast): the audits use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from everlast.engine import between_thresholds as bt
from everlast.engine.design import Design, NoisePlan, RoundNoise
from everlast.engine.noise import sample

I64 = NDArray[np.int64]
FIRST_BLOCK = 32
"""Query positions drawn at once at first (doubled while games remain, up to MAX_CELLS)."""
MAX_CELLS = 1 << 22
"""Noise values held at once (games x positions)."""


class Noises(Protocol):
    """Where a batch of games gets its noise (each game's draws in the engine's order)."""

    def first(self) -> I64:
        """Per game: the round's first threshold draw (paper: mu; target-charged: rho_h)."""
        ...

    def per_query(self, rows: I64, n: int) -> tuple[I64, I64 | None]:
        """The next n per-query draws of the games ``rows``: (nu or z, xi or None), shape (rows, n)."""
        ...

    def next_threshold(self, rows: I64) -> I64:
        """paper: the next threshold noise mu of each game in ``rows`` (after a top)."""
        ...


@dataclass(slots=True)
class BulkNoise:
    """The design's noise laws drawn with ``engine.noise.sample`` from one generator."""

    design: Design
    plan: NoisePlan
    games: int
    rng: np.random.Generator

    def first(self) -> I64:
        scale = self.plan.halt_threshold if self.design.target_charged else self.plan.threshold
        assert scale is not None
        return sample(self.rng, scale, self.games)

    def per_query(self, rows: I64, n: int) -> tuple[I64, I64 | None]:
        a = sample(self.rng, self.plan.query, rows.size * n).reshape(rows.size, n)
        if not self.design.target_charged:
            return a, None
        assert self.plan.halt_query is not None
        return a, sample(self.rng, self.plan.halt_query, rows.size * n).reshape(rows.size, n)

    def next_threshold(self, rows: I64) -> I64:
        assert self.plan.threshold is not None
        return sample(self.rng, self.plan.threshold, rows.size)


@dataclass(slots=True)
class EngineNoise:
    """Each game's noise from the predictor's streams: ``RoundNoise.start(design, plan, entropy,
    round)``, the entropy being the game's root (``engine.rng.root_entropy(seed)`` for a predictor
    created with that seed)."""

    design: Design
    plan: NoisePlan
    entropies: list[int]
    round_index: int = 1
    _noise: list[RoundNoise] = field(default_factory=list)
    _first: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        for e in self.entropies:
            rn, f = RoundNoise.start(self.design, self.plan, e, self.round_index)
            self._noise.append(rn)
            self._first.append(f)

    def first(self) -> I64:
        return np.asarray(self._first, dtype=np.int64)

    def per_query(self, rows: I64, n: int) -> tuple[I64, I64 | None]:
        a = np.empty((rows.size, n), dtype=np.int64)
        b = np.empty((rows.size, n), dtype=np.int64) if self.design.target_charged else None
        for k, r in enumerate(rows):
            x, y, self._noise[r] = self._noise[r].per_query(n)
            a[k] = x
            if b is not None:
                assert y is not None
                b[k] = y
        return a, b

    def next_threshold(self, rows: I64) -> I64:
        out = np.empty(rows.size, dtype=np.int64)
        for k, r in enumerate(rows):
            out[k], self._noise[r] = self._noise[r].next_threshold()
        return out


@dataclass(frozen=True, slots=True)
class BatchRun:
    outcomes: NDArray[np.int8]
    """(games, queries): L=0, R=1, TOP=2, refused=-1 (after the round failed)."""
    tops: I64
    halted: NDArray[np.bool_]

    @property
    def labels(self) -> NDArray[np.int8]:
        """What the adversary sees: 0 on L, 1 on R or top, -1 refused (``Predictor.answer``)."""
        out = np.where(self.outcomes == bt.L, 0, 1).astype(np.int8)
        out[self.outcomes == bt.REFUSED] = -1
        return out


def run_batch(design: Design, plan: NoisePlan, v: I64, queries: int, noise: Noises) -> BatchRun:
    """Answer ``queries`` queries in each of ``v.shape[0]`` independent rounds (games).

    ``v``: the vote counts, shape (games,) (the same query repeated) or (games, queries).
    """
    n = v.shape[0]
    counts = np.broadcast_to(v[:, None] if v.ndim == 1 else v, (n, queries)).astype(np.int64, copy=False)
    out = np.full((n, queries), bt.REFUSED, dtype=np.int8)
    tops = np.zeros(n, dtype=np.int64)
    halted = np.zeros(n, dtype=bool)
    first = noise.first()
    live = np.arange(n, dtype=np.int64)
    pos, width = 0, FIRST_BLOCK
    while live.size and pos < queries:
        w = max(1, min(width, queries - pos, MAX_CELLS // max(live.size, 1)))
        a, b = noise.per_query(live, w)
        vv = counts[live, pos : pos + w]
        if design.target_charged:
            assert b is not None
            done = _tct_block(plan, vv, a, b, first[live], live, pos, out, tops)
        else:
            done = _paper_block(plan, vv, a, first, live, pos, out, tops, noise)
        halted[live[done]] = True
        live = live[~done]
        pos += w
        width *= 2
    return BatchRun(out, tops, halted)


def _tct_block(plan: NoisePlan, v: I64, z: I64, xi: I64, rho: I64, live: I64, pos: int,
               out: NDArray[np.int8], tops: I64) -> NDArray[np.bool_]:
    """target-charged, positions [pos, pos + w) of the live games; returns which games failed."""
    assert plan.c0 is not None
    res = bt.outcomes_tct(v, z, plan)
    c = tops[live][:, None] + np.cumsum(res == bt.TOP, axis=1, dtype=np.int64)
    halt = c + xi >= plan.c0 + rho[:, None]  # no hard cap (engine.between_thresholds.halt_tct)
    done = halt.any(axis=1)
    w = v.shape[1]
    answered = np.where(done, np.argmax(halt, axis=1) + 1, w)
    shown = np.arange(w)[None, :] < answered[:, None]
    out[live, pos : pos + w] = np.where(shown, res, bt.REFUSED)
    tops[live] = c[np.arange(live.size), answered - 1]
    return np.asarray(done)


def _paper_block(plan: NoisePlan, v: I64, nu: I64, mu: I64, live: I64, pos: int, out: NDArray[np.int8],
                 tops: I64, noise: Noises) -> NDArray[np.bool_]:
    """paper, positions [pos, pos + w): one numpy step per position across the live games; ``mu``
    (all games) holds the threshold noise in force and is updated in place."""
    w = v.shape[1]
    alive = np.ones(live.size, dtype=bool)
    done = np.zeros(live.size, dtype=bool)
    for j in range(w):
        k = np.flatnonzero(alive)
        if k.size == 0:
            break
        g = live[k]
        above = v[k, j] + nu[k, j] - plan.lo
        slack = np.minimum(above, plan.band - above)
        m = mu[g]
        is_top = slack >= m
        res = np.where(above < m, bt.L, bt.R).astype(np.int8)
        res[is_top] = bt.TOP
        out[g, pos + j] = res
        hit = g[is_top]
        tops[hit] += 1
        fail = tops[hit] >= plan.c
        alive[k[is_top][fail]] = False
        done[k[is_top][fail]] = True
        again = hit[~fail]
        if again.size:
            mu[again] = noise.next_threshold(again)
    return done
