"""Rebuild a served mechanism from its checkpoint parts, whichever mechanism wrote them.

Its own module: it names every mechanism (``engine.predictor``, ``engine.learner.model``), and
those import the serving interface (``engine.serving``), so the dispatch cannot live there without
an import circle.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.errors import CorruptState
from everlast.engine.learner.model import PrivateLearner
from everlast.engine.predictor import Predictor
from everlast.engine.serving import Servable


def restore(round_part: dict[str, Any], live_part: dict[str, Any], reservoir: NDArray[np.float64] | None) -> Servable:
    """Rebuild a served mechanism from its checkpoint parts. Raises ``CorruptState``."""
    fmt = round_part.get("format") if isinstance(round_part, dict) else None
    if not isinstance(fmt, str):
        raise CorruptState("checkpoint part carries no format tag")
    if fmt.startswith("everlast-engine/"):
        return Predictor.from_parts(round_part, live_part, reservoir)
    if fmt.startswith("everlast-learner/"):
        return PrivateLearner.from_parts(round_part, live_part, reservoir)
    raise CorruptState(f"checkpoint was written by an unknown mechanism or version ({fmt[:40]!r})")
