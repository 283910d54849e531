"""Complete a hand-written round with the halting test of the default design (target-charged;
docs/PRIVACY.md section 9.1).

A planned schedule (``engine.planner.plan``) chooses its test's parameters with its other sizes. A
schedule written by hand (a simulation, the demo, a test) gives T, lambda, R, c, eps0 and the rest;
this module adds the noisy halting test so that the round runs the default design soundly:

* eps_h is the smallest of :data:`EPS_H_GRID` whose hard-cap margin g_high = min{g : P[xi - rho >=
  g] <= delta_cap} (Lemma T(ii), discrete) is at most :data:`HALT_SHARE` of c; c0 = c - g_high. (A
  smaller eps_h protects a query more but needs a wider margin; honest rounds must stay below c0 by
  another margin of about (4/eps_h) ln(R/beta), Lemma T(iii), or they halt.)
* delta_cap = :data:`CAP_SHARE` x delta / (1 + e^{eps_h}) keeps Theorem Q's delta_in at 1e-3 of the
  target delta, as the planner does (section 5.4).

:func:`accuracy_eps0` gives the per-query level a hand-written round needs for its answers to be
right (every noise below gamma T - 1 except w.p. beta): the smallest eps0, i.e. the cheapest in
privacy, that is still accurate.
"""

from __future__ import annotations

import dataclasses
import math

from engine.design import DEFAULT, Design
from engine.errors import InvalidSchedule
from engine.planner import above_threshold as at
from engine.schedule import RoundSpec

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


def accuracy_eps0(gamma: float, T: int, R: int, beta: float) -> float:
    """The smallest per-query level eps0 at which every one of R answers has |z| < gamma T - 1 except
    w.p. beta (P[|z| >= k] <= 2 e^{-eps0 k}): ln(2R/beta) / (gamma T - 2)."""
    room = gamma * T - 2.0
    if room <= 0.0:
        raise InvalidSchedule(f"the band holds too few counts at T = {T} (gamma T = {gamma * T:.3g})")
    return math.log(2.0 * R / beta) / room
