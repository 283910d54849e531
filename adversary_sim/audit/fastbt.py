"""BetweenThresholds for many independent games at once (vectorized over trials).

The audit plays the game of Figure 1 thousands of times. When a broken variant lets one round answer
thousands of in-band queries (``no-halt-limit``), the engine's per-top loop would dominate the run
time, so the round is replayed here with one numpy operation per query *position* across all trials.

This reproduces ``engine.between_thresholds.run`` with the paper's rules (restart the threshold noise
after every top, fail at the c-th top; Bun-Steinke-Ullman 2016 / the paper's Appendix C.2 with
Observation 2): for query j of a trial, with vote share q_j and noises nu_j ~ Lap(6/(eps' T)),
mu ~ Lap(2/(eps' T)) (redrawn after each top),

    above = q_j + nu_j - t_l,  slack = min(above, 2 gamma - above),
    TOP if slack >= mu, else L if above < mu, else R.

``run_batch`` takes the noise as arrays when given (tests feed the same noise to both
implementations and compare outcomes exactly); otherwise it draws it with the engine's Laplace
sampler. Only the inputs a round of the engine would see are used: the trial's vote shares, the
round's (eps', T, gamma, c).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from engine import between_thresholds as bt
from engine.rng import laplace


@dataclass(frozen=True, slots=True)
class BatchRun:
    outcomes: NDArray[np.int8]
    """(trials, queries): L=0, R=1, TOP=2, refused=-1 (after the round failed)."""
    tops: NDArray[np.int64]
    halted: NDArray[np.bool_]

    @property
    def labels(self) -> NDArray[np.int8]:
        """What the adversary sees: 0 on L, 1 on R or top, -1 refused (``Predictor.answer``)."""
        out = np.where(self.outcomes == bt.L, 0, 1).astype(np.int8)
        out[self.outcomes == bt.REFUSED] = -1
        return out


def run_batch(
    q: NDArray[np.float64],
    queries: int,
    *,
    eps_bt: float,
    T: int,
    band: float,
    c: int | None,
    rng: np.random.Generator | None = None,
    nu: NDArray[np.float64] | None = None,
    mu_draws: NDArray[np.float64] | None = None,
) -> BatchRun:
    """Answer ``queries`` queries in each of ``q.shape[0]`` independent rounds.

    ``q``: vote shares, shape (trials,) (the same query repeated) or (trials, queries).
    ``c``: tops after which the round fails (None: never; the broken ``no-halt-limit`` variant).
    ``nu``: (trials, queries) query noise; ``mu_draws``: (trials, k) successive threshold noises of
    each trial (the first is the initial one; one more per top). Either both or neither.
    """
    n = q.shape[0]
    qq = np.broadcast_to(q[:, None] if q.ndim == 1 else q, (n, queries))
    s_nu = bt.query_noise_scale(eps_bt, T)
    s_mu = bt.threshold_noise_scale(eps_bt, T)
    given = nu is not None
    if given:
        assert nu is not None and mu_draws is not None
        mu = mu_draws[:, 0].copy()
    else:
        assert rng is not None
        mu = laplace(rng, s_mu, n)
    t_l = 0.5 - band
    out = np.full((n, queries), bt.REFUSED, dtype=np.int8)
    tops = np.zeros(n, dtype=np.int64)
    live = np.ones(n, dtype=bool)
    limit = np.iinfo(np.int64).max if c is None else c
    for j in range(queries):
        idx = np.flatnonzero(live)
        if idx.size == 0:
            break
        noise = nu[idx, j] if given else laplace(rng, s_nu, idx.size)  # type: ignore[index,arg-type]
        above = qq[idx, j] + noise - t_l
        slack = np.minimum(above, 2.0 * band - above)
        m = mu[idx]
        is_top = slack >= m
        res = np.where(above < m, bt.L, bt.R).astype(np.int8)
        res[is_top] = bt.TOP
        out[idx, j] = res
        hit = idx[is_top]
        tops[hit] += 1
        done = hit[tops[hit] >= limit]
        live[done] = False
        again = hit[tops[hit] < limit]
        if again.size:
            if given:
                assert mu_draws is not None
                mu[again] = mu_draws[again, tops[again]]
            else:
                mu[again] = laplace(rng, s_mu, again.size)  # type: ignore[arg-type]
    return BatchRun(out, tops, ~live)
