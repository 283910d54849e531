"""Accuracy at the planner's n (Theorem L2, docs/privacy/learner.md 4): on an i.i.d. stream each fitted
learner's error is <= alpha except with probability <= beta. Fixed seeds; the number of failures
allowed is the 1e-6 upper quantile of Binomial(fits, beta), so a correct bound cannot flake."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy import stats

from everlast.engine.learner import PrivateLearner
from everlast.engine.planner import learner as pl

ALPHA, BETA, EPS = 0.1, 0.05, 1.0
FITS = 12
STREAM = 20_000


def _allowed_failures(fits: int) -> int:
    return int(stats.binom.isf(1e-6, fits, BETA))


Target = Callable[[np.ndarray], np.ndarray]
CASES: dict[str, tuple[dict[str, object], int, Target]] = {
    "thresholds": ({"name": "thresholds"}, 1, lambda x: x >= 0.3),
    "intervals": ({"name": "intervals"}, 1, lambda x: (x >= 0.2) & (x < 0.6)),
    "stumps": ({"name": "stumps", "d": 10}, 10, lambda x: x[:, 3] < 0.45),
}


@pytest.mark.statistical
@pytest.mark.parametrize("name", list(CASES))
def test_error_on_an_iid_stream_at_the_planners_n(name: str) -> None:
    spec, d, target = CASES[name]
    n = pl.n_required(EPS, ALPHA, BETA, pl.ln_hypotheses(name, d=d)).n_required
    assert n is not None
    rng = np.random.default_rng([14, d])
    failures = 0
    for seed in range(FITS):
        x = rng.random((n, d)) if d > 1 else rng.random(n)
        m = PrivateLearner.fit(spec, x, target(x).astype(np.int8), epsilon=EPS, seed=seed)
        q = rng.random((STREAM, d)) if d > 1 else rng.random(STREAM)
        err = float(np.mean(m.answer(q).labels != target(q)))
        # the stream's error estimates the true error: count a failure if even its 1e-6 lower
        # confidence bound exceeds alpha
        lower = stats.beta.ppf(1e-6, err * STREAM, STREAM - err * STREAM + 1) if err > 0 else 0.0
        failures += lower > ALPHA
        assert err < 0.5
    assert failures <= _allowed_failures(FITS)


def _worst_case_failures(n: int, fits: int, seed: int) -> int:
    """D: 85% at x = 1.0 (label 1), 15% at the double just below (label 0). The only correct cut is
    one ulp wide; the wrong cut below it holds ~2^63 cuts (every smaller double) and errs on 15%."""
    lo_pt = float(np.nextafter(1.0, 0.0))
    rng = np.random.default_rng(seed)
    failures = 0
    for s in range(fits):
        ones = rng.random(n) < 0.85
        x = np.where(ones, 1.0, lo_pt)
        m = PrivateLearner.fit("thresholds", x, ones.astype(np.int8), epsilon=EPS, seed=s)
        lab = m.answer(np.array([lo_pt, 1.0])).labels
        err = 0.15 * (lab[0] != 0) + 0.85 * (lab[1] != 1)  # the true error, exactly
        failures += err > ALPHA
    return failures


@pytest.mark.statistical
def test_worst_case_distribution_at_the_planners_n() -> None:
    n = pl.n_required(EPS, ALPHA, BETA, pl.ln_hypotheses("thresholds")).n_required
    assert n is not None
    fits = 60
    assert _worst_case_failures(n, fits, seed=3) <= _allowed_failures(fits)
    # and the test has teeth: with far too little data the same distribution defeats the learner
    assert _worst_case_failures(300, 20, seed=4) >= 10
