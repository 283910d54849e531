"""The validated accuracy certificate (docs/privacy/learner.md 10, Theorem V).

A public share of the training set is held out before the fit: which records, a uniform random subset
of ``holdout_size(n, share)`` indices drawn from the model's own randomness (never from the data). The
learner is fitted on the rest; the released model's error count E on the holdout is released through
the two-sided geometric (discrete Laplace) mechanism, E + Z with P[Z = z] proportional to
exp(-epsilon |z|), sampled exactly from fair bits (``discrete_laplace``); and ``upper_bound`` turns the
noisy count into a one-sided confidence bound on the released model's error on the distribution the
holdout (and the queries) are drawn from, at confidence 1 - beta, by inverting the exact law of
Binomial(m, p) + Z.

Privacy (Theorem V): the two parts are disjoint sets of indices fixed independently of the data, so
under substitution (the learner's neighbour relation: n is public) a changed record lies in one part
only; the fit is then epsilon-DP in it and the count a post-processing of the fit, or the fit is
unchanged and the count epsilon-DP: the whole release is (epsilon, 0)-DP at the one configured epsilon.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine import roots
from everlast.engine.errors import CorruptState, InvalidInput
from everlast.engine.learner.exact import BitSource, below, bernoulli_exp

DEFAULT_SHARE = 0.25
"""The share of the training set held out for the certificate (docs/privacy/learner.md 10)."""
MIN_HOLDOUT = 30
"""Fewer held-out records than this (a training set below 4 MIN_HOLDOUT at the default share): no
holdout, no validated certificate (the bound would be near 1 anyway)."""
MIN_BETA = 1e-12
"""The smallest failure probability the certificate is computed for: the window of ``observed_cdf``
omits a binomial mass of at most 2 e^-75 ~ 5e-33, absolute, which the slack beta 10^-9 must cover
(it does for every beta >= 1e-23; below that the bound would be unsound)."""
SLACK = 1e-9
"""Relative slack of the float evaluation of the binomial-geometric CDF (the bound is a hair
conservative: a p is accepted as the bound only where the computed CDF is below beta (1 - SLACK))."""


def holdout_size(n: int, share: float) -> int:
    """m = floor(share n) held-out records, or 0 when that is below ``MIN_HOLDOUT`` or leaves fewer
    than ``MIN_HOLDOUT`` to fit on (a function of the public n and configuration)."""
    if not 0.0 <= share < 1.0:
        raise InvalidInput("holdout share must lie in [0, 1)")
    m = math.floor(share * n)
    return m if m >= MIN_HOLDOUT and n - m >= MIN_HOLDOUT else 0


def split(n: int, m: int, bits: BitSource) -> NDArray[np.bool_]:
    """A uniform random subset of m of the n indices (True: held out), by a Fisher-Yates shuffle on
    exact uniform integers (``below``): a function of (n, m) and the bits, never of the data."""
    idx = np.arange(n, dtype=np.int64)
    for i in range(m):  # the first m slots of a partial shuffle
        j = i + below(bits, n - i)
        idx[i], idx[j] = idx[j], idx[i]
    out = np.zeros(n, dtype=np.bool_)
    out[idx[:m]] = True
    return out


def _bernoulli_exp_neg(bits: BitSource, eps: Fraction) -> bool:
    """True with probability exactly exp(-eps), eps >= 0 dyadic: the product of floor(eps) draws at
    exp(-1) and one at exp(-frac(eps)) (each within ``bernoulli_exp``'s range g <= 1, m = 0)."""
    whole = eps.numerator // eps.denominator
    for _ in range(whole):
        if not bernoulli_exp(bits, Fraction(1), 0):
            return False
    frac = eps - whole
    return True if frac == 0 else bernoulli_exp(bits, frac, 0)


def discrete_laplace(bits: BitSource, epsilon: float) -> int:
    """Z with P[Z = z] = (1 - q) / (1 + q) q^|z|, q = exp(-epsilon), exactly (Canonne, Kamath,
    Steinke 2020, Algorithm 2's shape): G geometric (P[G = g] = (1 - q) q^g, from Bernoulli(q) trials),
    a fair sign bit B; reject (B = 1, G = 0); return (1 - 2B) G. epsilon is the float's exact value."""
    e = Fraction(float(epsilon))
    if not e > 0:
        raise InvalidInput("the validation epsilon must be positive")
    while True:
        g = 0
        while _bernoulli_exp_neg(bits, e):
            g += 1
        b = below(bits, 2)
        if b == 1 and g == 0:
            continue
        return -g if b == 1 else g


def noise_cdf(j: NDArray[np.int64], epsilon: float) -> NDArray[np.float64]:
    """P[Z <= j] for the discrete Laplace law of parameter q = exp(-epsilon): q^-j / (1 + q) for j < 0,
    and 1 - q^(j+1) / (1 + q) for j >= 0 (sum of the geometric tails). Every power is exp(k lq) with
    lq = -epsilon exactly (never log(exp(-epsilon)), which is off by an ulp and fails where exp(-epsilon)
    underflows to 0, epsilon >= 745.2)."""
    jf = j.astype(np.float64)
    lq = -float(epsilon)
    q = math.exp(lq)  # 0.0 for epsilon >= 745.2: then 1 + q = 1, exactly the law's limit to double precision
    neg = np.exp(-np.minimum(jf, 0.0) * lq) / (1.0 + q)  # q^{-j} = q^{|j|} for j < 0
    pos = 1.0 - np.exp((np.maximum(jf, -1.0) + 1.0) * lq) / (1.0 + q)
    return np.where(j < 0, neg, pos)


def observed_cdf(c: int, m: int, p: float, epsilon: float) -> float:
    """P_p[E + Z <= c], E ~ Binomial(m, p) independent of Z (discrete Laplace at epsilon)."""
    from scipy.stats import binom

    sd = math.sqrt(m * p * (1.0 - p))
    # Outside the window (t = 40 sd + 50 from the mean) the binomial mass is at most 2 e^-75 (Bernstein:
    # t^2 / (2 (sd^2 + t/3)) >= 75), absolute; ``upper_bound``'s slack beta 10^-9 covers it for beta >= MIN_BETA.
    lo = max(0, math.floor(m * p - 40.0 * sd - 50.0))
    hi = min(m, math.ceil(m * p + 40.0 * sd + 50.0))
    k = np.arange(lo, hi + 1, dtype=np.int64)
    return float(np.sum(binom.pmf(k, m, p) * noise_cdf(c - k, epsilon)))


def upper_bound(c: int, m: int, epsilon: float, beta: float) -> float:
    """U(c) = inf {p in [0, 1] : P_p[E + Z <= c] <= beta}: with probability >= 1 - beta over the
    holdout and the noise, the true error is at most U (docs/privacy/learner.md 10, Lemma V1: the CDF
    decreases in p). 1.0 when no p < 1 is rejected. Bisection to 2^-40, returning the upper end."""
    if not MIN_BETA <= beta < 1.0:
        raise ValueError(f"validation_beta must lie in [{MIN_BETA:g}, 1): below, the window's omitted tail "
                         "(2 e^-75) is no longer inside the slack")
    if m < 1:
        return 1.0
    target = beta * (1.0 - SLACK)

    def rejected(p: float) -> bool:
        return observed_cdf(c, m, p, epsilon) <= target

    if not rejected(1.0 - 1e-12):
        return 1.0
    if rejected(0.0):
        return 0.0
    return roots.smallest_float(rejected, 0.0, 1.0 - 1e-12, abs_tol=2.0**-40)


@dataclass(frozen=True, slots=True)
class Validation:
    """The released measurement: holdout size m, the noisy error count, its epsilon and beta, and the
    bound (public: a post-processing of the release)."""

    m: int
    noisy_errors: int
    epsilon: float
    beta: float
    bound: float

    def to_dict(self) -> dict[str, Any]:
        return {"m": self.m, "noisy_errors": self.noisy_errors, "epsilon": self.epsilon, "beta": self.beta,
                "bound": self.bound}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Validation:
        try:
            v = cls(int(d["m"]), int(d["noisy_errors"]), float(d["epsilon"]), float(d["beta"]), float(d["bound"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptState(f"validation is malformed ({type(exc).__name__})") from None
        if v.m < 1 or not (v.epsilon > 0 and 0 < v.beta < 1 and 0.0 <= v.bound <= 1.0):
            raise CorruptState("validation's fields are out of range")
        return v

    def sentence(self) -> str:
        # the bound rounded up (never printed below what is proven), beta itself (1 - beta may print as 1)
        shown = math.ceil(self.bound * 1000) / 1000
        return (f"validated: error <= {shown:g} (w.p. >= 1 - {self.beta:g}, on i.i.d. queries; "
                f"{self.m} held-out examples, Theorem V)")


def measure(errors: int, m: int, epsilon: float, beta: float, bits: BitSource) -> Validation:
    """Release the error count ``errors`` of the fitted model on the m held-out records: noisy count
    and bound (Theorem V)."""
    c = int(errors) + discrete_laplace(bits, epsilon)
    return Validation(m, c, float(epsilon), float(beta), upper_bound(c, m, epsilon, beta))
