"""Small schedules and predictors shared by the engine tests."""

from __future__ import annotations

import itertools

import numpy as np

from engine.concepts import Thresholds
from engine.predictor import Predictor
from engine.schedule import RoundSpec, Schedule


def tiny_schedule(c: int = 1000, eps_bt: float = 0.5, band: float | None = None) -> Schedule:
    """Rounds of 600 queries on 50 classifiers: several transitions in a few thousand queries."""
    spec = RoundSpec(T=50, lam=10, R=600, c=c, eps_bt=eps_bt, delta_bt=1e-6, alpha=0.1,
                     m_S=50, m_D=500, gamma=band)
    return Schedule((spec,), repeat_last=True, halting="paper", restarts="per-top")


def tiny_predictor(seed: int = 1, c: int = 1000, eps_bt: float = 0.5) -> Predictor:
    g = np.random.default_rng(99)
    x = g.random(800)
    return Predictor.create(Thresholds(), tiny_schedule(c=c, eps_bt=eps_bt), x, (x >= 0.5).astype(int), seed=seed)


def run_in_batches(p: Predictor, xs: np.ndarray, cuts: list[int]) -> np.ndarray:
    """Answer ``xs`` cut at ``cuts``, running transitions as the engine asks for them."""
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < xs.size)), xs.size]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        pos = lo
        while pos < hi:
            if p.phase.value == "transition_due":
                p.transition()
            res = p.answer(xs[pos:hi])
            out.append(res.labels)
            pos += res.consumed
    return np.concatenate(out)
