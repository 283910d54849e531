"""What the answers of a target-charged schedule are proven to get right: Theorem A
(docs/privacy/genericbbl.md 6.3). Accuracy only: nothing here can weaken privacy.

For round i with T classifiers of lambda points, thresholds lo (``engine.design.noise_plan``) and
per-query noise DLap(t), a query's answer is 1{v(x) + z >= lo}. Lemma A1 bounds the error of that
hypothesis against the round's labels g_i by P[|z| >= k] + T ebar/(lo - k + 1) for any k, ebar the
classifiers' average error (Markov's inequality); Lemma A2 bounds ebar from Theorem A.2's tail at
sample size lambda (``mean_error_bound``) and Hoeffding's inequality over the T independent chunks
(``ensemble_error``); Claims E.1-E.3 (the paper) bound the labels' error a_i = sum_{j=2}^{i}
alpha_j. Two readings of an answer's accuracy (the doc says why both):

* ``per-query``: the hypothesis is randomized by the answer's own noise; a flip probability
  P[|z| >= k] is charged inside the bound;
* ``every-answer``: Definition 3.1 read literally (the noise fixed inside the hypothesis); every
  one of the round's R noises must stay below k, a union bound over the round.

All probabilities are evaluated so that the printed bound is an upper bound (rounded up).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import mpmath

from everlast.engine.design import Design, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner.above_threshold import up
from everlast.engine.schedule import RoundSpec

Reading = Literal["per-query", "every-answer"]
READINGS: tuple[Reading, ...] = ("per-query", "every-answer")
ENSEMBLE_BETA_SHARE = 1.0
"""Lemma A2's failure budget per round, as a share of the round's beta_i."""
STRICT_BETA_SHARE = 0.5
"""The every-answer reading's union bound over the round's noises, as a share of beta_i."""
_GRID = 4096
_DPS = 40


@functools.lru_cache(maxsize=4096)
def tail_bound(lam: int, d: int, a: float) -> float:
    """Theorem A.2 (Blumer et al. 1989) solved for beta at sample size lambda: a consistent
    hypothesis on lambda i.i.d. points has error > a with probability <= 2^{1 - (a lambda -
    8 d log2(13/a))/4}, when that is < 1/2 (and a < 1/2); 1.0 otherwise."""
    if not 0.0 < a < 0.5:
        return 1.0
    x = (a * lam - 8.0 * d * math.log2(13.0 / a)) / 4.0
    if x <= 2.0:  # 2^{1 - x} >= 1/2: Theorem A.2 says nothing here
        return 1.0
    return min(1.0, float(2.0 ** (1.0 - x)))


@functools.lru_cache(maxsize=1024)
def mean_error_bound(lam: int, d: int) -> float:
    """mu(lambda): an upper bound on the expected error of a consistent hypothesis on lambda points
    (Lemma A2): integral over a of P[error > a] <= min(1, tail_bound(a)), by an upper Riemann sum on
    [0, 1/2) (the bound decreases in a) plus (1/2) tail_bound(1/2-) for [1/2, 1]."""
    h = 0.5 / _GRID
    total = math.fsum(tail_bound(lam, d, j * h) if j else 1.0 for j in range(_GRID)) * h
    last = tail_bound(lam, d, 0.5 - 1e-12)
    return min(1.0, up(Fraction(total) * (1 + Fraction(1, 10**9)) + Fraction(last) / 2))


@functools.lru_cache(maxsize=65536)
def ensemble_error(mu: float, T: int, beta_e: float) -> float:
    """ebar with P[average error of T independent [0, 1] errors with means <= mu > ebar] <= beta_e
    (Hoeffding 1963, Thm 1, relative-entropy form: exp(-T KL(ebar || mu)) <= beta_e); rounded up."""
    if mu >= 1.0:
        return 1.0
    target = math.log(1.0 / beta_e) / T
    lo, hi = mu, 1.0
    if _kl(hi, mu) <= target:
        return 1.0
    for _ in range(80):  # KL(x || mu) increases in x >= mu: bisect for KL = target
        mid = 0.5 * (lo + hi)
        if _kl(mid, mu) >= target:
            hi = mid
        else:
            lo = mid
    return math.nextafter(hi, math.inf)


def _kl(u: float, m: float) -> float:
    if u >= 1.0:
        return -math.log(m) if m > 0 else math.inf
    return u * math.log(u / m) + (1.0 - u) * math.log((1.0 - u) / (1.0 - m))


def flip_probability(t: Fraction, k: int) -> float:
    """P[|Z| >= k] = 2 p^k/(1 + p), Z ~ DLap(t), p = e^{-1/t} (Lemma DL(ii)), rounded up; 1 for k <= 0."""
    if k <= 0:
        return 1.0
    with mpmath.workdps(_DPS):
        p = mpmath.exp(-1 / mpmath.mpf(t.numerator) * t.denominator)
        return min(1.0, up(2 * p**k / (1 + p) * (1 + mpmath.mpf(10) ** -30)))


@dataclass(frozen=True, slots=True)
class RoundAccuracy:
    """Theorem A for one round: every answer's hypothesis errs w.p. <= ``bound`` (in ``reading``),
    except on events of total probability ``failure``."""

    round: int
    reading: Reading
    bound: float
    labels: float
    """a_i: the labels' error (Claim E.1, inherited)."""
    flips: float
    """P[|z| >= k] (per query) or 0 (every answer: charged in ``failure``)."""
    ensemble: float
    """T ebar/(lo - k + 1): the classifiers' disagreement with the labels (Lemma A1, Markov)."""
    ebar: float
    mu: float
    k: int
    failure: float
    note: str = ""


def round_accuracy(spec: RoundSpec, design: Design, rnd: int, labels: float, vc: int,
                   reading: Reading = "per-query") -> RoundAccuracy:
    """Theorem A's bound for round ``rnd`` (``labels`` = a_i, the schedule's inherited labelling
    error). A round the engine cannot run, or with too few points per chunk for Theorem A.2, gets
    the trivial bound 1 and a note."""
    try:
        plan = noise_plan(design, spec)
    except InvalidSchedule as exc:
        return RoundAccuracy(rnd, reading, 1.0, labels, 0.0, 1.0, 1.0, 1.0, 0, 0.0, f"not runnable: {exc}")
    mu = mean_error_bound(spec.lam, vc)
    beta_e = ENSEMBLE_BETA_SHARE * spec.beta
    ebar = ensemble_error(mu, spec.T, beta_e)
    if reading == "every-answer":
        beta_z = STRICT_BETA_SHARE * spec.beta
        k = _strict_k(plan.query, spec.R, beta_z)
        ens = _markov(spec.T, ebar, plan.lo, k)
        bound = min(1.0, up(Fraction(labels) + Fraction(ens)))
        return RoundAccuracy(rnd, reading, bound, labels, 0.0, ens, ebar, mu, k, beta_e + beta_z)
    k, flips, ens = _best_k(plan.query, spec.T, ebar, plan.lo)
    bound = min(1.0, up(Fraction(labels) + Fraction(flips) + Fraction(ens)))
    note = "" if bound < 1.0 else "lambda too small for Theorem A.2 (mu = 1/2 or more): no accuracy proven"
    return RoundAccuracy(rnd, reading, bound, labels, flips, ens, ebar, mu, k, beta_e, note)


def _markov(T: int, ebar: float, lo: int, k: int) -> float:
    """T ebar/(lo - k + 1) (Lemma A1), rounded up; 1 when lo - k + 1 <= 0."""
    u = lo - k + 1
    return 1.0 if u <= 0 else min(1.0, up(Fraction(T) * Fraction(ebar) / u))


def _best_k(t: Fraction, T: int, ebar: float, lo: int) -> tuple[int, float, float]:
    """The k minimising P[|z| >= k] + T ebar/(lo - k + 1) (unimodal in k: a golden search on the
    integers, then the neighbourhood)."""

    def f(k: int) -> float:
        return flip_probability(t, k) + _markov(T, ebar, lo, k)

    a, b = 1, max(1, lo)
    while b - a > 4:
        m1, m2 = a + (b - a) // 3, b - (b - a) // 3
        if f(m1) <= f(m2):
            b = m2
        else:
            a = m1
    k = min(range(a, b + 1), key=f)
    return k, flip_probability(t, k), _markov(T, ebar, lo, k)


def _strict_k(t: Fraction, R: int, beta_z: float) -> int:
    """The smallest k with R P[|z| >= k] <= beta_z (the every-answer reading's union bound)."""
    k = 1
    while R * flip_probability(t, k) > beta_z:
        k *= 2
    lo, hi = k // 2, k
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if R * flip_probability(t, mid) <= beta_z:
            hi = mid
        else:
            lo = mid
    return hi


def labels_error(alphas: Sequence[float]) -> list[float]:
    """a_i = sum_{j=2}^{i} alpha_j for each listed round (Claim E.1: g_1 = c, and each relabelling
    adds alpha_j), rounded up."""
    out, acc = [], Fraction(0)
    for i, a in enumerate(alphas, start=1):
        if i >= 2:
            acc += Fraction(a)
        out.append(up(acc))
    return out


def schedule_accuracy(rounds: Sequence[RoundSpec], design: Design, vc: int,
                      reading: Reading = "per-query") -> tuple[RoundAccuracy, ...]:
    """Theorem A for every listed round of a target-charged schedule."""
    a = labels_error([r.alpha for r in rounds])
    return tuple(round_accuracy(r, design, i, a[i - 1], vc, reading) for i, r in enumerate(rounds, start=1))
