"""The predictor's life, in one table (like h11's ``_state.py``).

    ANSWERING --answer--> ANSWERING | TRANSITION_DUE (R_i answered) | HALTED (c_i-th top)
    TRANSITION_DUE --transition--> ANSWERING (round i+1) | EXHAUSTED (schedule ended)
    HALTED --answer--> HALTED            (every query refused, never answered from data)
    EXHAUSTED --answer--> EXHAUSTED      (every query refused)

Any other (phase, event) pair raises ``InvalidState`` naming the phase; the predictor is unchanged.
"""

from __future__ import annotations

import enum

from engine.errors import InvalidState


class Phase(enum.StrEnum):
    ANSWERING = "answering"
    TRANSITION_DUE = "transition_due"
    HALTED = "halted"
    EXHAUSTED = "exhausted"


LEGAL: dict[tuple[Phase, str], frozenset[Phase]] = {
    (Phase.ANSWERING, "answer"): frozenset({Phase.ANSWERING, Phase.TRANSITION_DUE, Phase.HALTED}),
    (Phase.HALTED, "answer"): frozenset({Phase.HALTED}),
    (Phase.EXHAUSTED, "answer"): frozenset({Phase.EXHAUSTED}),
    (Phase.TRANSITION_DUE, "transition"): frozenset({Phase.ANSWERING, Phase.EXHAUSTED}),
}

REFUSING = frozenset({Phase.HALTED, Phase.EXHAUSTED})


def check(phase: Phase, event: str) -> frozenset[Phase]:
    """The phases ``event`` may lead to from ``phase``; raises if the event is illegal there."""
    try:
        return LEGAL[(phase, event)]
    except KeyError:
        hint = " (call transition() first)" if phase is Phase.TRANSITION_DUE else ""
        raise InvalidState(f"cannot {event} in phase {phase.value}{hint}") from None
