"""D-hat_i: a uniform random subset of m of the round's R queries, in O(m) memory.

The round length R is fixed by the schedule, so the reservoir sample can be drawn *as positions*
at the start of the round (m distinct positions out of R, uniformly: ``sorted_subset``, which is
numpy's ``choice`` for m <= R/50, the first m distinct values of i.i.d. uniform positions up to
m = R/2, the complement of a smaller subset beyond, and no draw at all for m = R, where the
positions are not even stored; O(m) memory for any R <= 2^62) and filled as those positions arrive. This
has exactly the distribution of classic reservoir sampling (Vitter's Algorithm R) over a stream
of known length R, never holds more than m points, is independent of the query values, and is
append-only within the round, so a checkpoint only needs the points added since the last one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts.random_order import sorted_subset


class Reservoir:
    __slots__ = ("_positions", "filled", "points")

    def __init__(self, positions: NDArray[np.int64] | None, points: NDArray[np.float64], filled: int) -> None:
        self._positions = positions  # sorted, distinct, in [0, R); None: every position (m = R)
        self.points = points  # (m,) or (m, d); rows >= filled are unused
        self.filled = filled

    @classmethod
    def draw(cls, R: int, m: int, point_dim: int, rng: np.random.Generator) -> Reservoir:
        positions = None if m == R else sorted_subset(R, m, rng)  # m = R: keep every query, no draw
        shape: tuple[int, ...] = (m,) if point_dim == 1 else (m, point_dim)
        return cls(positions, np.zeros(shape, dtype=np.float64), 0)

    @property
    def positions(self) -> NDArray[np.int64]:
        """The round positions kept, sorted (built on demand when every position is kept)."""
        if self._positions is None:
            return np.arange(self.points.shape[0], dtype=np.int64)
        return self._positions

    @property
    def stored_positions(self) -> NDArray[np.int64] | None:
        """The positions as stored: None when every position is kept (m = R)."""
        return self._positions

    def offer(self, start: int, x: NDArray[np.float64]) -> None:
        """The queries at round positions start, start+1, ... (in order) arrive."""
        if self._positions is None:  # every query is kept: position p is row p
            self.points[start : start + x.shape[0]] = x
            self.filled = start + x.shape[0]
            return
        lo = int(np.searchsorted(self._positions, start, side="left"))
        hi = int(np.searchsorted(self._positions, start + x.shape[0], side="left"))
        if hi > lo:
            self.points[self.filled : self.filled + hi - lo] = x[self._positions[lo:hi] - start]
            self.filled += hi - lo

    @property
    def full(self) -> bool:
        return self.filled == int(self.points.shape[0])

    def contents(self) -> NDArray[np.float64]:
        return self.points[: self.filled]

    def to_dict(self) -> dict[str, Any]:
        return {"positions": self.positions, "points": self.contents(), "filled": self.filled}

    @classmethod
    def from_dict(cls, d: dict[str, Any], point_dim: int) -> Reservoir:
        positions = np.asarray(d["positions"], dtype=np.int64)
        filled = int(d["filled"])
        shape: tuple[int, ...] = (positions.size,) if point_dim == 1 else (positions.size, point_dim)
        got = np.asarray(d["points"], dtype=np.float64).reshape((filled, *shape[1:]))
        if filled > positions.size:
            raise ValueError("more reservoir points than positions")
        points = np.zeros(shape, dtype=np.float64)
        points[:filled] = got
        return cls(positions, points, filled)
