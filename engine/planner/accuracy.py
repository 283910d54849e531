"""What the answers of a target-charged schedule are proven to get right: Theorem A
(docs/privacy/genericbbl.md 6.3). Accuracy only: nothing here can weaken privacy.

For round i with T classifiers of lambda points, thresholds lo (``engine.design.noise_plan``) and
per-query noise DLap(t), a query's answer is 1{v(x) + z >= lo}. Lemma A1 bounds the error of that
hypothesis against the round's labels g_i by P[|z| >= k] + T ebar/(lo - k + 1) for any k, ebar the
classifiers' average error (Markov's inequality); Lemma A2 bounds ebar by the epsilon-net theorem
over the disagreement regions at sample size lambda (``mean_error_bound``) and Hoeffding's
inequality over the T independent chunks (``ensemble_error``); Claim E.1, made exact by Lemma R
(``relabel_size``), bounds the labels' error a_i = sum_{j=2}^{i} 2 alpha_j. Two readings of an
answer's accuracy (the doc says why both):

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

from everlast.engine import roots
from everlast.engine.design import Design, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner.above_threshold import up
from everlast.engine.planner.learning import labelboost_size
from everlast.engine.schedule import RoundSpec

Reading = Literal["per-query", "every-answer"]
READINGS: tuple[Reading, ...] = ("per-query", "every-answer")
ENSEMBLE_BETA_SHARE = 1.0
"""Lemma A2's failure budget per round, as a share of the round's beta_i."""
STRICT_BETA_SHARE = 0.5
"""The every-answer reading's union bound over the round's noises, as a share of beta_i."""
_DPS = 40


def log_pairs_growth(k: int, d: int) -> float:
    """ln of a bound on the growth function of the disagreement regions {h Delta g : h, g in C} on k
    points: its trace is fixed by the traces of h and g, so it is at most Pi_C(k)^2 <= (e k/d)^{2d}
    (Sauer-Shelah, k >= d); 2^k always bounds it; a class of VC dimension 0 has one region."""
    if d <= 0:
        return 0.0
    if k <= d:
        return k * math.log(2.0)
    return min(k * math.log(2.0), 2.0 * d * math.log(math.e * k / d))


@functools.lru_cache(maxsize=8192)
def tail_bound(lam: int, d: int, a: float) -> float:
    """P[some h, g in C agree on lambda i.i.d. points yet disagree on mass > a] <= 2 Pi(2 lambda)
    2^{-a lambda/2}, Pi the disagreement regions' growth function (the epsilon-net theorem of
    Haussler-Welzl 1987 with the constants of Blumer et al. 1989, Thm A2.1, for a lambda >= 8;
    ``log_pairs_growth``); 1 when that says nothing. Uniform over the pair: it holds for labels
    chosen after seeing the points (Lemma A2)."""
    if not 0.0 < a < 1.0 or a * lam < 8.0:
        return 1.0
    lg = math.log(2.0) + log_pairs_growth(2 * lam, d) - a * lam / 2.0 * math.log(2.0)
    return 1.0 if lg >= 0.0 else math.exp(lg)


@functools.lru_cache(maxsize=65536)
def mean_error_bound(lam: int, d: int) -> float:
    """mu(lambda): an upper bound on E[U], U the largest disagreement mass of two hypotheses of C that
    agree on lambda i.i.d. points (Lemma A2): E[U] = integral over a in [0, 1] of P[U > a] <= a_0 +
    integral_{a_0}^{1} min(1, e^{C - k a}) da, a_0 = 8/lambda, with ``tail_bound`` = e^{C - k a}
    (C = ln 2 + ln Pi(2 lambda), k = lambda ln(2)/2); the integral in closed form, rounded up."""
    a0 = 8.0 / lam
    if a0 >= 1.0:
        return 1.0
    C = math.log(2.0) + log_pairs_growth(2 * lam, d)
    k = lam * math.log(2.0) / 2.0
    s = max(a0, C / k)  # below s the bound is 1 (or a < a_0)
    if s >= 1.0:
        return 1.0
    total = s + (math.exp(C - k * s) - math.exp(C - k)) / k
    return min(1.0, up(Fraction(total) * (1 + Fraction(1, 10**9))))


def relabel_size(alpha: float, beta: float, d: int) -> int:
    """The smallest m with 4 Pi(2m) e^{-alpha m/8} <= beta: then, except w.p. beta, every pair h, g
    of C with empirical disagreement <= alpha on m i.i.d. points disagrees on mass <= 2 alpha
    (Anthony and Shawe-Taylor 1993, Thm 2.1, with gamma = 1/2, over the disagreement regions; the
    relabelling step of Claim E.1, docs/privacy/genericbbl.md 6.3)."""
    def fails(m: int) -> bool:  # with a margin for the float evaluation
        return math.log(4.0) + log_pairs_growth(2 * m, d) - alpha * m / 8.0 > math.log(beta) - 1e-9

    return roots.smallest_int(lambda m: not fails(m), 1, 1 << 62)


@functools.lru_cache(maxsize=65536)
def ensemble_error(mu: float, T: int, beta_e: float) -> float:
    """ebar with P[average error of T independent [0, 1] errors with means <= mu > ebar] <= beta_e
    (Hoeffding 1963, Thm 1, relative-entropy form: exp(-T KL(ebar || mu)) <= beta_e); rounded up."""
    if mu >= 1.0:
        return 1.0
    target = math.log(1.0 / beta_e) / T
    if _kl(1.0, mu) <= target * (1.0 + 1e-9):
        return 1.0
    # KL(x || mu) increases in x >= mu: the smallest x with KL >= target (with a relative margin for
    # the float KL's cancellation near mu), then confirmed at 40 digits and moved up until it holds
    x = _kl_boundary(mu, target * (1.0 + 1e-9))
    x = math.nextafter(x, math.inf)
    while x < 1.0 and not _kl_exact_at_least(x, mu, T, beta_e):
        x = min(1.0, x + max(1e-12, (x - mu) * 1e-6))
    return x


def _kl_boundary(mu: float, level: float) -> float:
    """``roots.smallest_float(lambda u: _kl(u, mu) >= level, mu, 1.0, steps=80)``, for 0 <= mu < 1:
    the same bisection (the same midpoints, predicate, steps and stops), with the predicate inlined
    (``ensemble_error`` runs it for every round the search sizes; tests/planner/test_accuracy_bounds
    checks the two agree)."""
    lo, hi, log, one_m = mu, 1.0, math.log, 1.0 - mu
    for _ in range(80):
        if hi - lo <= 0.0:
            break
        u = 0.5 * (lo + hi)  # finite: both ends lie in [0, 1]
        kl = u * log(u / mu) + (1.0 - u) * log((1.0 - u) / one_m) if u < 1.0 else _kl(u, mu)  # _kl(u, mu)
        if kl >= level:
            if hi == u:
                break
            hi = u
        else:
            if lo == u:
                break
            lo = u
    return hi


KL_FLOAT_ULPS = 4.0
"""What ``_kl_decided`` assumes of the platform's ``math.log`` and ``math.log1p``: within this many ulps
of the exact logarithm (glibc documents at most 1-2 on x86-64 and aarch64; CPython's fallbacks are as
close)."""
_KL_FLOAT_MIN = 2.0**-900
"""Below this ``mu`` the rounding model of ``_kl_decided`` (relative errors) fails to underflow:
such calls go to the 40-digit path (an independent review found a wrong answer at mu = 2^-1074 and
T = 1.7e308, far outside any plan)."""
_U = 2.0**-53
"""The unit roundoff of a float (round-to-nearest): fl(a op b) = (a op b)(1 + d), |d| <= _U."""


def _kl_decided(u: float, m: float, T: int, beta_e: float) -> bool | None:
    """``T KL(u || m) >= ln(1/beta_e)`` decided in floats where a proven error bound settles it, else
    None (``_kl_exact_at_least`` then evaluates at 40 digits). The exact answer where it answers
    (tests/planner/test_planner_speedups.py compares it with the 40-digit one near the boundary and
    where cancellation in KL is large, with mutants that drop the bound or its T err term).

    The bound, for 0 < m < u < 1 (else None); KL = u log(u/m) + (1-u) log((1-u)/(1-m)) = a + b.
    Each logarithm is taken of an argument y computed to a relative d (|d| <= 3.01 _U: at most three
    roundings), as log(y) (absolute error |log(1 + d)| <= 1.01 |d|) or, where y is near 1, as
    log1p(y - 1) with y - 1 computed to a relative d (absolute error <= |y - 1| |d| / (1 + min(y - 1,
    0)) (1 + 1e-15), i.e. <= 2.01 |y - 1| |d| for y >= 1/2): ``ea`` and ``eb`` below, weighted by u
    and by s = fl(1 - u) <= (1 - u)(1 + _U). On top of that the logarithm's own error (<=
    ``KL_FLOAT_ULPS`` ulps, an ulp <= 2 _U times the value), the product's and s's roundings (_U
    each) are relative errors of a and b, and the final sum's _U one of |a| + |b|: |k - KL| <= err =
    2 (u ea + s eb) + (4 KL_FLOAT_ULPS + 8) _U (|a| + |b|) (a factor ~2 to spare, which also covers
    the second-order terms and u, s, |a|, |b| computed rather than exact). L = fl(-log(beta_e)) is
    within 2 KL_FLOAT_ULPS _U L of ln(1/beta_e), and P = fl(T k) within T err + 2 _U |P| of T KL
    (T converted with _U); the decision needs |P - L| above tol = T err + 2^-44 (|P| + L), more than
    all of these together: the answer is the exact one. The 40-digit evaluation errs by ~2^-136 in
    absolute terms (not relative to KL; and for u < 2^-83 its 1 - U is rounded), so the two agree
    wherever T KL is not within ~T 2^-136 of L: for every plan (mu >= 2^-83, T <= 1e26 L). Beyond
    that an independent review found the 40-digit path wrong and this one right. Underflow breaks
    the relative-error model: mu below ``_KL_FLOAT_MIN`` is not decided here."""
    if not (_KL_FLOAT_MIN <= m < u < 1.0):
        return None
    x1 = (u - m) / m  # > 0: two roundings
    if x1 <= 1.0:
        la, ea = math.log1p(x1), 2.0 * _U * x1 * 1.01
    else:
        la, ea = math.log(u / m), 1.01 * _U
    s, t = 1.0 - u, 1.0 - m
    x2 = (m - u) / t  # in (-1, 0): three roundings
    if x2 >= -0.5:
        lb, eb = math.log1p(x2), 2.01 * 3.01 * _U * -x2
    else:
        lb, eb = math.log(s / t), 1.01 * 3.01 * _U
    a, b = u * la, s * lb
    k = a + b
    err = 2.0 * (u * ea + s * eb) + (4.0 * KL_FLOAT_ULPS + 8.0) * _U * (abs(a) + abs(b))
    tk, lb1 = T * k, -math.log(beta_e)  # P and L of the docstring
    if not (math.isfinite(tk) and math.isfinite(lb1) and math.isfinite(err)):
        return None
    tol = T * err + 2.0**-44 * (abs(tk) + abs(lb1))
    if tk - lb1 > tol:
        return True
    if lb1 - tk > tol:
        return False
    return None


def _kl_exact_at_least(u: float, m: float, T: int, beta_e: float) -> bool:
    """T KL(u || m) >= ln(1/beta_e), evaluated at 40 digits (in floats where ``_kl_decided`` proves
    the same answer)."""
    fast = _kl_decided(u, m, T, beta_e)
    if fast is not None:
        return fast
    return _kl_exact_at_least_mp(u, m, T, beta_e)


def _kl_exact_at_least_mp(u: float, m: float, T: int, beta_e: float) -> bool:
    """T KL(u || m) >= ln(1/beta_e), evaluated at 40 digits (always)."""
    with mpmath.workdps(_DPS):
        U, M = mpmath.mpf(u), mpmath.mpf(m)
        kl = U * mpmath.log(U / M) + (1 - U) * mpmath.log((1 - U) / (1 - M))
        return bool(T * kl >= _neg_log_exact(beta_e))


@functools.lru_cache(maxsize=4096, typed=True)
def _neg_log_exact(beta_e: float) -> mpmath.mpf:
    """ln(1/beta_e) at 40 digits (a round's constant: cached)."""
    with mpmath.workdps(_DPS):
        return -mpmath.log(mpmath.mpf(beta_e))


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
    error). A round the engine cannot run, or whose bound reaches 1, gets the trivial bound 1 and a
    note."""
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
    note = "" if bound < 1.0 else "Theorem A's bound reaches 1 (lambda or T too small): no accuracy proven"
    return RoundAccuracy(rnd, reading, bound, labels, flips, ens, ebar, mu, k, beta_e, note)


def _markov(T: int, ebar: float, lo: int, k: int) -> float:
    """T ebar/(lo - k + 1) (Lemma A1), rounded up; 1 when lo - k + 1 <= 0."""
    u = lo - k + 1
    return 1.0 if u <= 0 else min(1.0, up(Fraction(T) * Fraction(ebar) / u))


def _best_k(t: Fraction, T: int, ebar: float, lo: int) -> tuple[int, float, float]:
    """A k minimising P[|z| >= k] + T ebar/(lo - k + 1) (a ternary search on the integers, then the
    neighbourhood; the clipped Markov term can make it miss the optimum, never the bound's validity:
    any k gives a valid bound)."""

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
    return roots.smallest_int_from(lambda k: R * flip_probability(t, k) <= beta_z, 1)


def labels_error(alphas: Sequence[float]) -> list[float]:
    """a_i = sum_{j=2}^{i} 2 alpha_j for each listed round (Claim E.1 made exact: g_1 = c, and each
    relabelling adds at most 2 alpha_j, ``relabel_size``), rounded up."""
    out, acc = [], Fraction(0)
    for i, a in enumerate(alphas, start=1):
        if i >= 2:
            acc += 2 * Fraction(a)
        out.append(up(acc))
    return out


@dataclass(frozen=True, slots=True)
class RelabelNeed:
    """Round i's LabelBoost sample S-hat against what Claim E.1 (made exact) asks of it: m_S >=
    Lemma C.2's size (empirical error <= alpha_{i+1} on S-hat) and ``relabel_size`` (that error
    becomes a disagreement <= 2 alpha_{i+1} on D)."""

    round: int
    m_S: int
    need: int
    labelboost: int
    relabel: int


def relabel_needs(rounds: Sequence[RoundSpec], vc: int) -> tuple[RelabelNeed, ...]:
    """The relabelling's sample-size needs of every listed round (the last round relabels for its
    own repetition, at its own alpha and beta)."""
    out = []
    for i, r in enumerate(rounds, start=1):
        nxt = rounds[i] if i < len(rounds) else r
        lb = labelboost_size(r.m_D, nxt.alpha, nxt.beta, vc)
        rl = relabel_size(nxt.alpha, nxt.beta, vc)
        out.append(RelabelNeed(i, r.m_S, max(lb, rl), lb, rl))
    return tuple(out)


def relabel_failure(rounds: Sequence[RoundSpec]) -> float:
    """Claim E.1's failure probability over the listed rounds: 2 beta_i for each relabelling into
    round i >= 2 (Lemma C.2's beta_i and the relative bound's beta_i), rounded up."""
    return up(sum((2 * Fraction(r.beta) for r in rounds[1:]), Fraction(0)))


def schedule_accuracy(rounds: Sequence[RoundSpec], design: Design, vc: int,
                      reading: Reading = "per-query") -> tuple[RoundAccuracy, ...]:
    """Theorem A for every listed round of a target-charged schedule."""
    a = labels_error([r.alpha for r in rounds])
    return tuple(round_accuracy(r, design, i, a[i - 1], vc, reading) for i, r in enumerate(rounds, start=1))


@dataclass(frozen=True, slots=True)
class Horizon:
    """How far Theorem A-infinity (docs/privacy/genericbbl.md 6.3) proves every answer's accuracy:
    every query answered in rounds 1..``rounds`` (the listed ones and ``repetitions`` repetitions of
    the last) errs w.p. <= alpha in the reading, except on events of total probability <= ``failure``
    <= beta. ``queries`` is the number of queries those rounds hold; None when every round is covered
    (a schedule that ends after its listed rounds)."""

    queries: int | None
    rounds: int
    repetitions: int | None
    failure: float
    limit: str
    """What ends it (empty when nothing does)."""


def accuracy_horizon(rounds: Sequence[RoundSpec], design: Design, vc: int, alpha: float, beta: float,
                     reading: Reading = "per-query", repeat_last: bool = True,
                     accs: Sequence[RoundAccuracy] | None = None) -> Horizon:
    """The accuracy horizon of a target-charged schedule (Theorem A-infinity): round i's bound is
    A_i = a_i + (its own flips and ensemble terms), with a_{K+j} = a_K + 2 j alpha_K for the
    repetitions of round K, and the failure adds Theorem A's events and Claim E.1's 2 beta_i per round
    (2 beta_K and round K's events per repetition). The horizon is the last round with every A_i <=
    alpha and the accumulated failure <= beta, and it ends before the first round whose incoming
    relabelling (round K's own, for its repetitions) fails ``relabel_needs``'s sample size (Claim E.1
    does not hold there); exact rational arithmetic on the printed floats."""
    accs = tuple(accs) if accs is not None else schedule_accuracy(rounds, design, vc, reading)
    needs = relabel_needs(rounds, vc)
    A, B = Fraction(alpha), Fraction(beta)
    fail, queries = Fraction(0), 0
    for i, (r, acc) in enumerate(zip(rounds, accs, strict=True), start=1):
        if i >= 2 and needs[i - 2].m_S < needs[i - 2].need:  # Claim E.1 does not hold for round i's labels
            return Horizon(queries, i - 1, 0, up(fail), f"round {i}: its relabelling's sample S-hat_{i - 1} "
                           f"({needs[i - 2].m_S}) is below Claim E.1's size ({needs[i - 2].need})")
        step_fail = Fraction(acc.failure) + (2 * Fraction(r.beta) if i >= 2 else 0)
        if acc.bound > alpha or fail + step_fail > B:
            why = (f"round {i}: Theorem A's bound {acc.bound:.4g} exceeds alpha" if acc.bound > alpha else
                   f"round {i}: the accumulated failure exceeds beta")
            return Horizon(queries, i - 1, 0, up(fail), why)
        fail += step_fail
        queries += r.R
    if not repeat_last:
        return Horizon(None, len(rounds), None, up(fail), "")
    if needs[-1].m_S < needs[-1].need:  # round K's own relabelling, for its repetitions
        return Horizon(queries, len(rounds), 0, up(fail), f"no repetition of round {len(rounds)}: its "
                       f"relabelling's sample S-hat_{len(rounds)} ({needs[-1].m_S}) is below Claim E.1's "
                       f"size ({needs[-1].need})")
    last, r = accs[-1], rounds[-1]
    own = Fraction(last.flips) + Fraction(last.ensemble)  # round K's own terms (Lemmas A1, A2)
    step = 2 * Fraction(r.alpha)  # Claim E.1 made exact: each relabelling at alpha_K adds 2 alpha_K
    per = Fraction(last.failure) + 2 * Fraction(r.beta)
    j_acc = math.floor((A - Fraction(last.labels) - own) / step)
    j_fail = math.floor((B - fail) / per)
    j = max(0, min(j_acc, j_fail))
    why = (f"after {j} repetitions of round {len(rounds)} the labels' error a_i (+2 alpha_K = "
           f"{float(step):.3g} per repetition) leaves no room below alpha" if j_acc <= j_fail else
           f"after {j} repetitions of round {len(rounds)} the accumulated failure would exceed beta")
    return Horizon(queries + j * r.R, len(rounds) + j, j, up(fail + j * per), why)
