"""Claim 2.7 and Balle-Barthe-Gaboardi amplification."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everlast.engine.planner import amplification as amp


def test_bbg_by_hand() -> None:
    e, d = amp.bbg(0.1, 2.0, 1e-6)
    assert e == pytest.approx(math.log(1 + 0.1 * (math.e**2 - 1)))
    assert d == pytest.approx(1e-7)
    assert amp.bbg(1.0, 3.0, 1e-6) == (3.0, 1e-6)
    assert amp.bbg(0.0, 3.0, 1e-6) == (0.0, 0.0)
    big, _ = amp.bbg(1e-3, 200.0, 0.0)  # stable for large eps
    assert big == pytest.approx(200.0 + math.log(1e-3), rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.floats(0.01, 20.0), st.floats(0.01, 40.0))
def test_bbg_rate_inverts_bbg(target: float, eps_in: float) -> None:
    r = amp.bbg_rate(target, eps_in)
    assert 0.0 < r <= 1.0
    out, _ = amp.bbg(r, eps_in, 0.0)
    assert out <= target * (1 + 1e-12)
    if r < 1.0:
        assert out == pytest.approx(target, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 1.0), st.floats(0.0, 10.0))
def test_bbg_never_worse_than_claim_2_7(r: float, eps_in: float) -> None:
    paper, _ = amp.claim_2_7(r, eps_in, 0.0)
    tight, _ = amp.bbg(r, eps_in, 0.0)
    assert tight <= paper or math.isinf(paper)


def test_claim_2_7_applies_only_up_to_one() -> None:
    # the paper's rate: r-hat = eps / (3 + e^{eps + 4}) applied to eps + 4 gives exactly eps
    for eps in (0.1, 0.5, 1.0):
        r = amp.claim_2_7_rate(eps, eps + 4)
        out, d = amp.claim_2_7(r, eps + 4, 1e-6)
        assert out == pytest.approx(eps)
        assert d == pytest.approx(4 * r * 1e-6)
    assert math.isinf(amp.claim_2_7(0.5, 3.0, 0.0)[0])  # 0.5 (3 + e^3) > 1: no claim
