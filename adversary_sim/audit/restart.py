"""The restart attack (issue 8, query_privacy.md section 2): the "wait-and-test" adversary against
BetweenThresholds' threshold-noise restarts, played on the engine's BetweenThresholds component.

Why the component and not the predictor: the channel lives entirely inside one round's
BetweenThresholds, and the adversary only needs points whose vote share it controls. The game
therefore feeds vote fractions straight into ``engine.between_thresholds.run`` (which does no I/O)
with the engine's own policies (``Rules``: per-top / private / stateless restarts, paper / never /
noisy halting) and the noises the predictor draws (``engine.predictor``): nu_j ~ Lap(6/(eps' T)) per
query, a restart draws mu ~ Lap(2/(eps' T)) and, for private restarts, rho_r ~ Lap(2/eps_r); per query
zeta_j ~ Lap(4/eps_r) (private restarts), xi_j ~ Lap(4/eps_h) (noisy halting), and one mu per query
(stateless); rho_h ~ Lap(2/eps_h) once per round (noisy halting).

The adversary, in units of b = 2/(eps' T) (the threshold noise's scale):
  1. probe a point whose vote share is t_l - z b (z = -1: one noise unit inside the band);
  2. as soon as the current run of 0-labels reaches m, send the differing query: x^0 = a point far
     below the band (vote 0: an L, nothing restarts) or x^1 = a point in the middle of the band
     (vote 1/2: a top, which restarts the threshold noise under per-top restarts). Its answer is
     never shown to the adversary;
  3. probe again and let N2 be the number of 0-labels before the next 1-label (a refusal also ends
     the count); guess world 0 iff N2 >= theta.
A run of m L's selects a large threshold noise (rare tops); world 0 keeps it, world 1 draws a fresh
one. Under private restarts the hidden top only moves the block's noisy top count by one; under
stateless restarts nothing carries over.

The adversary is adaptive (it waits for a run), so each game feeds probes in chunks and, when the
run completes inside a chunk, replays that chunk's prefix from the saved state with the same noises
(``run`` is batch-invariant: the restart draws are consumed in order), which leaves the component
exactly in the state it has after the m-th zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engine import between_thresholds as bt
from engine.schedule import RoundSpec

FIRST_CHUNK = 256
MAX_CHUNK = 8192


@dataclass(frozen=True, slots=True)
class WaitAndTest:
    """The adversary's parameters (query_privacy.md section 4, audit B)."""

    m: int = 18
    """Run of 0-labels to wait for before the differing query."""
    z: float = -1.0
    """Probe offset: vote share t_l - z * b."""
    theta: int = 5
    """Guess world 0 iff N2 >= theta."""
    max_queries: int = 2_000_000
    """Probes the adversary spends waiting before it gives up (the game then has no test; it is the
    same in both worlds, so it only dilutes the statistic)."""


class _Draws:
    """Replayable restart draws: (mu, rho_r) in order, refilled in blocks."""

    def __init__(self, rng: np.random.Generator, mu_scale: float, rho_scale: float) -> None:
        self.rng, self.mu_scale, self.rho_scale = rng, mu_scale, rho_scale
        self.mu = np.empty(0)
        self.rho = np.empty(0)
        self.i = 0

    def __call__(self) -> tuple[float, float]:
        if self.i >= self.mu.size:
            k = max(1024, self.mu.size)
            self.mu = np.concatenate([self.mu, self.rng.laplace(0.0, self.mu_scale, k)])
            self.rho = np.concatenate([self.rho, self.rng.laplace(0.0, self.rho_scale, k)
                                       if self.rho_scale > 0 else np.zeros(k)])
        j = self.i
        self.i += 1
        return float(self.mu[j]), float(self.rho[j])


@dataclass(frozen=True, slots=True)
class Game:
    """One configuration of the component: the round and the policies."""

    spec: RoundSpec
    halting: str
    restarts: str

    @property
    def rules(self) -> bt.Rules:
        s = self.spec
        return bt.Rules(restarts=self.restarts, halting=self.halting, c=s.c,
                        k0=s.restart_threshold or 0.0, c0=s.halt_threshold or 0.0)

    def vote(self, x: float) -> float:
        """The vote share of a point, as a multiple of 1/T (what an ensemble of T voters can give)."""
        return round(x * self.spec.T) / self.spec.T


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


def play_one(g: Game, adv: WaitAndTest, world: int, rng: np.random.Generator) -> Outcome:
    """One game of the restart attack in world ``world`` (0: hidden x^0 = L; 1: hidden x^1 = top)."""
    s = g.spec
    rules = g.rules
    b = bt.threshold_noise_scale(s.eps_bt, s.T)
    t_l = 0.5 - s.band
    probe = g.vote(t_l - adv.z * b)
    nu_scale = bt.query_noise_scale(s.eps_bt, s.T)
    private = g.restarts == "private"
    noisy = g.halting == "noisy"
    stateless = g.restarts == "stateless"
    zeta_scale = 4.0 / (s.restart_eps or 1.0)
    xi_scale = 4.0 / (s.halt_eps or 1.0)
    draws = _Draws(rng, b, 2.0 / s.restart_eps if private and s.restart_eps else 0.0)
    mu0, rho_r = draws()
    rho_h = rng.laplace(0.0, 2.0 / s.halt_eps) if noisy and s.halt_eps else 0.0
    state = bt.BTState(mu=mu0, rho_r=rho_r, rho_h=rho_h)

    def noises(n: int) -> dict[str, NDArray[np.float64] | None]:
        return {"nu": rng.laplace(0.0, nu_scale, n),
                "zeta": rng.laplace(0.0, zeta_scale, n) if private else None,
                "xi": rng.laplace(0.0, xi_scale, n) if noisy else None,
                "mu_per_query": rng.laplace(0.0, b, n) if stateless else None}

    def feed(q: NDArray[np.float64], nz: dict[str, NDArray[np.float64] | None], st: bt.BTState,
             k: int | None = None) -> bt.BTRun:
        sl = slice(None) if k is None else slice(0, k)
        return bt.run(q[sl], nz["nu"][sl], band=s.band, state=st, rules=rules,  # type: ignore[index]
                      draw_restart=draws,
                      zeta=None if nz["zeta"] is None else nz["zeta"][sl],
                      xi=None if nz["xi"] is None else nz["xi"][sl],
                      mu_per_query=None if nz["mu_per_query"] is None else nz["mu_per_query"][sl])

    run_len, used, chunk = 0, 0, FIRST_CHUNK
    budget = min(adv.max_queries, s.R - 1 - adv.theta)
    while True:  # wait for a run of m zeros
        n = min(chunk, budget - used)
        if n <= 0:
            return Outcome(1.0, -1, used, state.tops)
        q = np.full(n, probe)
        nz = noises(n)
        saved, saved_i = state, draws.i
        res = feed(q, nz, state)
        ones = res.outcomes != bt.L
        idx = np.arange(res.answered)
        last_one = np.maximum.accumulate(np.where(ones, idx, -1)) if res.answered else idx
        runs = np.where(last_one >= 0, idx - last_one, idx + 1 + run_len)
        hit = np.flatnonzero(runs >= adv.m)
        if hit.size:
            k = int(hit[0]) + 1
            draws.i = saved_i
            res = feed(q, nz, saved, k)  # replay up to the m-th zero with the same noises
            assert res.answered == k
            if res.halted:  # the round failed at the m-th zero (same in both worlds): no test
                return Outcome(1.0, -1, used + k, res.state.tops)
            state = res.state
            used += k
            break
        if res.halted:  # the round failed while waiting (same in both worlds): no test
            return Outcome(1.0, -1, used + res.answered, res.state.tops)
        used += n
        run_len = int(runs[-1]) if n else run_len
        state = res.state
        chunk = min(2 * chunk, MAX_CHUNK)
    # the differing query (answer hidden), then theta probes
    x = g.vote(0.0) if world == 0 else g.vote(0.5)
    q = np.concatenate([[x], np.full(adv.theta, probe)])
    res = feed(q, noises(q.size), state)
    seen = np.full(adv.theta, bt.REFUSED, dtype=np.int64)
    shown = max(0, res.answered - 1)
    seen[:shown] = res.outcomes[1 : 1 + shown]
    zeros = seen == bt.L
    n2 = adv.theta if zeros.all() else int(np.argmin(zeros))
    return Outcome(0.0 if n2 >= adv.theta else 1.0, n2, used + res.answered, res.state.tops)


def play(g: Game, adv: WaitAndTest, world: int, trials: int, seed: int | list[int],
         progress: object = None) -> list[Outcome]:
    """``trials`` independent games in world ``world`` (fresh randomness per game)."""
    ss = np.random.SeedSequence(seed if isinstance(seed, list) else [seed])
    out = []
    for child in ss.spawn(trials):
        out.append(play_one(g, adv, world, np.random.default_rng(child)))
        if callable(progress):
            progress(1)
    return out
