"""Concept classes, by name. ``from_spec`` rebuilds one from ``ConceptClass.to_spec()``."""

from __future__ import annotations

from typing import Any

from engine.concepts.base import ConceptClass, Ensemble, LabelBoostResult
from engine.errors import InvalidInput

__all__ = ["ConceptClass", "Ensemble", "LabelBoostResult", "Thresholds", "from_spec", "names"]


def names() -> tuple[str, ...]:
    return ("thresholds", "intervals", "stumps", "finite")


def from_spec(spec: dict[str, Any]) -> ConceptClass:
    """Build a concept class from ``{"name": ..., **params}``."""
    name = spec.get("name")
    if name == "thresholds":
        return Thresholds()
    if name == "intervals":
        from engine.concepts.intervals import Intervals

        return Intervals()
    if name == "stumps":
        from engine.concepts.stumps import Stumps

        return Stumps(d=int(spec["d"]))
    if name == "finite":
        from engine.concepts.finite import FiniteClass

        return FiniteClass(spec["matrix"])
    raise InvalidInput(f"unknown concept class {name!r}; known: {', '.join(names())}")


# Last: LabelBoost's exact samplers import engine.learner, whose model imports the names above
# (``from_spec``); defining them first keeps that import cycle harmless.
from engine.concepts.thresholds import Thresholds  # noqa: E402
