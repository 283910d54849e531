"""AboveThreshold tests on top counts: the noisy halting test and the private restart test
(issue 8; docs/PRIVACY.md section 5).

Both tests are Dwork-Roth's AboveThreshold (Algorithm 1, Theorem 3.23) with privacy parameter e
on a count that moves by 0 or 1 per query: threshold noise rho ~ Lap(2/e) drawn once, per-query
noise Lap(4/e), "fire" at the first query j with count_j + noise_j >= threshold + rho.

* noisy halting: count = the round's tops C, threshold c0 = ``halt_threshold``, e = eps_h, hard
  cap C >= c;
* private restarts: count = the current block's tops B, threshold k0 = ``restart_threshold``,
  e = eps_r, no hard cap (``block_cap`` is charged on the training side: docs/PRIVACY.md 5.3,
  6.4); rho and B are renewed at every restart.

Every probability bound below has the form "a fixed Lap(4/e) variable minus an independent
Lap(2/e) variable exceeds g", because the count path of an auxiliary run *without* the test does
not depend on the test's noise (Lemma T in docs/PRIVACY.md). The difference of independent
Lap(b1) and Lap(b2) is distributed as their sum (Laplace is symmetric), with tail, for x >= 0,

    P[X + Y >= x] = (b1^2 e^{-x/b1} - b2^2 e^{-x/b2}) / (2 (b1^2 - b2^2))        (b1 != b2),
                  = e^{-x/b} (2 + x/b) / 4                                           (b1 = b2 = b),

(partial fractions of the moment generating function 1/((1 - b1^2 t^2)(1 - b2^2 t^2))). At the
AboveThreshold scales b1 = 4/e, b2 = 2/e this is (2/3) e^{-e x/4} - (1/6) e^{-e x/2}.

Pure functions; all logarithms natural.
"""

from __future__ import annotations

import math

QUERY_SCALE = 4.0
"""AboveThreshold's per-query noise is Lap(QUERY_SCALE / e) (Dwork-Roth, Algorithm 1)."""
THRESHOLD_SCALE = 2.0
"""AboveThreshold's threshold noise is Lap(THRESHOLD_SCALE / e)."""


def laplace_sum_tail(x: float, b1: float, b2: float) -> float:
    """P[X + Y >= x] for independent X ~ Lap(b1), Y ~ Lap(b2) (any real x; exact)."""
    if b1 <= 0.0 or b2 <= 0.0:
        raise ValueError("Laplace scales must be positive")
    if x < 0.0:
        return 1.0 - laplace_sum_tail(-x, b1, b2)
    hi, lo = max(b1, b2), min(b1, b2)
    if hi - lo <= 1e-12 * hi:
        return math.exp(-x / hi) * (2.0 + x / hi) / 4.0
    # (hi^2 e^{-x/hi} - lo^2 e^{-x/lo}) / (2 (hi^2 - lo^2)), written to stay accurate for large x
    r = lo / hi
    return math.exp(-x / hi) * (1.0 - r * r * math.exp(-x / lo + x / hi)) / (2.0 * (1.0 - r * r))


def at_tail(g: float, eps: float) -> float:
    """P[xi - rho >= g] for xi ~ Lap(4/eps), rho ~ Lap(2/eps) independent:
    (2/3) e^{-eps g/4} - (1/6) e^{-eps g/2} for g >= 0 (Lemma T)."""
    if eps <= 0.0 or not math.isfinite(eps):
        return 1.0
    return laplace_sum_tail(g, QUERY_SCALE / eps, THRESHOLD_SCALE / eps)


def at_margin(eps: float, p: float) -> int:
    """Smallest integer g >= 0 with :func:`at_tail` (g, eps) <= p (p in (0, 1/2])."""
    if not 0.0 < p < 1.0:
        raise ValueError("a probability bound lies in (0, 1)")
    if p >= 0.5:
        return 0
    g = max(0, math.ceil(QUERY_SCALE / eps * math.log(2.0 / (3.0 * p))))  # (2/3) e^{-eps g/4} <= p
    while g > 0 and at_tail(g - 1, eps) <= p:
        g -= 1
    while at_tail(g, eps) > p:
        g += 1
    return g


def cap_probability(cap: float, threshold: float, eps: float, reachable: bool = True) -> float:
    """P[a hard cap binds before the AboveThreshold test fires] <= at_tail(cap - threshold, eps)
    (Lemma T (a)); 0 when the cap cannot be reached (``reachable`` False)."""
    if not reachable:
        return 0.0
    return at_tail(cap - threshold, eps)


def early_fire_probability(queries: int, threshold: float, count_max: float, eps: float) -> float:
    """P[the test fires at some query while the count is <= count_max], over ``queries`` queries
    (Lemma T (b)): queries * at_tail(threshold - count_max, eps), capped at 1."""
    if queries <= 0:
        return 0.0
    return min(1.0, queries * at_tail(threshold - count_max, eps))


def cap_charge(eps: float, delta_cap: float) -> float:
    """Lemma Cap: a mechanism that agrees with an (eps, d)-DP one except on an event of probability
    <= delta_cap under either input is (eps, d + (1 + e^eps) delta_cap)-DP; this returns the
    added delta."""
    if delta_cap <= 0.0:
        return 0.0
    return (1.0 + math.exp(min(eps, 700.0))) * delta_cap
