"""Non-private subsample-and-aggregate: T ERM classifiers on disjoint chunks, plain majority.

The accuracy ceiling of the ensemble peers: the same ensemble as Dwork-Feldman and the
sparse-vector peer, with no noise and no budget. No privacy for the training set (epsilon = inf):
one example can flip the answer on any query where the vote is split evenly.
"""

from __future__ import annotations

import math
from typing import Any

from everlast.engine.concepts import ConceptClass
from everlast.peers.base import I8, PeerState, PrivacyAccounting, fit_ensemble, majority, streams, training_set


class NonPrivateMajority(PeerState):
    """``answer`` returns 1[2 v(x) > T] for every query, forever."""

    name = "nonprivate"

    def __init__(self, concept: ConceptClass, x: Any, y: Any, *, T: int, lam: int, seed: int | None = None) -> None:
        xs, ys = training_set(concept, x, y)
        self.concept = concept
        self.T = T
        self.lam = lam
        self.ensemble = fit_ensemble(concept, xs, ys, T, lam, streams(seed, ("partition",))["partition"])
        self._answered = 0
        self._privacy = PrivacyAccounting(
            epsilon=math.inf,
            delta=1.0,
            protects_queries=True,
            note=(
                "No privacy for the training set: the plain majority of the ensemble is released on "
                "every query. Queries are not at risk from each other: an answer depends only on the "
                "training set and its own query."
            ),
            max_queries=None,
            extra=(("T", float(T)), ("lam", float(lam))),
        )

    @property
    def exhausted(self) -> bool:
        return False

    def answer(self, x: Any) -> I8:
        xs = self.concept.validate_points(x)
        out = majority(self.ensemble.votes(xs), self.T)
        self._answered += out.size
        return out
