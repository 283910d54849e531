"""Read-only evaluation of a predictor, for simulations and tests only — never for serving.

``shadow_labels`` applies the current round's decision rule (current classifiers and threshold
noise, *fresh* query noise from a caller-supplied generator, top counted as 1) to points without
touching the predictor's state or streams. Its output is a function of the private state: a
daemon must never expose it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine import between_thresholds as bt
from engine.predictor import Predictor
from engine.rng import laplace


def shadow_labels(p: Predictor, x: Any, rng: np.random.Generator) -> NDArray[np.int8]:
    xs = p.concept.validate_points(x)
    spec = p.spec
    q = p.ensemble.votes(xs).astype(np.float64) / spec.T
    nu = laplace(rng, bt.query_noise_scale(spec.eps_bt, spec.T), xs.shape[0])
    # label 0 exactly when BetweenThresholds says L: c - t_l < mu (engine.between_thresholds)
    return ((q + nu) - (0.5 - spec.band) >= p.threshold_noise).astype(np.int8)


def majority_labels(p: Predictor, x: Any) -> NDArray[np.int8]:
    """The noiseless majority vote of the current classifiers (the accuracy proof's m(x))."""
    xs = p.concept.validate_points(x)
    return (2 * p.ensemble.votes(xs) >= p.spec.T).astype(np.int8)
