"""engine.concepts.random_order: exact uniform orders and subsets (the transition's sampler)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats

import everlast.engine.concepts.random_order as ro
from everlast.engine.concepts.random_order import first_distinct, packed_order, random_order, sorted_subset


@pytest.mark.parametrize("n,k", [(0, 0), (1, 1), (7, 3), (200_000, 150_000),
                                 (200_000, 1000)])
def test_random_order_is_an_ordered_subset(n: int, k: int) -> None:
    o = random_order(n, k, np.random.default_rng(n + k))
    assert o.dtype == np.uint32 and o.shape == (k,)
    assert np.unique(o).size == k and (o.size == 0 or int(o.max()) < n)


@pytest.mark.parametrize("key_bits", [1, 2, 8, 32])
def test_packed_order_is_a_permutation_with_any_number_of_ties(key_bits: int) -> None:
    n = 5000
    for seed in range(5):
        o = packed_order(n, n, np.random.default_rng(seed), key_bits=key_bits)
        np.testing.assert_array_equal(np.sort(o), np.arange(n))


def test_packed_order_is_deterministic_given_the_stream() -> None:
    a = packed_order(3000, 3000, np.random.default_rng(5), key_bits=3)
    b = packed_order(3000, 3000, np.random.default_rng(5), key_bits=3)
    np.testing.assert_array_equal(a, b)


def _chi2_uniform(counts: Counter[tuple[int, ...]], outcomes: list[tuple[int, ...]], draws: int) -> float:
    observed = np.array([counts[o] for o in outcomes])
    assert observed.sum() == draws
    return float(stats.chisquare(observed).pvalue)


@pytest.mark.statistical
@pytest.mark.parametrize("key_bits", [1, 2, 32])
def test_packed_order_is_uniform(key_bits: int) -> None:
    """All 5! = 120 orders of range(5), including when most keys tie (key_bits = 1: the order
    is then mostly made by the tie-breaking step): chi-square at alpha = 1e-6."""
    n, draws = 5, 60_000
    g = np.random.default_rng(100 + key_bits)
    counts = Counter(tuple(packed_order(n, n, g, key_bits=key_bits).tolist()) for _ in range(draws))
    outcomes = list(itertools.permutations(range(n)))
    assert set(counts) <= set(outcomes)
    assert _chi2_uniform(counts, outcomes, draws) > 1e-6


@pytest.mark.statistical
def test_packed_order_prefix_is_a_uniform_ordered_subset() -> None:
    n, k, draws = 7, 2, 42_000
    g = np.random.default_rng(3)
    counts = Counter(tuple(packed_order(n, k, g, key_bits=2).tolist()) for _ in range(draws))
    outcomes = list(itertools.permutations(range(n), k))
    assert len(outcomes) == math.perm(n, k)
    assert _chi2_uniform(counts, outcomes, draws) > 1e-6


@pytest.mark.parametrize("n,k", [(0, 0), (10, 0), (10, 10), (10, 7), (10, 3), (100_000, 99_000), (100_000, 60_000),
                                 (100_000, 50_000), (100_000, 10_000), (100_000, 2001), (100_000, 100)])
def test_sorted_subset(n: int, k: int) -> None:
    s = sorted_subset(n, k, np.random.default_rng(k))
    assert s.dtype == np.int64 and s.shape == (k,)
    assert (np.diff(s) > 0).all() and (k == 0 or (s[0] >= 0 and s[-1] < n))


@pytest.mark.statistical
@pytest.mark.parametrize("k", [1, 2, 4])
def test_sorted_subset_is_uniform(k: int) -> None:
    """Each k-subset of range(5) (k = 1, 2: the first distinct values of i.i.d. draws; k = 4
    through the complement)."""
    n, draws = 5, 30_000
    g = np.random.default_rng(k)
    counts = Counter(tuple(sorted_subset(n, k, g).tolist()) for _ in range(draws))
    outcomes = list(itertools.combinations(range(n), k))
    assert _chi2_uniform(counts, outcomes, draws) > 1e-6


@pytest.mark.statistical
def test_first_distinct_is_a_uniform_subset_and_keeps_first_appearances() -> None:
    """All 56 3-subsets of range(8) (chi-square at alpha 1e-6); and the values come in order of
    first appearance in the i.i.d. sequence, whatever the batch sizes."""
    n, k, draws = 8, 3, 56_000
    g = np.random.default_rng(12)
    counts = Counter(tuple(sorted(first_distinct(n, k, g).tolist())) for _ in range(draws))
    assert _chi2_uniform(counts, list(itertools.combinations(range(n), k)), draws) > 1e-6


def test_first_distinct_is_the_first_k_distinct_values_of_the_stream() -> None:
    for n, k in [(10, 5), (1000, 500), (2**40, 3000)]:
        got = first_distinct(n, k, np.random.default_rng(n))
        seq = np.random.default_rng(n).integers(0, n, size=20 * k + 200, dtype=np.int64)
        _, first = np.unique(seq, return_index=True)
        np.testing.assert_array_equal(got, seq[np.sort(first)][:k])


def test_subsets_of_huge_ranges_use_memory_in_k_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """R far beyond 2^32 with m above R/50 (forced here with a smaller k: the same code path), and
    numpy's choice for small m: peak memory stays a few bytes per kept position, never ~8 R."""
    import tracemalloc

    n = 2**40 + 12345
    for ratio, k in [(ro.CHOICE_RATIO, 5000), (2**41, 20_000)]:  # choice; first_distinct
        monkeypatch.setattr(ro, "CHOICE_RATIO", ratio)
        tracemalloc.start()
        s = sorted_subset(n, k, np.random.default_rng(1))
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert s.size == k and (np.diff(s) > 0).all() and s[-1] > 2**32
        assert peak < 200 * k, peak


def test_generators_without_64_bit_words_are_refused() -> None:
    """packed_order reads raw outputs as 64-bit words: MT19937's 32-bit outputs would leave every
    other key 0 (the order far from uniform), so it is refused by name."""
    with pytest.raises(TypeError, match="MT19937"):
        packed_order(10, 10, np.random.Generator(np.random.MT19937(0)))
    for bg in (np.random.PCG64(0), np.random.PCG64DXSM(0), np.random.SFC64(0), np.random.Philox(0)):
        o = packed_order(10, 10, np.random.Generator(bg))
        np.testing.assert_array_equal(np.sort(o), np.arange(10))


def test_bad_sizes() -> None:
    g = np.random.default_rng(0)
    for n, k in [(3, 4), (3, -1)]:
        with pytest.raises(ValueError):
            random_order(n, k, g)
        with pytest.raises(ValueError):
            sorted_subset(n, k, g)
    with pytest.raises(ValueError):
        sorted_subset(2**62 + 1, 1, g)
    with pytest.raises(ValueError):
        first_distinct(10, 6, g)


def test_huge_ranges() -> None:
    """Round lengths R far beyond 2^32 (D-hat a tiny subset of them): the reservoir's positions."""
    s = sorted_subset(10**12, 1000, np.random.default_rng(0))
    assert s.size == 1000 and (np.diff(s) > 0).all() and s[-1] > 2**32
    with pytest.raises(ValueError):
        random_order(2**32 + 1, 10, np.random.default_rng(0))


@pytest.mark.parametrize("n", [1, 6, 7, 13, 40])
def test_keys_drawn_in_chunks_are_the_keys_of_one_draw(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """``packed_order`` fills the keys ``KEY_CHUNK`` at a time; the words (and so the order and the
    stream after it) are those of one ``random_raw`` call, for odd and even n and a final partial chunk."""
    whole = packed_order(n, n, np.random.default_rng(n), key_bits=3)
    g_whole = np.random.default_rng(n)
    packed_order(n, n, g_whole, key_bits=3)
    monkeypatch.setattr(ro, "KEY_CHUNK", 6)
    g = np.random.default_rng(n)
    np.testing.assert_array_equal(packed_order(n, n, g, key_bits=3), whole)
    assert g.bit_generator.state == g_whole.bit_generator.state


def test_large_orders_come_as_views_and_small_ones_contiguous(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ro, "CONTIGUOUS_MAX", 100)
    small = packed_order(500, 100, np.random.default_rng(1))
    large = packed_order(500, 101, np.random.default_rng(1))
    assert small.flags.c_contiguous and not large.flags.c_contiguous
    np.testing.assert_array_equal(small, large[:100])


def _shuffle_runs_reference(halves: np.ndarray, rng: np.random.Generator) -> None:
    """``_shuffle_runs`` as first written (its run members from two more passes over all n words)."""
    lo_i, hi_i = ro._LO, ro._HI
    hi = halves[:, hi_i]
    ties = np.zeros(hi.size, dtype=bool)
    np.equal(hi[1:], hi[:-1], out=ties[1:])
    if not ties.any():
        return
    in_run = ties.copy()
    in_run[:-1] |= ties[1:]
    members = np.flatnonzero(in_run)
    run = np.cumsum(~ties[members])
    low = halves[members, lo_i]
    while True:
        u = rng.random(members.size)
        order = np.lexsort((u, run))
        us, rs = u[order], run[order]
        if not np.any((us[1:] == us[:-1]) & (rs[1:] == rs[:-1])):
            break
    halves[members, lo_i] = low[order]


@pytest.mark.parametrize("key_bits", [32, 12, 3, 1])
def test_run_shuffle_matches_its_reference(key_bits: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same orders, tie for tie, as the first form of the run shuffle (the state format holds)."""
    for n in (1, 2, 5, 64, 3000):
        for seed in range(4):
            got = ro.packed_order(n, n, np.random.default_rng(seed), key_bits=key_bits)
            with monkeypatch.context() as m:
                m.setattr(ro, "_shuffle_runs", _shuffle_runs_reference)
                want = ro.packed_order(n, n, np.random.default_rng(seed), key_bits=key_bits)
            assert np.array_equal(got, want)
