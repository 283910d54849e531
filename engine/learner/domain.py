"""The finite domain X the private learner learns over, as integer *positions*.

Three kinds (``Domain.from_spec``):
  * ``float64``: every finite double, -0.0 and +0.0 identified (they compare equal). Positions are
    the IEEE-754 ordinals (``engine.learner.ordinals``): [-MAX_ORDINAL, MAX_ORDINAL],
    |X| = 2^64 - 2^53 - 1.
  * ``range``: the finite doubles in [lo, hi] (lo <= hi finite). Positions: ordinals in
    [ordinal(lo), ordinal(hi)], |X| = ordinal(hi) - ordinal(lo) + 1.
  * ``grid``: K distinct finite doubles g_0 < ... < g_{K-1} the model declares. Positions: indices
    0..K-1; a point is in X iff it equals some g_j.
  * ``bins``: a public range [lo_k, hi_k] per feature k and a number of bins B: every finite double is
    in X, and its position on coordinate k is its bin, the binary64 computation
    floor(fl(fl(x - lo_k) * fl(B / fl(hi_k - lo_k)))) clipped to [0, B - 1] (0 where hi_k = lo_k; an
    overflow to +inf is the last bin). |X| = B positions per coordinate; a cut is a bin edge. The
    ranges are part of the public configuration (chosen before the data, like every domain); a point
    outside its range falls in the end bin, not refused (docs/privacy/learner.md 1, "Bins").
Positions are increasing in value, so any hypothesis that compares values (x >= t, a <= x < b) is a
comparison of positions. A *cut* c in [lo_pos, hi_pos + 1] splits X into the positions < c and >= c;
the learner's hypotheses are made of cuts. Positions and cuts fit int64 (|ordinal| <= 2^63 - 2^52);
the number of positions between two cuts can reach 2^64 - 2^53: count it in uint64 or Python ints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.errors import InvalidInput
from everlast.engine.learner.ordinals import MAX_ORDINAL, from_ordinal, ordinal, to_ordinal

KINDS = ("float64", "range", "grid", "bins")
MAX_BINS = 1 << 20


@dataclass(frozen=True, slots=True)
class Domain:
    """A finite, totally ordered domain; build with ``float64()``, ``range()``, ``grid()`` or ``from_spec``."""

    kind: str
    lo_pos: int
    """Smallest position."""
    hi_pos: int
    """Largest position."""
    points: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    """The grid (kind ``grid`` only), strictly increasing."""
    lo: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    """Per-feature lower ends (kind ``bins`` only; one value applies to every feature)."""
    hi: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    # -- constructors -------------------------------------------------------------------------------

    @classmethod
    def float64(cls) -> Domain:
        return cls("float64", -MAX_ORDINAL, MAX_ORDINAL)

    @classmethod
    def range(cls, lo: float, hi: float) -> Domain:
        lo, hi = float(lo), float(hi)
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise InvalidInput("domain range bounds must be finite")
        if not lo <= hi:
            raise InvalidInput("domain range needs lo <= hi")
        return cls("range", ordinal(lo), ordinal(hi))

    @classmethod
    def grid(cls, points: Any) -> Domain:
        try:
            g = np.array(points, dtype=np.float64).ravel()
        except (TypeError, ValueError, OverflowError):
            raise InvalidInput("domain grid points are not numeric") from None
        if g.size == 0:
            raise InvalidInput("domain grid is empty")
        if not np.isfinite(g).all():
            raise InvalidInput(f"domain grid point at position {int(np.argmax(~np.isfinite(g)))} is NaN or infinite")
        if not (g[1:] > g[:-1]).all():
            raise InvalidInput("domain grid points must be strictly increasing (no duplicates; -0.0 equals 0.0)")
        g = g + 0.0  # -0.0 -> +0.0: the grid holds values, and the two zeros are one value
        return cls("grid", 0, int(g.size) - 1, g)

    @classmethod
    def bins(cls, lo: Any, hi: Any, bins: int = 256) -> Domain:
        try:
            a = np.array(lo, dtype=np.float64).ravel()
            b = np.array(hi, dtype=np.float64).ravel()
        except (TypeError, ValueError, OverflowError):
            raise InvalidInput("domain bins' lo and hi are not numeric") from None
        if a.size == 0 or a.size != b.size:
            raise InvalidInput("domain bins need lo and hi of the same length (one value per feature, or one for all)")
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            raise InvalidInput("domain bins' lo and hi must be finite")
        if not (a <= b).all():
            raise InvalidInput(f"domain bins need lo <= hi (feature {int(np.argmax(~(a <= b)))})")
        if not np.isfinite(b - a).all():
            raise InvalidInput("domain bins' ranges hi - lo must be finite")
        if isinstance(bins, bool) or not isinstance(bins, int | np.integer) or not 2 <= int(bins) <= MAX_BINS:
            raise InvalidInput(f"domain bins need an integer number of bins between 2 and {MAX_BINS}")
        return cls("bins", 0, int(bins) - 1, np.zeros(0), a + 0.0, b + 0.0)

    @classmethod
    def from_spec(cls, spec: Any) -> Domain:
        """Inverse of ``to_spec``; ``None`` or ``"float64"`` means all finite doubles."""
        if spec is None or spec == "float64":
            return cls.float64()
        if not isinstance(spec, dict):
            raise InvalidInput("domain must be 'float64' or a table with a 'kind'")
        kind = spec.get("kind")
        try:
            if kind == "float64":
                return cls.float64()
            if kind == "range":
                return cls.range(spec["lo"], spec["hi"])
            if kind == "grid":
                return cls.grid(spec["points"])
            if kind == "bins":
                return cls.bins(spec["lo"], spec["hi"], spec.get("bins", 256))
        except KeyError as exc:
            raise InvalidInput(f"domain of kind {kind!r} needs the field {exc.args[0]!r}") from None
        raise InvalidInput(f"unknown domain kind {kind!r}; known: {', '.join(KINDS)}")

    def to_spec(self) -> dict[str, Any]:
        if self.kind == "range":
            return {"kind": "range", "lo": float(from_ordinal(np.array([self.lo_pos]))[0]),
                    "hi": float(from_ordinal(np.array([self.hi_pos]))[0])}
        if self.kind == "grid":
            return {"kind": "grid", "points": self.points.copy()}
        if self.kind == "bins":
            return {"kind": "bins", "lo": self.lo.tolist(), "hi": self.hi.tolist(), "bins": self.size}
        return {"kind": "float64"}

    # -- the map ------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        """|X|, exactly (a Python int: up to 2^64 - 2^53 - 1)."""
        return self.hi_pos - self.lo_pos + 1

    def _map(self, x: NDArray[np.float64]) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
        """(positions, outside) of finite points, elementwise; a position is meaningless where outside."""
        if self.kind == "grid":
            idx = np.searchsorted(self.points, x).astype(np.int64)
            inside = idx < self.points.size
            inside[inside] = self.points[idx[inside]] == x[inside]
            return idx, ~inside
        if self.kind == "bins":
            return self._bin(x), np.zeros(x.shape, dtype=np.bool_)
        pos = to_ordinal(x)
        return pos, (pos < self.lo_pos) | (pos > self.hi_pos)

    def _bin(self, x: NDArray[np.float64]) -> NDArray[np.int64]:
        """Bin of every coordinate: a float computation of the point and the public ranges alone."""
        k = self.lo.size
        if k > 1 and (x.ndim != 2 or x.shape[1] != k):
            raise InvalidInput(f"domain bins declare {k} features' ranges; the points have "
                               f"{x.shape[1] if x.ndim == 2 else 1}")
        span = self.hi - self.lo
        wide = span > 0
        scale = np.where(wide, self.size / np.where(wide, span, 1.0), 0.0)
        with np.errstate(over="ignore", invalid="ignore"):
            t = np.floor((x - self.lo) * scale)
        t = np.nan_to_num(t, nan=0.0, posinf=float(self.hi_pos), neginf=0.0)
        return np.clip(t, 0, self.hi_pos).astype(np.int64)

    def outside(self, x: NDArray[np.float64]) -> NDArray[np.bool_]:
        """Per point (a row of a (n, d) batch: any coordinate), whether it lies outside the domain.
        A function of the point and the declared domain alone."""
        bad = self._map(x)[1]
        return np.asarray(bad.reshape(bad.shape[0], -1).any(axis=1)) if bad.ndim > 1 else bad

    def positions(self, x: NDArray[np.float64], what: str = "query") -> NDArray[np.int64]:
        """Positions of finite points (any shape); raises ``InvalidInput`` naming the first point
        outside the domain by its position in the batch (never its value)."""
        pos, bad = self._map(x)
        if bad.any():
            first = int(np.argmax(bad.reshape(bad.shape[0], -1).any(axis=1))) if bad.ndim > 1 else int(np.argmax(bad))
            raise InvalidInput(f"{what} point at position {first} lies outside the model's declared domain "
                               f"({self.describe()})")
        return pos

    def value(self, pos: int) -> float:
        """The double at a position (for display; +inf for the cut past the last position)."""
        if pos > self.hi_pos:
            return float("inf")
        if self.kind == "grid":
            return float(self.points[pos])
        if self.kind == "bins":
            return float(pos)  # a bin index: its value depends on the coordinate's range
        return float(from_ordinal(np.array([pos], dtype=np.int64))[0])

    def describe(self) -> str:
        if self.kind == "grid":
            return f"a grid of {self.points.size} points"
        if self.kind == "range":
            return f"the doubles in a declared range ({self.size} points)"
        if self.kind == "bins":
            return f"{self.size} bins of declared per-feature ranges"
        return "all finite doubles"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Domain):
            return NotImplemented
        return (self.kind, self.lo_pos, self.hi_pos) == (other.kind, other.lo_pos, other.hi_pos) and bool(
            np.array_equal(self.points, other.points) and np.array_equal(self.lo, other.lo)
            and np.array_equal(self.hi, other.hi))

    def __hash__(self) -> int:
        return hash((self.kind, self.lo_pos, self.hi_pos, self.points.size))
