"""Concept classes, by name. ``from_spec`` rebuilds one from ``ConceptClass.to_spec()``."""

from __future__ import annotations

from typing import Any

from everlast.engine.concepts.base import ConceptClass, Ensemble, LabelBoostResult
from everlast.engine.errors import InvalidInput

__all__ = ["ConceptClass", "Ensemble", "LabelBoostResult", "Thresholds", "from_spec", "names"]


def names() -> tuple[str, ...]:
    return ("thresholds", "intervals", "stumps", "finite")


def from_spec(spec: dict[str, Any]) -> ConceptClass:
    """Build a concept class from ``{"name": ..., **params}``."""
    name = spec.get("name")
    if name == "thresholds":
        return Thresholds()
    if name == "intervals":
        from everlast.engine.concepts.intervals import Intervals

        return Intervals()
    if name == "stumps":
        from everlast.engine.concepts.stumps import Stumps

        return Stumps(d=int(spec["d"]))
    if name == "finite":
        from everlast.engine.concepts.finite import FiniteClass

        return FiniteClass(spec["matrix"])
    raise InvalidInput(f"unknown concept class {name!r}; known: {', '.join(names())}")


# Last: LabelBoost's exact samplers import engine.learner, whose model imports the names above
# (``from_spec``); defining them first keeps that import cycle harmless.
from everlast.engine.concepts.thresholds import Thresholds  # noqa: E402
