"""The generic private learner exactly as the daemon serves it (``mechanism = "private-learner"``:
``engine.learner.PrivateLearner``, docs/privacy/learner.md) behind the peers' interface, so that
``everlast compare`` runs it like the other rows.

Two domains:
  * ``grid=None``: all finite float64, the daemon's default -- the task's points as they are;
  * a ``peers.base.Grid`` of K points (K <= 2^62): task points snapped to the grid (as for the
    KLNRS peer, ``peers.private_learner``), grid index k presented to the engine as the double whose
    IEEE-754 ordinal is k, on the declared range of exactly K doubles [0.0, that of ordinal K - 1].
    The map is increasing, so every threshold of the grid is a threshold of the range and back:
    the same class on a domain of K points, sampled exactly by the engine.

Sample size: Theorem L2 (``engine.planner.learner``) read for the comparison's criterion, expected
error <= alpha (``n_expected_error``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from everlast.engine import roots
from everlast.engine.concepts import ConceptClass
from everlast.engine.learner import Domain
from everlast.engine.learner import PrivateLearner as EngineLearner
from everlast.engine.learner.ordinals import FLOAT64_POINTS, from_ordinal
from everlast.engine.planner import learner as pl
from everlast.peers.base import I8, Grid, PeerState, PrivacyAccounting
from everlast.peers.design import require_thresholds


def domain_size(grid: Grid | None) -> int:
    return FLOAT64_POINTS if grid is None else grid.size


def n_required(epsilon: float, alpha: float, grid: Grid | None = None) -> int:
    """Theorem L2's n for expected error <= alpha, thresholds on the domain."""
    n = pl.n_expected_error(epsilon, alpha, pl.ln_hypotheses("thresholds", domain_size(grid))).n_required
    assert n is not None
    return n


def expected_error_bound(n: int, epsilon: float, grid: Grid | None = None) -> float:
    """The smallest expected error Theorem L2 proves at n (``n_required`` inverted by bisection;
    the condition is monotone in alpha). 1.0 when it proves none below 1."""
    ln_h = pl.ln_hypotheses("thresholds", domain_size(grid))
    hi = 1.0 - 1e-9
    if not pl.expected_error_holds(n, epsilon, hi, ln_h):
        return 1.0
    return roots.smallest_float(lambda a: pl.expected_error_holds(n, epsilon, a, ln_h), 0.0, hi, steps=50)


class ServedLearner(PeerState):
    """The engine's private learner (thresholds) on all finite doubles or on a grid."""

    name = "served_learner"

    def __init__(self, concept: ConceptClass, x: Any, y: Any, *, epsilon: float, grid: Grid | None = None,
                 seed: int | None = None) -> None:
        require_thresholds(concept, "the served private learner")
        self.concept = concept
        self.grid = grid
        self.epsilon = epsilon
        xs = self._engine_points(concept.validate_points(x, "training"))
        domain = None if grid is None else Domain.range(0.0, float(from_ordinal(np.array([grid.size - 1]))[0]))
        self.model = EngineLearner.fit("thresholds", xs, y, epsilon=epsilon, domain=domain, seed=seed)
        self.n = self.model.n_train
        self._answered = 0
        where = "all finite float64" if grid is None else f"a grid of {grid.size} points"
        self._privacy = PrivacyAccounting(
            epsilon=epsilon,
            delta=0.0,
            protects_queries=True,
            note=(f"Training set: one threshold on {where} released by the exponential mechanism, sampled "
                  f"exactly (engine.learner, served as mechanism = private-learner), ({epsilon:.3g}, 0)-DP "
                  "(Theorem L1, docs/privacy/learner.md 2); every answer is a post-processing of it. Queries: 0-DP."),
            max_queries=None,
            per_query_epsilon=0.0,
            extra=(("domain_size", float(domain_size(grid))),),
        )

    def _engine_points(self, x: np.ndarray) -> np.ndarray:
        if self.grid is None:
            return x
        return from_ordinal(self.grid.index(x))  # grid index k -> the double of ordinal k (increasing)

    @property
    def exhausted(self) -> bool:
        return False

    def answer(self, x: Any) -> I8:
        xs = self._engine_points(self.concept.validate_points(x))
        labels = self.model.answer(xs).labels
        self._answered += int(labels.size)
        return labels
