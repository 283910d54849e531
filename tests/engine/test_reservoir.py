"""engine.reservoir: D-hat as positions drawn at the start of a round."""

from __future__ import annotations

import numpy as np
import pytest

from everlast.engine.reservoir import Reservoir


@pytest.mark.parametrize("R,m", [(10**12, 500), (10**6, 10**6), (1000, 999), (1000, 600), (1000, 30), (5, 0)])
def test_draw_and_fill(R: int, m: int) -> None:
    r = Reservoir.draw(R, m, 1, np.random.default_rng(0))
    pos = r.positions
    assert pos.dtype == np.int64 and pos.size == m and (np.diff(pos) > 0).all()
    assert m == 0 or (pos[0] >= 0 and pos[-1] < R)
    if R <= 10**6:  # offer the whole round in uneven batches: exactly the drawn positions are kept
        x = np.arange(R, dtype=np.float64)
        for a, b in [(0, 7), (7, R // 2), (R // 2, R)]:
            r.offer(a, x[a:b])
        assert r.full
        np.testing.assert_array_equal(r.contents(), pos.astype(np.float64))


def test_rounds_beyond_2_32_queries_draw_in_memory_of_m() -> None:
    """R > 2^32 (a planned round) with a small m: positions only, never an R-element array."""
    import tracemalloc

    tracemalloc.start()
    r = Reservoir.draw(2**62, 4000, 2, np.random.default_rng(5))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert r.positions.size == 4000 and r.positions[-1] > 2**32
    assert peak < 4_000_000, peak


def test_every_query_kept_draws_nothing() -> None:
    g = np.random.default_rng(3)
    before = g.bit_generator.state
    Reservoir.draw(1000, 1000, 2, g)
    assert g.bit_generator.state == before


def test_roundtrip_keeps_what_was_offered() -> None:
    for R, m in [(50, 50), (50, 20), (50, 0)]:
        r = Reservoir.draw(R, m, 2, np.random.default_rng(1))
        x = np.arange(2 * R, dtype=np.float64).reshape(R, 2)
        r.offer(0, x[:30])
        back = Reservoir.from_dict(r.to_dict(), 2)
        np.testing.assert_array_equal(back.positions, r.positions)
        np.testing.assert_array_equal(back.contents(), r.contents())
        back.offer(30, x[30:])
        r.offer(30, x[30:])
        assert back.full and r.full
        np.testing.assert_array_equal(back.contents(), r.contents())
