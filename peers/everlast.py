"""Everlast itself behind the peers' interface, so ``peers.evaluate.run_peer`` scores it like the
others. Its privacy numbers come from the planner (``engine.planner``), which this adapter does not
compute: pass them in, or the accounting says "not certified here" (epsilon = nan)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from everlast.engine.phases import REFUSING
from everlast.engine.predictor import Predictor
from everlast.peers.base import I8, PeerState, PrivacyAccounting

UNCERTIFIED = PrivacyAccounting(
    epsilon=math.nan,
    delta=math.nan,
    protects_queries=True,
    note=(
        "GenericBBL (Naor-Nissim-Stemmer-Yan 2023): protects the training set and the queries "
        "(Definition 3.4); the certified (epsilon, delta) comes from the planner and was not given."
    ),
)


class EverlastPeer(PeerState):
    """Adapter: runs round transitions as the engine asks, returns labels (-1 = refused)."""

    name = "everlast"

    def __init__(self, predictor: Predictor, privacy: PrivacyAccounting | None = None) -> None:
        self.predictor = predictor
        self._privacy = privacy if privacy is not None else UNCERTIFIED
        self._answered = 0

    @property
    def exhausted(self) -> bool:
        return self.predictor.phase in REFUSING

    def answer(self, x: Any) -> I8:
        labels = self.predictor.answer_all(x).labels
        self._answered += int(np.count_nonzero(labels >= 0))
        return labels
