"""A private burn-rate signal (target-charged design; docs/privacy/genericbbl.md 5.5).

The round's top count is private (Theorem Q reads it only through the halting test), so its burn
rate cannot be published as it is. Instead, with ``Schedule.burn = {"window": W, "eps": eps_b}``, the
round's positions are cut into disjoint windows of W queries ([w W, (w + 1) W), W a public count), and
when a window's last query has been taken the engine releases

    noisy_tops_w = (tops among the window's answered queries) + eta_w,    eta_w ~ DLap(1/eps_b),

eta_w from the round's own stream (``Purpose.BURN``, one draw per window in window order: replayable and
independent of batching). A query lies in one window, so, given which queries are answered, it moves
its own window's release by at most 1 (Lemma DL(iv): eps_b per query); which queries are answered
can change through the halting and quota tests, which Theorem Q+ (step 2) conditions on and pays for
with eps_h and eps_q. On the training side the releases are post-processing of the outcomes
Lemma TC treats as released. A window the round does not complete (it halted, or R is not a multiple
of W) is never released. The releases come back in ``Answers.burn`` as rows (round, window, noisy_tops).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine import fields
from everlast.engine.errors import CorruptState, InvalidSchedule
from everlast.engine.fields import integral
from everlast.engine.noise import NoiseStream, exact_scale

I64 = NDArray[np.int64]
BLOCK = 256
"""Draws per canonical block of the burn stream (a round releases R // W of them)."""
COLUMNS = ("round", "window", "noisy_tops")
"""The columns of ``Answers.burn``."""


DEFAULT_EPS_SHARE = 0.05
"""A planned model's default eps_b, as a share of its target epsilon (clipped to ``DEFAULT_EPS_RANGE``):
the signal's noise must be small against the round's halt budget c_i, and c_i falls with the
budget that buys it (docs/OPERATIONS.md, capacity)."""
DEFAULT_EPS_RANGE = (0.01, 0.5)
DEFAULT_WINDOWS = 4
"""A planned model's default window is R_1 / this: four releases per round. With eps_b =
``DEFAULT_EPS_SHARE`` epsilon the round's summed release noise has a standard deviation of
sqrt(2 W p) / (1 - p) (W windows, p = e^{-eps_b}): 7 tops at epsilon 8 (c_1 = 272), 57 at epsilon
1 (c_1 ~ 10,500)."""


def default_eps(epsilon: float) -> float:
    """eps_b of a planned model's default burn-rate signal for target ``epsilon`` (a value the exact
    scale 1/eps_b represents; Theorem Q+ charges it to every query)."""
    lo, hi = DEFAULT_EPS_RANGE
    share = min(hi, max(lo, DEFAULT_EPS_SHARE * epsilon))
    return float(1 / exact_scale(round(1.0 / share, 6)))


def planning_default(epsilon: float) -> Burn:
    """The default signal as the planner charges it (the window does not enter the charge; the
    schedule's window is set from R_1 once planned: ``with_default_window``)."""
    return Burn(1, default_eps(epsilon))


def default_window(first_round_queries: int) -> int:
    return max(1, first_round_queries // DEFAULT_WINDOWS)


def release_noise_sd(burn: Burn, windows: int) -> float:
    """Standard deviation of the sum of ``windows`` releases' noise, DLap(1/eps_b) each (variance
    2p/(1 - p)^2, p = e^{-eps_b}): public, as the schedule is."""
    p = math.exp(-float(burn.epsilon))
    return math.sqrt(2.0 * p * max(0, windows)) / (1.0 - p)


@dataclass(frozen=True, slots=True)
class Burn:
    """The schedule-wide burn-rate setting (``Schedule.burn``; ``None`` = off)."""

    window: int
    """W >= 1: queries per window (a public count)."""
    eps: float
    """eps_b: each window's noise is DLap(1/eps_b)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "window", integral(self.window, "burn.window"))
        if isinstance(self.eps, bool) or not isinstance(self.eps, int | float):
            raise InvalidSchedule("burn.eps must be a number")
        object.__setattr__(self, "eps", float(self.eps))
        if self.window < 1:
            raise InvalidSchedule("burn.window must be >= 1")
        if not (math.isfinite(self.eps) and self.eps > 0.0):
            raise InvalidSchedule("burn.eps must be a positive finite number")
        exact_scale(1.0 / self.eps)

    @property
    def scale(self) -> Fraction:
        """The exact rational value of 1/eps_b."""
        return exact_scale(1.0 / self.eps)

    @property
    def epsilon(self) -> Fraction:
        """eps_b := 1/t_b of the exact scale, exactly (= eps_b when the float is exact): what Lemma
        DL(iv) charges a query for its window's release (Theorem Q+). A certificate rounds it up."""
        return 1 / self.scale

    def to_dict(self) -> dict[str, Any]:
        return {"window": self.window, "eps": self.eps}

    @classmethod
    def from_dict(cls, d: Any) -> Burn:
        """From the schedule's ``burn`` object (``engine.fields``: an integer window, a number eps)."""
        return cls(**fields.read(cls, d, "burn"))


@dataclass(frozen=True, slots=True)
class BurnState:
    """What the burn-rate signal carries within a round."""

    tops: int
    """Tops among the answered queries of the current, unfinished window. PRIVATE."""
    noise: NoiseStream
    """eta_w, one per released window (``Purpose.BURN``)."""

    def to_dict(self) -> dict[str, Any]:
        return {"tops": self.tops, "noise": self.noise.to_dict()}

    @classmethod
    def from_dict(cls, d: Any, burn: Burn) -> BurnState:
        if not isinstance(d, Mapping) or not isinstance(d.get("noise"), Mapping):
            raise CorruptState("burn state is malformed")
        try:
            tops = int(d["tops"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptState(f"burn state is malformed ({type(exc).__name__})") from None
        noise = NoiseStream.from_dict(dict(d["noise"]))
        if noise.scale != burn.scale or noise.block != BLOCK or tops < 0:
            raise CorruptState("burn state does not match the schedule")
        return cls(tops, noise)


def windows(counted: NDArray[np.bool_], start: int, state: BurnState, window: int,
            round_index: int) -> tuple[I64, BurnState]:
    """The releases of the windows completed by queries at round positions start, start + 1, ...
    (``counted``: each one's outcome is an answered TOP), as rows (round, window, noisy_tops), and the
    state after them. The work depends on the batch's size and positions only."""
    k = counted.size
    first = start // window
    end = start + k
    done = end // window - first  # windows whose last position lies in the batch
    w = (start + np.arange(k, dtype=np.int64)) // window - first
    per = np.bincount(w, weights=counted, minlength=done + 1).astype(np.int64)
    per[0] += state.tops
    eta, noise = state.noise.take(done)
    rows = np.empty((done, 3), dtype=np.int64)
    rows[:, 0] = round_index
    rows[:, 1] = first + np.arange(done, dtype=np.int64)
    rows[:, 2] = per[:done] + eta
    return rows, BurnState(int(per[done]), noise)
