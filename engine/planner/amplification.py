"""Privacy amplification by subsampling a fixed-size subset without replacement.

Two statements are used, both for the substitution neighbouring relation (Definition 2.2):

* **Claim 2.7** of the paper (Kasiviswanathan et al. 2011), the paper's own tool: if A is
  (eps', delta')-DP on m records and B runs A on a uniformly random m-subset of t = (m/eps)(3 +
  e^{eps'}) records, B is (eps, 4 eps delta' / (3 + e^{eps'}))-DP, **stated for eps <= 1**. In terms
  of the rate r = m/t: eps_out = r (3 + e^{eps'}), delta_out = 4 r delta'. Outside eps_out <= 1 the
  claim says nothing, and :func:`claim_2_7` returns +inf.
* **Balle, Barthe, Gaboardi (NeurIPS 2018), Theorem 10** (used by the ``tight`` accounting; valid
  for every eps): eps_out = ln(1 + r (e^{eps'} - 1)), delta_out = r delta'.

BBG is never worse: ln(1 + r(e^x - 1)) <= r(e^x - 1) < r(3 + e^x).

Rounding: rates are realised as ratios of integers m/N with m rounded down, so the realised rate
never exceeds the planned one; :func:`bbg_rate` shaves a relative 1e-12 so that float error cannot
push the output above the target.
"""

from __future__ import annotations

import math
from fractions import Fraction


def bbg(r: float, eps: float, delta: float) -> tuple[float, float]:
    """BBG 2018 Thm 10: (ln(1 + r (e^eps - 1)), r delta) for sampling rate r in [0, 1].

    Evaluated as logaddexp(ln(1 - r), ln r + eps), stable for large eps.
    """
    if not 0.0 <= r <= 1.0:
        raise ValueError("a sampling rate lies in [0, 1]")
    if r == 0.0:
        return 0.0, 0.0
    if math.isinf(eps):
        return math.inf, r * delta
    if r == 1.0:
        return eps, delta
    if eps < 30.0:
        out = math.log1p(r * math.expm1(eps))
    else:
        a, b = math.log1p(-r), math.log(r) + eps
        hi = max(a, b)
        out = hi + math.log1p(math.exp(min(a, b) - hi))
    # a few float operations, each within an ulp or two: move up by a relative 1e-13 (safe side)
    return _up(out * (1.0 + 1e-13)), _up_product(r, delta)


def _up(x: float) -> float:
    return math.nextafter(x, math.inf) if x > 0.0 else x


def _up_product(r: float, delta: float) -> float:
    """The smallest float >= r * delta (exact product)."""
    exact = Fraction(r) * Fraction(delta)
    f = float(exact)
    return f if Fraction(f) >= exact else math.nextafter(f, math.inf)


def bbg_rate(eps_target: float, eps_in: float) -> float:
    """Largest rate r <= 1 with BBG's eps_out <= eps_target: r = (e^{eps_target} - 1)/(e^{eps_in} - 1)."""
    if eps_target <= 0.0:
        return 0.0
    if eps_in <= eps_target:
        return 1.0
    log_r = math.log(math.expm1(eps_target)) - (
        math.log(math.expm1(eps_in)) if eps_in < 30.0 else eps_in + math.log1p(-math.exp(-eps_in))
    )
    return min(1.0, math.exp(log_r) * (1.0 - 1e-12))


def claim_2_7(r: float, eps: float, delta: float) -> tuple[float, float]:
    """Claim 2.7 at rate r: (r (3 + e^eps), 4 r delta), or (+inf, 4 r delta) when r (3 + e^eps) > 1,
    where the claim does not apply (it is stated for an output eps <= 1)."""
    if not 0.0 <= r <= 1.0:
        raise ValueError("a sampling rate lies in [0, 1]")
    if math.isinf(eps):
        return math.inf, 4.0 * r * delta
    out = r * (3.0 + math.exp(eps)) if eps < 700.0 else math.inf
    return (out if out <= 1.0 else math.inf), 4.0 * r * delta


def claim_2_7_rate(eps_target: float, eps_in: float) -> float:
    """The paper's rate for Claim 2.7: eps_target / (3 + e^{eps_in}) (requires eps_target <= 1).
    GenericBBL uses eps_in = eps + 4: r-hat = eps / (3 + e^{eps + 4})."""
    return eps_target / (3.0 + math.exp(eps_in))
