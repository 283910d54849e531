"""The exponential mechanism against brute force: on a small grid every hypothesis can be
enumerated and its exact probability exp(-eps E / 2) / Z computed; the sampler's frequencies must
fit (chi-square, fixed seeds, p-value floor 1e-6). Plus exactness of counts beyond 2^53."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from everlast.engine.learner.cells import cells
from everlast.engine.learner.exact import Bits, DyadicSampler
from everlast.engine.learner.ordinals import ordinal, to_ordinal
from everlast.engine.learner.release import sample
from everlast.engine.learner.sampler import interval_marginal_bounds

G = 6  # grid positions 0..5, cuts 0..6
POS = np.array([0, 1, 1, 3, 3, 5], dtype=np.int64)
Y = np.array([0, 1, 0, 1, 1, 0], dtype=np.int8)  # ties at 1 and 3, not realizable by any class


def _errors(labels: np.ndarray, pos: np.ndarray, y: np.ndarray) -> int:
    return int((labels[pos] != y).sum())


def brute_force(concept: str, pos: np.ndarray, y: np.ndarray, eps: float, d: int = 1) -> dict[tuple[int, ...], float]:
    """Exact EM probabilities of every parameter tuple (lo, hi, sign, coord) on the grid."""
    grid = np.arange(G)
    w: dict[tuple[int, ...], float] = {}
    if concept == "intervals":
        for lo, hi in itertools.combinations_with_replacement(range(G + 1), 2):
            lab = ((grid >= lo) & (grid < hi)).astype(np.int8)
            w[(lo, hi, 1, 0)] = math.exp(-eps * _errors(lab, pos, y) / 2)
    else:
        P = pos if pos.ndim == 2 else pos[:, None]
        for coord, c, s in itertools.product(range(d), range(G + 1), (1, -1)):
            up = grid >= c
            w[(c, c, s, coord)] = math.exp(-eps * _errors((up if s > 0 else ~up).astype(np.int8), P[:, coord], y) / 2)
    z = sum(w.values())
    return {k: v / z for k, v in w.items()}


def _chi2(freq: dict[tuple[int, ...], int], probs: dict[tuple[int, ...], float], n: int) -> float:
    assert set(freq) <= set(probs), "sampled a hypothesis outside the class"
    keys = sorted(probs)
    obs = np.array([freq.get(k, 0) for k in keys], dtype=float)
    exp = np.array([probs[k] * n for k in keys])
    small = exp < 5  # pool rare cells so the chi-square approximation holds
    if small.any():
        obs = np.append(obs[~small], obs[small].sum())
        exp = np.append(exp[~small], exp[small].sum())
    return float(stats.chisquare(obs, exp).pvalue)


def _draws(concept: str, pos: np.ndarray, y: np.ndarray, eps: float, n: int, seed: int,
           fast: bool = True) -> dict[tuple[int, ...], int]:
    bits = Bits(np.random.default_rng(seed))
    freq: dict[tuple[int, ...], int] = {}
    for _ in range(n):
        h = sample(concept, pos, y, 0, G - 1, eps, bits, fast=fast)
        key = (h.lo, h.hi, h.sign, h.coord)
        freq[key] = freq.get(key, 0) + 1
    return freq


@pytest.mark.parametrize("concept", ["thresholds", "intervals"])
@pytest.mark.parametrize("eps", [0.7, 3.0])
def test_against_brute_force(concept: str, eps: float) -> None:
    n = 3000
    probs = brute_force(concept, POS, Y, eps)
    assert _chi2(_draws(concept, POS, Y, eps, n, seed=17), probs, n) > 1e-6


def test_stumps_against_brute_force() -> None:
    pos = np.stack([POS, POS[::-1]], axis=1)
    n = 3000
    probs = brute_force("stumps", pos, Y, 1.5, d=2)
    assert _chi2(_draws("stumps", pos, Y, 1.5, n, seed=18), probs, n) > 1e-6


def test_exact_fallback_alone_against_brute_force() -> None:
    """With the float fast path off every cell is chosen by the integer path."""
    n = 2000
    for concept in ("thresholds", "intervals"):
        probs = brute_force(concept, POS, Y, 2.0)
        assert _chi2(_draws(concept, POS, Y, 2.0, n, seed=19, fast=False), probs, n) > 1e-6


@pytest.mark.statistical
@pytest.mark.parametrize("concept", ["thresholds", "intervals"])
def test_against_brute_force_many_draws(concept: str) -> None:
    n = 25000
    for eps in (0.2, 1.0, 6.0):
        probs = brute_force(concept, POS, Y, eps)
        assert _chi2(_draws(concept, POS, Y, eps, n, seed=23), probs, n) > 1e-6


def test_same_bits_same_hypothesis() -> None:
    for concept in ("thresholds", "intervals"):
        a = sample(concept, POS, Y, 0, G - 1, 1.0, Bits(np.random.default_rng(5)))
        b = sample(concept, POS, Y, 0, G - 1, 1.0, Bits(np.random.default_rng(5)))
        assert a == b


# -- counts beyond 2^53 ------------------------------------------------------------------------------


def test_cell_sizes_are_exact_beyond_2_53() -> None:
    x = np.array([-1.0, 0.0, 1e-300, 1.0, np.finfo(float).max])
    o = [ordinal(float(v)) for v in x]
    lo, hi = -0x7FEF_FFFF_FFFF_FFFF, 0x7FEF_FFFF_FFFF_FFFF
    c = cells(to_ordinal(x), np.zeros(5, np.int8), lo, hi)
    want = [o[0] - (lo - 1)] + [o[i + 1] - o[i] for i in range(4)] + [(hi + 1) - o[4]]
    assert [int(v) for v in c.sizes[0].tolist()] == want
    assert sum(want) == 2**64 - 2**53  # |X| + 1 cuts in all
    assert max(want) >= 2**62
    # float64 cannot hold these counts; the sampler's integer bounds use them exactly
    s = np.array([2**53 + 1, 2**64 - 2**53 - 1, 1], dtype=np.uint64)
    assert float(s[0]) == float(2**53)  # the float view rounds ...
    clo, chi = DyadicSampler(s, np.zeros(3, np.int64))._bounds(8)
    assert clo == chi == list(itertools.accumulate(int(v) << 8 for v in s.tolist()))  # ... the bounds do not


def test_interval_marginal_bounds_enclose_the_exact_marginal() -> None:
    from fractions import Fraction

    rng = np.random.default_rng(9)
    for _ in range(30):
        K = int(rng.integers(1, 12))
        sizes = [int(v) for v in rng.integers(0, 1 << 62, K, dtype=np.uint64)]
        sizes[0] = 2**64 - 2**53 - 1
        ma = [int(v) for v in rng.integers(0, 300, K)]
        mb = [int(v) for v in rng.integers(0, 300, K)]
        md = int(rng.integers(0, 300))
        exact = []
        for a in range(K):
            g = sum(Fraction(sizes[b], 1 << mb[b]) for b in range(a + 1, K))
            exact.append(Fraction(sizes[a], 1 << ma[a]) * g + Fraction(sizes[a] * (sizes[a] + 1) // 2, 1 << md))
        cum = list(itertools.accumulate(exact))
        for p in (64, 200):
            clo, chi = interval_marginal_bounds(sizes, ma, mb, md, p)
            # a common unknown scale: the ratios C_k / Z must lie within the bounds' ratios
            for k in range(K):
                assert Fraction(clo[k], chi[-1]) <= cum[k] / cum[-1] <= Fraction(chi[k], clo[-1])
            assert Fraction(chi[-1] - clo[-1], clo[-1]) < Fraction(4 * K, 2**p)


@pytest.mark.statistical
def test_uniform_inside_a_cell_of_2_62_cuts() -> None:
    """All cuts of a huge cell equally likely: the cut's offset in the cell, in 16 bins."""
    x = np.array([0.0, 1.0])
    y = np.array([0, 1], np.int8)
    lo, hi = -0x7FEF_FFFF_FFFF_FFFF, 0x7FEF_FFFF_FFFF_FFFF
    bits = Bits(np.random.default_rng(31))
    size = ordinal(1.0) - ordinal(0.0)
    offs: list[int] = []
    while len(offs) < 4000:
        h = sample("thresholds", to_ordinal(x), y, lo, hi, 60.0, bits)  # eps 60: the 0-error cell wins
        if h.sign == 1 and ordinal(0.0) < h.lo <= ordinal(1.0):
            offs.append((h.lo - ordinal(0.0) - 1) * 16 // size)
    assert stats.chisquare(np.bincount(offs, minlength=16)).pvalue > 1e-6


EDGE_CASES = [
    (np.array([2], np.int64), np.array([1], np.int8)),  # one example
    (np.array([0, 0, 5, 5], np.int64), np.array([0, 0, 0, 0], np.int8)),  # all zeros, ties at the ends
    (np.array([1, 2, 3, 4], np.int64), np.array([1, 1, 1, 1], np.int8)),  # all ones
    (np.array([3, 3, 3, 3, 3], np.int64), np.array([1, 0, 1, 0, 1], np.int8)),  # one position, both labels
]


@pytest.mark.parametrize("case", range(len(EDGE_CASES)))
@pytest.mark.parametrize("concept", ["thresholds", "intervals"])
def test_edge_datasets_against_brute_force(case: int, concept: str) -> None:
    pos, y = EDGE_CASES[case]
    n = 1500
    probs = brute_force(concept, pos, y, 2.5)
    assert _chi2(_draws(concept, pos, y, 2.5, n, seed=40 + case), probs, n) > 1e-6


def test_large_epsilon_and_many_examples_stay_exact_and_fast() -> None:
    """eps n near the engine's limit: exponents in the thousands, weights far below float range."""
    rng = np.random.default_rng(3)
    x = rng.random(20_000)
    y = (x >= 0.5).astype(np.int8)
    y[:50] ^= 1  # not realizable: the best cut still has 50 errors
    bits = Bits(np.random.default_rng(4))
    for concept in ("thresholds", "intervals"):
        h = sample(concept, to_ordinal(x), y, -0x7FEF_FFFF_FFFF_FFFF, 0x7FEF_FFFF_FFFF_FFFF, 400.0, bits)
        assert h.lo <= h.hi
