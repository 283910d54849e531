"""engine.reservoir: D-hat as positions drawn at the start of a round."""

from __future__ import annotations

import numpy as np
import pytest

from engine.reservoir import Reservoir


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


def test_every_query_kept_draws_nothing() -> None:
    g = np.random.default_rng(3)
    before = g.bit_generator.state
    Reservoir.draw(1000, 1000, 2, g)
    assert g.bit_generator.state == before
