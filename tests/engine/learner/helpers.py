"""Shared helpers for the learner tests: scripted bit sources and exact reference computations."""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

import numpy as np


class ScriptedBits:
    """A bit source that returns given 64-bit words, then words from a seeded generator; records all."""

    def __init__(self, words: Iterable[int] = (), seed: int = 0) -> None:
        self._script = list(words)
        self._g = np.random.default_rng(seed)
        self.drawn: list[int] = []

    def word(self) -> int:
        w = self._script.pop(0) if self._script else int(self._g.integers(0, 1 << 64, dtype=np.uint64))
        self.drawn.append(w)
        return w


def exact_index(weights: list[Fraction], u: Fraction) -> int:
    """The inverse-CDF index of u in [0, 1): C_{k-1} <= u Z < C_k."""
    z = sum(weights)
    acc = Fraction(0)
    for k, w in enumerate(weights):
        acc += w
        if u * z < acc:
            return k
    raise AssertionError("u >= 1")


def dyadic(sizes: list[int], m: list[int]) -> list[Fraction]:
    return [Fraction(s) / (1 << mk) if mk >= 0 else Fraction(s * (1 << -mk)) for s, mk in zip(sizes, m, strict=True)]
