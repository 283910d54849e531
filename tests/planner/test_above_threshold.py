"""The AboveThreshold tests (noisy halting, private restarts): Lemma T's tails against numerical
integration, AboveThreshold's epsilon (Dwork-Roth Thm 3.23) by exact integration over the
threshold noise on short count sequences, the hard-cap bound, and Theorem Q's in-round step."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from scipy import integrate

from engine.planner import above_threshold as at
from engine.planner.query_side import in_round
from engine.schedule import RoundSpec


def _lap_cdf(x: np.ndarray, b: float) -> np.ndarray:
    out: np.ndarray = np.where(x < 0, 0.5 * np.exp(np.minimum(x, 0) / b),
                               1.0 - 0.5 * np.exp(-np.maximum(x, 0) / b))
    return out


def _lap_pdf(x: np.ndarray, b: float) -> np.ndarray:
    out: np.ndarray = np.exp(-np.abs(x) / b) / (2.0 * b)
    return out


@pytest.mark.parametrize(("x", "b1", "b2"), [(0.0, 4.0, 2.0), (3.0, 4.0, 2.0), (40.0, 4.0, 2.0),
                                             (-5.0, 4.0, 2.0), (7.0, 1.0, 1.0), (2.0, 1.0, 3.0)])
def test_laplace_sum_tail_by_integration(x: float, b1: float, b2: float) -> None:
    # P[X + Y >= x] = int f_Y(y) P[X >= x - y] dy
    def f(y: float) -> float:
        return float(_lap_pdf(np.array(y), b2) * (1.0 - _lap_cdf(np.array(x - y), b1)))

    ref, _ = integrate.quad(f, -np.inf, np.inf, epsabs=1e-15, limit=200, points=None)
    assert at.laplace_sum_tail(x, b1, b2) == pytest.approx(ref, rel=1e-7, abs=1e-14)


def test_at_tail_closed_form_and_margin() -> None:
    for eps, g in ((0.1, 50.0), (1.0, 3.0), (0.5, 100.0)):
        assert at.at_tail(g, eps) == pytest.approx(
            2 / 3 * math.exp(-eps * g / 4) - 1 / 6 * math.exp(-eps * g / 2), rel=1e-12)
    for eps, p in ((0.01, 1e-12), (1.0, 1e-30), (0.3, 0.01)):
        g = at.at_margin(eps, p)
        assert at.at_tail(g, eps) <= p < at.at_tail(g - 1, eps)


def _above_threshold_probs(f: list[float], eps: float, thr: float) -> np.ndarray:
    """Exact P[fire at k] (k = 1..K) and P[no fire] for AboveThreshold on the fixed count
    sequence f: integrate over rho ~ Lap(2/eps) with the per-query noise Lap(4/eps) in closed form."""
    b_rho, b_nu = 2.0 / eps, 4.0 / eps
    rho = np.linspace(-50 * b_rho, 50 * b_rho, 40_001)
    w = _lap_pdf(rho, b_rho)
    below = np.ones_like(rho)
    out = []
    for fk in f:
        p_below = _lap_cdf(thr + rho - fk, b_nu)  # f_k + nu_k < thr + rho
        out.append(integrate.trapezoid(w * below * (1.0 - p_below), rho))
        below = below * p_below
    out.append(integrate.trapezoid(w * below, rho))
    return np.asarray(out)


@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_above_threshold_is_eps_dp_on_short_count_sequences(eps: float) -> None:
    """Theorem Q's building block: counts that differ by d in {-1, 0, 1} from the hidden query on
    (the shape of a top count) give output distributions within e^eps of each other."""
    thr = 3.0
    worst = 0.0
    for base in itertools.product((0, 1), repeat=4):
        counts = np.cumsum(base).astype(float).tolist()
        for j0, d in itertools.product(range(4), (-1, 1)):
            other = [c + (d if j >= j0 else 0) for j, c in enumerate(counts)]
            p, q = _above_threshold_probs(counts, eps, thr), _above_threshold_probs(other, eps, thr)
            worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(q)))))
    assert worst <= eps * (1 + 1e-4)
    assert worst > 0.3 * eps  # and the test is not vacuous


def test_cap_probability_bounds_the_exact_no_fire_probability() -> None:
    """Lemma T (a): a count that climbs to the cap without the test firing -- exact probability
    (every query a top, the adversary's best path to the cap) below at_tail(cap - c0)."""
    eps, c0 = 1.0, 4.0
    for cap in (6, 9, 12):
        counts = [float(min(j, cap)) for j in range(1, cap + 1)]
        no_fire = _above_threshold_probs(counts, eps, c0)[-1]
        assert no_fire <= at.cap_probability(cap, c0, eps)
    assert at.cap_probability(5, 4.0, 1.0, reachable=False) == 0.0
    assert at.cap_charge(0.5, 1e-9) == pytest.approx((1 + math.exp(0.5)) * 1e-9)


def test_early_fire_probability_bounds_the_exact_one() -> None:
    """Lemma T (b): m queries at count <= k fire with probability <= m at_tail(thr - k)."""
    eps, thr = 0.5, 12.0
    for m, k in ((5, 2.0), (20, 4.0)):
        p_fire = 1.0 - _above_threshold_probs([k] * m, eps, thr)[-1]
        assert p_fire <= at.early_fire_probability(m, thr, k, eps)


BASE = RoundSpec(T=10**6, lam=50, R=10**6, c=5_000, eps_bt=0.01, delta_bt=1e-12, alpha=0.1, m_S=100,
                 m_D=1_000, beta=0.05, halt_eps=0.1, halt_threshold=3_000.0, restart_eps=0.5,
                 restart_threshold=400.0, block_cap=520)


def test_theorem_q_by_hand() -> None:
    ir = in_round(BASE, "noisy", "private")
    assert ir.valid and ir.epsilon == pytest.approx(0.6)
    d_h = at.at_tail(2_000, 0.1)
    # the block cap is not in the mechanism (a cap on the hidden query's block re-opens the restart
    # channel for a block the adversary picks: docs/PRIVACY.md 5.3): only the halting cap is charged
    assert ir.delta_cap_h == pytest.approx(d_h) and ir.delta_cap_r == 0.0
    assert ir.delta == pytest.approx((1 + math.exp(0.6)) * d_h)
    # stateless restarts: only the halting test; never with c > R: nothing
    assert in_round(BASE, "noisy", "stateless").epsilon == pytest.approx(0.1)
    never = dataclasses.replace(BASE, c=BASE.R + 1)
    z = in_round(never, "never", "stateless")
    assert z.valid and z.epsilon == 0.0 and z.delta == 0.0
    # caps that cannot bind cost no delta
    big = dataclasses.replace(BASE, c=BASE.R + 1, block_cap=BASE.R + 2)
    assert in_round(big, "noisy", "private").delta == 0.0
    # open channels
    assert not in_round(BASE, "noisy", "per-top").valid
    assert not in_round(BASE, "paper", "private").valid
    assert not in_round(dataclasses.replace(BASE, c=BASE.R), "never", "private").valid


def test_cap_gap_is_exact_for_counts_beyond_float_precision() -> None:
    c = 10**22 + 7
    spec = dataclasses.replace(BASE, R=10**23, c=c, halt_threshold=float(10**22))
    gap = c - 10**22  # float(1e22) is exactly 10**22
    assert in_round(spec, "noisy", "stateless").delta_cap_h == pytest.approx(at.at_tail(gap, 0.1))


def test_every_round_is_charged_the_largest_halting_cap_of_the_schedule() -> None:
    """Theorem Q, step 1: the challenge round is chosen adaptively and M' drops the caps of every
    round, so each round's in-round delta uses the largest cap probability over the schedule."""
    from engine.planner import certify
    from engine.schedule import Schedule

    tight_cap = dataclasses.replace(BASE, restart_eps=None, restart_threshold=None, block_cap=None,
                                    halt_threshold=float(BASE.c - 400))  # tau(400, 0.1) ~ 3e-5
    loose_cap = dataclasses.replace(tight_cap, T=10_000, halt_threshold=float(BASE.c - 100), m_D=BASE.R)
    first = dataclasses.replace(tight_cap, m_D=BASE.R)
    s = Schedule((first, loose_cap), halting="noisy", restarts="stateless")
    cert = certify(s, 10**12)
    q0 = [st for st in cert.steps if st.chain == "queries" and st.name.startswith("in-round")]
    worst = at.at_tail(100, 0.1)
    assert at.at_tail(400, 0.1) < worst
    for st in q0:
        assert st.inputs_dict()["delta_cap_h"] == pytest.approx(worst)
        assert st.delta == pytest.approx((1 + math.exp(0.1)) * worst)
