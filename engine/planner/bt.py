"""BetweenThresholds (Bun, Steinke, Ullman 2016), as used in GenericBBL step 3(c)-(d).

Lemma C.3 (privacy): BT run with parameter eps on a database of n items, with a sensitivity-1/n
query, is (eps, delta)-DP for adaptively chosen queries whenever

    t_u - t_l >= 12 / (eps n) * (ln(10/eps) + ln(1/delta) + 1),       eps, delta in (0, 1).

In GenericBBL the database is F_i, the T_i chunk classifiers, and the query is the vote share
q_x(F_i) = (1/T_i) sum_t f_t(x) (the paper writes the sum without 1/T_i; the normalisation is what
makes the sensitivity 1/T_i that Lemma C.3 assumes). The thresholds are 1/2 -+ gamma_i, so the gap
is 2 gamma_i and the condition ("P1") reads

    2 gamma_i >= 12 / (eps'_i T_i) * (ln(10/eps'_i) + ln(1/delta'_i) + 1).

**Logarithms are natural.** The lemma writes "log"; its log terms come from Laplace tail bounds
P[|Lap(b)| > t] = e^{-t/b}, so the natural log is the consistent reading (docs/notes/calibration.md reads it the
same way). ``log_base=2`` is accepted for a reader who disagrees; it
makes every T about 1.44x larger.

Lemma C.4 (accuracy only) is here too, since it is a condition on the same T_i.

Rounding: T is rounded **up** and every inequality is re-checked in floating point with a relative
safety margin ``SAFETY`` in the privacy-safe direction.
"""

from __future__ import annotations

import math

SAFETY = 1e-9
"""Relative margin by which floating-point privacy checks are made stricter."""


def _log(x: float, log_base: float | None) -> float:
    return math.log(x) if log_base is None else math.log(x) / math.log(log_base)


def bt_log_factor(eps: float, delta: float, log_base: float | None = None) -> float:
    """L = ln(10/eps) + ln(1/delta) + 1 (Lemma C.3)."""
    return _log(10.0 / eps, log_base) + _log(1.0 / delta, log_base) + 1.0


def gap_required(eps: float, delta: float, T: float, log_base: float | None = None) -> float:
    """Lemma C.3's gap: 12 / (eps T) * (ln(10/eps) + ln(1/delta) + 1)."""
    return 12.0 / (eps * T) * bt_log_factor(eps, delta, log_base)


def ranges_ok(eps: float, delta: float) -> bool:
    """Lemma C.3's ranges (condition P2): eps in (0, 1) and delta in (0, 1)."""
    return 0.0 < eps < 1.0 and 0.0 < delta < 1.0


def gap_holds(gamma: float, eps: float, delta: float, T: int, log_base: float | None = None) -> bool:
    """P1 and P2 for one BT instance: ranges, and 2 gamma >= gap_required, with margin SAFETY."""
    if not ranges_ok(eps, delta) or T < 1 or not 0.0 < gamma < 0.5:
        return False
    return 2.0 * gamma >= gap_required(eps, delta, T, log_base) * (1.0 + SAFETY)


def gap_ratio(gamma: float, eps: float, delta: float, T: float) -> float:
    """gap_required / (2 gamma): P1 holds iff this is <= 1 (the "gap" column of calibration (i))."""
    return gap_required(eps, delta, T) / (2.0 * gamma)


def min_t(gamma: float, eps: float, delta: float, log_base: float | None = None) -> int:
    """Smallest integer T meeting Lemma C.3's gap condition:
    T = ceil(6 / (gamma eps) * (ln(10/eps) + ln(1/delta) + 1)), rounded up until the
    floating-point check :func:`gap_holds` passes."""
    if not ranges_ok(eps, delta) or not 0.0 < gamma < 0.5:
        raise ValueError("Lemma C.3 needs eps, delta in (0, 1) and 0 < gamma < 1/2")
    T = max(1, math.ceil(6.0 / (gamma * eps) * bt_log_factor(eps, delta, log_base) * (1.0 + SAFETY)))
    while not gap_holds(gamma, eps, delta, T, log_base):
        T = max(T + 1, math.ceil(T * (1.0 + 4.0 * SAFETY)))
    return T


def min_delta(gamma: float, eps: float, T: int) -> float:
    """Smallest delta' for which Lemma C.3 certifies BT at (eps, T, gap 2 gamma):
    delta' = exp(-(gamma eps T / 6 - ln(10/eps) - 1)), nudged up until :func:`gap_holds` passes.

    Returns 1.0 when no delta' < 1 works (the instance is then not certified). delta' is an
    accounting quantity only (it does not change BT's noise), so a certifier may use the smallest
    valid one; the schedule's own ``delta_bt`` is checked separately.
    """
    if not 0.0 < eps < 1.0 or T < 1 or not 0.0 < gamma < 0.5:
        return 1.0
    x = gamma * eps * T / 6.0 - math.log(10.0 / eps) - 1.0
    if x <= 0.0:
        return 1.0
    delta = math.exp(-x * (1.0 - 1e-7))
    for _ in range(60):
        if delta >= 1.0:
            return 1.0
        if gap_holds(gamma, eps, delta, T):
            return delta
        delta *= 1.0 + 1e-6
    return 1.0


def accuracy_t(alpha: float, eps: float, k: float, beta: float) -> float:
    """Lemma C.4 (accuracy only), as Claim D.7 uses it: BT's answers are alpha-accurate for k
    queries w.p. 1 - beta if T >= 8 / (alpha eps) * (ln(k + 1) + ln(1/beta))."""
    return 8.0 / (alpha * eps) * (math.log(k + 1.0) + math.log(1.0 / beta))
