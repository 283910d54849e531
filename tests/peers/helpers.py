"""Shared fixtures for the peer tests: a fixed task and small training sets."""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import NDArray

from everlast.adversary_sim.iid import Task, make_task
from everlast.engine.concepts import Thresholds

THRESHOLDS = Thresholds()


def task(distribution: str = "uniform") -> Task:
    return make_task(THRESHOLDS, distribution, 0)


def data(n: int, seed: int = 0, distribution: str = "uniform") -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    return task(distribution).sample(np.random.default_rng(seed), n)


def queries(n: int, seed: int = 1) -> NDArray[np.float64]:
    return np.random.default_rng(seed).random(n)


def in_batches(answer, x: NDArray[np.float64], cuts: list[int]) -> NDArray[np.int8]:  # type: ignore[no-untyped-def]
    """Answer ``x`` cut at ``cuts``."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < x.size}), x.size]
    return np.concatenate([answer(x[a:b]) for a, b in itertools.pairwise(bounds)])
