"""The predictor's life, in one table (like h11's ``_state.py``): the table *assigns* the next phase.

    ANSWERING      --answer/answered-->   ANSWERING
    ANSWERING      --answer/round_full--> TRANSITION_DUE   (R_i queries answered)
    ANSWERING      --answer/paused-->     PAUSED           (the round's halting test fired before its R_i-th
                                                            query: the rest of the round is refused)
    PAUSED         --answer/refused-->    PAUSED           (refused, round-paused; the queries still fill D-hat)
    PAUSED         --answer/round_full--> TRANSITION_DUE   (the round's R_i positions are taken: round i+1
                                                            serves again)
    TRANSITION_DUE --transition/next-->   ANSWERING        (round i+1)
    TRANSITION_DUE --transition/ended-->  EXHAUSTED        (a schedule that does not repeat its last round)
    HALTED         --answer/refused-->    HALTED           (a state written before rounds paused: it
                                                            refuses for good, as it promised; no event leads here)
    EXHAUSTED      --answer/refused-->    EXHAUSTED
    any phase      --failure-->           ERROR            (a failure that could not be undone)

In ERROR every call fails fast with ``InvalidState`` naming the phase (h11's sticky ERROR state).
Any other (phase, event) pair raises ``InvalidState``; the predictor is unchanged.
"""

from __future__ import annotations

import enum

from everlast.engine.errors import InvalidState


class Phase(enum.StrEnum):
    ANSWERING = "answering"
    PAUSED = "paused"
    TRANSITION_DUE = "transition_due"
    HALTED = "halted"
    EXHAUSTED = "exhausted"
    ERROR = "error"


TABLE: dict[tuple[Phase, str, str], Phase] = {
    (Phase.ANSWERING, "answer", "answered"): Phase.ANSWERING,
    (Phase.ANSWERING, "answer", "round_full"): Phase.TRANSITION_DUE,
    (Phase.ANSWERING, "answer", "paused"): Phase.PAUSED,
    (Phase.PAUSED, "answer", "refused"): Phase.PAUSED,
    (Phase.PAUSED, "answer", "round_full"): Phase.TRANSITION_DUE,
    (Phase.TRANSITION_DUE, "transition", "next"): Phase.ANSWERING,
    (Phase.TRANSITION_DUE, "transition", "ended"): Phase.EXHAUSTED,
    (Phase.HALTED, "answer", "refused"): Phase.HALTED,
    (Phase.EXHAUSTED, "answer", "refused"): Phase.EXHAUSTED,
}

REFUSING = frozenset({Phase.HALTED, Phase.EXHAUSTED})
"""Phases that refuse every query for good (a paused round refuses only until its round ends)."""
EVENTS = frozenset(e for (_, e, _) in TABLE)


def check(phase: Phase, event: str) -> None:
    """Raise ``InvalidState`` unless ``event`` may happen in ``phase``."""
    if not any(p is phase and e == event for (p, e, _) in TABLE):
        if phase is Phase.ERROR:
            raise InvalidState(f"cannot {event}: the predictor is in phase error (an earlier call failed "
                               "in a way that could not be undone); restore it from a checkpoint")
        hint = " (call transition() first)" if phase is Phase.TRANSITION_DUE else ""
        raise InvalidState(f"cannot {event} in phase {phase.value}{hint}")


def fire(phase: Phase, event: str, outcome: str) -> Phase:
    """The phase after ``event`` ended with ``outcome`` in ``phase`` (from the table)."""
    try:
        return TABLE[(phase, event, outcome)]
    except KeyError:
        raise InvalidState(f"no transition from phase {phase.value} on {event}/{outcome}") from None
