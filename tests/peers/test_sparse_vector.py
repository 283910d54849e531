"""Sparse-vector peer: AboveThreshold's privacy checked by exact numerical integration on short
query sequences, the bad-event bound against the exact Laplace-difference tail, the calibration,
refusal at the cutoff and at the query budget, determinism, accuracy."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate

from everlast.peers import accounting, evaluate, registry
from everlast.peers import sparse_vector as sv
from everlast.peers.base import distance_to_instability, majority
from tests.peers.helpers import THRESHOLDS, data, in_batches, queries, task


def lap_cdf(z: float, b: float) -> float:
    return 0.5 * math.exp(z / b) if z < 0 else 1 - 0.5 * math.exp(-z / b)


def lap_sf(z: float, b: float) -> float:
    return lap_cdf(-z, b)


def pattern_probability(d: list[float], halts: bool, w: float, eps1: float) -> float:
    """P[the first len(d) - halts queries are stable and (if halts) the last is unstable], for
    distances d, by integrating over the threshold noise rho ~ Lap(2/eps1); nu ~ Lap(4/eps1).
    Unstable iff d + nu <= w + rho."""
    b1, b2 = 2 / eps1, 4 / eps1

    def f(r: float) -> float:
        val = math.exp(-abs(r) / b1) / (2 * b1)
        for i, di in enumerate(d):
            z = w + r - di
            val *= lap_cdf(z, b2) if (halts and i == len(d) - 1) else lap_sf(z, b2)
        return val

    kinks = sorted({di - w for di in d} | {0.0})
    lim = 60 * b2
    return float(integrate.quad(f, -lim, lim, points=kinks, limit=400, epsabs=0, epsrel=1e-11)[0])


@pytest.mark.parametrize("d", [[5.0], [0.0, 3.0], [2.0, 6.0, 1.0], [9.0, 9.0, 0.0]])
@pytest.mark.parametrize("halts", [False, True])
def test_above_threshold_is_eps1_dp_by_integration(d: list[float], halts: bool) -> None:
    """Dwork-Roth Thm 3.23 with our sign convention: for every pattern of +-1 changes of the
    (sensitivity-1) distances, the output's probability moves by at most e^eps1."""
    eps1, w = 0.7, 3.0
    p = pattern_probability(d, halts, w, eps1)
    worst = 0.0
    for shift in itertools.product((-1, 0, 1), repeat=len(d)):
        q = pattern_probability([di + s for di, s in zip(d, shift, strict=True)], halts, w, eps1)
        worst = max(worst, abs(math.log(p / q)))
    assert worst <= eps1 * (1 + 1e-7)


@pytest.mark.parametrize("b1,b2", [(2.0, 4.0), (1.0, 1.0), (3.0, 0.5)])
@pytest.mark.parametrize("s", [0.0, 0.7, 3.0, 20.0])
def test_laplace_difference_tail_by_integration(b1: float, b2: float, s: float) -> None:
    """P[nu - rho >= s] = int f_rho(r) P[nu >= s + r] dr."""

    def f(r: float) -> float:
        return math.exp(-abs(r) / b1) / (2 * b1) * lap_sf(s + r, b2)

    lim = 80 * max(b1, b2)
    cuts = sorted({-lim, -s, 0.0, lim})
    exact = sum(integrate.quad(f, a, b, limit=200, epsabs=0, epsrel=1e-11)[0] for a, b in itertools.pairwise(cuts))
    assert sv.laplace_difference_sf(s, b1, b2) == pytest.approx(exact, rel=1e-8, abs=1e-300)
    assert sv.laplace_difference_sf(-s, b1, b2) == pytest.approx(1 - exact, rel=1e-8)


@pytest.mark.parametrize("w", [0.0, 5.0, 40.0, 300.0])
@pytest.mark.parametrize("c", [1, 10, 1000])
def test_bad_event_bound_minimizer_and_validity(w: float, c: int) -> None:
    """The closed-form minimizer beats a fine grid over a, and the bound dominates the exact
    probability that one distance-0 query is declared stable, P[nu - rho > w], per instance."""
    b1, b2 = 2 / 0.3, 4 / 0.3
    grid = np.linspace(0, w, 20_001)
    brute = min(1.0, c * float(np.min(0.5 * np.exp(-grid / b1) + 0.5 * np.exp(-(w - grid) / b2))))
    got = sv.svt_bad_event(w, b1, b2, c)
    assert got <= brute * (1 + 1e-9)
    assert got >= brute * (1 - 1e-3)
    assert got >= min(1.0, c * sv.laplace_difference_sf(w, b1, b2))


def test_threshold_calibration() -> None:
    b1, b2, c, d = 5.0, 10.0, 100, 1e-7
    w = sv.svt_threshold(d, b1, b2, c)
    assert sv.svt_bad_event(w, b1, b2, c) <= d < sv.svt_bad_event(w * (1 - 1e-6), b1, b2, c)


@pytest.mark.parametrize("c", [1, 20, 500])
def test_calibrate_certifies_the_target(c: int) -> None:
    p = sv.calibrate(c, 1.0, 1e-6)
    comp = accounting.compose(c, p.eps_instance, p.delta_comp)
    assert comp.epsilon <= 1.0
    assert p.delta_comp + sv.svt_bad_event(p.w, p.b1, p.b2, c) <= 1e-6 * (1 + 1e-12)
    # independent: dp_accounting's PLD of RR(eps_inst)^c is within its discretization of ours
    assert accounting.rr_pld_epsilon(c, p.eps_instance, p.delta_comp) == pytest.approx(comp.optimal, rel=0.02)


def make(c: int = 5, w: float | None = None, max_queries: int | None = None, seed: int = 3,
         n: int = 20_000, T: int = 200) -> sv.SparseVector:
    x, y = data(n)
    p = sv.calibrate(c, 2.0, 1e-6)
    if w is not None:
        p = sv.SVTParams(c=p.c, eps1=p.eps1, eps_answer=p.eps_answer, w=w, delta_comp=p.delta_comp)
    return sv.SparseVector(THRESHOLDS, x, y, T=T, lam=n // T, params=p, max_queries=max_queries, seed=seed)


def test_privacy_record() -> None:
    p = make()
    acc = p.privacy
    assert acc.epsilon <= 2.0 and acc.delta <= 1e-6 * (1 + 1e-12)
    assert not acc.protects_queries
    assert acc.max_queries is None


def test_refuses_after_the_cth_unstable_query() -> None:
    """With w far above any distance every query is unstable: exactly c are answered (noisily),
    then every query is refused, whatever the batches."""
    p = make(c=7, w=1e9)
    out = in_batches(p.answer, queries(40), [3, 6, 11])
    assert (out[:7] >= 0).all() and (out[7:] == -1).all()
    assert p.unstable == 7 and p.exhausted and p.answered == 7
    assert (p.answer(queries(5, 9)) == -1).all()


def test_refuses_after_the_query_budget() -> None:
    p = make(c=10**6, max_queries=100)
    out = in_batches(p.answer, queries(150), [99, 100, 101])
    assert (out[:100] >= 0).all() and (out[100:] == -1).all()
    assert p.exhausted


def test_stable_queries_get_the_noiseless_majority_for_free() -> None:
    """Queries far from the threshold: every answer is the plain majority, no instance is spent."""
    x, y = data(20_000)
    params = sv.SVTParams(c=3, eps1=20.0, eps_answer=1.0, w=5.0, delta_comp=1e-6)
    p = sv.SparseVector(THRESHOLDS, x, y, T=200, lam=100, params=params, seed=3)
    xq = np.concatenate([np.linspace(0.0, 0.3, 500), np.linspace(0.7, 1.0, 500)])
    v = p.ensemble.votes(xq)
    assert (distance_to_instability(v, p.T) > p.params.w + 60 * p.params.b2).all()  # stable w.p. ~1 - 1e-20
    np.testing.assert_array_equal(p.answer(xq), majority(v, p.T))
    assert p.unstable == 0


def test_deterministic_and_batch_invariant() -> None:
    xq = np.concatenate([queries(2000), np.full(50, 0.5)])
    a = make(c=30, w=40.0).answer(xq)
    b = in_batches(make(c=30, w=40.0).answer, xq, [1, 64, 65, 1000, 2010])
    np.testing.assert_array_equal(a, b)


def test_accuracy_at_large_n() -> None:
    t = task()
    peer = registry.build("sparse_vector", "thresholds", 2_000_000, 2.0, 1e-6, 0.1, seed=1, task=t)
    r = evaluate.run_peer(peer, t, 50_000, seed=2)
    bound = registry.error_bound(peer, 0.1)
    assert bound <= 0.1
    assert r["answered"] >= 1
    assert r["error_rate"] <= bound + 4 * math.sqrt(bound / r["answered"])
