"""Complete a hand-written round with the tests of the default design (noisy halting + private
restarts), in their one-block form (docs/PRIVACY.md section 9, "hand-written schedules").

A planned schedule (``engine.planner.plan``) chooses its tests' parameters with its other sizes. A
schedule written by hand (a simulation, the demo, a test) gives T, lambda, R, c, eps' and the rest;
this module adds the five test parameters so that the round runs the default design soundly:

* **noisy halting**: eps_h is the smallest of :data:`EPS_H_GRID` whose hard-cap margin
  g_high = min{g : tau_{eps_h}(g) <= delta_cap} (Lemma T(ii)) is at most :data:`HALT_SHARE` of c;
  c0 = c - g_high. (A smaller eps_h protects a query more but needs a wider margin; honest rounds
  must stay below c0 by another margin of about (4/eps_h) ln(R/beta), Lemma T(iii), or they halt.)
* **private restarts, one block per round**: k_max = c + 1 (the cap never binds: delta_r = 0) and
  k0 = c + g_f with g_f from Lemma N' at delta_fail = :data:`FAIL_SHARE` x delta, so k_low = c + 1
  and Lemma N' bounds the round to one block except on a noise-only event. eps_r =
  :data:`EPS_R` (the test almost never fires, so it is nearly free; it is paid by every query).
  Training side: one block of at most c tops, eps'/2 + c eta_plus by Theorem B -- linear in c,
  so this form is the cheap one only for small c (thousands), where the planned design's many
  blocks cannot pay Lemma N's failure charge.

delta_cap = :data:`CAP_SHARE` x delta / (1 + e^{eps_h + eps_r}) keeps Theorem Q's delta_in at
1e-3 of the target delta, as the planner does (section 5.4).
"""

from __future__ import annotations

import dataclasses
import math

from engine.errors import InvalidSchedule
from engine.planner import above_threshold as at
from engine.planner import block as blk
from engine.schedule import RoundSpec

EPS_H_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
HALT_SHARE = 0.1
"""The most of c the halting test's hard-cap margin may take."""
EPS_R = 1e-3
CAP_SHARE = 1e-3
FAIL_SHARE = 1e-4
"""delta_fail / delta: below 1e-2 (the certifier's largest phi) of the smallest round Delta the
chains use (delta/(4e) on the query side, at r_D = 1)."""


def fill_tests(spec: RoundSpec, halting: str = "noisy", restarts: str = "private",
               delta: float = 1e-6) -> RoundSpec:
    """``spec`` with the tests its design needs filled in (fields already set are kept)."""
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must lie in (0, 1)")
    eps_r = spec.restart_eps if spec.restart_eps is not None else EPS_R
    out = spec
    if halting == "noisy" and (spec.halt_eps is None or spec.halt_threshold is None):
        out = _fill_halting(out, eps_r if restarts == "private" else 0.0, delta)
    if restarts == "private" and (spec.restart_eps is None or spec.restart_threshold is None
                                  or spec.block_cap is None):
        g_f = blk.noise_margin(spec.R, eps_r, FAIL_SHARE * delta)
        out = dataclasses.replace(out, restart_eps=eps_r, restart_threshold=float(spec.c + g_f),
                                  block_cap=spec.c + 1)
    return out


def _fill_halting(spec: RoundSpec, eps_r: float, delta: float) -> RoundSpec:
    for eps_h in EPS_H_GRID:
        d_cap = CAP_SHARE * delta / at.cap_charge(eps_h + eps_r, 1.0)
        g_high = at.at_margin(eps_h, d_cap)
        if g_high <= HALT_SHARE * spec.c:
            return dataclasses.replace(spec, halt_eps=eps_h, halt_threshold=float(spec.c - g_high))
    g = at.at_margin(EPS_H_GRID[-1], CAP_SHARE * delta / at.cap_charge(EPS_H_GRID[-1] + eps_r, 1.0))
    raise InvalidSchedule(
        f"c = {spec.c} is too small for noisy halting: even eps_h = {EPS_H_GRID[-1]:g} needs a hard-cap "
        f"margin of {g} tops (raise c to at least {math.ceil(g / HALT_SHARE)}, or use halting 'never' with c > R)")

