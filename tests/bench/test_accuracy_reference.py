"""bench.accuracy's reference for `covered`: what an exact (Clopper-Pearson) 1 - beta bound on the holdout
scores against an independent test error. It is below 1 - beta (the test error's own noise), and it is
checked here against a direct simulation of that experiment."""

from __future__ import annotations

import numpy as np
from scipy.stats import beta as beta_law

from bench.accuracy import exact_covered


def test_exact_covered_matches_a_simulation_and_sits_below_one_minus_beta() -> None:
    m, n_test, err, b = 99, 171, 0.10, 0.01  # breast cancer's holdout and test sizes
    got = exact_covered(err, m, n_test, b)
    rng = np.random.default_rng(7)
    k = rng.binomial(m, err, 200_000)
    j = rng.binomial(n_test, err, 200_000)
    cp = np.where(k < m, beta_law.ppf(1 - b, k + 1, np.maximum(m - k, 1)), 1.0)
    sim = float(np.mean(cp >= j / n_test))
    assert abs(got - sim) < 0.002
    assert 0.95 < got < 1 - b  # an exact 99% bound misses ~2% of test errors on these sizes
    # a larger test part makes the test error a better stand-in for the true error: closer to 1 - beta
    assert exact_covered(err, m, 100 * n_test, b) > got
