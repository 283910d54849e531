"""Composition of k adaptively chosen (eps0, 0)-DP mechanisms: the accountants the peers share.

All bounds are valid for *adaptive* composition (each mechanism chosen after seeing the previous
outputs), which is what an adaptive querier gets. Natural logarithms throughout.

  * basic (Dwork-McSherry-Nissim-Smith 2006; Dwork-Roth 2014, Thm 3.16): eps = k eps0, delta = 0.
  * advanced (Dwork-Rothblum-Vadhan 2010; Dwork-Roth 2014, Thm 3.20):
        eps = eps0 sqrt(2 k ln(1/delta)) + k eps0 (e^eps0 - 1).
  * optimal (Kairouz-Oh-Viswanath 2015, Thm 3.3, which they show holds for adaptive composition):
    every eps0-DP mechanism is dominated by
    binary randomized response RR(eps0), so the exact privacy profile of RR(eps0)^k bounds any
    k-fold adaptive composition:
        q = e^eps0 / (1 + e^eps0),  X ~ Bin(k, q) under P,  X ~ Bin(k, 1 - q) under Q,
        loss L = eps0 (2X - k),     delta(eps) = P_P[L > eps] - e^eps P_Q[L > eps].
    This is the privacy-loss distribution (PLD) of the dominating pair, computed exactly from
    binomial tails (scipy), cheap for any k (10^9 included).
  * pld (dp_accounting 0.6, ``from_laplace_mechanism(1/eps0)``, pessimistic discretization):
    the PLD of the Laplace mechanism itself, tighter than the generic bound for the noisy vote
    count (Dwork-Feldman peer). Costly for large k, so evaluated only up to ``PLD_MAX_K``.

The tightest valid bound is the minimum over accountants: each is a valid (eps, delta) guarantee
on its own, so the smallest holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from scipy import stats

from everlast.engine import roots

Mechanism = Literal["generic", "laplace"]
"""``generic``: any eps0-DP mechanism (basic, advanced, optimal). ``laplace``: the Laplace mechanism
on a sensitivity-1 count with scale 1/eps0 (adds the dp_accounting PLD)."""

PLD_MAX_K = 10_000
"""Largest k for which the dp_accounting PLD is evaluated (0.01-0.1 s per evaluation below this)."""

ACCOUNTANTS = ("basic", "advanced", "optimal", "pld")


def basic_epsilon(k: int, eps0: float) -> float:
    """Basic composition: eps = k * eps0 (delta = 0)."""
    return k * eps0


def advanced_epsilon(k: int, eps0: float, delta: float) -> float:
    """Advanced composition (DRV10; Dwork-Roth Thm 3.20) for k pure eps0-DP mechanisms:
    eps = eps0 * sqrt(2 k ln(1/delta)) + k * eps0 * (e^eps0 - 1); inf when delta <= 0."""
    if delta <= 0.0:
        return math.inf
    if k == 0:
        return 0.0
    return eps0 * math.sqrt(2.0 * k * math.log(1.0 / delta)) + k * eps0 * math.expm1(eps0)


def optimal_delta(k: int, eps0: float, eps: float) -> float:
    """delta(eps) of RR(eps0)^k (KOV15 Thm 3.3), exactly, from binomial tails:
    delta = P_P[X > m] - e^eps P_Q[X > m], m = floor((k + eps/eps0) / 2), X ~ Bin(k, q) under P and
    Bin(k, 1 - q) under Q, q = e^eps0 / (1 + e^eps0). Computed as P_P[X > m] * (1 - e^(eps + lq - lp))
    in log space (no cancellation, no overflow)."""
    if k == 0 or eps0 == 0.0 or eps >= k * eps0:
        return 0.0
    q = 1.0 / (1.0 + math.exp(-eps0))
    m = math.floor((k + eps / eps0) / 2.0)
    lp = float(stats.binom.logsf(m, k, q))
    if lp == -math.inf:
        return 0.0
    lq = float(stats.binom.logsf(m, k, 1.0 - q))
    if lq == -math.inf:
        return math.exp(lp)
    return max(0.0, math.exp(lp) * -math.expm1(eps + lq - lp))


def optimal_epsilon(k: int, eps0: float, delta: float) -> float:
    """Smallest eps with ``optimal_delta(k, eps0, eps) <= delta`` (bisection to 1e-12 relative; the
    returned eps always satisfies the inequality)."""
    if k == 0 or eps0 == 0.0:
        return 0.0
    hi = k * eps0
    if delta <= 0.0:
        return hi
    if optimal_delta(k, eps0, 0.0) <= delta:
        return 0.0
    return roots.smallest_float(lambda e: optimal_delta(k, eps0, e) <= delta, 0.0, hi, abs_tol=1e-12, rel_tol=1e-12)


def _pld_module() -> Any:
    """dp_accounting's PLD module, from the ``compare`` extra (the daemon never needs it)."""
    try:
        from dp_accounting.pld import privacy_loss_distribution
    except ImportError as e:
        raise ImportError("the Dwork-Feldman peer's Laplace accounting needs dp-accounting: "
                          "pip install 'everlast[compare]'") from e
    return privacy_loss_distribution


@lru_cache(maxsize=64)
def _laplace_pld(eps0: float) -> object:
    pld = _pld_module()
    return pld.from_laplace_mechanism(1.0 / eps0, sensitivity=1.0, value_discretization_interval=min(1e-4, eps0 / 20))


def laplace_pld_epsilon(k: int, eps0: float, delta: float) -> float:
    """eps at ``delta`` of k-fold Laplace(scale 1/eps0, sensitivity 1), by dp_accounting's PLD
    (pessimistic estimate: an upper bound)."""
    if k == 0:
        return 0.0
    base = _laplace_pld(eps0)
    return float(base.self_compose(k).get_epsilon_for_delta(delta))  # type: ignore[attr-defined]


def rr_pld_epsilon(k: int, eps0: float, delta: float, interval: float | None = None) -> float:
    """eps at ``delta`` of RR(eps0)^k by dp_accounting (``from_randomized_response`` with 2 buckets,
    noise_parameter p = 2/(1 + e^eps0), i.e. truth kept w.p. e^eps0/(1+e^eps0)). An independent
    computation of ``optimal_epsilon`` (used by the tests). Discretization: ``interval`` (default
    eps0/1000), rounded pessimistically, so the result is an upper bound within ~1% of the exact one."""
    pld = _pld_module()
    p = 2.0 / (1.0 + math.exp(eps0))
    step = eps0 / 1000.0 if interval is None else interval
    base = pld.from_randomized_response(p, 2, value_discretization_interval=step)
    return float(base.self_compose(k).get_epsilon_for_delta(delta))


@dataclass(frozen=True, slots=True)
class Composition:
    """Epsilon at ``delta`` of k-fold composition of eps0-DP mechanisms, by each accountant."""

    k: int
    eps0: float
    delta: float
    basic: float
    advanced: float
    optimal: float
    pld: float | None
    """dp_accounting PLD of the Laplace mechanism (``None``: generic mechanism or k too large)."""

    @property
    def best(self) -> tuple[str, float]:
        """The tightest valid bound and its accountant (basic holds with delta = 0 <= delta)."""
        cands = [("basic", self.basic), ("advanced", self.advanced), ("optimal", self.optimal)]
        if self.pld is not None:
            cands.append(("pld", self.pld))
        return min(cands, key=lambda kv: kv[1])

    @property
    def epsilon(self) -> float:
        return self.best[1]

    def as_pairs(self) -> tuple[tuple[str, float | None], ...]:
        return (("basic", self.basic), ("advanced", self.advanced), ("optimal", self.optimal), ("pld", self.pld))


def compose(k: int, eps0: float, delta: float, mechanism: Mechanism = "generic",
            pld_max_k: int = PLD_MAX_K) -> Composition:
    """Every accountant's epsilon at ``delta`` for k-fold composition of eps0-DP mechanisms."""
    pld_eps = laplace_pld_epsilon(k, eps0, delta) if mechanism == "laplace" and 0 < k <= pld_max_k else None
    return Composition(
        k=k, eps0=eps0, delta=delta,
        basic=basic_epsilon(k, eps0),
        advanced=advanced_epsilon(k, eps0, delta),
        optimal=optimal_epsilon(k, eps0, delta),
        pld=pld_eps,
    )


def max_queries(eps0: float, epsilon: float, delta: float, mechanism: Mechanism = "generic",
                pld_max_k: int = PLD_MAX_K) -> tuple[int, str]:
    """The largest k such that k-fold composition of eps0-DP mechanisms is (epsilon, delta)-DP by
    at least one accountant, and that accountant. Each accountant's bound is monotone in k (a
    prefix of the interaction is a post-processing of the whole), so each is searched by bisection.
    """
    if eps0 <= 0.0:
        raise ValueError("the per-query epsilon must be positive")
    k_basic = math.floor(epsilon / eps0)
    while basic_epsilon(k_basic + 1, eps0) <= epsilon:
        k_basic += 1
    while k_basic > 0 and basic_epsilon(k_basic, eps0) > epsilon:
        k_basic -= 1
    found: list[tuple[int, str]] = [(k_basic, "basic")]
    if delta > 0.0:
        found.append((roots.largest_int_from(lambda k: advanced_epsilon(k, eps0, delta) <= epsilon, 1), "advanced"))
        found.append((roots.largest_int_from(lambda k: optimal_delta(k, eps0, epsilon) <= delta, 1), "optimal"))
    k_best, name = max(found)
    if mechanism == "laplace" and delta > 0.0 and k_best < pld_max_k:
        def ok(k: int) -> bool:
            return k <= pld_max_k and laplace_pld_epsilon(k, eps0, delta) <= epsilon

        if ok(k_best + 1):
            # the PLD is at most a few percent tighter: bracket above k_best, then bisect
            lo, hi = k_best + 1, min(pld_max_k + 1, max(k_best + 2, math.ceil(1.25 * (k_best + 1))))
            while hi <= pld_max_k and ok(hi):
                lo, hi = hi, min(pld_max_k + 1, 2 * hi)
            k_best, name = roots.largest_int(ok, lo, hi), "pld"
    return k_best, name


def max_eps0(k: int, epsilon: float, delta: float) -> float:
    """The largest eps0 such that k-fold composition of eps0-DP mechanisms is (epsilon, delta)-DP by
    the tightest generic accountant (basic, advanced or optimal); bisection to 1e-10 relative,
    returning a value that satisfies the constraint."""
    if k < 1:
        raise ValueError("k must be at least 1")

    def ok(e0: float) -> bool:
        if basic_epsilon(k, e0) <= epsilon:
            return True
        if delta <= 0.0:
            return False
        return advanced_epsilon(k, e0, delta) <= epsilon or optimal_delta(k, e0, epsilon) <= delta

    lo = epsilon / k  # basic holds
    lo, hi = roots.grow_until(ok, lo, 2.0 * lo, want=False)
    return roots.largest_float(ok, lo, hi, rel_tol=1e-10)
