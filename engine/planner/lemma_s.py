"""Lemma S (query_privacy.md section 3.3(i); a SKETCH NOBODY HAS REVIEWED): one threshold noise
with at most c tops costs ~ sqrt(c) eta, not c eta. Used only by the *conditional* accounting
``block_bound="lemma-s"``: every epsilon it produces is printed as conditional on Lemma S, and a
design accounted with it is never reported as query-private (docs/PRIVACY.md section 8).

Statement (as written in query_privacy.md, with its constants C1 = C2 = 3): BetweenThresholds with
one threshold noise mu and at most c tops is (eps, delta_mu + delta_1 + delta_2)-DP, where

    eps = eps'/2 + C1 eta^2 (c + y + 1) + eta sqrt(2 C2 (c + y + 1) ln(1/delta_2))
          + (2/3) eta_plus ln(1/delta_2),
    y   = (4/3) l + sqrt((16/9) l^2 + 2 (c + 1) l),   l = ln(1/delta_1),
    eta = eps'/3,

provided the noisy band is at least 10 b_nu wide except with probability delta_mu -- here: the
band slack of Theorem B (``block.band_slack``) is >= 10. eta_plus is Lemma I's exact per-top ratio
at that slack (``block.eta_plus``), which is below the sketch's eta(1 + 2e^{-10}) + eta^2.
"""

from __future__ import annotations

import math

from scipy.optimize import brentq

from engine.planner import block as blk

C1 = 3.0
C2 = 3.0
MIN_SLACK = 10.0
"""Lemma S conditions on a band at least 10 b_nu wide."""


def epsilon(eps_bt: float, tops: int, delta_1: float, delta_2: float, x: float = MIN_SLACK) -> float:
    """Lemma S's epsilon for one threshold noise and at most ``tops`` tops (+inf if x < 10)."""
    if x < MIN_SLACK or not (0.0 < delta_1 < 1.0 and 0.0 < delta_2 < 1.0) or eps_bt <= 0.0:
        return math.inf
    eta = eps_bt / 3.0
    ep = blk.eta_plus(eps_bt, x)
    ell = math.log(1.0 / delta_1)
    y = (4.0 / 3.0) * ell + math.sqrt((16.0 / 9.0) * ell * ell + 2.0 * (tops + 1) * ell)
    m = tops + y + 1.0
    l2 = math.log(1.0 / delta_2)
    return (eps_bt / 2.0 + C1 * eta * eta * m + eta * math.sqrt(2.0 * C2 * m * l2)
            + (2.0 / 3.0) * ep * l2)


def block_epsilon(eps_bt: float, T: int, gamma: float, delta_mu: float, tops: int) -> float:
    """Lemma S for a block whose declared delta_mu is also used for delta_1 and delta_2 (the
    block's delta is then 3 delta_mu); +inf unless the band slack is >= 10."""
    x = blk.band_slack(eps_bt, T, gamma, delta_mu)
    return epsilon(eps_bt, tops, delta_mu, delta_mu, x)


def eps_bt_for(eps_block: float, tops: int, delta_each: float) -> float:
    """Largest eps' with Lemma S's epsilon (slack 10, delta_1 = delta_2 = delta_each) <= eps_block."""
    def f(e: float) -> float:
        return epsilon(e, tops, delta_each, delta_each) - eps_block

    if eps_block <= 0.0 or f(1e-300) >= 0.0:
        return 0.0
    hi = 2.0 * eps_block
    e = float(brentq(f, 1e-300, hi, xtol=1e-300, rtol=1e-13))
    while e > 0.0 and f(e) > 0.0:
        e *= 1.0 - 1e-12
    return e
