"""The vote count's search (``engine.concepts.thresholds.sorted_search``): the same integers as
``np.searchsorted`` on every path (plain, sorted needles, values placed among the needles)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from everlast.engine.concepts.intervals import IntervalEnsemble
from everlast.engine.concepts.thresholds import SORTED_SEARCH_MIN_BATCH, SORTED_SEARCH_MIN_T, sorted_search

SPECIAL = [0.0, -0.0, 0.25, 0.5, 1.0, np.inf, -np.inf]


def values(g: np.random.Generator, n: int, pool: int) -> np.ndarray:
    """n values with many repeats: draws from a pool of ``pool`` values and the special ones."""
    base = np.r_[g.random(pool).round(3), SPECIAL]
    return g.choice(base, size=n)


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1),
       T=st.sampled_from([1, 5, 64, 300, SORTED_SEARCH_MIN_T - 1, SORTED_SEARCH_MIN_T, 7000]),
       n=st.sampled_from([0, 1, SORTED_SEARCH_MIN_BATCH - 1, SORTED_SEARCH_MIN_BATCH, 700, 20_000]),
       side=st.sampled_from(["left", "right"]), pool=st.sampled_from([3, 50, 10_000]))
def test_sorted_search_is_searchsorted(seed: int, T: int, n: int, side: Literal["left", "right"], pool: int) -> None:
    g = np.random.default_rng(seed)
    t = np.sort(values(g, T, pool))
    x = values(g, n, pool)
    got = sorted_search(t, x, side)
    assert got.dtype == np.int64
    assert np.array_equal(got, np.searchsorted(t, x, side=side))


@pytest.mark.parametrize("T", [10, 100, 5000])
@pytest.mark.parametrize("n", [300, 20_000])
def test_interval_votes_are_the_two_searches(T: int, n: int) -> None:
    g = np.random.default_rng(T + n)
    a = values(g, T, 40)
    b = a + g.choice([0.0, 0.1], size=T)  # a - inf stays -inf: an interval (-inf, -inf] holds nothing
    b[g.random(T) < 0.1] = np.inf
    ens = IntervalEnsemble(np.sort(a), np.sort(b))
    x = values(g, n, 40)
    want = np.searchsorted(ens.a, x, side="right") - np.searchsorted(ens.b, x, side="left")
    assert np.array_equal(ens.votes(x), want)


@pytest.mark.parametrize("shape", [(600, 1), (20, 30), (2, 3, 100)])
def test_any_shape_of_needles_as_searchsorted_takes(shape: tuple[int, ...]) -> None:
    g = np.random.default_rng(len(shape))
    t = np.sort(values(g, 500, 40))
    x = values(g, int(np.prod(shape)), 40).reshape(shape)
    assert np.array_equal(sorted_search(t, x, "right"), np.searchsorted(t, x, side="right"))
    ens = IntervalEnsemble(t, t + 0.1)
    want = np.searchsorted(ens.a, x, side="right") - np.searchsorted(ens.b, x, side="left")
    assert np.array_equal(ens.votes(x), want)
