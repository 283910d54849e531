"""What one engine needs for each round of a schedule: its D-hat points, its length in queries and
the memory it holds (accuracy- and privacy-neutral: only whether one machine can run it).

A round keeps D-hat in memory (``engine.reservoir``: m_D points of 8 bytes per coordinate, and
their m_D positions when it keeps fewer queries than it answers), and its transition holds the next
round's D-hat beside it while LabelBoost relabels, S_{i+1} (lambda T = m_D points in a planned
schedule) is drawn in its random order and the next round's positions are drawn. The constants are
peaks measured with ``tracemalloc`` over a steady round and its transition, ``python -m
bench.capacity`` (which prints the measured/model ratio: at most 1 from 2^18 points on; the next
round's order, drawn on a second core, moves the peak by up to ~20% from run to run; smaller
rounds carry a fixed ~2 MB of batches and never strain a machine). One engine orders at most 2^32
D-hat points (``engine.design.MAX_D_HAT``). The process's own fixed memory (the interpreter,
numpy, the broker client: a few hundred MB) comes on top.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from everlast.engine.design import MAX_D_HAT
from everlast.engine.schedule import RoundSpec

POINT_BYTES = 8
"""Bytes per coordinate of a stored point (float64)."""
POSITION_BYTES = 42
"""Per D-hat point when a round keeps fewer queries than it answers (m_D < R): its int64 position
and the scratch of drawing the next round's (``random_order.sorted_subset``), measured."""
TRANSITION_BYTES = {"thresholds": 18.0, "intervals": 18.0, "stumps": 84.0}
"""Per D-hat point (per coordinate for stumps): what the round and its transition hold besides the
two D-hats (S_{i+1}, its labels, the random order, LabelBoost's scratch), measured by
``python -m bench.capacity`` and rounded up."""
ENGINE_MEMORY = 16 * 2**30
"""The memory one engine is planned with by default (bytes; ``everlast plan --engine-memory``)."""


def round_bytes(m_D: int, next_m_D: int, R: int, concept: str = "thresholds", coords: int = 1) -> int:
    """The model of a round's peak memory: this round's D-hat, the next round's, the kept positions
    (m_D < R) and the transition's working memory."""
    work = TRANSITION_BYTES.get(concept, TRANSITION_BYTES["thresholds"]) * (coords if concept == "stumps" else 1)
    positions = POSITION_BYTES * m_D if m_D < R else 0
    return int(POINT_BYTES * coords * (m_D + next_m_D) + positions + work * m_D)


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
    out = []
    for i, r in enumerate(rounds):
        nxt = rounds[i + 1] if i + 1 < len(rounds) else (r if repeat_last else None)
        mem = round_bytes(r.m_D, nxt.m_D if nxt is not None else 0, r.R, concept, coords)
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
