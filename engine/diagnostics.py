"""Read-only evaluation of a predictor, for simulations and tests only -- never for serving.

``shadow_labels`` applies the current round's decision rule (current classifiers, thresholds and
threshold noise; *fresh* per-query noise from a caller-supplied generator, drawn with the round's
own scales through ``engine.noise``; top counted as 1) to points without touching the predictor's
state or streams. Its output is a function of the private state: a daemon must never expose it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine import between_thresholds as bt
from everlast.engine import noise
from everlast.engine.predictor import Predictor


def shadow_labels(p: Predictor, x: Any, rng: np.random.Generator) -> NDArray[np.int8]:
    xs = p.concept.validate_points(x)
    plan = p.plan
    v = p.ensemble.votes(xs)
    z = noise.sample(rng, plan.query, xs.shape[0])
    if p.design.target_charged:
        out = bt.outcomes_tct(v, z, plan)
    else:  # label 0 exactly when BetweenThresholds says L: v + nu - lo < mu
        out = np.where(v + z - plan.lo < p.threshold_noise, bt.L, bt.R).astype(np.int8)
    return np.asarray(out != bt.L, dtype=np.int8)

