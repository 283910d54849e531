"""The boundary prober: an adaptive availability attack on GenericBBL's halt budget.

GenericBBL answers with BetweenThresholds (paper, step 3(d); Bun-Steinke-Ullman 2016): a query whose
vote share falls inside the band [1/2 - gamma, 1/2 + gamma] (a *split* vote) is a "top", and the c_i-th
top of round i pauses the round (the paper's step 3(d)iv fails the predictor for good; this engine
refuses the rest of the round and answers again in the next: docs/privacy/genericbbl.md 16). The
paper's budget c_i is sized for i.i.d. queries, which rarely land in the band (Claim D.5); an
adversary that aims at the band exhausts it in about c_i queries.

The prober sees only labels (0 on L; 1 on R or top -- a top is not distinguishable from R by its
label). It works on one coordinate (point_dim 1 classes; for thresholds the label boundary is a
single point):

1. *bracket*: find lo with majority label 0 and hi with majority label 1 (widening if needed);
2. *bisect*: k-section on labels: each batch spreads its n queries evenly over [lo, hi], takes the
   1-D best split of the noisy labels (fewest ones left of it plus zeros right of it), and shrinks
   the bracket to a few grid steps around it. This converges to the point where the vote share
   crosses the lower threshold t_l;
3. *exhaust*: query just right of that point, where the vote share is in the band and most answers
   are tops. It steps right (doubling the step) until at least ``target_ones`` of a batch's labels
   are 1, then stays there; it never steps further, because far right of the band the answers are R
   (label 1 too, but not tops). The default 0.7 stops inside the band when the per-query noise is
   about as wide as the band, as the default design sizes it (eps0 gamma T ~ 1.3: at the band's centre
   an answer is a top w.p. ~0.72 and labelled 1 w.p. ~0.86; a target of 0.9 overshot the band and
   found a top in one query of 15).

``report()`` gives the boundary estimate, the queries spent in each phase and queries-to-halt (the
queries the round had answered when it failed; the in-process driver ``run_stream`` records it).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from everlast.adversary_sim.iid import Task
from everlast.adversary_sim.streams import Labels, Points, quantile_of


class BoundaryProber:
    """Adaptive stream: locate the label boundary, then spend the round's halt budget."""

    adaptive = True

    def __init__(
        self,
        task: Task,
        seed: int = 0,
        *,
        lo: float | None = None,
        hi: float | None = None,
        tol: float | None = None,
        target_ones: float = 0.7,
        max_widen: int = 20,
    ) -> None:
        if task.concept.point_dim != 1:
            raise ValueError("the boundary prober works on one-dimensional concept classes")
        self.task = task
        self.seed = seed
        self._g = np.random.default_rng([seed, 0xB0])
        self.lo = quantile_of(task, 0.001) if lo is None else float(lo)
        self.hi = quantile_of(task, 0.999) if hi is None else float(hi)
        if not self.hi > self.lo:
            raise ValueError("the prober needs lo < hi")
        width = self.hi - self.lo
        self.tol = width * 1e-4 if tol is None else float(tol)
        self.target_ones = target_ones
        self.max_widen = max_widen
        self.phase = "bracket"
        self.widened = 0
        self.x_exhaust: float | None = None
        self.step: float = self.tol
        self.boundary: float | None = None
        self.spent: dict[str, int] = {"bracket": 0, "bisect": 0, "exhaust": 0}
        self.refused = 0
        self.answered = 0
        self._last: Points = np.zeros(0)

    # -- stream protocol --------------------------------------------------------------------------

    def next_batch(self, n: int) -> tuple[Points, Labels | None]:
        if n < 1:
            return np.zeros(0), None
        if self.phase == "bracket":
            half = max(1, n // 2)
            x = np.concatenate([np.full(half, self.lo), np.full(n - half, self.hi)])
        elif self.phase == "bisect":
            x = np.linspace(self.lo, self.hi, n)
        else:
            assert self.x_exhaust is not None
            x = np.full(n, self.x_exhaust)
        self.spent[self.phase] += n
        self._last = x
        return x, self.task.concept.label(self.task.target, x)

    def observe(self, labels: Labels) -> None:
        x = self._last[: labels.size]
        ok = labels >= 0
        self.refused += int((~ok).sum())
        self.answered += int(ok.sum())
        if not ok.any():
            return
        x, lab = x[ok], labels[ok]
        if self.phase == "bracket":
            self._observe_bracket(x, lab)
        elif self.phase == "bisect":
            self._observe_bisect(x, lab)
        else:
            self._observe_exhaust(lab)

    def _observe_bracket(self, x: Points, lab: Labels) -> None:
        left = lab[x == self.lo]
        right = lab[x == self.hi]
        ok_lo = left.size > 0 and left.mean() < 0.5
        ok_hi = right.size > 0 and right.mean() > 0.5
        if ok_lo and ok_hi:
            self.phase = "bisect"
            return
        if self.widened >= self.max_widen:
            self._start_exhaust(self.hi if not ok_hi else self.lo)
            return
        w = self.hi - self.lo
        if not ok_lo:
            self.lo -= w
        if not ok_hi:
            self.hi += w
        self.widened += 1

    def _observe_bisect(self, x: Points, lab: Labels) -> None:
        order = np.argsort(x, kind="stable")
        xs, ys = x[order], lab[order].astype(np.int64)
        ones_left = np.concatenate([[0], np.cumsum(ys)])
        zeros_right = np.concatenate([np.cumsum((1 - ys)[::-1])[::-1], [0]])
        k = int(np.argmin(ones_left + zeros_right))  # split before sorted position k
        step = (self.hi - self.lo) / max(1, xs.size - 1)
        centre = xs[k - 1] if k == xs.size else (xs[k] if k == 0 else 0.5 * (xs[k - 1] + xs[k]))
        self.lo, self.hi = centre - 2.0 * step, centre + 2.0 * step
        if self.hi - self.lo <= self.tol:
            self.boundary = 0.5 * (self.lo + self.hi)
            self._start_exhaust(self.hi)

    def _start_exhaust(self, x: float) -> None:
        self.phase = "exhaust"
        self.x_exhaust = x
        self.step = max(self.tol, self.hi - self.lo)

    def _observe_exhaust(self, lab: Labels) -> None:
        if lab.mean() < self.target_ones:
            assert self.x_exhaust is not None
            self.x_exhaust += self.step
            self.step *= 2.0

    def reference(self, g: np.random.Generator, n: int) -> tuple[Points, Labels]:
        """Honest traffic (the task's distribution): what accuracy is judged on."""
        return self.task.sample(g, n)

    def report(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "boundary_estimate": None if self.boundary is None else float(self.boundary),
            "exhaust_point": None if self.x_exhaust is None else float(self.x_exhaust),
            "queries_bracket": self.spent["bracket"],
            "queries_bisect": self.spent["bisect"],
            "queries_exhaust": self.spent["exhaust"],
            "answered": self.answered,
            "refused": self.refused,
        }
