"""Every error the engine raises.

One root, ``EngineError``; each subclass says who is at fault. Messages name the offending
*field* or *position*, never a query or training value (privacy hygiene: errors end up in logs
and dead-letter headers).

State guarantee: an engine call that raises leaves the predictor exactly as it was.
"""

from __future__ import annotations


class EngineError(Exception):
    """Root of every error raised by ``engine``."""


class InvalidInput(EngineError, ValueError):
    """The caller's data is malformed: NaN/inf, wrong dimension, labels not in {0,1}, empty."""


class InvalidSchedule(EngineError, ValueError):
    """A schedule is internally inconsistent (sizes that do not chain, parameters out of range)."""


class TrainingSetTooSmall(EngineError, ValueError):
    """The training set cannot feed round 1 of the schedule. ``required`` says how large it must be."""

    def __init__(self, given: int, required: int) -> None:
        super().__init__(
            f"training set has {given} examples; the schedule needs at least {required} "
            f"(|S_1| = lambda_1 * T_1)"
        )
        self.given = given
        self.required = required


class InvalidState(EngineError):
    """A call is not legal in the predictor's current phase (e.g. answering while a transition is due)."""


class Halted(InvalidState):
    """The predictor has failed (a round's halt budget was spent); it only refuses from now on."""


class CorruptState(EngineError, ValueError):
    """A serialized state could not be decoded or fails its integrity checks."""
