"""Value records of the privacy chain: what ran, which lemma bounds it, what it cost.

Modelled on dp_accounting's ``DpEvent`` records: each :class:`Step` names the mechanism, the
lemma of the paper (Naor, Nissim, Stemmer, Yan 2023, "Private Everlasting Prediction") or of the
literature it relies on, its inputs, and the (epsilon, delta) it is charged. Each :class:`Check`
is one numerically verified precondition, tagged as needed for PRIVACY or for ACCURACY only, so an
auditor can re-derive every number from the schedule alone.

All logarithms in the planner are natural unless a field says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Scalar = float | int | str | bool | None
Chain = Literal["training", "queries"]
Kind = Literal["privacy", "accuracy"]


def _items(inputs: dict[str, Scalar]) -> tuple[tuple[str, Scalar], ...]:
    return tuple(inputs.items())


@dataclass(frozen=True, slots=True)
class Step:
    """One link of a privacy chain.

    ``epsilon``/``delta`` are what this step contributes or certifies (see ``name``); ``math.inf``
    means the step is not certified, and ``valid`` is then False with the reason in ``note``.
    """

    chain: Chain
    name: str
    lemma: str
    epsilon: float
    delta: float
    inputs: tuple[tuple[str, Scalar], ...] = ()
    round: int | None = None
    valid: bool = True
    note: str = ""

    @staticmethod
    def make(
        chain: Chain,
        name: str,
        lemma: str,
        epsilon: float,
        delta: float,
        inputs: dict[str, Scalar] | None = None,
        round: int | None = None,
        valid: bool | None = None,
        note: str = "",
    ) -> Step:
        ok = math.isfinite(epsilon) and math.isfinite(delta) if valid is None else valid
        return Step(
            chain=chain, name=name, lemma=lemma, epsilon=float(epsilon), delta=float(delta),
            inputs=_items(inputs or {}), round=round, valid=ok, note=note,
        )

    def inputs_dict(self) -> dict[str, Scalar]:
        return dict(self.inputs)


@dataclass(frozen=True, slots=True)
class Check:
    """One numerically verified condition. ``holds`` is the verdict; ``value`` and ``bound`` are the
    two sides compared (``value <= bound`` unless ``detail`` says otherwise)."""

    name: str
    lemma: str
    kind: Kind
    holds: bool
    value: float
    bound: float
    round: int | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Receipt:
    """What an accountant charged for one event (``engine.planner.accountants``): its (epsilon,
    delta), the steps that record it (each naming its lemma), the conditions checked on the way,
    and the reason when it is not certified (epsilon +inf)."""

    epsilon: float
    delta: float
    steps: tuple[Step, ...] = ()
    checks: tuple[Check, ...] = ()
    reason: str = ""
