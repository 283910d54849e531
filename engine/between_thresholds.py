"""BetweenThresholds (Bun, Steinke, Ullman 2016), as in the paper's Appendix C.2, with
Observation 2's extension to c top outcomes.

Database: the round's T classifiers F_i. Query for a point x: q_x(F_i) = (1/T) sum_t f_t(x), the
*fraction* voting 1. (The paper's step 3(d)ii writes the sum without 1/T; Lemma C.3's sensitivity
1/n needs the fraction, so we normalise. See docs/PRIVACY.md.)

Noise, with eps' the instance's privacy parameter and n = T:
  * threshold noise mu ~ Lap(2/(eps' T)), noisy thresholds t_l + mu and t_u - mu, drawn at the start
    and afresh after every top (each top ends one BetweenThresholds instance; Observation 2
    composes the c instances);
  * query noise nu_j ~ Lap(6/(eps' T)), one per query.
Outcome of c_j = q_j + nu_j: L if c_j < t_l + mu, else R if c_j > t_u - mu, else top. We evaluate it
in the equivalent form "top iff mu <= s_j := min(c_j - t_l, t_u - c_j); else L iff c_j - t_l < mu;
else R" (identical over the reals), because the slack s_j does not depend on mu: it is computed
once per batch, and the loop only has to find, from each restart, the first query with s_j >= mu.
After the c-th top the instance halts (GenericBBL step 3(d)iv: the predictor fails).

Tops are rare in honest traffic; the search window grows geometrically between tops and shrinks
back after each, so an adversary that forces tops costs O(window) per top, not O(batch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

L: int = 0
R: int = 1
TOP: int = 2
REFUSED: int = -1

_FIRST_WINDOW = 64


def threshold_noise_scale(eps_bt: float, T: int) -> float:
    """Scale of mu: 2 / (eps' T)."""
    return 2.0 / (eps_bt * T)


def query_noise_scale(eps_bt: float, T: int) -> float:
    """Scale of nu_j: 6 / (eps' T)."""
    return 6.0 / (eps_bt * T)


@dataclass(frozen=True, slots=True)
class BTRun:
    """Result of feeding a batch to BetweenThresholds."""

    outcomes: NDArray[np.int8]
    """L / R / TOP for each query answered (length ``answered``)."""
    answered: int
    """Queries answered: the whole batch, or up to and including the c-th top."""
    mu: float
    """Threshold noise in force after the batch."""
    tops: int
    """Tops used so far in the round."""
    halted: bool
    """True if the c-th top was reached in this batch."""


def run(
    q: NDArray[np.float64],
    nu: NDArray[np.float64],
    *,
    band: float,
    mu: float,
    tops: int,
    c: int,
    draw_mu: Callable[[], float],
    restart_after_top: bool = True,
) -> BTRun:
    """Answer the queries with fractions ``q`` and query noise ``nu`` (same length), thresholds
    1/2 -+ ``band``. ``draw_mu`` draws the next threshold noise (called once per restart, in order,
    which keeps the threshold stream batch-invariant)."""
    n = q.size
    t_l = 0.5 - band
    above = (q + nu) - t_l  # c_j - t_l
    slack = np.minimum(above, 2.0 * band - above)  # min(c_j - t_l, t_u - c_j)
    top_at: list[int] = []
    mus = [mu]
    p = 0
    w = _FIRST_WINDOW
    halted = False
    while p < n:
        e = min(n, p + w)
        hits = np.flatnonzero(slack[p:e] >= mu)
        if hits.size == 0:
            p = e
            w *= 2
            continue
        k = p + int(hits[0])
        top_at.append(k)
        p = k + 1
        tops += 1
        if tops >= c:
            halted = True
            break
        if restart_after_top:
            mu = draw_mu()
        mus.append(mu)
        w = _FIRST_WINDOW
    answered = p if halted else n
    # the threshold noise in force at each query: piecewise constant, changing after each top
    seg_len = np.diff(np.r_[0, np.asarray(top_at, dtype=np.int64) + 1, answered])[: len(mus)]
    mu_at = np.repeat(np.asarray(mus[: seg_len.size]), seg_len)
    a = above[:answered]
    out = np.where(a < mu_at, L, R).astype(np.int8)
    out[np.asarray(top_at, dtype=np.int64)] = TOP
    return BTRun(out, answered, mu, tops, halted)
