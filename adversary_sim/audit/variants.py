"""The mechanism under audit: the real engine, or the engine with one safeguard removed.

A broken variant is built from *inputs* to the unmodified engine -- a schedule or a concept class --
never by patching the engine: the audit runs ``engine.predictor.Predictor`` as shipped. The claimed
epsilon is always the planner's certificate for the *nominal* configuration (what the operator was
promised); the variant is what actually runs. An audit that reports a lower bound above the claim
for a broken variant shows that the games can see the safeguard at work.

* ``real``: the nominal schedule and concept class.
* ``no-noise``: BetweenThresholds' noise switched off. The schedule's eps' is raised to 1e12, which
  scales the threshold noise Lap(2/(eps' T)) and the query noise Lap(6/(eps' T)) down by ~1e12: far
  below one vote (1/T), so every answer is the noiseless comparison of the vote share with the
  thresholds.
* ``majority-relabel``: LabelBoost (paper, Appendix C.1: the exponential mechanism over the
  dichotomies of S-hat o D-hat scored by agreements with S-hat) replaced by a plain relabel with the
  dichotomy that agrees with the most labeled points (the majority of S-hat's labels decides; ties
  go to the first, as an ERM would): LabelBoost with its randomness removed.
* ``no-halt-limit``: the halt budget is not enforced (c_i raised to 2^62: no round ever fails), while
  the claim still charges c_i tops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.concepts import ConceptClass, LabelBoostResult, Thresholds
from engine.concepts.base import F64, I8, distinct_sorted
from engine.schedule import Schedule

VARIANTS = ("real", "no-noise", "majority-relabel", "no-halt-limit")
NO_NOISE_EPS = 1e12
NO_HALT_C = 1 << 62


class PlainRelabelThresholds(Thresholds):
    """Thresholds whose LabelBoost step picks the best-scoring dichotomy instead of sampling one.

    Same scores as ``Thresholds.labelboost`` (agreements with the labeled part, over the suffixes of
    the distinct points of S-hat o D-hat); argmax instead of the exponential mechanism. Used only by
    the audit's ``majority-relabel`` variant.
    """

    def labelboost(self, x_lab: F64, y_lab: I8, x_unlab: F64, rng: np.random.Generator) -> LabelBoostResult:
        values, rank = distinct_sorted(np.concatenate([x_lab, x_unlab]))
        ell = values.size
        r_lab = rank[: x_lab.size]
        n1 = np.bincount(r_lab[y_lab == 1], minlength=ell)
        n0 = np.bincount(r_lab[y_lab == 0], minlength=ell)
        c0 = np.concatenate([[0], np.cumsum(n0)])
        c1 = np.concatenate([[0], np.cumsum(n1)])
        score = c0 + (c1[-1] - c1)
        k = int(np.argmax(score))
        labels = (rank >= k).astype(np.int8)
        return LabelBoostResult(
            labels_labeled=labels[: x_lab.size],
            labels_unlabeled=labels[x_lab.size :],
            n_dichotomies=ell + 1,
            score=int(score[k]),
        )


def _map_rounds(s: Schedule, **change: Any) -> Schedule:
    rounds = tuple(dataclasses.replace(r, **change) for r in s.rounds)
    return dataclasses.replace(s, rounds=rounds)


def _no_halt(s: Schedule) -> Schedule:
    return _map_rounds(s, c=NO_HALT_C)


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    description: str
    schedule: Callable[[Schedule], Schedule]
    """The schedule the engine runs, from the nominal one."""
    concept: Callable[[ConceptClass], ConceptClass]
    """The concept class the engine runs, from the nominal one."""
    fast_probe: bool = False
    """Probe rounds may be replayed by ``fastbt`` (thousands of tops per trial)."""


def _same_concept(c: ConceptClass) -> ConceptClass:
    return c


def _plain_relabel(c: ConceptClass) -> ConceptClass:
    if not isinstance(c, Thresholds):
        raise ValueError("the majority-relabel variant is implemented for thresholds only")
    return PlainRelabelThresholds()


def _same_schedule(s: Schedule) -> Schedule:
    return s


def _no_noise(s: Schedule) -> Schedule:
    return _map_rounds(s, eps_bt=NO_NOISE_EPS)


_VARIANTS: dict[str, Variant] = {
    "real": Variant("real", "the engine as shipped", _same_schedule, _same_concept),
    "no-noise": Variant("no-noise", "BetweenThresholds noise switched off (eps' = 1e12)", _no_noise,
                        _same_concept),
    "majority-relabel": Variant("majority-relabel",
                                "LabelBoost replaced by a plain relabel with the best-agreeing dichotomy",
                                _same_schedule, _plain_relabel),
    "no-halt-limit": Variant("no-halt-limit", "halt budget not enforced (c = 2^62)", _no_halt,
                             _same_concept, fast_probe=True),
}


def variant(name: str) -> Variant:
    try:
        return _VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}") from None
