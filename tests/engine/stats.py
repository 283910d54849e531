"""Acceptance tests for the statistical engine tests, with tolerances from the math.

Each statistical test makes ``m`` checks (cells) and accepts when every one passes at level
``FAMILY_ALPHA / m`` (Bonferroni): a correct sampler fails a test with probability at most
``FAMILY_ALPHA``. Seeds are fixed, so a run is deterministic; the level only says how unlucky a
seed would have to be for a correct implementation to fail.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

FAMILY_ALPHA = 1e-6


def z_bonferroni(m: int, alpha: float = FAMILY_ALPHA) -> float:
    """The two-sided normal quantile for one of ``m`` checks at family level ``alpha``."""
    return float(stats.norm.isf(alpha / (2 * m)))


def check_binomial(count: int, n: int, p: float, m: int, what: str = "") -> None:
    """Exact two-sided binomial test of ``count`` successes in ``n`` trials against ``p``."""
    pv = stats.binomtest(int(count), int(n), float(p)).pvalue
    assert pv >= FAMILY_ALPHA / m, f"{what}: {count}/{n} = {count / n:.6g} vs p = {p:.6g} (p-value {pv:.3g})"


def check_chisquare(observed: Sequence[int] | np.ndarray, probs: Sequence[float] | np.ndarray, m: int,
                    what: str = "") -> None:
    """Pearson chi-square goodness of fit of cell counts against exact cell probabilities (which
    must sum to 1; every expected count must be >= 5 for the chi-square approximation)."""
    obs = np.asarray(observed, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    assert abs(p.sum() - 1.0) < 1e-9, "cell probabilities must sum to 1"
    expected = p * obs.sum()
    assert expected.min() >= 5, "merge cells: an expected count is below 5"
    pv = stats.chisquare(obs, expected).pvalue
    assert pv >= FAMILY_ALPHA / m, f"{what}: chi-square p-value {pv:.3g} over {obs.size} cells"


def check_mean(sample_mean: float, mean: float, sd: float, n: int, m: int, what: str = "") -> None:
    """A CLT check: |sample mean - mean| <= z sd / sqrt(n) (n large, finite fourth moments)."""
    tol = z_bonferroni(m) * sd / math.sqrt(n)
    assert abs(sample_mean - mean) <= tol, f"{what}: {sample_mean:.6g} vs {mean:.6g} (tolerance {tol:.3g})"


# -- the discrete Laplace law, exactly (up to float rounding of the probabilities) ------------


def dlap_ratio(scale: float) -> float:
    """p = exp(-1/scale): P[Z = z] = (1 - p)/(1 + p) p^|z|."""
    return math.exp(-1.0 / scale)


def dlap_pmf(z: int, scale: float) -> float:
    p = dlap_ratio(scale)
    return -math.expm1(-1.0 / scale) / (1.0 + p) * math.exp(-abs(z) / scale)


def dlap_cdf(k: int, scale: float) -> float:
    """P[Z <= k]: p^{-k}/(1 + p) for k < 0, 1 - p^{k+1}/(1 + p) for k >= 0."""
    p = dlap_ratio(scale)
    if k < 0:
        return math.exp(k / scale) / (1.0 + p)
    return 1.0 - math.exp(-(k + 1) / scale) / (1.0 + p)


def dlap_upper(k: int, scale: float) -> float:
    """P[Z >= k] for k >= 1 (= P[Z <= -k]): p^k/(1 + p)."""
    assert k >= 1
    return math.exp(-k / scale) / (1.0 + dlap_ratio(scale))
