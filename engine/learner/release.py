"""One release of the exponential mechanism for a class of one hypothesis (docs/privacy/learner.md 3,
Theorem X): intervals by ``engine.learner.sampler`` (Lemma X6), thresholds and stumps by
``engine.learner.stumps`` (Lemma X7). Its own module so that neither of those imports the other
both ways."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from everlast.engine.learner.cells import cells
from everlast.engine.learner.exact import BitSource
from everlast.engine.learner.hypothesis import Hypothesis
from everlast.engine.learner.sampler import sample_interval
from everlast.engine.learner.stumps import sample_stump_rows

I64 = NDArray[np.int64]


def sample(concept: str, pos: I64, y: NDArray[np.int8], lo_pos: int, hi_pos: int, eps: float,
           bits: BitSource, fast: bool = True) -> Hypothesis:
    """The exponential mechanism for ``concept`` on validated positions and labels."""
    if concept == "intervals":
        return sample_interval(cells(pos, y, lo_pos, hi_pos), eps, bits, fast)
    return sample_stump_rows(pos, None, y, lo_pos, hi_pos, eps, bits, concept, fast)
