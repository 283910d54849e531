"""The mechanism under audit: the real engine, the engine with one safeguard removed, or a broken claim.

A broken mechanism is built from *inputs* to the unmodified engine -- a schedule or a concept class --
never by patching the engine: the audit runs ``engine.predictor.Predictor`` (or its vectorized copy
``audit.fastbt``, tied to it by a test) as shipped. The claimed epsilon is the planner's certificate
for the *nominal* configuration (what the operator was promised), except for ``charged-c``, where the
mechanism is the real one and the *claim* is the broken part. An audit that reports a lower bound
above the claim for a broken variant shows that the games can see the safeguard at work.

* ``real``: the nominal schedule and concept class.
* ``no-noise``: the per-query noise switched off. eps' (paper) or eps0 (target-charged) is raised to
  2^20, which makes every noise scale of the round's answers 2^-20 counts or less (the smallest the
  engine runs): a nonzero draw has probability below e^-(2^20), so every answer is the noiseless
  comparison of the vote count with the thresholds.
* ``majority-relabel``: LabelBoost (paper, Appendix C.1: the exponential mechanism over the
  dichotomies of S-hat o D-hat scored by agreements with S-hat) replaced by a plain relabel with the
  dichotomy that agrees with the most labeled points (ties go to the first, as an ERM would):
  LabelBoost with its randomness removed.
* ``no-halt-limit``: no cap on tops: c = 2^60 (and, target-charged, the halting test's threshold c0
  = 2^60), so no round ever fails, while the claim still charges the nominal c.
* ``deterministic-halting`` (target-charged only): the halting test without its noise, at c: eps_h
  is raised to 2^20 and c0 = c, so the round fails at exactly the c-th top, the paper's rule. Not a
  product design: it shows what the noisy test buys (the halting attack catches it).
* ``charged-c`` (target-charged only, the flip attack): the mechanism as shipped, and the claim
  computed as if only the c tops were charged: the K-fold composition of eps0-DP steps with K = c
  instead of Lemma TC's K (docs/notes/target_charging.md 3.3: "pay eps0 per TOP" is not achievable).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from everlast.engine.concepts import ConceptClass, LabelBoostResult, Thresholds
from everlast.engine.concepts.base import F64, I8, distinct_sorted
from everlast.engine.design import MAX_COUNT
from everlast.engine.schedule import Schedule

VARIANTS = ("real", "no-noise", "majority-relabel", "no-halt-limit", "deterministic-halting", "charged-c")
NO_NOISE_EPS = float(1 << 20)
"""eps' / eps0 / eps_h of the noiseless variants: every scale 2^-20 counts or below (engine.noise's
smallest)."""
NO_HALT_C = MAX_COUNT
"""The largest cap the engine runs (2^60): no round reaches it."""


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
    """Every round's hard cap (and its halting test's threshold, where the design has one) out of reach."""
    rounds = tuple(dataclasses.replace(r, c=NO_HALT_C, halt_threshold=None if r.halt_threshold is None else NO_HALT_C)
                   for r in s.rounds)
    return dataclasses.replace(s, rounds=rounds)


def _deterministic_halting(s: Schedule) -> Schedule:
    rounds = tuple(dataclasses.replace(r, halt_eps=NO_NOISE_EPS, halt_threshold=r.c) for r in s.rounds)
    return dataclasses.replace(s, rounds=rounds)


@dataclass(frozen=True, slots=True)
class Variant:
    name: str
    description: str
    schedule: Callable[[Schedule], Schedule]
    """The schedule the engine runs, from the nominal one."""
    concept: Callable[[ConceptClass], ConceptClass]
    """The concept class the engine runs, from the nominal one."""
    designs: tuple[str, ...] = ("target-charged", "paper")
    """The designs the variant applies to."""
    charged_c: bool = False
    """The claim, not the mechanism, is broken: K = c charged steps (``charged-c``)."""
    fast_probe: bool = False
    """Probe rounds are replayed by ``fastbt`` (thousands of tops per game)."""


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
    "no-noise": Variant("no-noise", "per-query noise switched off (eps' or eps0 = 2^20)", _no_noise,
                        _same_concept),
    "majority-relabel": Variant("majority-relabel",
                                "LabelBoost replaced by a plain relabel with the best-agreeing dichotomy",
                                _same_schedule, _plain_relabel),
    "no-halt-limit": Variant("no-halt-limit", "no cap on tops: no round ever fails (c = c0 = 2^60)",
                             _no_halt, _same_concept, fast_probe=True),
    "deterministic-halting": Variant(
        "deterministic-halting", "the halting test without noise: the round fails at exactly the c-th top "
        "(eps_h = 2^20, c0 = c); an audit variant, not a product design", _deterministic_halting,
        _same_concept, designs=("target-charged",)),
    "charged-c": Variant(
        "charged-c", "the mechanism as shipped; the claim charges only c steps (K = c instead of Lemma TC's "
        "K)", _same_schedule, _same_concept, designs=("target-charged",), charged_c=True),
}


def variant(name: str) -> Variant:
    try:
        return _VARIANTS[name]
    except KeyError:
        raise ValueError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}") from None
