"""The learner's hypothesis classes on a domain of positions [lo_pos, hi_pos] (``engine.learner.domain``).

Cuts c range over [lo_pos, hi_pos + 1] (N + 1 values for |X| = N):
  * ``thresholds``: (c, s), s in {+1, -1}; label 1 iff pos >= c (s = +1) or pos < c (s = -1).
    |H| = 2 (N + 1) parameters (the two constant functions appear twice; harmless, see
    docs/privacy/learner.md 1).
  * ``intervals``: (c_lo, c_hi), c_lo <= c_hi; label 1 iff c_lo <= pos < c_hi (c_lo = c_hi: the
    empty concept). |H| = (N + 1)(N + 2) / 2.
  * ``stumps`` on R^d: (k, c, s), coordinate k in [0, d); label as a threshold on coordinate k.
    |H| = 2 d (N + 1).
  * ``trees`` of depth k on R^d (``engine.learner.tree``): a stump at each of the 2^k - 1 nodes.
    |H| = (2 d (N + 1))^(2^k - 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.errors import CorruptState

CLASSES = ("thresholds", "intervals", "stumps", "trees")


def hypothesis_count(concept: str, domain_size: int, d: int = 1, depth: int = 1) -> int:
    """|H| of the learner's parameterization, exactly (Python int)."""
    cuts = domain_size + 1
    if concept == "trees":
        return int((2 * d * cuts) ** ((1 << depth) - 1))
    if concept == "thresholds":
        return 2 * cuts
    if concept == "intervals":
        return cuts * (cuts + 1) // 2
    if concept == "stumps":
        return 2 * d * cuts
    raise ValueError(f"the private learner has no class {concept!r}; known: {', '.join(CLASSES)}")


@dataclass(frozen=True, slots=True)
class Hypothesis:
    """One released hypothesis. A secret of the model (checkpoints hold it)."""

    concept: str
    lo: int
    """The cut (thresholds, stumps) or the left cut (intervals)."""
    hi: int
    """The right cut (intervals); equal to ``lo`` otherwise."""
    sign: int = 1
    coord: int = 0

    def labels(self, pos: NDArray[np.int64]) -> NDArray[np.int8]:
        """Labels of validated positions: shape (n,) (or (n, d) for stumps)."""
        if self.concept == "intervals":
            return ((pos >= self.lo) & (pos < self.hi)).astype(np.int8)
        col = pos[:, self.coord] if pos.ndim == 2 else pos
        up = col >= self.lo
        return (up if self.sign > 0 else ~up).astype(np.int8)

    def constant(self, lo_pos: int, hi_pos: int) -> bool:
        """Whether it gives every point of the domain [lo_pos, hi_pos] the same label (a function of the
        release: public to whoever holds it)."""
        if self.concept == "intervals":
            return self.lo >= self.hi or (self.lo <= lo_pos and self.hi > hi_pos)
        return self.lo <= lo_pos or self.lo > hi_pos

    def to_dict(self) -> dict[str, Any]:
        return {"concept": self.concept, "lo": self.lo, "hi": self.hi, "sign": self.sign, "coord": self.coord}

    @classmethod
    def from_dict(cls, d: dict[str, Any], lo_pos: int, hi_pos: int, dim: int) -> Hypothesis:
        """Inverse of ``to_dict``, checked against the domain and dimension (``CorruptState``)."""
        try:
            h = cls(str(d["concept"]), int(d["lo"]), int(d["hi"]), int(d["sign"]), int(d["coord"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptState(f"hypothesis is malformed ({type(exc).__name__})") from None
        ok = h.concept in CLASSES[:3] and lo_pos <= h.lo <= h.hi <= hi_pos + 1 and h.sign in (1, -1)
        ok = ok and 0 <= h.coord < dim and (h.concept == "intervals" or h.lo == h.hi)
        if not ok:
            raise CorruptState("hypothesis does not fit its domain and class")
        return h
