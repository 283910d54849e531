"""Drift: the query distribution moves over time while the hidden concept stays put.

GenericBBL's accuracy guarantee (Definition 3.1, Theorem 5.1) is for i.i.d. queries: round i+1 is
trained on round i's queries relabeled by LabelBoost (step 3(e)-(g)), so a predictor follows the
*query* distribution. When that distribution drifts, each round is trained on where the queries
were, and its accuracy where they are now can lag -- in particular the ERM classifiers of a round
whose queries have moved away from the concept's boundary see few points near it.

The stream draws from a named distribution of ``adversary_sim.iid`` and adds a shift to the first
coordinate that grows with the number of points emitted: ``shift(t) = total_shift * min(1, t /
horizon)`` (``kind="linear"``), or ``total_shift * sin(2 pi t / horizon)`` (``kind="periodic"``). The
true labels come from the fixed hidden concept. ``reference`` samples the distribution *at the
current time* (the "true distribution" the predictor is judged on round by round) and
``reference_original`` the distribution at t = 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from everlast.adversary_sim.iid import Task
from everlast.adversary_sim.streams import Labels, Points


class DriftStream:
    adaptive = False

    def __init__(self, task: Task, seed: int = 0, *, total_shift: float = 1.0, horizon: int = 1_000_000,
                 kind: str = "linear") -> None:
        if kind not in ("linear", "periodic"):
            raise ValueError("drift kind must be 'linear' or 'periodic'")
        if horizon < 1:
            raise ValueError("the drift horizon must be >= 1 query")
        self.task = task
        self.seed = seed
        self.total_shift = float(total_shift)
        self.horizon = int(horizon)
        self.kind = kind
        self.emitted = 0
        self._g = np.random.default_rng([seed, 0xD1])

    def shift_at(self, t: int | float) -> float:
        """The shift of the first coordinate after ``t`` emitted points."""
        if self.kind == "linear":
            return self.total_shift * min(1.0, t / self.horizon)
        return self.total_shift * math.sin(2.0 * math.pi * t / self.horizon)

    def _draw(self, g: np.random.Generator, n: int, t: int) -> tuple[Points, Labels]:
        x, _ = self.task.sample(g, n)
        steps = t + np.arange(n, dtype=np.float64)
        if self.kind == "linear":
            shift = self.total_shift * np.minimum(1.0, steps / self.horizon)
        else:
            shift = self.total_shift * np.sin(2.0 * np.pi * steps / self.horizon)
        x = x.copy()
        if x.ndim == 1:
            x += shift
        else:
            x[:, 0] += shift
        return x, self.task.concept.label(self.task.target, x)

    def next_batch(self, n: int) -> tuple[Points, Labels | None]:
        x, y = self._draw(self._g, n, self.emitted)
        self.emitted += n
        return x, y

    def observe(self, labels: Labels) -> None:
        pass

    def reference(self, g: np.random.Generator, n: int) -> tuple[Points, Labels]:
        """Fresh points of the distribution at the current time (shift frozen at ``emitted``)."""
        x, _ = self.task.sample(g, n)
        x = x.copy()
        s = self.shift_at(self.emitted)
        if x.ndim == 1:
            x += s
        else:
            x[:, 0] += s
        return x, self.task.concept.label(self.task.target, x)

    def reference_original(self, g: np.random.Generator, n: int) -> tuple[Points, Labels]:
        return self.task.sample(g, n)

    def report(self) -> dict[str, Any]:
        return {"kind": self.kind, "total_shift": self.total_shift, "horizon": self.horizon,
                "emitted": self.emitted, "shift_now": self.shift_at(self.emitted)}
