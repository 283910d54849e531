"""Query poisoning: queries concentrated where they bias the next round's relabeled set.

Round i+1 of GenericBBL learns from D-hat_i, a uniform sample of round i's *queries* relabeled by
LabelBoost (step 3(e)-(g)). Whoever sends a large share of a round's queries therefore chooses most
of the next round's training points. A poisoner that concentrates its queries in one region leaves
the next round's chunks (lambda_{i+1} points each) with few points elsewhere: for thresholds, a
chunk that holds no point of the other class has the constant ERM ("all ones" / "all zeros"), and
when enough chunks are constant the vote on the other side of the boundary climbs into the band
(tops, hence halting: an availability attack) or past the majority (wrong answers). Nothing here
breaks privacy; it exercises the accuracy guarantee, which holds only for i.i.d. queries
(Definition 3.1).

Each query is, with probability ``fraction``, a poison point -- uniform in a window of quantile
width ``spread`` centred at quantile ``0.5 + offset`` (``side='positive'``) or ``0.5 - offset`` of
the task's distribution along the first coordinate (the hidden concept splits the mass at the
median: ``adversary_sim.iid.make_task``) -- and otherwise an honest i.i.d. point. ``reference`` is
the honest distribution: accuracy is judged where the honest users are.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from everlast.adversary_sim.iid import Task
from everlast.adversary_sim.streams import Labels, Points, quantile_of


class PoisoningStream:
    adaptive = False

    def __init__(self, task: Task, seed: int = 0, *, fraction: float = 0.95, side: str = "positive",
                 offset: float = 0.3, spread: float = 0.01) -> None:
        if not 0.0 <= fraction <= 1.0:
            raise ValueError("the poison fraction must lie in [0, 1]")
        if side not in ("positive", "negative"):
            raise ValueError("side must be 'positive' or 'negative'")
        centre = 0.5 + offset if side == "positive" else 0.5 - offset
        lo_q, hi_q = centre - spread / 2.0, centre + spread / 2.0
        if not 0.0 < lo_q < hi_q < 1.0:
            raise ValueError("the poison window must lie inside the distribution (0 < quantiles < 1)")
        self.task = task
        self.seed = seed
        self.fraction = float(fraction)
        self.side = side
        self.window = (quantile_of(task, lo_q, seed), quantile_of(task, hi_q, seed))
        self.emitted = 0
        self.poisoned = 0
        self._g = np.random.default_rng([seed, 0x90])

    def next_batch(self, n: int) -> tuple[Points, Labels | None]:
        x, _ = self.task.sample(self._g, n)
        x = x.copy()
        bad = self._g.random(n) < self.fraction
        k = int(bad.sum())
        pts = self._g.uniform(self.window[0], self.window[1], k)
        if x.ndim == 1:
            x[bad] = pts
        else:
            x[bad, 0] = pts
        self.emitted += n
        self.poisoned += k
        return x, self.task.concept.label(self.task.target, x)

    def observe(self, labels: Labels) -> None:
        pass

    def reference(self, g: np.random.Generator, n: int) -> tuple[Points, Labels]:
        return self.task.sample(g, n)

    def report(self) -> dict[str, Any]:
        return {"fraction": self.fraction, "side": self.side, "window": [float(w) for w in self.window],
                "emitted": self.emitted, "poisoned": self.poisoned}
