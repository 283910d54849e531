"""The dyadic proposal's exponents (docs/privacy/learner.md 3, Lemma X3): for a cell whose errors
exceed the least by de, an integer m <= g / ln 2 with g = eps de / 2, computed in float64 with a
shave that keeps it below the true value. Shared by ``engine.learner.sampler`` (intervals) and
``engine.learner.stumps`` (thresholds and stumps), which import it from here.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]

INV_2LN2 = 0.7213475204444817
"""fl(1 / (2 ln 2)); tests check it against a 400-digit value."""
M_SHAVE = 1.0 - 2.0**-48
"""Relative shave that keeps the float estimate of g / ln 2 below the true value (Lemma X3)."""


def exponents(eps: float, de: I64) -> I64:
    """m = floor(fl(fl(fl(eps de) c) M_SHAVE)) with c = fl(1/(2 ln 2)): an integer in
    [0, g / ln 2] for g = eps de / 2 (Lemma X3: the float estimate carries at most 4 roundings, each
    of relative size <= 2^-53, which the shave 2^-48 dominates). ``de`` >= 0 integers < 2^53."""
    f = de.astype(np.float64)
    t = (f if eps == 1.0 else eps * f) * INV_2LN2  # fl(1.0 x) = x: the same roundings
    return np.floor(t * M_SHAVE).astype(np.int64)
