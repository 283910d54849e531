"""Complete a hand-written round with the halting test of the default design (target-charged;
docs/privacy/genericbbl.md section 9.1).

A planned schedule (``engine.planner.plan``) chooses its test's parameters with its other sizes. A
schedule written by hand (a simulation, the demo, a test) gives T, lambda, R, c, eps0 and the rest;
this module adds the noisy halting test so that the round runs the default design soundly:

* eps_h is the smallest of :data:`EPS_H_GRID` whose hard-cap margin g_high = min{g : P[xi - rho >=
  g] <= delta_cap} (Lemma T(ii), discrete) is at most :data:`HALT_SHARE` of c; c0 = c - g_high. (A
  smaller eps_h protects a query more but needs a wider margin; honest rounds must stay below c0 by
  another margin of about (4/eps_h) ln(R/beta), Lemma T(iii), or they halt.)
* delta_cap = :data:`CAP_SHARE` x delta / (1 + e^{eps_h}) keeps Theorem Q's delta_in at 1e-3 of the
  target delta, as the planner does (section 5.4). No hard cap runs (a round pauses on its test alone,
  section 16): the margin bounds the probability that the count passes c before the test fires, which
  Lemma TC' charges on the training side (at most delta_cap).

:func:`sample_eps0` gives the per-query level of a sample round: the smallest eps0 (the cheapest in
privacy) at which a query that every classifier agrees on is answered against them with
probability at most alpha/16. A sample round's lambda is far below what Theorem A needs (its
accuracy is measured, not proven: docs/privacy/genericbbl.md 9.1); this rule keeps the answers'
own flips a small share of alpha, as Theorem A's per-query reading does for planned rounds.
:func:`accuracy_eps0` is the earlier floor (every noise below gamma T - 1 except w.p. beta), kept
for the paper's design.

:func:`hand_round` puts them together for the sample schedules (simulate, demo, the compose sample,
the adversary simulator): eps0 by :func:`sample_eps0`, c sized from the top rate with the round's
own noise (``top_rate``, docs/halt_budget.md 3b) so that its own i.i.d. stream does not halt it, and
the test filled.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from everlast.engine.design import DEFAULT, Design, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import above_threshold as at
from everlast.engine.planner.learning import boundaries, top_rate
from everlast.engine.planner.steps import Check
from everlast.engine.planner.top_rate import top_rate_exact
from everlast.engine.schedule import RoundSpec

EPS_H_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
HALT_SHARE = 0.1
"""The most of c the halting test's hard-cap margin may take."""
CAP_SHARE = 1e-3


def fill_tests(spec: RoundSpec, design: Design = DEFAULT, delta: float = 1e-6) -> RoundSpec:
    """``spec`` with the halting test its design needs filled in (fields already set are kept)."""
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must lie in (0, 1)")
    if not design.target_charged or (spec.halt_eps is not None and spec.halt_threshold is not None):
        return spec
    for eps_h in EPS_H_GRID:
        g_high = at.at_margin(eps_h, CAP_SHARE * delta / at.cap_charge(eps_h, 1.0))
        if g_high <= HALT_SHARE * spec.c:
            return dataclasses.replace(spec, halt_eps=eps_h, halt_threshold=spec.c - g_high)
    g = at.at_margin(EPS_H_GRID[-1], CAP_SHARE * delta / at.cap_charge(EPS_H_GRID[-1], 1.0))
    raise InvalidSchedule(
        f"c = {spec.c} is too small for noisy halting: even eps_h = {EPS_H_GRID[-1]:g} needs a hard-cap "
        f"margin of {g} tops (raise c to at least {math.ceil(g / HALT_SHARE)})")


FLIP_SHARE = 1.0 / 16.0
"""Sample rounds: the most a query all classifiers agree on is answered against them, as a share of alpha."""


def sample_eps0(T: int, gamma: float, alpha: float) -> float:
    """The smallest eps0 with P[Z >= lo] = p^lo/(1 + p) <= alpha/16 (Z ~ DLap(1/eps0), p = e^{-eps0},
    lo = ceil(T (1/2 - gamma))): ln(16/alpha)/lo suffices, as 1/(1 + p) <= 1."""
    lo = math.ceil(T * (0.5 - gamma))
    if lo < 1:
        raise InvalidSchedule(f"the band leaves no count below it at T = {T} (gamma = {gamma:.3g})")
    return math.log(1.0 / (FLIP_SHARE * alpha)) / lo


def flip_checks(rounds: Sequence[RoundSpec], design: Design = DEFAULT) -> list[Check]:
    """Accuracy only, for hand-written target-charged rounds: each round's own noise answers a query
    every classifier agrees on against them w.p. <= alpha/16, the rule :func:`sample_eps0` sizes eps0
    by (Theorem A's flip term at k = lo; docs/privacy/genericbbl.md 6.3). ``value`` is the T that
    eps_bt needs, ``bound`` the round's T."""
    if not design.target_charged:
        return []
    out = []
    for i, r in enumerate(rounds, start=1):
        share = 0.5 - r.band
        need = math.log(1.0 / (FLIP_SHARE * r.alpha)) / (r.eps_bt * share) if share > 0 else math.inf
        lo = math.ceil(r.T * share)
        holds = share > 0 and r.eps_bt * lo >= math.log(1.0 / (FLIP_SHARE * r.alpha)) * (1.0 - 1e-12)
        out.append(Check("accuracy: T >= ln(16/alpha)/(eps0 (1/2 - gamma)) (the answer's own noise flips it "
                         "w.p. <= alpha/16)", "docs/privacy/genericbbl.md 6.3 (Theorem A's flip term)", "accuracy",
                         holds, math.ceil(need) if math.isfinite(need) else need, r.T, i))
    return out


def accuracy_eps0(gamma: float, T: int, R: int, beta: float) -> float:
    """The smallest per-query level eps0 at which every one of R answers has |z| < gamma T - 1 except
    w.p. beta (P[|z| >= k] <= 2 e^{-eps0 k}): ln(2R/beta) / (gamma T - 2)."""
    room = gamma * T - 2.0
    if room <= 0.0:
        raise InvalidSchedule(f"the band holds too few counts at T = {T} (gamma T = {gamma * T:.3g})")
    return math.log(2.0 * R / beta) / room


SAMPLE_K = 2.0
"""Safety factor of a sample round's halt budget (the planner's default k)."""
EARLY_SHARE = 0.1
"""Share of a sample round's beta spent on the halting test firing before the budget."""


def _round_up(x: float, digits: int = 3) -> float:
    """x rounded up to ``digits`` significant digits (a readable eps0 no smaller than asked)."""
    e = math.floor(math.log10(x)) - digits + 1
    m = math.ceil(x / 10.0**e - 1e-9)
    v = float(f"{m}e{e}")
    return v if v >= x else float(f"{m + 1}e{e}")


def hand_round(*, T: int, lam: int, R: int, alpha: float, m_S: int, m_D: int, concept: str = "thresholds",
               d: int = 1, gamma: float | None = None, beta: float = 0.05, k: float = SAMPLE_K,
               delta: float = 1e-6, eps0: float | None = None, c: int | None = None) -> RoundSpec:
    """A hand-written round of the default design (target-charged) for a sample schedule.

    * eps0 (``eps_bt``): :func:`sample_eps0` (rounded up to 3 digits) unless given: any smaller
      would flip the answers too often, any larger costs privacy for nothing.
    * c: unless given, the smallest hard cap whose halting test (filled by :func:`fill_tests`) fires
      before ``budget = ceil(k R p_top)`` tops with probability <= EARLY_SHARE beta (union bound over
      the R queries, Lemma T(iii)); p_top is the top rate with the round's own noise
      (``top_rate.top_rate_exact``), and never below the noiseless per-concept rule
      ``learning.top_rate`` (which also counts the spurious stumps of docs/halt_budget.md 3). Honest
      i.i.d. traffic on data the rule covers then exceeds the budget with probability
      ``learning.split_votes_failure``.
    """
    band = alpha if gamma is None else gamma
    if eps0 is None:
        eps0 = _round_up(sample_eps0(T, band, alpha))
    if c is None:
        probe = noise_plan(DEFAULT, RoundSpec(T=T, lam=lam, R=R, c=1, eps_bt=eps0, delta_bt=None, alpha=alpha,
                                              m_S=m_S, m_D=m_D, gamma=gamma, beta=beta, halt_eps=1.0,
                                              halt_threshold=1))
        rate = max(top_rate_exact(T, probe.lo, probe.hi, probe.query, lam, boundaries(concept)),
                   top_rate(concept, band, lam, d))
        c = sample_cap(R, rate, k, beta, delta)
    spec = RoundSpec(T=T, lam=lam, R=R, c=c, eps_bt=eps0, delta_bt=None, alpha=alpha, m_S=m_S, m_D=m_D,
                     gamma=gamma, beta=beta)
    return fill_tests(spec, DEFAULT, delta)


def halt_budget_of(spec: RoundSpec, beta_early: float) -> int:
    """The most tops a round filled by :func:`fill_tests` absorbs before its noisy halting test
    fires with probability > ``beta_early`` (over its R queries): c0 - at_margin(eps_h, beta_early/R)."""
    if spec.halt_eps is None or spec.halt_threshold is None:
        return spec.c
    return spec.halt_threshold - at.at_margin(spec.halt_eps, min(0.5, beta_early / spec.R))


def sample_cap(R: int, rate: float, k: float, beta: float, delta: float = 1e-6) -> int:
    """The smallest hard cap c whose filled round absorbs ``ceil(k R rate)`` tops (:func:`hand_round`)."""
    budget = max(1, math.ceil(k * R * rate))
    c = math.ceil(budget / (1.0 - HALT_SHARE)) + 1
    probe = RoundSpec(T=1, lam=1, R=R, c=c, eps_bt=1.0, delta_bt=None, alpha=0.1, m_S=1, m_D=1)
    while True:
        try:
            spec = fill_tests(dataclasses.replace(probe, c=c), DEFAULT, delta)
        except InvalidSchedule:
            c = math.ceil(c * 1.1) + 1
            continue
        room = halt_budget_of(spec, EARLY_SHARE * beta)
        if room >= budget:
            return c
        c += max(1, budget - room)
