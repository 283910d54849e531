"""The restart attack (docs/notes/query_privacy.md 2): the "wait-and-test" adversary against a
round's threshold-noise restarts, played on the engine's round mechanism.

Why the mechanism and not the predictor: the channel lives entirely inside one round, and the
adversary only needs points whose vote count it controls. The game therefore feeds integer vote
counts straight into ``engine.between_thresholds.run_paper`` / ``run_tct`` (which do no I/O), with
each game's noise drawn by the engine's own ``engine.design.RoundNoise`` from the game's root
entropy: the same streams, scales and draw order as a predictor's round.

The adversary, in units of b (paper: the threshold noise's scale 2/eps'; target-charged: the
per-query noise's scale 1/eps0; both in counts):
  1. probe a point whose count is lo - z b (paper, z = -1: one noise unit inside the band);
  2. as soon as the current run of 0-labels reaches m, send the differing query: x^0 = count 0 (an L;
     nothing restarts) or x^1 = the band's middle (a top, which restarts the threshold noise under
     the paper's design). Its answer is never shown to the adversary;
  3. probe again and let N2 be the number of 0-labels before the next 1-label (a refusal also ends
     the count); guess world 0 iff N2 >= theta.
Under the paper's design a run of m L's selects a large threshold noise (rare tops); world 0 keeps it,
world 1 draws a fresh one. The target-charged design has no threshold noise: every probe draws its
own, so the hidden top can reach N2 only through the round's top count, which only the noisy halting
test reads (Theorem Q).

The adversary is adaptive (it waits for a run), so each game feeds probes in chunks and, when the
run completes inside a chunk, replays that chunk's prefix from the saved state and noise (RoundNoise
is a value and the mechanism is batch-invariant), which leaves the round exactly in its state after
the m-th zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from everlast.engine import between_thresholds as bt
from everlast.engine.design import Design, NoisePlan, RoundNoise, noise_plan
from everlast.engine.schedule import RoundSpec

FIRST_CHUNK = 256
MAX_CHUNK = 8192


@dataclass(frozen=True, slots=True)
class WaitAndTest:
    """The adversary's parameters (docs/notes/query_privacy.md 4, audit B)."""

    m: int = 18
    """Run of 0-labels to wait for before the differing query."""
    z: float = -1.0
    """Probe offset: count lo - z * b."""
    theta: int = 5
    """Guess world 0 iff N2 >= theta."""
    max_queries: int = 2_000_000
    """Probes the adversary spends waiting before it gives up (the game then has no test; it is the
    same in both worlds, so it only dilutes the statistic)."""


@dataclass(frozen=True, slots=True)
class Game:
    """One configuration of the round: its parameters and design."""

    spec: RoundSpec
    design: Design

    @property
    def plan(self) -> NoisePlan:
        return noise_plan(self.design, self.spec)

    @property
    def unit(self) -> float:
        """b, in counts: the scale of the noise the probe offset is measured in."""
        p = self.plan
        return float(p.query if self.design.target_charged else p.threshold or 0)


@dataclass(frozen=True, slots=True)
class Outcome:
    score: float
    """1.0: guess world 1 (N2 < theta, or no test); 0.0: guess world 0."""
    n2: int
    """N2 (-1 when the game ended before the test)."""
    queries: int
    """Queries answered in the round (probes + the differing query)."""
    tops: int
    """Tops in the round at the end of the game."""
    counts: NDArray[np.int64] | None = field(default=None, compare=False)
    """With ``record``: the count of every query the round answered, in order."""
    outcomes: NDArray[np.int8] | None = field(default=None, compare=False)
    """With ``record``: the round's outcome of each (the differing query's included)."""


def _feed(g: Game, plan: NoisePlan, v: NDArray[np.int64], noise: RoundNoise,
          state: bt.BTState) -> tuple[bt.BTRun, RoundNoise]:
    """The engine's round on counts ``v`` from (noise, state); the noise after the answered queries."""
    a, b, after = noise.per_query(v.size)
    if g.design.target_charged:
        assert b is not None
        res = bt.run_tct(v, a, b, plan, state)
    else:
        box = [after]

        def next_mu() -> int:
            mu, box[0] = box[0].next_threshold()
            return mu

        res = bt.run_paper(v, a, plan, state, next_mu)
        after = box[0]
    return res, after


def start(g: Game, entropy: int) -> tuple[RoundNoise, bt.BTState]:
    """Round 1's noise and state, as ``Predictor.create`` starts them (``engine.predictor``)."""
    noise, first = RoundNoise.start(g.design, g.plan, entropy, 1)
    st = bt.BTState(rho_h=first) if g.design.target_charged else bt.BTState(mu=first)
    return noise, st


def play_one(g: Game, adv: WaitAndTest, world: int, entropy: int, record: bool = False) -> Outcome:
    """One game of the restart attack in world ``world`` (0: hidden x^0 = L; 1: hidden x^1 = top)."""
    s, plan = g.spec, g.plan
    probe = int(np.clip(plan.lo - round(adv.z * g.unit), 0, s.T))
    noise, state = start(g, entropy)
    fed: list[NDArray[np.int64]] = []
    seen: list[NDArray[np.int8]] = []

    def done(score: float, n2: int, used: int, tops: int) -> Outcome:
        if not record:
            return Outcome(score, n2, used, tops)
        return Outcome(score, n2, used, tops, np.concatenate(fed) if fed else np.zeros(0, np.int64),
                       np.concatenate(seen) if seen else np.zeros(0, np.int8))

    run_len, used, chunk = 0, 0, FIRST_CHUNK
    budget = min(adv.max_queries, s.R - 1 - adv.theta)
    while True:  # wait for a run of m zeros
        n = min(chunk, budget - used)
        if n <= 0:
            return done(1.0, -1, used, state.tops)
        q = np.full(n, probe, dtype=np.int64)
        res, after = _feed(g, plan, q, noise, state)
        ones = res.outcomes != bt.L
        idx = np.arange(res.answered)
        last_one = np.maximum.accumulate(np.where(ones, idx, -1)) if res.answered else idx
        runs = np.where(last_one >= 0, idx - last_one, idx + 1 + run_len)
        hit = np.flatnonzero(runs >= adv.m)
        if hit.size:
            k = int(hit[0]) + 1
            res, after = _feed(g, plan, q[:k], noise, state)  # replay up to the m-th zero, same noise
            assert res.answered == k
            fed.append(q[:k])
            seen.append(res.outcomes)
            if res.halted:  # the round failed at the m-th zero (same in both worlds): no test
                return done(1.0, -1, used + k, res.state.tops)
            noise, state = after, res.state
            used += k
            break
        fed.append(q[: res.answered])
        seen.append(res.outcomes)
        if res.halted:  # the round failed while waiting (same in both worlds): no test
            return done(1.0, -1, used + res.answered, res.state.tops)
        used += n
        run_len = int(runs[-1]) if n else run_len
        noise, state = after, res.state
        chunk = min(2 * chunk, MAX_CHUNK)
    # the differing query (answer hidden), then theta probes
    x = 0 if world == 0 else (plan.lo + plan.hi) // 2
    q = np.concatenate([[x], np.full(adv.theta, probe)]).astype(np.int64)
    res, _ = _feed(g, plan, q, noise, state)
    fed.append(q[: res.answered])
    seen.append(res.outcomes)
    shown = np.full(adv.theta, bt.REFUSED, dtype=np.int64)
    k = max(0, res.answered - 1)
    shown[:k] = res.outcomes[1 : 1 + k]
    zeros = shown == bt.L
    n2 = adv.theta if zeros.all() else int(np.argmin(zeros))
    return done(0.0 if n2 >= adv.theta else 1.0, n2, used + res.answered, res.state.tops)


def game_entropies(seed: int | list[int], trials: int) -> list[int]:
    """One independent root entropy per game (fresh randomness per game)."""
    ss = np.random.SeedSequence(seed if isinstance(seed, list) else [seed])
    return [int(x) for x in ss.generate_state(trials, dtype=np.uint64)]


def play(g: Game, adv: WaitAndTest, world: int, trials: int, seed: int | list[int],
         progress: Callable[[int], None] | None = None) -> list[Outcome]:
    """``trials`` independent games in world ``world``."""
    out = []
    for e in game_entropies(seed, trials):
        out.append(play_one(g, adv, world, e))
        if progress is not None:
            progress(1)
    return out
