"""I.i.d. query streams: a named distribution and a hidden concept that labels it.

Used by ``everlast simulate`` and the adversary simulator. Seeded and deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts import ConceptClass

Sampler = Callable[[np.random.Generator, int, int], NDArray[np.float64]]


def _uniform(g: np.random.Generator, n: int, d: int) -> NDArray[np.float64]:
    return g.random((n, d))


def _normal(g: np.random.Generator, n: int, d: int) -> NDArray[np.float64]:
    return g.standard_normal((n, d))


def _mixture(g: np.random.Generator, n: int, d: int) -> NDArray[np.float64]:
    """Two Gaussians, N(-2, 1) and N(2, 0.5^2), weights 0.3 / 0.7."""
    left = g.random((n, 1)) < 0.3
    return np.where(left, -2.0 + g.standard_normal((n, d)), 2.0 + 0.5 * g.standard_normal((n, d)))


def _heavy(g: np.random.Generator, n: int, d: int) -> NDArray[np.float64]:
    """Student t with 1.5 degrees of freedom (infinite variance)."""
    return g.standard_t(1.5, size=(n, d))


def _ties(g: np.random.Generator, n: int, d: int) -> NDArray[np.float64]:
    """Discrete: 21 equally likely atoms on {0, 0.05, ..., 1} (many repeated points)."""
    return g.integers(0, 21, size=(n, d)).astype(np.float64) / 20.0


def _spike(g: np.random.Generator, n: int, d: int) -> NDArray[np.float64]:
    """Continuous, with its mass piled up at 0 (the median, hence the threshold concept's
    boundary): sign(u) |u|^8 for u uniform on (-1, 1), density ~ |x|^{-7/8} near 0."""
    u = 2.0 * g.random((n, d)) - 1.0
    out: NDArray[np.float64] = np.sign(u) * np.abs(u) ** 8
    return out


DISTRIBUTIONS: dict[str, Sampler] = {
    "uniform": _uniform,
    "normal": _normal,
    "mixture": _mixture,
    "heavy": _heavy,
    "ties": _ties,
    "spike": _spike,
}


@dataclass(frozen=True, slots=True)
class Task:
    """A distribution over points plus the hidden concept that labels them."""

    concept: ConceptClass
    distribution: str
    target: dict[str, Any]
    """The hidden concept's parameters (``ConceptClass.label``)."""

    def sample(self, g: np.random.Generator, n: int) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        d = self.concept.point_dim
        x = DISTRIBUTIONS[self.distribution](g, n, d)
        pts = x[:, 0] if d == 1 else x
        return pts, self.concept.label(self.target, pts)


def make_task(concept: ConceptClass, distribution: str, seed: int = 0, positives: float | None = None) -> Task:
    """The hidden concept splits the distribution's mass: thresholds at the median, intervals
    around the central 40%, stumps on coordinate 0 at its median. ``positives`` sets the share of
    positive labels instead (the threshold at the 1 - p quantile, the interval around the central p):
    rare positives put the decision boundary in the distribution's tail."""
    if distribution not in DISTRIBUTIONS:
        raise ValueError(f"unknown distribution {distribution!r}; known: {', '.join(DISTRIBUTIONS)}")
    if positives is not None and not 0.0 < positives < 1.0:
        raise ValueError(f"the share of positives must lie strictly between 0 and 1, got {positives!r}")
    g = np.random.default_rng([seed, 0xD157])
    ref = DISTRIBUTIONS[distribution](g, 200_001, 1)[:, 0]
    p_pos = 0.5 if positives is None else positives
    if concept.name == "thresholds":
        target: dict[str, Any] = {"t": float(np.quantile(ref, 1.0 - p_pos))}
    elif concept.name == "intervals":
        half = 0.2 if positives is None else positives / 2
        target = {"a": float(np.quantile(ref, 0.5 - half)), "b": float(np.quantile(ref, 0.5 + half))}
    elif concept.name == "stumps":
        target = {"j": 0, "s": 1, "t": float(np.quantile(ref, 1.0 - p_pos))}
    else:
        raise ValueError(f"no synthetic task for concept class {concept.name!r}")
    return Task(concept, distribution, target)
