"""The noisy halting test (discrete AboveThreshold, docs/privacy/genericbbl.md 5), checked independently:
``dlap_sum_tail``'s closed form against brute-force summation of the two pmfs, ``at_margin``'s
minimality, Lemma AT (the test is (1/t_r + 2/t_x)-DP) by exact enumeration over the threshold noise
on short count sequences, the hard cap's bound (Lemma T) on the exact no-fire probability, and
Theorem Q's in-round step for both designs."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from everlast.engine.design import DEFAULT, PAPER
from everlast.engine.planner import above_threshold as at
from everlast.engine.planner import certify
from everlast.engine.planner.design_rules import rules
from everlast.engine.schedule import RoundSpec, Schedule


def _pmf(scale: float, n: int) -> np.ndarray:
    """DLap(scale) on {-n, ..., n}: (1-r)/(1+r) r^|z|, r = e^{-1/scale}."""
    r = math.exp(-1.0 / scale)
    z = np.arange(-n, n + 1)
    out: np.ndarray = (1 - r) / (1 + r) * r ** np.abs(z)
    return out


def _outside(scale: float, n: int) -> float:
    """P[|Z| > n] (what the truncation to {-n, ..., n} drops)."""
    r = math.exp(-1.0 / scale)
    return 2 * r ** (n + 1) / (1 + r)


@pytest.mark.parametrize(("a", "b"), [(0.5, 0.5), (1.0, 3.0), (2.5, 2.5), (4.0, 2.0), (7.3, 1.1),
                                      (20.0, 10.0), (Fraction(400, 7), Fraction(200, 7))])
@pytest.mark.parametrize("g", [-40, -3, 0, 1, 2, 5, 17, 60, 150])
def test_dlap_sum_tail_against_brute_force(a: float | Fraction, b: float | Fraction, g: int) -> None:
    n = int(60 * max(float(a), float(b))) + 200
    conv = np.convolve(_pmf(float(a), n), _pmf(float(b), n))  # the law of X + Y on {-2n, ..., 2n}
    brute = float(np.sum(conv[g + 2 * n:]))
    slack = _outside(float(a), n) + _outside(float(b), n)
    ours = at.dlap_sum_tail(g, a, b)
    assert ours == pytest.approx(brute, rel=1e-9, abs=slack + 1e-300)
    assert at.dlap_sum_tail(g, b, a) == pytest.approx(ours, rel=1e-12)  # X + Y = Y + X


def test_dlap_sum_tail_deep_tail_in_high_precision() -> None:
    """Far in the tail (1e-60) floats lose the brute-force sum's small terms: sum in 50 digits."""
    a, b, g = 3.0, 1.5, 420
    with mp.workdps(50):
        p, r = mp.e ** (-1 / mp.mpf(a)), mp.e ** (-1 / mp.mpf(b))
        ca, cb = (1 - p) / (1 + p), (1 - r) / (1 + r)
        # P[X >= k] summed term by term, then sum over y; both truncated far beyond the bound
        total = mp.mpf(0)
        for y in range(-400, g + 400):
            k = g - y
            tail_x = mp.nsum(lambda x, k=k: ca * p ** abs(x), [k, mp.inf]) if k > 0 else \
                1 - mp.nsum(lambda x, k=k: ca * p ** abs(x), [-mp.inf, k - 1])
            total += cb * r ** abs(y) * tail_x
        ours = at.dlap_sum_tail(g, a, b)
        assert ours >= total * (1 - mp.mpf(10) ** -20)
        assert ours == pytest.approx(float(total), rel=1e-12)


@pytest.mark.parametrize(("eps", "p"), [(0.01, 1e-12), (0.01, 4.97e-10), (0.1, 1e-6), (1.0, 1e-30),
                                        (0.3, 0.01), (2.0, 0.4), (0.5, 1e-200)])
def test_at_margin_is_the_smallest_integer(eps: float, p: float) -> None:
    g = at.at_margin(eps, p)
    tq, tr = at.scales(eps)
    assert at.at_tail(g, tq, tr) <= p
    assert g == 0 or at.at_tail(g - 1, tq, tr) > p


def test_scales_and_epsilon_are_the_engines_exact_ones() -> None:
    from everlast.engine.noise import exact_scale

    for eps in (0.01, 0.1, 0.37, 1.0):
        tq, tr = at.scales(eps)
        assert (tq, tr) == (exact_scale(4.0 / eps), exact_scale(2.0 / eps))
        exact = 1 / tr + 2 / tq  # Fraction arithmetic
        assert at.at_epsilon(tr, tq) >= float(exact)
        assert at.at_epsilon(tr, tq) == pytest.approx(float(exact), rel=1e-15)


# ---------------------------------------------------------------------------- Lemma AT, exactly


@functools.cache
def _fire_law(counts: tuple[int, ...], c0: int, eps: float) -> np.ndarray:
    """Exact P[fire at query j] (j = 1..k) and P[no fire] of the discrete test on a fixed count
    path: fire at the first j with C_j + xi_j >= c0 + rho; rho ~ DLap(2/eps) summed over its
    support (truncated where the remaining mass is below 1e-25, far below the float error of the
    ratios compared), xi_j ~ DLap(4/eps) in closed form."""
    tq, tr = (float(x) for x in at.scales(eps))
    pq, pr = math.exp(-1 / tq), math.exp(-1 / tr)
    n = int(tr * 60) + 20
    rho = np.arange(-n, n + 1)
    w = (1 - pr) / (1 + pr) * pr ** np.abs(rho)

    def ge(k: np.ndarray) -> np.ndarray:  # P[xi >= k]
        out: np.ndarray = np.where(k >= 1, pq ** np.maximum(k, 1) / (1 + pq),
                                   1 - pq ** (1 - np.minimum(k, 0)) / (1 + pq))
        return out

    alive = np.ones_like(w)
    out = []
    for cj in counts:
        fire = ge(c0 + rho - cj)
        out.append(float(np.sum(w * alive * fire)))
        alive = alive * (1 - fire)
    out.append(float(np.sum(w * alive)))
    return np.asarray(out)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_lemma_at_on_short_count_paths(eps: float) -> None:
    """Count paths that differ by at most 1 at every query (a query's top moves every later count
    by at most 1): every outcome's probability within e^{eps_h} of the other world's, both ways."""
    tq, tr = at.scales(eps)
    eps_h = at.at_epsilon(tr, tq)
    c0 = 3
    worst = 0.0
    for steps in itertools.product((0, 1), repeat=4):
        counts = list(itertools.accumulate(steps))
        for j0 in range(4):
            for d in (-1, 1):
                other = [c + (d if j >= j0 else 0) for j, c in enumerate(counts)]
                P, Q = _fire_law(tuple(counts), c0, eps), _fire_law(tuple(other), c0, eps)
                worst = max(worst, float(np.max(np.abs(np.log(P) - np.log(Q)))))
    assert worst <= eps_h * (1 + 1e-9)
    assert worst > 0.3 * eps_h  # not vacuous


def test_cap_bound_on_the_exact_no_fire_probability() -> None:
    """Lemma T(ii): the adversary's fastest path to the cap (every query a top) reaches c tops
    without the test firing with probability at most P[xi - rho >= c - c0] (cap_probability)."""
    eps, c0 = 1.0, 4
    for cap in (6, 9, 12):
        no_fire = _fire_law(tuple(range(1, cap + 1)), c0, eps)[-1]
        assert no_fire <= at.cap_probability(cap, c0, eps)
    assert at.cap_charge(0.5, 1e-9) >= (1 + math.exp(0.5)) * 1e-9
    assert at.cap_charge(0.5, 0.0) == 0.0


# ---------------------------------------------------------------------------- Theorem Q (step Q0)

TCT = RoundSpec(T=10**6, lam=50, R=10**6, c=5_000, eps_bt=0.01, delta_bt=None, alpha=0.1, m_S=100,
                m_D=1_000, beta=0.05, halt_eps=0.1, halt_threshold=3_000)


def test_theorem_q_by_hand() -> None:
    ir = rules(DEFAULT).in_round(TCT)
    tq, tr = at.scales(0.1)
    assert ir.valid and ir.epsilon == at.at_epsilon(tr, tq) == pytest.approx(0.1)
    d_h = at.dlap_sum_tail(2_000, tq, tr)
    assert ir.delta_cap_h == d_h
    assert ir.delta == pytest.approx((1 + math.exp(ir.epsilon)) * d_h, rel=1e-12)
    # a cap that cannot bind (c > R) costs no delta
    assert rules(DEFAULT).in_round(dataclasses.replace(TCT, c=TCT.R + 1)).delta == 0.0
    # the paper's design: both channels open
    paper = dataclasses.replace(TCT, delta_bt=1e-8, halt_eps=None, halt_threshold=None)
    p = rules(PAPER).in_round(paper)
    assert not p.valid and math.isinf(p.epsilon) and "halting" in p.note and "restart" in p.note
    assert "halting" not in rules(PAPER).in_round(dataclasses.replace(paper, c=paper.R + 1)).note


def test_every_round_is_charged_the_largest_halting_cap_of_the_schedule() -> None:
    """Theorem Q, step 1: the challenge round is chosen adaptively, so each round's in-round delta
    uses the largest cap probability over the schedule."""
    tight = dataclasses.replace(TCT, halt_threshold=TCT.c - 400, m_D=TCT.R)
    loose = dataclasses.replace(TCT, T=10_000, halt_threshold=TCT.c - 100, m_D=TCT.R)
    cert = certify(Schedule((tight, loose), design=DEFAULT), 10**12)
    tq, tr = at.scales(0.1)
    worst = at.dlap_sum_tail(100, tq, tr)
    assert at.dlap_sum_tail(400, tq, tr) < worst
    q0 = [s for s in cert.steps if s.chain == "queries" and s.name.startswith("in-round")]
    assert q0
    for s in q0:
        assert s.inputs_dict()["delta_cap_h"] == worst
