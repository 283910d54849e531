"""engine.between_thresholds: the vectorized mechanisms against the one-query-at-a-time
``reference``, and one query's outcome probabilities against the exact discrete Laplace law."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everlast.engine import between_thresholds as bt
from everlast.engine.design import DEFAULT, MAX_COUNT, PAPER, NoisePlan, noise_plan
from everlast.engine.noise import NoiseStream
from everlast.engine.schedule import RoundSpec
from tests.engine.stats import check_binomial, check_chisquare, dlap_cdf, dlap_pmf

I64 = np.ndarray[Any, np.dtype[np.int64]]
ONE = Fraction(1)


def plan_of(lo: int, hi: int, T: int, c: int, c0: int | None = None) -> NoisePlan:
    """A plan with the given integers (the scales are irrelevant to the mechanism functions)."""
    return NoisePlan(T, 10**6, lo, hi, ONE, ONE, ONE, ONE, c, c0)


def arr(xs: list[int]) -> I64:
    return np.asarray(xs, dtype=np.int64)


class Mus:
    """``next_mu`` from a list, counting the calls."""

    def __init__(self, values: list[int]) -> None:
        self.it: Iterator[int] = iter(values)
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return next(self.it)


def same(a: bt.BTRun, b: bt.BTRun) -> bool:
    return (np.array_equal(a.outcomes, b.outcomes) and a.outcomes.dtype == np.int8 and a.answered == b.answered
            and a.state == b.state and a.halted == b.halted)


# -- random inputs against the reference ----------------------------------------------------------


@st.composite
def cases(draw: st.DrawFn, paper: bool) -> dict[str, Any]:
    T = draw(st.integers(2, 40))
    lo = draw(st.integers(0, T))
    hi = draw(st.integers(lo, T))
    near = [x for x in (lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 0, T) if 0 <= x <= T]
    n = draw(st.integers(0, 150))
    v = draw(st.lists(st.one_of(st.sampled_from(near), st.integers(0, T)), min_size=n, max_size=n))
    noise = draw(st.lists(st.integers(-4, 4), min_size=n, max_size=n))
    c = draw(st.integers(1, 12))
    tops = draw(st.integers(0, c - 1))
    if paper:
        mus = draw(st.lists(st.integers(-4, 4), min_size=n + 1, max_size=n + 1))
        return {"plan": plan_of(lo, hi, T, c), "v": arr(v), "noise": arr(noise), "mus": mus,
                "state": bt.BTState(tops=tops, mu=mus[0])}
    c0 = draw(st.integers(1, c))
    xi = draw(st.lists(st.integers(-6, 6), min_size=n, max_size=n))
    rho = draw(st.integers(-3, 3))
    return {"plan": plan_of(lo, hi, T, c, c0), "v": arr(v), "noise": arr(noise), "xi": arr(xi),
            "state": bt.BTState(tops=tops, rho_h=rho)}


@settings(max_examples=150, deadline=None)
@given(case=cases(paper=False), cut=st.integers(0, 150))
def test_run_tct_is_the_reference(case: dict[str, Any], cut: int) -> None:
    plan, v, z, xi, state = case["plan"], case["v"], case["noise"], case["xi"], case["state"]
    got = bt.run_tct(v, z, xi, plan, state)
    want = bt.reference(v, z, plan, state, xi=xi)
    assert same(got, want)
    assert np.array_equal(got.outcomes, bt.outcomes_tct(v, z, plan)[: got.answered])
    # fed in two batches, the round gives the same answers (the second only if the first did not halt)
    k = min(cut, v.size)
    first = bt.run_tct(v[:k], z[:k], xi[:k], plan, state)
    if first.halted:
        assert same(first, got)
    else:
        second = bt.run_tct(v[k:], z[k:], xi[k:], plan, first.state)
        assert np.array_equal(np.r_[first.outcomes, second.outcomes], got.outcomes)
        assert (second.state, second.halted, first.answered + second.answered) == (got.state, got.halted,
                                                                                     got.answered)


@settings(max_examples=150, deadline=None)
@given(case=cases(paper=True), cut=st.integers(0, 150))
def test_run_paper_is_the_reference(case: dict[str, Any], cut: int) -> None:
    plan, v, nu, mus, state = case["plan"], case["v"], case["noise"], case["mus"], case["state"]
    a, b = Mus(mus[1:]), Mus(mus[1:])
    got = bt.run_paper(v, nu, plan, state, a)
    want = bt.reference(v, nu, plan, state, next_mu=b)
    assert same(got, want)
    assert a.calls == b.calls  # the same threshold draws, in the same order
    k = min(cut, v.size)
    c = Mus(mus[1:])
    first = bt.run_paper(v[:k], nu[:k], plan, state, c)
    if first.halted:
        assert same(first, got)
    else:
        second = bt.run_paper(v[k:], nu[k:], plan, first.state, c)
        assert np.array_equal(np.r_[first.outcomes, second.outcomes], got.outcomes)
        assert (second.state, second.halted) == (got.state, got.halted) and c.calls == a.calls


def test_long_batches_with_sparse_tops_cross_the_search_windows() -> None:
    """run_paper searches each restart's first top in doubling windows (64, 128, ...): tops far
    apart, near window edges and at the very end."""
    g = np.random.default_rng(7)
    n = 20_000
    plan = plan_of(45, 55, 100, c=10**6)
    v = g.choice(arr([10, 50, 90]), size=n, p=[0.4985, 0.003, 0.4985])
    v[[63, 64, 127, 128, 191, 192, n - 1]] = 50
    nu = g.integers(-2, 3, size=n)
    mus = g.integers(-3, 4, size=n + 1).tolist()
    a, b = Mus(mus[1:]), Mus(mus[1:])
    got = bt.run_paper(v, nu, plan, bt.BTState(mu=mus[0]), a)
    assert same(got, bt.reference(v, nu, plan, bt.BTState(mu=mus[0]), next_mu=b)) and a.calls == b.calls
    assert 30 < int((got.outcomes == bt.TOP).sum()) < 200


# -- definitions by hand ----------------------------------------------------------------------------


def test_tct_thresholds_are_inclusive() -> None:
    plan = plan_of(20, 30, 50, c=100, c0=100)
    v = arr([19, 20, 21, 29, 30, 31, 0, 50, 25, 25])
    z = arr([0, 0, 0, 0, 0, 0, 19, -20, -6, 6])
    out = bt.run_tct(v, z, np.zeros(10, np.int64), plan, bt.BTState())
    assert out.outcomes.tolist() == [bt.L, bt.TOP, bt.TOP, bt.TOP, bt.TOP, bt.R, bt.L, bt.TOP, bt.L, bt.R]
    assert out.state.tops == 5 and not out.halted and out.answered == 10


def test_tct_halting_test_fires_at_equality_after_any_query() -> None:
    plan = plan_of(20, 30, 50, c=100, c0=5)
    state = bt.BTState(tops=2, rho_h=1)
    v = arr([0, 25, 0, 0])  # L, TOP (tops 3), L, L
    z = np.zeros(4, np.int64)
    # tops + xi >= c0 + rho = 6: at the third query (an L) 3 + 3 = 6
    res = bt.run_tct(v, z, arr([3, 2, 3, 9]), plan, state)
    assert res.halted and res.answered == 3 and res.outcomes.tolist() == [bt.L, bt.TOP, bt.L]
    assert res.state == bt.BTState(tops=3, rho_h=1)
    res = bt.run_tct(v, z, arr([3, 2, 2, 2]), plan, state)
    assert not res.halted and res.answered == 4


def test_tct_runs_no_hard_cap() -> None:
    """The round pauses on the noisy test alone: with the test silent the count passes c (a
    deterministic cap would leak once a paused round is followed by more rounds:
    docs/privacy/genericbbl.md 16; the certificate charges the probability of passing c)."""
    plan = plan_of(20, 30, 50, c=3, c0=3)
    xi = np.full(6, -100, np.int64)  # the noisy test never fires
    res = bt.run_tct(np.full(6, 25, np.int64), np.zeros(6, np.int64), xi, plan, bt.BTState(rho_h=100))
    assert not res.halted and res.answered == 6 and res.state.tops == 6
    ref = bt.reference(np.full(6, 25, np.int64), np.zeros(6, np.int64), plan, bt.BTState(rho_h=100), xi=xi)
    assert not ref.halted and ref.state.tops == 6


def test_tct_empty_batch() -> None:
    res = bt.run_tct(arr([]), arr([]), arr([]), plan_of(1, 2, 3, 5, 5), bt.BTState(tops=2, rho_h=4))
    assert res.answered == 0 and res.state == bt.BTState(tops=2, rho_h=4) and not res.halted


def test_paper_fails_exactly_at_the_c_th_top_and_draws_no_mu_for_it() -> None:
    plan = plan_of(20, 30, 50, c=7)
    mus = Mus([0] * 50)
    res = bt.run_paper(np.full(50, 25, np.int64), np.zeros(50, np.int64), plan, bt.BTState(), mus)
    assert res.halted and res.answered == 7 and res.state.tops == 7
    assert (res.outcomes == bt.TOP).all() and mus.calls == 6


def test_paper_threshold_noise_moves_both_thresholds() -> None:
    """TOP iff lo + mu <= v + nu <= hi - mu; L iff below lo + mu; R otherwise."""
    plan = plan_of(20, 30, 50, c=100)
    v = arr([22, 23, 27, 28, 18, 32])
    nu = np.zeros(6, np.int64)
    res = bt.run_paper(v, nu, plan, bt.BTState(mu=3), Mus([3] * 10))  # band [23, 27]
    assert res.outcomes.tolist() == [bt.L, bt.TOP, bt.TOP, bt.R, bt.L, bt.R]
    res = bt.run_paper(v, nu, plan, bt.BTState(mu=-2), Mus([-2] * 10))  # band [18, 32]
    assert (res.outcomes == bt.TOP).all()
    # mu beyond half the band empties it: L below lo + mu, R from there on
    res = bt.run_paper(arr([25, 25, 26]), arr([0, 0, 0]), plan, bt.BTState(mu=6), Mus([]))
    assert res.outcomes.tolist() == [bt.L, bt.L, bt.R] and res.state.tops == 0


def test_paper_restart_draws_a_fresh_threshold_after_each_top() -> None:
    plan = plan_of(20, 30, 50, c=10)
    res = bt.run_paper(np.full(3, 25, np.int64), np.zeros(3, np.int64), plan, bt.BTState(mu=0), Mus([6, 0]))
    assert res.outcomes.tolist() == [bt.TOP, bt.L, bt.L] and res.state == bt.BTState(tops=1, mu=6)


def test_paper_empty_batch() -> None:
    res = bt.run_paper(arr([]), arr([]), plan_of(1, 2, 3, 5), bt.BTState(tops=1, mu=3), Mus([]))
    assert res.answered == 0 and res.state == bt.BTState(tops=1, mu=3) and res.outcomes.dtype == np.int8


def test_int64_headroom_at_the_limits() -> None:
    """Counts up to 2^60 plus saturated noises (|z| <= 2^62) do not overflow."""
    plan = noise_plan(DEFAULT, RoundSpec(T=MAX_COUNT, lam=1, R=10, c=MAX_COUNT, eps_bt=1.0, delta_bt=None,
                                         alpha=0.1, m_S=1, m_D=1, halt_eps=1.0, halt_threshold=MAX_COUNT))
    sat = 1 << 62
    v = arr([MAX_COUNT, MAX_COUNT, 0, 0])
    z = arr([sat, -sat, sat, -sat])
    xi = arr([sat, -sat, -sat, -sat])
    assert same(bt.run_tct(v, z, xi, plan, bt.BTState(tops=MAX_COUNT - 1, rho_h=sat)),
                bt.reference(v, z, plan, bt.BTState(tops=MAX_COUNT - 1, rho_h=sat), xi=xi))
    pp = noise_plan(PAPER, RoundSpec(T=MAX_COUNT, lam=1, R=10, c=MAX_COUNT, eps_bt=1.0, delta_bt=1e-6,
                                     alpha=0.1, m_S=1, m_D=1))
    for mu in (sat, -sat):
        assert same(bt.run_paper(v, z, pp, bt.BTState(mu=mu), Mus([mu] * 5)),
                    bt.reference(v, z, pp, bt.BTState(mu=mu), next_mu=Mus([mu] * 5)))


# -- exact outcome probabilities of one query (statistical) -----------------------------------------

SPEC = RoundSpec(T=100, lam=1, R=10**6, c=10**6, eps_bt=0.5, delta_bt=1e-6, alpha=0.05, m_S=1, m_D=1,
                 halt_eps=1.0, halt_threshold=10**6)
"""T = 100, gamma = 0.05: lo = 45, hi = 55."""
VOTES = [50, 45, 44, 55, 56, 47, 40, 60, 30]


def tct_probs(v: int, plan: NoisePlan) -> list[float]:
    """P[L] = P[z < lo - v], P[R] = P[z > hi - v], TOP the rest; z ~ DLap(1/eps0)."""
    t = float(plan.query)
    p_l = dlap_cdf(plan.lo - v - 1, t)
    p_r = 1.0 - dlap_cdf(plan.hi - v, t)
    return [p_l, p_r, 1.0 - p_l - p_r]


def paper_probs(v: int, plan: NoisePlan) -> list[float]:
    """Sum over mu ~ DLap(2/eps') of the nu ~ DLap(6/eps') probabilities: L iff nu < lo + mu - v,
    TOP iff lo + mu - v <= nu <= hi - mu - v."""
    assert plan.threshold is not None
    tm, tn = float(plan.threshold), float(plan.query)
    M = int(60 * tm)  # P[|mu| > M] < e^-60
    p_l = p_top = 0.0
    for mu in range(-M, M + 1):
        w = dlap_pmf(mu, tm)
        a, b = plan.lo + mu - v, plan.hi - mu - v
        p_l += w * dlap_cdf(a - 1, tn)
        if a <= b:
            p_top += w * (dlap_cdf(b, tn) - dlap_cdf(a - 1, tn))
    return [p_l, 1.0 - p_l - p_top, p_top]


def check_outcomes(outcomes: list[int] | np.ndarray, probs: list[float], m: int, what: str) -> None:
    counts = np.bincount(np.asarray(outcomes), minlength=3)
    n = int(counts.sum())
    cells = [(i, probs[i]) for i in (bt.L, bt.R, bt.TOP)]
    for code, p in cells:
        check_binomial(int(counts[code]), n, p, m, f"{what} outcome {code}")
    keep = [i for i, p in cells if p * n >= 5]  # merge cells too rare for the chi-square
    obs = [int(counts[i]) for i in keep] + [n - sum(int(counts[i]) for i in keep)]
    pr = [probs[i] for i in keep] + [1.0 - sum(probs[i] for i in keep)]
    if pr[-1] * n < 5:
        obs, pr = obs[:-1], pr[:-1]
        obs[-1] += n - sum(obs)
        pr[-1] += 1.0 - sum(pr)
    if len(obs) > 1:
        check_chisquare(obs, pr, m, what)


@pytest.mark.statistical
def test_tct_one_query_outcome_frequencies() -> None:
    plan = noise_plan(DEFAULT, SPEC)
    assert (plan.lo, plan.hi, plan.query) == (45, 55, Fraction(2))
    n = 100_000
    m = 4 * len(VOTES)
    stream = NoiseStream.fresh(np.random.default_rng(2024), plan.query, 8192)
    for v in VOTES:
        z, stream = stream.take(n)
        res = bt.run_tct(np.full(n, v, np.int64), z, np.zeros(n, np.int64), plan, bt.BTState())
        assert res.answered == n
        check_outcomes(res.outcomes, tct_probs(v, plan), m, f"tct v={v}")


@pytest.mark.statistical
def test_paper_one_query_outcome_frequencies() -> None:
    """A fresh instance per trial (its own mu), so the trials are i.i.d."""
    plan = noise_plan(PAPER, RoundSpec(**{**SPEC.to_dict(), "eps_bt": 1.0}))
    assert (plan.query, plan.threshold) == (Fraction(6), Fraction(2))
    n = 20_000
    m = 4 * len(VOTES)
    assert plan.threshold is not None
    for v in VOTES:  # independent generators for nu and mu (a stream does not advance its generator)
        nus = NoiseStream.fresh(np.random.default_rng([77, v, 0]), plan.query, 4096).take(n)[0]
        mus = NoiseStream.fresh(np.random.default_rng([77, v, 1]), plan.threshold, 4096).take(n)[0]
        va = arr([v])
        out = [int(bt.run_paper(va, nus[j : j + 1], plan, bt.BTState(mu=int(mus[j])), _no_mu).outcomes[0])
               for j in range(n)]
        check_outcomes(out, paper_probs(v, plan), m, f"paper v={v}")


def _no_mu() -> int:
    return 0  # c is large: a top restarts, but the instance is discarded after one query


@pytest.mark.statistical
def test_tct_halting_time_law() -> None:
    """Every query a top (tops after query j = j): the round halts at the first j with
    j + xi_j >= c0 + rho_h, or at j = c. With xi ~ DLap(4/eps_h), rho_h ~ DLap(2/eps_h):
    P[J = j] = sum_rho P[rho] prod_{i<j} P[xi < c0 + rho - i] * P[xi >= c0 + rho - j]."""
    c0, c = 30, 60
    spec = RoundSpec(**{**SPEC.to_dict(), "c": c, "halt_threshold": c0, "halt_eps": 1.0})
    plan = noise_plan(DEFAULT, spec)
    assert plan.halt_query is not None and plan.halt_threshold is not None
    tx, tr = float(plan.halt_query), float(plan.halt_threshold)
    probs = np.zeros(c + 1)
    for rho in range(-int(60 * tr), int(60 * tr) + 1):
        alive = 1.0
        for j in range(1, c + 1):
            fire = 1.0 if j == c else 1.0 - dlap_cdf(c0 + rho - j - 1, tx)
            probs[j] += dlap_pmf(rho, tr) * alive * fire
            alive *= 1.0 - fire
    n = 20_000
    xis = NoiseStream.fresh(np.random.default_rng([5, 0]), plan.halt_query, 8192).take(n * c)[0].reshape(n, c)
    rhos = NoiseStream.fresh(np.random.default_rng([5, 1]), plan.halt_threshold, 8192).take(n)[0]
    v, z = np.full(c, 50, np.int64), np.zeros(c, np.int64)
    stops = np.zeros(c + 1, np.int64)
    for i in range(n):
        res = bt.run_tct(v, z, xis[i], plan, bt.BTState(rho_h=int(rhos[i])))
        assert res.halted
        stops[res.answered] += 1
    # cells: j = 1.. with expected >= 5, the rest merged at both ends
    exp = probs * n
    ok = np.flatnonzero(exp >= 20)
    lo_, hi_ = int(ok[0]), int(ok[-1])
    obs = [int(stops[: lo_ + 1].sum()), *stops[lo_ + 1 : hi_].tolist(), int(stops[hi_:].sum())]
    pr = [float(probs[: lo_ + 1].sum()), *probs[lo_ + 1 : hi_].tolist(), float(probs[hi_:].sum())]
    check_chisquare(obs, pr, 1, "halting time")
    assert math.isclose(sum(pr), 1.0, abs_tol=1e-9)



class PeekMus(Mus):
    """A source ``run_paper`` can look ahead in (as the predictor's ``_MuFeed``): ``calls`` counts
    the noises consumed, peeked ones excluded."""

    def __init__(self, values: list[int]) -> None:
        super().__init__(values)
        self.values, self.pos = list(values), 0

    def __call__(self) -> int:
        self.pos += 1
        self.calls += 1
        return self.values[self.pos - 1]

    def peek(self, k: int) -> np.ndarray:
        assert self.pos + k <= len(self.values), "looked past the noises the batch can use"
        return arr(self.values[self.pos : self.pos + k])

    def skip(self, k: int) -> None:
        assert self.pos + k <= len(self.values), "consumed more noises than there are tops"
        self.pos += k
        self.calls += k


@settings(max_examples=300, deadline=None)
@given(case=cases(paper=True), cut=st.integers(0, 150), window=st.sampled_from([1, 2, 3, 7, 256]),
       scan=st.sampled_from([1, 2, 5, 64, bt.MU_SCAN]))
def test_run_paper_windows_are_the_reference(case: dict[str, Any], cut: int, window: int, scan: int) -> None:
    """Looking ahead (windows of 1, 2, 3, 7 and 256 noises, so that windows run out mid-batch, and
    scans of 1-64 queries, so that they end before the window's noises do) gives the reference's
    outcomes and consumes the same noises in the same order, in one batch or two."""
    plan, v, nu, mus, state = case["plan"], case["v"], case["noise"], case["mus"], case["state"]
    saved, saved_min, saved_scan = bt.MU_WINDOW, bt.LOOKAHEAD_MIN_BATCH, bt.MU_SCAN
    bt.MU_WINDOW, bt.LOOKAHEAD_MIN_BATCH, bt.MU_SCAN = window, 0, scan
    try:
        a, b = PeekMus(mus[1:]), Mus(mus[1:])
        got = bt.run_paper(v, nu, plan, state, a)
        want = bt.reference(v, nu, plan, state, next_mu=b)
        assert same(got, want) and a.calls == b.calls
        k = min(cut, v.size)
        c = PeekMus(mus[1:])
        first = bt.run_paper(v[:k], nu[:k], plan, state, c)
        if not first.halted:
            second = bt.run_paper(v[k:], nu[k:], plan, first.state, c)
            assert np.array_equal(np.r_[first.outcomes, second.outcomes], got.outcomes)
            assert (second.state, second.halted) == (got.state, got.halted) and c.calls == a.calls
    finally:
        bt.MU_WINDOW, bt.LOOKAHEAD_MIN_BATCH, bt.MU_SCAN = saved, saved_min, saved_scan


def test_run_paper_windows_on_long_batches() -> None:
    """Thousands of tops, sure and unsure ones mixed (noise spread 9 against slacks 0..40), the c-th
    top near the end: the windowed path equals the reference and consumes the same noises."""
    g = np.random.default_rng(3)
    n = 30_000
    plan = plan_of(40, 60, 100, c=4_000)
    v = g.integers(20, 81, size=n)
    nu = g.integers(-3, 4, size=n)
    mus = g.integers(-4, 5, size=n + 1).tolist()
    a, b = PeekMus(mus[1:]), Mus(mus[1:])
    got = bt.run_paper(v, nu, plan, bt.BTState(mu=mus[0]), a)
    want = bt.reference(v, nu, plan, bt.BTState(mu=mus[0]), next_mu=b)
    assert same(got, want) and a.calls == b.calls
    assert got.halted and 2_000 < got.answered < n
    saved = bt.MU_SCAN
    bt.MU_SCAN = 300  # scans end long before the windows' noises run out
    try:
        c = PeekMus(mus[1:])
        assert same(bt.run_paper(v, nu, plan, bt.BTState(mu=mus[0]), c), want) and c.calls == b.calls
    finally:
        bt.MU_SCAN = saved


def test_run_paper_windows_narrow_band_and_no_tops() -> None:
    """A band narrower than the noises' spread (no query is ever sure: every top is searched) and a
    batch with no top (no noise is looked at): the reference's outcomes and draws."""
    g = np.random.default_rng(5)
    n = 5_000
    plan = plan_of(24, 26, 50, c=10**6)  # band 2: slack <= 1
    v = g.integers(20, 31, size=n)
    nu = g.integers(-1, 2, size=n)
    mus = g.integers(-6, 2, size=n + 1).tolist()  # most noises let a top through, a few (1) only the band centre
    a, b = PeekMus(mus[1:]), Mus(mus[1:])
    got = bt.run_paper(v, nu, plan, bt.BTState(mu=mus[0]), a)
    assert same(got, bt.reference(v, nu, plan, bt.BTState(mu=mus[0]), next_mu=b)) and a.calls == b.calls
    assert int((got.outcomes == bt.TOP).sum()) > 100

    class Blind(PeekMus):
        def peek(self, k: int) -> np.ndarray:
            raise AssertionError("looked at a noise in a batch without tops")

    none = bt.run_paper(np.full(500, 0, np.int64), np.zeros(500, np.int64), plan, bt.BTState(mu=3), Blind([]))
    assert (none.outcomes == bt.L).all() and none.state == bt.BTState(mu=3)


def test_run_paper_with_the_round_already_failed_takes_the_one_noise_path() -> None:
    """A state at or past c tops (refused on restore, ``Predictor.from_state``) is not fed to the
    look-ahead: the one-noise path answers it as it always has."""
    plan = plan_of(20, 30, 50, c=3)
    a, b = PeekMus([1, 2, 3]), Mus([1, 2, 3])
    state = bt.BTState(tops=3, mu=0)
    v = np.full(500, 25, np.int64)
    got = bt.run_paper(v, np.zeros(500, np.int64), plan, state, a)
    assert same(got, bt.reference(v, np.zeros(500, np.int64), plan, state, next_mu=b)) and a.calls == 0


def test_zero_window_or_scan_constants_still_end() -> None:
    """Review 6, F4: a window or scan of 0 is taken as 1 (no endless loop)."""
    g = np.random.default_rng(9)
    n = 2_000
    plan = plan_of(40, 60, 100, c=10**6)
    v = g.integers(20, 81, size=n)
    nu = g.integers(-3, 4, size=n)
    mus = g.integers(-4, 5, size=n + 1).tolist()
    want = bt.reference(v, nu, plan, bt.BTState(mu=mus[0]), next_mu=Mus(mus[1:]))
    saved = bt.MU_WINDOW, bt.MU_SCAN
    try:
        for window, scan in ((0, bt.MU_SCAN), (bt.MU_WINDOW, 0)):
            bt.MU_WINDOW, bt.MU_SCAN = window, scan
            assert same(bt.run_paper(v, nu, plan, bt.BTState(mu=mus[0]), PeekMus(mus[1:])), want)
    finally:
        bt.MU_WINDOW, bt.MU_SCAN = saved
