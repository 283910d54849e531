"""Lemma Q (discrete), checked numerically and independently of the planner's code: for random
(eps0, m, band position, shift) the explicit decomposition of the two 3-outcome laws (L, TOP, R)
of the per-query mechanism is built in 80-digit arithmetic, every condition of a q-target is
verified, and the TOP fraction of the B-parts is at least ``target_charging.q_target`` (and the
bound is attained). The laws come from the two-sided geometric pmf, P[Z = z] = (1-r)/(1+r) r^|z|,
r = e^{-eps0}, summed in closed form here (not from engine.planner)."""

from __future__ import annotations

import random

import mpmath as mp
import pytest

from everlast.engine.planner import target_charging as tc

DPS = 80
TOL = mp.mpf(10) ** -60


def _le(x: int, r: mp.mpf) -> mp.mpf:
    """P[Z <= x]: sum_{z <= x} of the pmf, x an integer."""
    if x < 0:
        return r ** (-x) / (1 + r)
    return 1 - r ** (x + 1) / (1 + r)


def _between(lo: int, hi: int, r: mp.mpf) -> mp.mpf:
    """P[lo <= Z <= hi] without cancellation in either tail."""
    if lo > hi:
        return mp.mpf(0)
    if lo >= 1:
        return r**lo / (1 + r) * (1 - r ** (hi - lo + 1))
    if hi <= -1:
        return r ** (-hi) / (1 + r) * (1 - r ** (hi - lo + 1))
    return 1 - _le(lo - 1, r) - _le(-(hi + 1), r)  # P[Z >= hi+1] = P[Z <= -(hi+1)]


def _laws(eps0: mp.mpf, m: int, a: int, s: int) -> tuple[list[mp.mpf], list[mp.mpf]]:
    """(L, TOP, R) probabilities: world 0 has the band at noise values {a, ..., a+m-1} (the count v
    with lo = v + a, hi = lo + m - 1); world 1's count is v + s, so its band is shifted by -s."""
    r = mp.e ** (-eps0)

    def law(b: int) -> list[mp.mpf]:
        lo = a - b
        hi = lo + m - 1
        return [_le(lo - 1, r), _between(lo, hi, r), _le(-(hi + 1), r)]

    return law(0), law(s)


def _pmf(z: int, r: mp.mpf) -> mp.mpf:
    return (1 - r) / (1 + r) * r ** abs(z)


def _differences(m: int, a: int, s: int, r: mp.mpf) -> tuple[mp.mpf, mp.mpf]:
    """(d_L, d_R) = P0 - P1 on L and R, as single point masses (a difference of two tail sums
    would cancel when both are near 1): world 1's band is world 0's shifted by -s, so exactly one
    noise value changes side at each edge."""
    lo, hi = a, a + m - 1
    d_l = _pmf(lo - 1, r) if s == 1 else -_pmf(lo, r)
    d_r = -_pmf(hi, r) if s == 1 else _pmf(hi + 1, r)
    return d_l, d_r


def _decompose(P0: list[mp.mpf], P1: list[mp.mpf], d: tuple[mp.mpf, mp.mpf],
               u: mp.mpf) -> tuple[list[mp.mpf], list[mp.mpf]]:
    """Lemma Q's B-parts: on a non-target outcome the world with more mass gets u|d|/(u-1), the
    other |d|/(u-1); all TOP mass goes to B."""
    B0, B1 = [mp.mpf(0)] * 3, [mp.mpf(0)] * 3
    for y, dy in ((0, d[0]), (2, d[1])):
        big, small = u * abs(dy) / (u - 1), abs(dy) / (u - 1)
        B0[y], B1[y] = (big, small) if dy >= 0 else (small, big)
    B0[1], B1[1] = P0[1], P1[1]
    return B0, B1


def _configs(n: int, seed: int) -> list[tuple[float, int, int, int]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        eps0 = 10 ** rng.uniform(-6.0, 0.5)
        m = rng.choice([rng.randint(1, 12), rng.randint(1, 400), int(10 ** rng.uniform(2, 8))])
        a = rng.randint(-m - 60, 60) if rng.random() < 0.5 else rng.choice([-m, -m + 1, 0, 1, -m - 1])
        out.append((eps0, m, a, rng.choice([-1, 1])))
    return out


@pytest.mark.parametrize(("eps0", "m", "a", "s"), _configs(400, seed=13))
def test_decomposition_is_a_q_target(eps0: float, m: int, a: int, s: int) -> None:
    with mp.workdps(DPS):
        e = mp.mpf(eps0)
        u = mp.e**e
        P0, P1 = _laws(e, m, a, s)
        assert abs(sum(P0) - 1) < TOL and abs(sum(P1) - 1) < TOL
        for y in range(3):  # the per-query mechanism is eps0-DP (count sensitivity 1)
            assert P0[y] <= u * P1[y] * (1 + TOL) and P1[y] <= u * P0[y] * (1 + TOL)
        d = _differences(m, a, s, mp.e ** (-e))
        for y, dy in ((0, d[0]), (2, d[1])):  # the point masses are the laws' differences
            assert abs(P0[y] - P1[y] - dy) <= TOL
        B0, B1 = _decompose(P0, P1, d, u)
        # the common parts are non-negative and equal in both worlds (TOP has none)
        for y in range(3):
            c0, c1 = P0[y] - B0[y], P1[y] - B1[y]
            assert c0 >= -TOL and abs(c0 - c1) <= TOL
        # equal B-mass (1 - p): TOP's difference balances the edges' (relative: all may be tiny)
        assert abs(sum(B0) - sum(B1)) <= TOL * sum(B0)
        for y in range(3):  # the B-parts are eps0-indistinguishable outcome by outcome
            assert B0[y] <= u * B1[y] * (1 + TOL) and B1[y] <= u * B0[y] * (1 + TOL)
        # TOP's share of each B-part is at least Lemma Q's q
        q = min(B0[1] / sum(B0), B1[1] / sum(B1))
        q_claim = (1 - mp.e ** (-e * m)) / (1 + u)
        assert q >= q_claim * (1 - TOL)
        # the planner's q is that formula rounded down
        assert tc.q_target(eps0, m) <= q_claim
        assert tc.q_target(eps0, m) == pytest.approx(float(q_claim), rel=1e-12)


def test_the_bound_is_attained_when_the_count_is_above_the_band() -> None:
    """Case 2 of the proof (the vote above the band): the decomposition gives q exactly."""
    with mp.workdps(DPS):
        worst = mp.mpf(10)
        for eps0, m, _, _ in _configs(200, seed=5):
            e = mp.mpf(eps0)
            a = -m - 5  # band entirely below the count in world 0
            P0, P1 = _laws(e, m, a, 1)
            B0, B1 = _decompose(P0, P1, _differences(m, a, 1, mp.e ** (-e)), mp.e**e)
            q = min(B0[1] / sum(B0), B1[1] / sum(B1))
            worst = min(worst, q / ((1 - mp.e ** (-e * m)) / (1 + mp.e**e)))
        assert abs(worst - 1) < mp.mpf(10) ** -40
