"""KOV's delta_RR against an independent 50-digit evaluation (needs mpmath, which is not a
declared dependency: skipped without it). The full validation behind ``composition.term_margin``
ran six (mu, E) settings per decade of c from 1e2 to 1e14; this re-runs a fast subset."""

from __future__ import annotations

import math

import numpy as np
import pytest

from everlast.engine.planner import composition as comp

mp = pytest.importorskip("mpmath")


def _cdf_ref(l: int, c: int, eps0: float, which: str) -> float:  # noqa: E741 (l*, the paper)
    """P[B <= l], B ~ Bin(c, x), x = expit(-eps0) ('q') or expit(eps0) ('p'): the pmf at l in
    mpmath (50 digits), then exact log-ratios pmf(k-1)/pmf(k) = k/(c-k+1) (1-x)/x going down.
    Call it under ``mp.workdps(50)``: never set mpmath's global precision (the planner's figures
    once moved by an ulp in a later test on the same worker)."""
    e = mp.mpf(eps0)
    x = 1 / (1 + mp.e**e) if which == "q" else 1 / (1 + mp.e ** (-e))
    anchor = (mp.loggamma(c + 1) - mp.loggamma(l + 1) - mp.loggamma(c - l + 1)
              + l * mp.log(x) + (c - l) * mp.log(1 - x))
    lr = eps0 if which == "q" else -eps0  # log((1-x)/x)
    k0 = float(mp.log(mp.mpf(l) / (c - l + 1)))
    m = int(min(l + 1, 45 * math.sqrt(c) / 2 + 100))
    total, acc, j0 = 0.0, 0.0, 0
    while j0 < m:
        t = np.arange(j0, min(m, j0 + 4_000_000), dtype=np.float64)
        inc = k0 + lr + np.log1p(-t / l) - np.log1p(t / (c - l + 1))
        cs = acc + np.concatenate([[0.0], np.cumsum(inc)])
        total += float(np.sum(np.exp(cs[:-1])))
        acc = float(cs[-1])
        j0 += len(t)
    return mp.e**anchor * total  # type: ignore[no-any-return]


@pytest.mark.parametrize(("c", "mu", "E"), [
    (10, 0.5, 1.0), (100, 1.0, 1.0), (10**6, 0.233, 1.0), (10**6, 2.0, 8.0), (10**10, 0.05, 0.2),
    (10**10, 0.233, 1.0), (10**12, 0.233, 1.0),
])
def test_delta_rr_against_independent_high_precision(c: int, mu: float, E: float) -> None:
    eps0 = mu / math.sqrt(c)
    lstar = math.ceil((c - E / eps0) / 2) - 1
    with mp.workdps(50):
        t1 = _cdf_ref(lstar, c, eps0, "q")
        ref = float(t1 - mp.e**E * _cdf_ref(lstar, c, eps0, "p"))
    ours = comp.kov_delta_rr(eps0, c, E)
    assert ours >= ref  # an upper bound
    assert ours - ref <= 1.2 * comp.term_margin(c) * float(t1)  # and tight (margin + error)
