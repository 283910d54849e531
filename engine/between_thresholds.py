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
class Rules:
    """When the threshold noise restarts and when the round fails (engine.schedule policies).

    Per query j, in this order: its outcome; the halting test (the query is answered either way);
    the restart test (a fresh threshold noise for query j+1).
      restarts "per-top": restart after every top.
      restarts "private": restart when block_tops + zeta_j >= k0 + rho_r (no hard cap on a block's
        tops: a cap that reads the hidden query's outcome re-opens the restart channel for a block the
        adversary can pick, docs/PRIVACY.md 5.3; the schedule's block_cap is an accounting bound,
        exceeded only on Lemma K's event, section 6.4)
        (AboveThreshold on the block's top count; zeta_j ~ Lap(4/eps_r), rho_r ~ Lap(2/eps_r) drawn
        with each threshold noise).
      restarts "stateless": a fresh threshold noise before every query.
      halting "paper" / "never": fail when round_tops >= c ("never" schedules have c >= R).
      halting "noisy": fail when round_tops + xi_j >= c0 + rho_h (xi_j ~ Lap(4/eps_h), rho_h ~
        Lap(2/eps_h) once per round), or round_tops >= c.
    """

    restarts: str = "per-top"
    halting: str = "paper"
    c: int = 1
    k0: float = 0.0
    c0: float = 0.0


@dataclass(frozen=True, slots=True)
class BTState:
    """What BetweenThresholds carries from one query to the next within a round."""

    mu: float
    """Threshold noise in force."""
    rho_r: float = 0.0
    """Noise of the private restart test's threshold (restarts "private")."""
    block_tops: int = 0
    """Tops since the last restart."""
    tops: int = 0
    """Tops in the round."""
    rho_h: float = 0.0
    """Noise of the noisy halting test's threshold (halting "noisy")."""


@dataclass(frozen=True, slots=True)
class BTRun:
    """Result of feeding a batch to BetweenThresholds."""

    outcomes: NDArray[np.int8]
    """L / R / TOP for each query answered (length ``answered``)."""
    answered: int
    """Queries answered: the whole batch, or up to and including the one after which the round failed."""
    state: BTState
    """State after the batch."""
    halted: bool
    """True if the round failed in this batch."""

    @property
    def mu(self) -> float:
        return self.state.mu

    @property
    def tops(self) -> int:
        return self.state.tops


def run(
    q: NDArray[np.float64],
    nu: NDArray[np.float64],
    *,
    band: float,
    state: BTState | None = None,
    rules: Rules | None = None,
    draw_restart: Callable[[], tuple[float, float]] | None = None,
    mu_per_query: NDArray[np.float64] | None = None,
    zeta: NDArray[np.float64] | None = None,
    xi: NDArray[np.float64] | None = None,
    # the paper's interface (per-top restarts, fail at the c-th top), kept for tests and peers:
    mu: float | None = None,
    tops: int = 0,
    c: int | None = None,
    draw_mu: Callable[[], float] | None = None,
    restart_after_top: bool = True,
) -> BTRun:
    """Answer the queries with fractions ``q`` and query noise ``nu``, thresholds 1/2 -+ ``band``.

    ``draw_restart`` returns the next (mu, rho_r) at each restart, in order (batch-invariant).
    ``mu_per_query`` is the threshold noise of each query (restarts "stateless"); ``zeta`` and ``xi``
    are the per-query noises of the restart and halting tests (required by "private" / "noisy").
    """
    if rules is None:  # the paper's interface
        assert mu is not None and c is not None and draw_mu is not None
        rules = Rules(restarts="per-top" if restart_after_top else "none", halting="paper", c=c)
        state = BTState(mu=mu, tops=tops)
        draw = draw_mu

        def draw_restart_paper() -> tuple[float, float]:
            return draw(), 0.0

        draw_restart = draw_restart_paper
    assert state is not None
    n = q.size
    t_l = 0.5 - band
    above = (q + nu) - t_l  # c_j - t_l
    slack = np.minimum(above, 2.0 * band - above)  # min(c_j - t_l, t_u - c_j)
    if rules.restarts == "stateless":
        assert mu_per_query is not None
        return _run_stateless(above, slack, mu_per_query, state, rules, xi)
    assert draw_restart is not None
    mu_, rho_r, btops, ctops = state.mu, state.rho_r, state.block_tops, state.tops
    tops_at: list[int] = []
    restarts_at: list[int] = []  # query index after which a new threshold noise applies
    mus = [mu_]
    p, w = 0, _FIRST_WINDOW
    halted = False
    simple = rules.restarts == "per-top" and rules.halting != "noisy"
    while p < n:
        e = min(n, p + w)
        if simple:  # the paper's design: the only events are tops
            hits = np.flatnonzero(slack[p:e] >= mu_)
            if hits.size == 0:
                p, w = e, w * 2
                continue
            k = p + int(hits[0])
            tops_at.append(k)
            ctops += 1
            p = k + 1
            if ctops >= rules.c:
                halted = True
                break
            mu_, rho_r = draw_restart()
            mus.append(mu_)
            restarts_at.append(k)
            w = _FIRST_WINDOW
            continue
        is_top = slack[p:e] >= mu_
        cum = np.cumsum(is_top, dtype=np.int64)
        round_tops = ctops + cum
        halt = round_tops >= rules.c
        if rules.halting == "noisy":
            assert xi is not None
            halt |= round_tops + xi[p:e] >= rules.c0 + state.rho_h
        if rules.restarts == "per-top":
            restart = is_top
        elif rules.restarts == "private":
            assert zeta is not None
            block = btops + cum
            restart = block + zeta[p:e] >= rules.k0 + rho_r
        else:  # "none": one threshold noise for the round (tests only)
            restart = np.zeros(e - p, dtype=bool)
        h = int(np.argmax(halt)) if halt.any() else -1
        r_ = int(np.argmax(restart)) if restart.any() else -1
        stop = h if h >= 0 and (r_ < 0 or h <= r_) else r_
        last = stop if stop >= 0 else e - p - 1
        tops_at.extend((p + np.flatnonzero(is_top[: last + 1])).tolist())
        ctops += int(cum[last])
        btops += int(cum[last])
        p += last + 1
        if stop >= 0 and stop == h:
            halted = True
            break
        if stop >= 0:
            mu_, rho_r = draw_restart()
            mus.append(mu_)
            restarts_at.append(p - 1)
            btops = 0
            w = _FIRST_WINDOW
        else:
            w *= 2
    # the threshold noise in force at each answered query: piecewise constant between restarts
    seg = np.diff(np.r_[0, np.asarray(restarts_at, dtype=np.int64) + 1, p])
    mu_at = np.repeat(np.asarray(mus[: seg.size]), seg)
    out = np.where(above[:p] < mu_at, L, R).astype(np.int8)
    out[np.asarray(tops_at, dtype=np.int64)] = TOP
    new = BTState(mu=mu_, rho_r=rho_r, block_tops=btops, tops=ctops, rho_h=state.rho_h)
    return BTRun(out, p, new, halted)


def _run_stateless(above: NDArray[np.float64], slack: NDArray[np.float64], mus: NDArray[np.float64],
                   state: BTState, rules: Rules, xi: NDArray[np.float64] | None) -> BTRun:
    """Every query is its own BetweenThresholds instance with its own threshold noise."""
    is_top = slack >= mus
    out = np.where(above < mus, L, R).astype(np.int8)
    out[is_top] = TOP
    round_tops = state.tops + np.cumsum(is_top, dtype=np.int64)
    halt = round_tops >= rules.c
    if rules.halting == "noisy":
        assert xi is not None
        halt |= round_tops + xi >= rules.c0 + state.rho_h
    if halt.any():
        k = int(np.argmax(halt)) + 1
        return BTRun(out[:k], k, BTState(mu=float(mus[k - 1]), tops=int(round_tops[k - 1]), rho_h=state.rho_h),
                     True)
    tops = int(round_tops[-1]) if round_tops.size else state.tops
    mu = float(mus[-1]) if mus.size else state.mu
    return BTRun(out, out.size, BTState(mu=mu, tops=tops, rho_h=state.rho_h), False)
