"""A round's per-query mechanism on integer vote counts, for the two designs (engine.design).

The database is the round's T classifiers; a query's count v_j is how many of them vote 1 (an
integer in [0, T]; neighbouring training sets change one classifier, so every count moves by at
most 1). Thresholds are the integers lo = ceil(T(1/2 - gamma)) and hi = floor(T(1/2 + gamma)), and
every noise is an integer (exact discrete Laplace, engine.noise): every comparison below is exact
integer arithmetic, so the mechanism is the one docs/PRIVACY.md analyses, not a float rounding of it.

**paper** (BetweenThresholds, Bun-Steinke-Ullman 2016 / the paper's Appendix C.2, with Observation
2's c tops): threshold noise mu (redrawn after every top), per-query noise nu_j; the outcome is
TOP if lo + mu <= v_j + nu_j <= hi - mu, L if v_j + nu_j < lo + mu, else R. Evaluated as "TOP iff
s_j >= mu, with s_j = min(v_j + nu_j - lo, hi - v_j - nu_j); else L iff v_j + nu_j - lo < mu", which
is the same over the integers and lets the loop search each restart's first top with no per-query
Python step; with the next threshold noises known in advance (the predictor's feed can peek) most
tops are decided many at a time (``_run_paper_windows``). The c-th top pauses the round (after its
query is answered).

**target-charged**: no threshold noise; the outcome is L if v_j + z_j < lo, R if v_j + z_j > hi, TOP
otherwise. After each query (answered either way) the round pauses if C_j + xi_j >= c0 + rho_h
(AboveThreshold on the round's top count C). There is no hard cap in the running mechanism: c is the
count the certificate charges, which the count passes before the test fires only with probability
tau(c - c0) (docs/privacy/genericbbl.md 16: a deterministic cap would leak through a round that
pauses and is followed by more rounds). Fully vectorized, and constant work: the same calls and
branches whatever the counts (``halt_tct``). A query refused for its client's quota
(``engine.quotas``) has outcome REFUSED and adds no top.

"halted" in a ``BTRun`` means the round's test fired: the predictor pauses the round
(``engine.phases``).

GenericBBL answers 0 for L and 1 for R or TOP.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from everlast.engine.design import NoisePlan

L: int = 0
R: int = 1
TOP: int = 2
REFUSED: int = -1

I64 = NDArray[np.int64]
_FIRST_WINDOW = 64


@dataclass(frozen=True, slots=True)
class BTState:
    """What a round carries from one query to the next."""

    tops: int = 0
    """Tops in the round so far (C)."""
    mu: int = 0
    """paper: the threshold noise in force."""
    rho_h: int = 0
    """target-charged: the halting test's threshold noise (drawn once per round)."""


@dataclass(frozen=True, slots=True)
class BTRun:
    """The result of feeding a batch to the round."""

    outcomes: NDArray[np.int8]
    """L / R / TOP per answered query (length ``answered``)."""
    answered: int
    """The whole batch, or up to and including the query after which the round's test fired."""
    state: BTState
    halted: bool


_TCT_CODES = np.array([L, TOP, R], dtype=np.int8)
"""(w >= lo) + (w > hi) is 0 below the band, 1 inside, 2 above: the outcome codes in that order."""


def outcomes_tct(v: I64, z: I64, plan: NoisePlan) -> NDArray[np.int8]:
    """target-charged outcomes of counts ``v`` with noises ``z`` (no state; neither is modified)."""
    w = v + z
    return _TCT_CODES[(w >= plan.lo).view(np.int8) + (w > plan.hi).view(np.int8)]


def run_tct(v: I64, z: I64, xi: I64, plan: NoisePlan, state: BTState) -> BTRun:
    """target-charged: every query answered from its own noise; the noisy halting test on C
    (``halt_tct`` on ``outcomes_tct``)."""
    return halt_tct(outcomes_tct(v, z, plan), xi, plan, state)


def halt_tct(out: NDArray[np.int8], xi: I64, plan: NoisePlan, state: BTState,
             refused: NDArray[np.bool_] | None = None) -> BTRun:
    """target-charged: the round's halting test after every query of a batch whose outcomes are
    ``out``. ``refused``: queries refused for their client's quota (``engine.quotas``): no top, outcome
    REFUSED, yet a query after which the test runs like any other (C is unchanged by it).

    The test fires at the first j with C_j + xi_j >= c0 + rho_h (no hard cap: module docstring).
    **Constant work** (docs/privacy/genericbbl.md 8): the same numpy calls and no branch, whatever the
    counts; C_j is formed for every query (an earlier version skipped it when C_n + max(xi) < c0 +
    rho_h, which made the time of a batch a function of the private top count)."""
    assert plan.c0 is not None
    n = out.size
    counted = out == TOP
    if refused is not None:
        counted &= ~refused
        out = np.where(refused, np.int8(REFUSED), out)
    tops = np.empty(n + 1, dtype=np.int64)  # tops[j] = C_j, tops[0] = the state's
    tops[0] = 0
    np.cumsum(counted, dtype=np.int64, out=tops[1:])
    tops += state.tops
    theta = plan.c0 + state.rho_h
    halt = xi + tops[1:] >= theta
    first = int(np.argmax(halt)) if n else 0
    halted = n > 0 and bool(halt[first])
    k = first + 1 if halted else n  # a branch on the halt only: the batch's refusals release it
    return BTRun(out[:k], k, BTState(tops=int(tops[k]), rho_h=state.rho_h), halted)


@runtime_checkable
class Lookahead(Protocol):
    """A threshold-noise source ``run_paper`` may look ahead in: ``peek(k)`` returns exactly the next
    k noises without consuming them, ``skip(k)`` consumes k, a call consumes one
    (``engine.predictor._MuFeed``)."""

    def __call__(self) -> int: ...

    def peek(self, k: int) -> I64: ...

    def skip(self, k: int) -> None: ...


MU_WINDOW = 256
"""Threshold noises ``run_paper`` looks ahead at per step (a peekable source)."""
MU_SCAN = 1 << 14
"""Queries a window scans at most: with tops rare its noises outlast the scan, and the next window
starts where it ended (the split changes no outcome), instead of every window scanning the rest of
the batch."""
LOOKAHEAD_MIN_BATCH = 256
"""Smaller batches take the one-noise path: its few numpy calls cost less there (same outcomes, same
noises consumed)."""


def run_paper(v: I64, nu: I64, plan: NoisePlan, state: BTState, next_mu: Callable[[], int]) -> BTRun:
    """paper: BetweenThresholds with a fresh threshold noise after every top, pausing at the c-th.

    ``next_mu`` returns the next threshold noise (called once per top that does not fail the round,
    in order: batch-invariant). A source with ``peek``/``skip`` is consumed the same way, exactly one
    noise per top that does not fail the round, and decided in windows (``_run_paper_windows``).
    """
    above = v + nu
    above -= plan.lo  # v + nu - lo
    slack = np.subtract(plan.band, above)
    np.minimum(slack, above, out=slack)  # min(v + nu - lo, hi - v - nu)
    if v.size >= LOOKAHEAD_MIN_BATCH and isinstance(next_mu, Lookahead) and state.tops < plan.c:
        return _run_paper_windows(above, slack, plan, state, next_mu)
    n = v.size
    mu, tops = state.mu, state.tops
    tops_at: list[int] = []
    mus = [mu]
    p, w = 0, _FIRST_WINDOW
    halted = False
    while p < n:
        e = min(n, p + w)
        hits = np.flatnonzero(slack[p:e] >= mu)
        if hits.size == 0:
            p, w = e, w * 2
            continue
        k = p + int(hits[0])
        tops_at.append(k)
        tops += 1
        p = k + 1
        if tops >= plan.c:
            halted = True
            break
        mu = next_mu()
        mus.append(mu)
        w = _FIRST_WINDOW
    return _outcomes(above, np.asarray(tops_at, dtype=np.int64), np.asarray(mus, dtype=np.int64), p,
                     BTState(tops=tops, mu=mu), halted)


def _run_paper_windows(above: I64, slack: I64, plan: NoisePlan, state: BTState, feed: Lookahead) -> BTRun:
    """``run_paper`` with the next threshold noises known in advance (at most ``MU_WINDOW``).

    With M_0 the noise in force and M_1..M_W the next W (``feed.peek``), the noise in force after u
    more tops is M_u. Query j is a top iff s_j >= the noise in force at j, so while at most W tops
    happen: a query with s_j < min M is never a top, and one with s_j >= max M always is (in order,
    each moving the noise on by one). Between those, the next top under M_u is searched as the
    one-noise path searches (doubling windows over the candidates), one numpy step per top, not per
    query. So every query gets the outcome the one-at-a-time definition gives it, with the same
    noises consumed in the same order (``feed.skip``: one per top that does not fail the round).
    No noise is looked at before a query reaches the noise in force (a batch without tops draws
    none)."""
    n = slack.size
    mu, tops = state.mu, state.tops
    tops_at: list[I64] = []
    mus: list[I64] = [np.array([mu], dtype=np.int64)]  # the noise in force from the start, then after each top
    p, halted = 0, False
    while p < n and not halted:
        p = _first_at_least(slack, p, mu)  # the next top under the noise in force; the window starts there
        if p >= n:  # none: the rest of the batch has no top
            break
        W = min(max(1, MU_WINDOW), n - p)  # at most one top per query left
        M = np.concatenate([np.array([mu], dtype=np.int64), np.asarray(feed.peek(W), dtype=np.int64)])
        end = min(n, p + max(1, MU_SCAN))  # the window decides [p, end) at most
        cand = np.flatnonzero(slack[p:end] >= M.min()) + p  # nothing else can be a top while M lasts
        sure = slack[cand] >= M.max()  # a top under every noise of M
        flips = np.flatnonzero(sure[1:] != sure[:-1]) + 1  # where runs of sure / unsure candidates start
        ends = [*flips.tolist(), cand.size]
        used, i, run = 0, 0, 0  # tops so far in this window; next candidate; its run's index in ends
        stop = end
        while i < cand.size:
            if used == W:  # M is used up: the next window starts at this candidate
                stop = int(cand[i])
                break
            while ends[run] <= i:
                run += 1
            r = ends[run]  # candidates i..r-1 are all sure or all unsure
            if sure[i]:
                k = min(r - i, W - used, plan.c - tops)
                tops_at.append(cand[i : i + k])
                tops, used, i = tops + k, used + k, i + k
                if tops >= plan.c:
                    halted, stop = True, int(cand[i - 1]) + 1
                    break
                continue
            h, w = i, _FIRST_WINDOW  # unsure: the first of them that reaches M[used], if any
            while h < r:
                e = min(r, h + w)
                hits = np.flatnonzero(slack[cand[h:e]] >= M[used])
                if hits.size:
                    h += int(hits[0])
                    break
                h, w = e, w * 2
            if h >= r:
                i = r
                continue
            j = int(cand[h])
            tops_at.append(np.array([j], dtype=np.int64))
            tops, used, i = tops + 1, used + 1, h + 1
            if tops >= plan.c:
                halted, stop = True, j + 1
                break
        drawn = used - 1 if halted else used  # the failing top draws no new noise
        feed.skip(drawn)
        mus.append(M[1 : drawn + 1])
        mu = int(M[drawn])
        p = stop
    at = np.concatenate(tops_at) if tops_at else np.zeros(0, dtype=np.int64)
    return _outcomes(above, at, np.concatenate(mus), min(p, n), BTState(tops=tops, mu=mu), halted)


def _first_at_least(s: I64, p: int, bound: int) -> int:
    """The first j >= p with s[j] >= bound (s.size if none), scanning doubling windows from p."""
    w = _FIRST_WINDOW
    while p < s.size:
        e = min(s.size, p + w)
        hits = np.flatnonzero(s[p:e] >= bound)
        if hits.size:
            return p + int(hits[0])
        p, w = e, w * 2
    return s.size


def _outcomes(above: I64, tops_at: I64, mus: I64, answered: int, state: BTState, halted: bool) -> BTRun:
    """The outcomes of the first ``answered`` queries: TOP at ``tops_at``; elsewhere L iff
    v + nu - lo < the threshold noise in force (constant between tops: ``mus[t]`` after t tops)."""
    restarts = tops_at[: mus.size - 1]  # a failing top draws no new mu
    if restarts.size:
        mu_at: I64 | int = np.repeat(mus, np.diff(np.r_[0, restarts + 1, answered]))
    else:
        mu_at = int(mus[0])
    out = np.greater_equal(above[:answered], mu_at).view(np.int8)  # R = 1 where v + nu - lo >= mu, else L = 0
    out[tops_at] = TOP
    return BTRun(out, answered, state, halted)


def reference(v: I64, noise: I64, plan: NoisePlan, state: BTState, *, xi: I64 | None = None,
              next_mu: Callable[[], int] | None = None, refused: NDArray[np.bool_] | None = None) -> BTRun:
    """One query at a time, straight from the definitions in the module docstring: the
    specification the vectorized functions above are tested against (never used to serve).
    ``refused`` (target-charged): queries refused for their client's quota."""
    out: list[int] = []
    tops, mu = state.tops, state.mu
    for j in range(v.size):
        c = int(v[j]) + int(noise[j])
        if next_mu is None:  # target-charged
            o = L if c < plan.lo else R if c > plan.hi else TOP
            if refused is not None and refused[j]:
                o = REFUSED
        else:
            o = TOP if plan.lo + mu <= c <= plan.hi - mu else L if c < plan.lo + mu else R
        out.append(o)
        tops += o == TOP
        if next_mu is None:
            assert xi is not None and plan.c0 is not None
            if tops + int(xi[j]) >= plan.c0 + state.rho_h:
                return BTRun(np.asarray(out, np.int8), j + 1, BTState(tops=tops, rho_h=state.rho_h), True)
        elif o == TOP:
            if tops >= plan.c:
                return BTRun(np.asarray(out, np.int8), j + 1, BTState(tops=tops, mu=mu), True)
            mu = next_mu()
    return BTRun(np.asarray(out, np.int8), v.size, BTState(tops=tops, mu=mu, rho_h=state.rho_h), False)
