"""The served private learner behind the peers' interface (``peers.served_learner``): the engine's
mechanism on all finite float64 or on a grid presented as a range of consecutive doubles."""

from __future__ import annotations

import numpy as np
import pytest

from everlast.adversary_sim.iid import make_task
from everlast.engine.concepts import Thresholds
from everlast.peers import evaluate, registry
from everlast.peers.base import Grid
from everlast.peers.served_learner import ServedLearner, expected_error_bound, n_required


@pytest.mark.parametrize("size", [None, 2**8, 2**32, 2**62])
def test_a_threshold_on_the_grid_index_and_accurate_at_its_n(size: int | None) -> None:
    task = make_task(Thresholds(), "uniform", 0)
    grid = None if size is None else Grid(0.0, 1.0, size)
    n = n_required(1.0, 0.1, grid)
    peer = registry.build("served_learner", "thresholds", n, 1.0, 1e-6, 0.1, seed=3, task=task,
                          **({} if size is None else {"grid_size": size}))
    assert isinstance(peer, ServedLearner) and peer.n == n and peer.privacy.epsilon == 1.0
    assert peer.privacy.delta == 0.0 and peer.privacy.max_queries is None and not peer.exhausted
    r = evaluate.run_peer(peer, task, 20_000, seed=4)
    assert r["answered"] == 20_000 and r["error_rate"] <= 0.1
    assert registry.error_bound(peer, 0.1) == expected_error_bound(n, 1.0, grid) <= 0.1 + 1e-9
    if grid is not None:  # the labels are a threshold in the grid index: monotone along the grid
        pts = grid.points(np.sort(np.random.default_rng(5).integers(0, size, 2_000)))
        labels = peer.answer(pts)
        assert (np.diff(labels.astype(int)) * (1 if labels[-1] >= labels[0] else -1) >= 0).all()


def test_the_grid_is_the_domain() -> None:
    peer = ServedLearner(Thresholds(), [0.0, 0.5, 1.0], [0, 1, 1], epsilon=1.0, grid=Grid(0.0, 1.0, 3), seed=1)
    from everlast.peers.base import OutsideDomain

    with pytest.raises(OutsideDomain):
        peer.answer(np.array([0.25]))
