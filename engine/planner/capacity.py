"""What one engine needs for each round of a schedule: its D-hat points, its length in queries and
the memory it holds (accuracy- and privacy-neutral: only whether one machine can run it).

A round keeps D-hat in memory (``engine.reservoir``: m_D points of 8 bytes per coordinate), and its
transition holds the next round's D-hat beside it while LabelBoost and the random order run. The
transition's own working memory per D-hat point was measured with ``tracemalloc`` around
``Predictor.transition`` (``python -m bench.engine --memory``): about 1 byte for thresholds and
intervals, about 84 bytes per coordinate for stumps (their LabelBoost enumerates every
coordinate's dichotomies). One engine orders at most 2^32 D-hat points
(``engine.design.MAX_D_HAT``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from everlast.engine.design import MAX_D_HAT
from everlast.engine.schedule import RoundSpec

POINT_BYTES = 8
"""Bytes per coordinate of a stored point (float64)."""
TRANSITION_BYTES = {"thresholds": 1.0, "intervals": 1.0, "stumps": 84.0}
"""A transition's working memory per D-hat point (per coordinate for stumps), measured."""
ENGINE_MEMORY = 16 * 2**30
"""The memory one engine is planned with by default (bytes; ``everlast plan --engine-memory``)."""


@dataclass(frozen=True, slots=True)
class RoundCapacity:
    round: int
    d_hat_points: int
    queries: int
    memory_bytes: int
    """Peak: this round's D-hat, the next round's, and the transition's working memory."""
    one_engine: bool
    reason: str = ""


def schedule_capacity(rounds: Sequence[RoundSpec], concept: str = "thresholds", dim: int = 1,
                      engine_memory: int = ENGINE_MEMORY, repeat_last: bool = True) -> tuple[RoundCapacity, ...]:
    """Per listed round: what it needs, and whether one engine of ``engine_memory`` bytes runs it."""
    coords = dim if concept == "stumps" else 1
    work = TRANSITION_BYTES.get(concept, 8.0) * (coords if concept == "stumps" else 1)
    out = []
    for i, r in enumerate(rounds):
        nxt = rounds[i + 1] if i + 1 < len(rounds) else (r if repeat_last else None)
        mem = int(POINT_BYTES * coords * (r.m_D + (nxt.m_D if nxt is not None else 0)) + work * r.m_D)
        reason = ""
        if r.m_D > MAX_D_HAT:
            reason = f"D-hat of {r.m_D:.3g} points is beyond the 2^32 one engine orders"
        elif mem > engine_memory:
            reason = f"needs {mem / 2**30:.3g} GiB, beyond the {engine_memory / 2**30:.3g} GiB planned for one engine"
        out.append(RoundCapacity(i + 1, r.m_D, r.R, mem, not reason, reason))
    return tuple(out)


def one_engine_rounds(cap: Sequence[RoundCapacity]) -> int:
    """How many rounds from the first one engine runs before the first that it cannot."""
    k = 0
    for c in cap:
        if not c.one_engine:
            break
        k += 1
    return k
