"""The target-charged round's training-side privacy: Lemma Q and Lemma TC (docs/privacy/genericbbl.md 6).

The round (engine.between_thresholds.run_tct): per query, z_j ~ DLap(t) on the integer vote count
v_j, outcome L (v + z < lo), R (v + z > hi) or TOP; a substitution in the training set moves every
count by at most 1. Per query the mechanism is eps0-DP with eps0 = 1/t.

* **Lemma Q** (discrete, proven in docs/privacy/genericbbl.md 6.1): TOP is a q-target of that mechanism with
  B-level eps0 and q = (1 - e^{-eps0 m}) / (1 + e^{eps0}), m = hi - lo + 1 the counts in the band.
* **Lemma TC** (proven in 6.2): a round that stops by its c-th TOP (the hard cap) is
  (E, delta_K + delta_tail)-DP for every K, with (E, delta_K) the K-fold optimal (KOV)
  composition of eps0-DP steps and delta_tail >= P[Bin(K, q) <= c - 1]; K may be taken <= R (a
  round has at most R charged steps, so for K = R the tail is 0).
* **Lemma TC'** (proven in 16.2): the same round with no hard cap, pausing when its halting test
  fires: delta_tail gains tau_c = P[xi - rho >= c - c0 + 1] (``passing``), the probability that the
  count passes c before the test fires. The tail and tau_c are summed rounded up, and what is left
  of Delta for KOV is rounded down (``above_threshold.up_sum``, ``down_diff``; section 1).

``delta_tail`` is bounded by the Chernoff-Hoeffding bound with the exact binomial KL divergence,
P[Bin(K, q) <= a] <= exp(-K KL(a/K || q)) for a <= Kq (rigorous, closed form), which costs about
ln(sqrt(K)) in the exponent against the exact tail: a ~1% larger K.

The idea of charging only the steps that hit a target is Cohen and Lyu's ("The target-charging
technique for privacy accounting across interactive computations", NeurIPS 2023); we could not
read their text, so the statements and constants used here are the ones proven in the repo.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import mpmath

from everlast.engine import roots
from everlast.engine.planner import composition as comp
from everlast.engine.planner.above_threshold import down_diff, up, up_sum

EPS0_CAP = 5.0
"""Planning never asks for a per-query level above this (the accuracy floor binds far below)."""
TAIL_SHARES = (0.3, 0.1, 3e-2, 1e-2, 3e-3, 1e-3, 1e-4, 1e-5)
"""Shares of Delta tried for delta_tail; the smallest E wins."""


def q_target(eps0: float, m: int) -> float:
    """Lemma Q's q = (1 - e^{-eps0 m})/(1 + e^{eps0}), rounded down."""
    if m < 1 or eps0 <= 0.0:
        return 0.0
    with mpmath.workdps(40):
        q = -mpmath.expm1(-mpmath.mpf(eps0) * m) / (1 + mpmath.exp(mpmath.mpf(eps0)))
        f = float(q * (1 - mpmath.mpf(10) ** -30))
    return f if f <= q else math.nextafter(f, 0.0)


@functools.lru_cache(maxsize=1 << 17)
def binom_lower_tail(K: int, q: float, a: int) -> float:
    """An upper bound on P[Bin(K, q) <= a]: exp(-K KL(a/K || q)) when a < Kq, else 1 (rounded up).
    A pure function of its arguments, so its values are cached (the planner asks for the same
    ones many times)."""
    if a < 0:
        return 0.0
    if a >= K:
        return 1.0
    x = a / K
    if x >= q:
        return 1.0
    qm, one_qm, margin = _exact_q(q)
    with mpmath.workdps(40):
        xm = mpmath.mpf(a) / K
        kl = (xm * mpmath.log(xm / qm) if a > 0 else 0) + (1 - xm) * mpmath.log((1 - xm) / one_qm)
        return up(mpmath.exp(-K * kl) * margin)


@functools.lru_cache(maxsize=1 << 12, typed=True)
def _exact_q(q: float) -> tuple[mpmath.mpf, mpmath.mpf, mpmath.mpf]:
    """q, 1 - q and the rounding margin 1 + 10^-30 at ``binom_lower_tail``'s 40 digits (the same
    values it computed inline; cached: the searches ask for many K at one q)."""
    with mpmath.workdps(40):
        qm = mpmath.mpf(q)
        return qm, 1 - qm, 1 + mpmath.mpf(10) ** -30


@functools.lru_cache(maxsize=1 << 16)
def charged_steps(c: int, q: float, target: float) -> int:
    """Smallest K > K0 = max(c, ceil((c - 1)/q)) with binom_lower_tail(K, q, c - 1) <= target. K0
    itself is not tried: where the bound already holds there (small c with q near 1 only), the
    answer is K0 + 1, and a larger K only over-charges.

    The bound falls as K grows (K KL((c - 1)/K || q) increases in K while (c - 1)/K < q), so the
    answer is the one boundary of a monotone predicate. It is located with the double-precision
    bound (``_float_log_tail``, cheap) and then pinned with the exact one: the returned K meets the
    target at 40 digits and K - 1 does not (or is K0), whatever the float estimate said. The
    result is therefore the same as a bisection on the exact bound alone, at 2 to 4 exact
    evaluations instead of about 20."""
    if not 0.0 < target < 1.0 or q <= 0.0:
        raise ValueError("need a tail target in (0, 1) and q > 0")

    def meets(K: int) -> bool:
        return binom_lower_tail(K, q, c - 1) <= target

    lo = max(c, math.ceil((c - 1) / q))
    log_target = math.log(target)
    _, hi = roots.grow_until(lambda K: _float_log_tail(K, q, c - 1) <= log_target, lo, max(lo + 1, 2 * lo))
    guess = roots.smallest_int(lambda K: _float_log_tail(K, q, c - 1) <= log_target, lo, hi)
    return _pin_boundary(meets, lo, guess)


def _float_log_tail(K: int, q: float, a: int) -> float:
    """ln of ``binom_lower_tail``'s bound in double precision (search only: never compared with a
    target as the answer; ``charged_steps`` confirms at 40 digits)."""
    if a >= K:
        return 0.0
    x = a / K
    if x >= q:
        return 0.0
    kl = (x * math.log(x / q) if a > 0 else 0.0) + (1.0 - x) * (math.log1p(-x) - math.log1p(-q))
    return -K * kl


def _pin_boundary(meets: Callable[[int], bool], lo: int, guess: int) -> int:
    """The smallest K > lo with ``meets(K)``, for ``meets`` false then true on (lo, inf), searched
    from a guess of it: a galloping step away from the guess brackets the boundary, then
    ``roots.smallest_int`` (its invariant: the end returned was evaluated to meet)."""
    guess = max(guess, lo + 1)
    if meets(guess):
        hi, step = guess, 1
        while hi - step > lo and meets(hi - step):
            hi, step = hi - step, 2 * step
        below = max(lo, hi - step)  # does not meet (or is lo)
        return hi if hi - below <= 1 else roots.smallest_int(meets, below, hi)
    below, step = guess, 1
    while not meets(below + step):
        below, step = below + step, 2 * step
    hi = below + step
    return hi if hi - below <= 1 else roots.smallest_int(meets, below, hi)


@dataclass(frozen=True, slots=True)
class RoundTC:
    """A target-charged round's certificate: (E, Delta) from Lemmas Q and TC."""

    E: float
    Delta: float
    eps0: float
    q: float
    K: int
    """Charged steps composed (min(R, the tail's K))."""
    delta_K: float
    delta_tail: float
    """P[Bin(K, q) <= c - 1] bound plus the probability that the round's count passes c before its
    test fires (0 when K = R)."""


def round_epsilon(eps0: float, m: int, c: int, R: int, Delta: float, passing: float = 0.0) -> RoundTC:
    """Certify one target-charged round (exact scales from engine.design.noise_plan: eps0 = 1/t,
    m = hi - lo + 1, the count c charged, R queries) at total delta ``Delta``. ``passing``: a bound
    on the probability that the round's top count reaches c before its halting test fires
    (tau(c - c0), Lemma T(ii)); the round runs no hard cap (docs/privacy/genericbbl.md 16, Lemma TC'),
    so a tail with K < R adds it."""
    cands = _round_candidates(eps0, m, c, R, Delta, passing)
    best = next(cands)  # E = +inf: no K certifies the round
    for cand in cands:
        if cand.E < best.E:
            best = cand
    return best


def round_meets(eps0: float, m: int, c: int, R: int, Delta: float, E: float, passing: float = 0.0) -> bool:
    """``round_epsilon(eps0, m, c, R, Delta, passing).E <= E``, stopping at the first K that meets E
    (the same candidates in the same order; the planner's searches ask only this)."""
    return any(cand.E <= E for cand in _round_candidates(eps0, m, c, R, Delta, passing))


def _round_candidates(eps0: float, m: int, c: int, R: int, Delta: float, passing: float) -> Iterator[RoundTC]:
    """``round_epsilon``'s certificates, one per K tried: first the one with E = +inf and K = 0 (q
    alone), then K = R (every query charged, no tail), then the tail shares' (``TAIL_SHARES``)."""
    q = q_target(eps0, m)
    yield RoundTC(math.inf, Delta, eps0, q, 0, 0.0, 0.0)
    if q <= 0.0 or not 0.0 < Delta < 1.0:
        return
    # K = R: every query charged, no tail
    E_all = comp.kov_epsilon(eps0, 0.0, R, Delta)
    if math.isfinite(E_all):
        yield RoundTC(E_all, Delta, eps0, q, R, comp.kov_delta(eps0, 0.0, R, E_all), 0.0)
    for share in TAIL_SHARES:
        K = charged_steps(c, q, share * Delta)
        if K >= R:
            continue  # K = R is covered above
        tail = up_sum(binom_lower_tail(K, q, c - 1), passing)  # both rounded up (section 1)
        rest = down_diff(Delta, tail) if tail < Delta else 0.0  # what is left for KOV, rounded down
        E = comp.kov_epsilon(eps0, 0.0, K, rest) if rest > 0.0 else math.inf
        yield RoundTC(E, Delta, eps0, q, K, rest, tail)


def max_eps0(E: float, Delta: float, c: int, R: int, m_of: Callable[[float], int], passing: float = 0.0) -> float:
    """Planning: the largest eps0 whose round meets (E, Delta), searched over the tail share.
    ``m_of(eps0)`` is the band's count m at the T that eps0 implies. q depends on eps0, so start
    from q = 1/2 (too optimistic) and recompute once at the resulting eps0: the second eps0 is
    below the fixed point, hence valid (a smaller eps0 has a larger q, so its K is smaller). The
    certifier re-derives everything from the schedule. ``passing``: as in ``round_epsilon``."""
    eps0 = _max_eps0_at(E, Delta, c, R, 0.5, passing)
    for _ in range(2):
        if eps0 <= 0.0:
            return 0.0
        eps0 = _max_eps0_at(E, Delta, c, R, q_target(eps0, m_of(eps0)), passing)
    return eps0


@functools.lru_cache(maxsize=1 << 14)
def _max_eps0_at(E: float, Delta: float, c: int, R: int, q: float, passing: float = 0.0) -> float:
    best = 0.0
    for share in TAIL_SHARES:
        K = min(R, charged_steps(c, q, share * Delta))
        tail = 0.0 if K >= R else up_sum(binom_lower_tail(K, q, c - 1), passing)
        rest = down_diff(Delta, tail) if tail < Delta else 0.0
        if rest <= 0.0:
            continue
        best = max(best, comp.kov_max_eps0(K, E, rest, cap=EPS0_CAP))
    return best
