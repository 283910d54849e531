"""The planner's speed-only rewrites give the values of the forms they replace, bit for bit (the
known answers, tests/data/kat-plan.json, pin the plans; these pin the pieces on many more inputs).

* ``accuracy._kl_boundary`` is ``roots.smallest_float`` on ``_kl`` with 80 steps;
* ``top_rate.top_rate`` (window ends kept per band and lambda) is the element-wise ``_laplace_cdf`` form;
* ``round_solvers._grid_index`` / ``_grid_sigma`` are ``_up_to_grid``'s grid;
* ``TargetChargedSolver._round``'s memo returns what ``_round_at`` returns (or raises what it raises).
"""

from __future__ import annotations

import math
import random

import mpmath
import numpy as np
import pytest

from everlast.engine import roots
from everlast.engine.planner import accuracy as acc
from everlast.engine.planner import round_solvers as rs
from everlast.engine.planner import top_rate as tr


def test_kl_boundary_is_the_bisection_it_inlines() -> None:
    rnd = random.Random(2)
    for _ in range(3000):
        mu = math.exp(rnd.uniform(-12.0, -0.01))
        T = int(math.exp(rnd.uniform(0.0, 25.0)))
        level = math.log(1.0 / math.exp(rnd.uniform(-20.0, -1.0))) / T * (1.0 + 1e-9)
        if rnd.random() < 0.05:  # near the top: the bisection reaches u = 1
            level = acc._kl(1.0, mu) * rnd.uniform(0.9, 1.0)
        want = roots.smallest_float(lambda u, mu=mu, level=level: acc._kl(u, mu) >= level, mu, 1.0, steps=80)
        assert acc._kl_boundary(mu, level) == want


def _top_rate_reference(gamma: float, sigma: float, lam: int, boundaries: int) -> float:
    s, wk = tr._kept_shares(lam, boundaries)

    def window(a: np.ndarray | float, b: np.ndarray | float) -> np.ndarray:
        return np.asarray(tr._laplace_cdf(b, sigma) - tr._laplace_cdf(a, sigma), dtype=np.float64)

    g0 = float(window(0.5 - gamma, 0.5 + gamma))
    inside = window(0.5 - gamma - s, 0.5 + gamma - s)
    return min(1.0, g0 + boundaries / lam * float(np.dot(inside - g0, wk)))


def test_top_rate_is_the_elementwise_form() -> None:
    rnd = random.Random(1)
    for _ in range(2000):
        g = rnd.choice((*rs.GAMMAS, 0.0125, 0.05))
        lam, b = rnd.choice((1, 2, 5, 17, 60, 61, 333, 5000)), rnd.choice((1, 2, 3))
        sigma = math.exp(rnd.uniform(-9.0, 1.0))
        assert tr.top_rate(g, sigma, lam, b) == _top_rate_reference(g, sigma, lam, b)


def test_grid_index_is_up_to_grid() -> None:
    rnd = random.Random(3)
    for _ in range(10000):
        sigma = math.exp(rnd.uniform(-12.0, 3.0))
        n = rs._grid_index(sigma)
        assert rs._grid_sigma(n) == math.exp(math.ceil(math.log(sigma) / 0.01) * 0.01) == rs._up_to_grid(sigma)


@pytest.mark.parametrize("exact", [False, True])
def test_round_memo_returns_the_rounds_value(exact: bool) -> None:
    from everlast.engine.planner.options import TightOptions
    from everlast.engine.planner.tight import _Problem

    def solver() -> rs.TargetChargedSolver:
        P = _Problem(1.0, 1e-6, 0.1, 0.05, 1, TightOptions(halt_budget="split-votes", eps_h=0.1, relabelling="even"))
        assert isinstance(P.solver, rs.TargetChargedSolver)
        return P.solver

    memo, fresh = solver(), solver()
    for R, G in ((10**5, 400), (10**6, 900), (10**5, 400), (3 * 10**6, 2000), (10**6, 900)):
        for i in (1, 12):
            try:
                want: object = fresh._round_at(i, R, 0.9, 1e-7, exact, G)
            except rs.Infeasible as exc:
                with pytest.raises(rs.Infeasible, match=str(exc)):
                    memo._round(i, R, 0.9, 1e-7, exact, G)
                continue
            assert memo._round(i, R, 0.9, 1e-7, exact, G) == want


def test_round_meets_is_round_epsilons_answer() -> None:
    from everlast.engine.planner import target_charging as tc

    rnd = random.Random(4)
    for _ in range(40):
        eps0, m = math.exp(rnd.uniform(-6.0, -1.0)), rnd.choice((1, 5, 40, 300))
        c, R, Delta = rnd.choice((1, 3, 30, 300)), rnd.choice((50, 10**4, 10**6)), rnd.choice((1e-7, 1e-3))
        passing = rnd.choice((0.0, 1e-9))
        full = tc.round_epsilon(eps0, m, c, R, Delta, passing)
        for E in (full.E, math.nextafter(full.E, 0.0), full.E * 1.1, full.E * 0.9, math.inf, 0.5):
            assert tc.round_meets(eps0, m, c, R, Delta, E, passing) == (full.E <= E)


@pytest.mark.parametrize("band", ["planned", "alpha"])
def test_settles_is_the_full_rounds_answer(band: str) -> None:
    """``_settles`` (first candidate that settles; candidates whose need's floor exceeds G passed over)
    answers as the full round does, over a grid of G around where rounds settle."""
    from everlast.engine.planner.options import TightOptions
    from everlast.engine.planner.tight import _Problem

    o = TightOptions(halt_budget="split-votes", eps_h=0.1, relabelling="even", band=band)  # type: ignore[arg-type]
    short = _Problem(1.0, 1e-6, 0.1, 0.05, 1, o).solver
    full = _Problem(1.0, 1e-6, 0.1, 0.05, 1, o).solver
    assert isinstance(short, rs.TargetChargedSolver) and isinstance(full, rs.TargetChargedSolver)
    seen = set()
    for i in (1, 2, 12):
        for R in (10**3, 10**5, 3 * 10**6):
            for G in (1, 10, 100, 300, 1000, 2000, 3000, 5000, 10**4, 3 * 10**4, 10**5, 10**6):
                try:
                    want = full._round_at(i, R, 0.9, 1e-7, False, G).t_acc <= G
                except rs.Infeasible:
                    want = False
                assert short._settles(i, R, 0.9, 1e-7, G) == want
                seen.add(want)
    assert seen == {True, False}


def _kl_cases(seed: int, count: int, ulps: int) -> list[tuple[float, float, int, float]]:
    """(u, mu, T, beta) at and around the float boundary of T KL(u || mu) >= ln(1/beta) (``ulps``
    floats either side), where a float decision is hardest, and at ensemble_error's own probes."""
    rnd = random.Random(seed)
    out: list[tuple[float, float, int, float]] = []
    while len(out) < count * (2 * ulps + 2):
        mu = math.exp(rnd.uniform(-12.0, -0.01))
        T = int(math.exp(rnd.uniform(0.0, 25.0)))
        beta = math.exp(rnd.uniform(-30.0, -1.0))
        target = math.log(1.0 / beta) / T
        if acc._kl(1.0, mu) <= target * (1.0 + 1e-9):
            continue
        x = acc._kl_boundary(mu, target)
        out.append((math.nextafter(acc._kl_boundary(mu, target * (1.0 + 1e-9)), math.inf), mu, T, beta))
        for direction in (-math.inf, math.inf):
            u = x
            out.append((u, mu, T, beta))
            for _ in range(ulps):
                u = math.nextafter(u, direction)
                out.append((u, mu, T, beta))
    return out


def test_kl_float_decision_is_the_40_digit_one() -> None:
    """``_kl_decided`` (the float shortcut of ensemble_error's 40-digit check) answers only where the
    40-digit evaluation gives the same answer, at the boundary and at ensemble_error's probes (where
    it decides most often: that is the speed-up)."""
    decided = probes = 0
    for u, mu, T, beta in _kl_cases(7, 300, 12):
        fast = acc._kl_decided(u, mu, T, beta)
        if fast is not None:
            decided += 1
            assert fast == acc._kl_exact_at_least_mp(u, mu, T, beta), (u, mu, T, beta)
        assert acc._kl_exact_at_least(u, mu, T, beta) == acc._kl_exact_at_least_mp(u, mu, T, beta)
    for u, mu, T, beta in _kl_cases(8, 300, 0)[::2]:  # ensemble_error's first probe
        probes += acc._kl_decided(u, mu, T, beta) is not None
    assert decided > 0 and probes > 150  # 214 of the 300 here; in the eps1 plan all but 5 of 18,105 calls


def test_kl_float_decision_without_its_error_bound_is_caught() -> None:
    """The mutant that decides every case in floats (no error bound) gives an answer the 40-digit
    evaluation does not on the boundary cases above: the test would catch a wrong shortcut."""
    def mutant(u: float, mu: float, T: int, beta: float) -> bool:
        return T * (u * math.log(u / mu) + (1.0 - u) * math.log((1.0 - u) / (1.0 - mu))) >= -math.log(beta)

    wrong = sum(mutant(*c) != acc._kl_exact_at_least_mp(*c) for c in _kl_cases(7, 300, 12))
    assert wrong > 0


def _cancelling_cases(seed: int, count: int) -> list[tuple[float, float, int, float]]:
    """(u, mu, T, beta) with u within ~1e-6 relative of mu (KL ~ 1e-12 from terms ~1e-6: the float k
    has a relative error ~1e-10) and ln(1/beta) between T k and T KL: only ``T err`` separates them."""
    rnd = random.Random(seed)
    out: list[tuple[float, float, int, float]] = []
    while len(out) < count:
        mu = rnd.uniform(0.05, 0.9)
        u = mu * (1.0 + rnd.uniform(0.3e-6, 3e-6))
        T = int(rnd.uniform(1e10, 1e12))
        k = u * math.log1p((u - mu) / mu) + (1.0 - u) * math.log1p((mu - u) / (1.0 - mu))
        with mpmath.workdps(60):
            U, M = mpmath.mpf(u), mpmath.mpf(mu)
            kl = float(U * mpmath.log1p((U - M) / M) + (1 - U) * mpmath.log1p((M - U) / (1 - M)))
        lo, hi = sorted((T * k, T * kl))
        if hi - lo <= 1e-12 * hi:
            continue
        out.append((u, mu, T, math.exp(-(lo + hi) / 2.0)))
    return out


def test_kl_float_decision_where_cancellation_is_large() -> None:
    """Where KL's two terms cancel, the float decision answers only as the 40-digit one does, and the
    mutant whose tolerance drops ``T err`` (keeping only the 2^-44 relative slack) is caught."""
    cases = _cancelling_cases(9, 200)
    for c in cases:
        fast = acc._kl_decided(*c)
        assert fast is None or fast == acc._kl_exact_at_least_mp(*c), c

    def mutant(u: float, mu: float, T: int, beta: float) -> bool | None:
        k = u * math.log1p((u - mu) / mu) + (1.0 - u) * math.log1p((mu - u) / (1.0 - mu))
        tk, lb = T * k, -math.log(beta)
        tol = 2.0**-44 * (abs(tk) + abs(lb))
        return True if tk - lb > tol else False if lb - tk > tol else None

    wrong = sum((d := mutant(*c)) is not None and d != acc._kl_exact_at_least_mp(*c) for c in cases)
    assert wrong > len(cases) // 4, wrong


def test_kl_float_decision_leaves_underflow_to_the_40_digit_path() -> None:
    """The review's counterexample (subnormal u and mu, T near the largest float): not decided."""
    c = (2.0**-1073, 2.0**-1074, int(1.7e308), 1.0 - 2.0**-53)
    assert acc._kl_decided(*c) is None


@pytest.mark.parametrize("band", ["planned", "alpha"])
@pytest.mark.parametrize("margin", ["lemma-a1", "band"])
def test_settle_scan_is_the_candidates_answer(band: str, margin: str) -> None:
    """``_settle_scan`` (the settle loop unrolled) answers as ``any`` over ``_candidates(settle=True)``."""
    from everlast.engine.planner.options import TightOptions
    from everlast.engine.planner.tight import _Problem

    o = TightOptions(halt_budget="split-votes", eps_h=0.1, relabelling="even", band=band,  # type: ignore[arg-type]
                     answer_margin=margin)  # type: ignore[arg-type]
    solver = _Problem(1.0, 1e-6, 0.1, 0.05, 1, o).solver
    assert isinstance(solver, rs.TargetChargedSolver)
    seen = set()
    for i in (1, 2, 12):
        for R in (10**3, 10**5, 3 * 10**6):
            for E, Delta in ((0.9, 1e-7), (0.3, 1e-9)):
                for G in (1, 10, 100, 300, 1000, 2000, 3000, 5000, 10**4, 3 * 10**4, 10**5, 10**6):
                    want = any(need <= G for need, *_ in solver._candidates(i, R, E, Delta, G, True))
                    assert solver._settle_scan(i, R, E, Delta, G) == want
                    seen.add(want)
    assert seen == {True, False}
