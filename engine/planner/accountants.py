"""Accountants: what each step of GenericBBL's privacy chains costs (docs/privacy/genericbbl.md 3-4).

In the style of Google's dp_accounting, the chain is a sequence of events -- what ran -- and an
accountant prices each one, returning a :class:`~everlast.engine.planner.steps.Receipt` that names
the lemma it used. Before pricing, ``refusal`` says why the accountant cannot price a design, or
``None`` when it can (the dry run); a refused event prices as an invalid step with the reason, never a made-up
number.

The events of the chains (docs/privacy/genericbbl.md 3-4), each priced by one method:

* :class:`RoundAnswers` -- one round's answers with respect to its database (steps T1-T2, Q1-Q2);
* :class:`LabelBoostStep` -- LabelBoost followed by a mechanism A, for a neighbour in the labeled
  or the unlabeled part (steps T3, Q5);
* :class:`Subsample` -- a uniform fixed-size subset, amplifying what runs on it (T3, T5, Q6);
* :func:`compose` -- basic adaptive composition (Proposition 2.5; T4, Q7).

Two accountants share this interface:

* :data:`TIGHT` (``--accounting tight``, the default): the engine's mechanism. Rounds by the
  design's own lemmas (``design_rules``), subsampling by Balle-Barthe-Gaboardi 2018 Thm 10,
  LabelBoost by the direct Lemma LB (``TIGHT_LEMMA_C1``: by Lemma C.1, the ablation), deltas
  allotted so that no printed delta exceeds its target.
* :data:`PUBLISHED` (``--accounting paper``): the paper's lemmas as published (Lemma C.3,
  Observation 2, Claim 2.7, Lemma C.1), stated for its idealised mechanism (continuous Laplace
  noise on real vote shares). It prices the paper's design only and describes that idealised
  mechanism, never the engine's.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar, Final, Literal

from everlast.engine.design import DEFAULT, PAPER, Design, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import amplification as amp
from everlast.engine.planner import bt
from everlast.engine.planner import composition as comp
from everlast.engine.planner.above_threshold import up, up_sum
from everlast.engine.planner.design_rules import rules
from everlast.engine.planner.learning import CLAIM_D5, SPLIT_VOTES, HaltBudget
from everlast.engine.planner.steps import Chain, Check, Receipt, Step
from everlast.engine.schedule import RoundSpec

AccountingName = Literal["tight", "paper"]
"""The ``--accounting`` values (a JSON and CLI contract)."""
TIGHT_NAME: Final = "tight"
"""The tight accountant's name (:data:`TIGHT`)."""
PUBLISHED_NAME: Final = "paper"
"""The published accountant's name (:data:`PUBLISHED`: the paper's lemmas as published). Spelt
"paper" only where a user writes or reads it (``--accounting paper``, ``accounting = "paper"``)."""

LABELBOOST_EPS = 3.0
"""Lemma C.1's additive epsilon (Beimel-Nissim-Stemmer 2021): (eps_A + 3, 4 e delta_A)."""
LABELBOOST_DELTA_FACTOR = math.nextafter(4.0 * math.e, math.inf)
"""4e rounded up (Lemma C.1's delta factor)."""
LB_LABELED_EPS = math.nextafter(math.log(4.0 * math.e), math.inf)
"""Lemma LB (b): ln(4e) rounded up, a labeled-part neighbour (docs/privacy/genericbbl.md 3)."""
LB_UNLABELED_EPS = math.nextafter(math.log(4.0), math.inf)
"""Lemma LB (a): ln 4 rounded up, an unlabeled-part neighbour, with the delta unchanged."""
LabelBoostLemma = Literal["direct", "lemma-c1"]
DELTA_CAP = 0.5
"""The largest Delta a round is ever certified at (a larger one says nothing useful)."""
ENGINE = "the engine's mechanism (integer counts, exact discrete Laplace noise)"
IDEALISED = ("the paper's idealised mechanism (continuous Laplace noise on real vote shares): the paper's "
             "lemmas are stated for it, not for the engine's discrete mechanism")
BBG = "Balle-Barthe-Gaboardi 2018 Thm 10 (subsampling w/o replacement, substitution)"
BBG_SHORT = "Balle-Barthe-Gaboardi 2018 Thm 10"
CLAIM_2_7 = "Claim 2.7 (needs eps_out <= 1)"
Neighbour = Literal["labeled", "unlabeled"]


# ---------------------------------------------------------------------------------------------
# Events: what ran


@dataclass(frozen=True, slots=True)
class RoundAnswers:
    """The answers of round ``round`` (``spec``) under ``design``, with respect to the round's
    database F (its T classifiers; a substitution in S_i changes one classifier). Priced at total
    delta ``Delta``: Lemmas Q and TC (target-charged), Theorem B and KOV (paper design, tight), or
    Lemma C.3 and Observation 2 (paper accounting)."""

    design: Design
    spec: RoundSpec
    round: int
    Delta: float
    chain: Chain


@dataclass(frozen=True, slots=True)
class LabelBoostStep:
    """LabelBoost on S-hat o D-hat followed by a mechanism A that is (eps_A, delta_A)-DP, for
    neighbours differing in the labeled part (A = 'output S_{i+1}', which drops it) or in the
    unlabeled part (A = S_{i+1} from D-hat', then Phi_{i+1}). Lemma C.1."""

    neighbour: Neighbour
    round: int
    chain: Chain
    eps_A: float = 0.0
    delta_A: float = 0.0


@dataclass(frozen=True, slots=True)
class Subsample:
    """A uniformly random subset of ``kept`` of ``of`` records, on which a mechanism that is
    (eps, delta)-DP runs (substitution neighbours)."""

    kept: int
    of: int
    eps: float
    delta: float
    name: str
    round: int
    chain: Chain
    inputs: tuple[tuple[str, float | int], ...] = ()
    delta_factor: float = 1.0
    """The inner mechanism's delta is ``delta_factor * delta`` (LabelBoost's 4e before D-hat's
    subsample); the tight accountant multiplies the three exactly before rounding up."""
    short_lemma: bool = False
    """Print the lemma's short name (the chains' last steps do; kept for stable outputs)."""
    check: str = ""
    """The name of the published accountant's check that Claim 2.7 applies."""
    refusal: str = ""
    """The published accountant's reason when Claim 2.7 does not apply."""


def exact_rate(num: int, den: int) -> float:
    """num/den rounded up in floating point (privacy-safe), clipped to 1."""
    if den <= 0:
        return math.inf
    return min(1.0, math.nextafter(num / den, math.inf))


def within(target: float, rate: float | Fraction) -> float:
    """The largest float Delta with rate * Delta <= target in exact arithmetic, so that the delta a
    subsampling step prints (rate * Delta rounded up) never exceeds its target."""
    r = Fraction(rate)
    if r <= 0:
        return math.inf
    D = float(Fraction(target) / r)
    while r * Fraction(D) > Fraction(target):
        D = math.nextafter(D, 0.0)
    return D


def compose(name: str, lemma: str, rnd: int, chain: Chain, *parts: Receipt, delta: float) -> Receipt:
    """Proposition 2.5 (basic adaptive composition): the epsilons add (rounded up); ``delta`` is the
    composed delta the caller allotted."""
    eps = up_sum(*(p.epsilon for p in parts)) if math.isfinite(sum(p.epsilon for p in parts)) else math.inf
    step = Step.make(chain, name, lemma, eps, delta, {}, rnd)
    return Receipt(eps, delta, (step,))


def invalid(chain: Chain, rnd: int, name: str, lemma: str, reason: str) -> Receipt:
    step = Step.make(chain, name, lemma, math.inf, 1.0, {}, rnd, valid=False, note=reason)
    return Receipt(math.inf, 1.0, (step,), (), reason)


# ---------------------------------------------------------------------------------------------
# Accountants: what it cost


class Accountant(abc.ABC):
    """Prices the chain's events (one interface, two accountings)."""

    name: ClassVar[AccountingName]
    describes: ClassVar[str]
    default_design: ClassVar[Design]
    """The design planned when the targets name none."""
    epsilon_ceiling: ClassVar[float]
    """The largest target epsilon a search for the best epsilon tries (the paper's analysis
    assumes epsilon < 1)."""
    estimates: ClassVar[bool]
    """Whether the planner has a search-only estimate of n for this accounting (a few times
    cheaper than an exact plan; used only to choose where to look)."""
    planning_refusal: ClassVar[str] = ""
    """Why the planner refuses targets whose design this accountant cannot price."""
    halt_budgets: ClassVar[tuple[HaltBudget, ...]]
    """The halt budgets the accounting plans with, its own first."""

    @abc.abstractmethod
    def refusal(self, design: Design) -> str | None:
        """The dry run: why this accountant cannot price rounds of ``design``, or ``None`` when it can
        (dp_accounting's ``supports``, with the reason)."""

    def round_answers(self, ev: RoundAnswers) -> Receipt:
        """Steps 1-2 of Phi_i: the round's answers, priced at ``ev.Delta``."""
        why = self.refusal(ev.design)
        if why is not None:
            return invalid(ev.chain, ev.round, f"round mechanism, round {ev.round}", f"none ({self.name} accounting)",
                           f"round {ev.round}: {why}")
        return self._round(ev)

    @abc.abstractmethod
    def _round(self, ev: RoundAnswers) -> Receipt: ...

    labelboost_lemma: LabelBoostLemma = "lemma-c1"
    """Which bound LabelBoost is charged by: Lemma C.1 as published, or the direct Lemma LB."""

    def labelboost_eps(self, neighbour: Neighbour) -> float:
        """What LabelBoost adds to the epsilon of the mechanism after it."""
        if self.labelboost_lemma == "lemma-c1":
            return LABELBOOST_EPS
        return LB_LABELED_EPS if neighbour == "labeled" else LB_UNLABELED_EPS

    def labelboost(self, ev: LabelBoostStep) -> Receipt:
        """Lemma C.1: (eps_A + 3, 4e delta_A); or Lemma LB: (ln(4e), 0) for a labeled-part neighbour
        (A drops the labeled part) and (eps_A + ln 4, delta_A) for an unlabeled-part neighbour."""
        if self.labelboost_lemma == "direct":
            return self._labelboost_direct(ev)
        if ev.neighbour == "labeled":
            step = Step.make(ev.chain, f"LabelBoost, labeled-part neighbour, round {ev.round}",
                             "Lemma C.1 with A = 'output S_{i+1}' ((0,0)-DP: it drops the labeled part)",
                             LABELBOOST_EPS, 0.0, {}, ev.round)
            return Receipt(LABELBOOST_EPS, 0.0, (step,))
        eps, delta = ev.eps_A + LABELBOOST_EPS, LABELBOOST_DELTA_FACTOR * ev.delta_A
        step = Step.make(ev.chain, f"LabelBoost, unlabeled-part neighbour, round {ev.round}",
                         "Lemma C.1 with A = (S_{i+1} from D-hat', then Phi_{i+1})", eps, delta, {}, ev.round)
        return Receipt(eps, delta, (step,))

    def _labelboost_direct(self, ev: LabelBoostStep) -> Receipt:
        if ev.neighbour == "labeled":
            step = Step.make(ev.chain, f"LabelBoost, labeled-part neighbour, round {ev.round}",
                             "Lemma LB (b): A = 'output S_{i+1}' drops the labeled part: (ln(4e), 0) "
                             "(docs/privacy/genericbbl.md 3)", LB_LABELED_EPS, 0.0, {}, ev.round)
            return Receipt(LB_LABELED_EPS, 0.0, (step,))
        eps = up_sum(ev.eps_A, LB_UNLABELED_EPS) if math.isfinite(ev.eps_A) else math.inf
        step = Step.make(ev.chain, f"LabelBoost, unlabeled-part neighbour, round {ev.round}",
                         "Lemma LB (a): A = (S_{i+1} from D-hat', then Phi_{i+1}): (eps_A + ln 4, delta_A) "
                         "(docs/privacy/genericbbl.md 3)", eps, ev.delta_A, {}, ev.round)
        return Receipt(eps, ev.delta_A, (step,))

    @property
    def labelboost_delta_factor(self) -> float:
        """What LabelBoost multiplies the delta of the mechanism after it by (unlabeled part)."""
        return 1.0 if self.labelboost_lemma == "direct" else LABELBOOST_DELTA_FACTOR

    @abc.abstractmethod
    def subsample(self, ev: Subsample) -> Receipt:
        """Amplification by subsampling a fixed-size subset without replacement."""

    @abc.abstractmethod
    def allot(self, target: float, factor: float | Fraction) -> float:
        """The Delta an inner mechanism may use when a step multiplies its delta by ``factor`` and
        the result must stay within ``target`` (NaN: the accounting does not allot deltas)."""


class TightAccountant(Accountant):
    """The engine's mechanism: every number is for the integers and exact noise the engine runs.
    LabelBoost by Lemma LB (``TIGHT``), or by Lemma C.1 (``TIGHT_LEMMA_C1``, the ablation that shows
    what Lemma LB buys)."""

    def __init__(self, labelboost_lemma: LabelBoostLemma = "direct") -> None:
        self.labelboost_lemma = labelboost_lemma

    name: ClassVar[AccountingName] = TIGHT_NAME
    describes: ClassVar[str] = ENGINE
    default_design: ClassVar[Design] = DEFAULT
    epsilon_ceiling: ClassVar[float] = 64.0
    estimates: ClassVar[bool] = True
    halt_budgets: ClassVar[tuple[HaltBudget, ...]] = (SPLIT_VOTES, CLAIM_D5)

    def refusal(self, design: Design) -> str | None:
        return None

    def _round(self, ev: RoundAnswers) -> Receipt:
        try:
            plan = noise_plan(ev.design, ev.spec)
        except InvalidSchedule as exc:
            return invalid(ev.chain, ev.round, f"round mechanism, round {ev.round}", "engine.design.noise_plan",
                           f"round {ev.round}: the engine cannot run it exactly ({exc})")
        return rules(ev.design).round_receipt(ev.spec, plan, ev.round, ev.Delta, ev.chain)

    def subsample(self, ev: Subsample) -> Receipt:
        r = exact_rate(ev.kept, ev.of)
        eps, delta = amp.bbg(r, ev.eps, ev.delta_factor * ev.delta)
        if ev.delta_factor != 1.0:
            delta = up(Fraction(r) * Fraction(ev.delta_factor) * Fraction(ev.delta))
        step = Step.make(ev.chain, ev.name, BBG_SHORT if ev.short_lemma else BBG, eps, delta,
                         {**dict(ev.inputs), "rate": r}, ev.round)
        return Receipt(eps, delta, (step,))

    def allot(self, target: float, factor: float | Fraction) -> float:
        return min(DELTA_CAP, within(target, factor))


class PublishedAccountant(Accountant):
    """The paper's own lemmas, as published, for its idealised mechanism (docs/privacy/genericbbl.md 7.3)."""

    name: ClassVar[AccountingName] = PUBLISHED_NAME
    describes: ClassVar[str] = IDEALISED
    default_design: ClassVar[Design] = PAPER
    epsilon_ceiling: ClassVar[float] = 1.0
    estimates: ClassVar[bool] = False
    halt_budgets: ClassVar[tuple[HaltBudget, ...]] = (CLAIM_D5,)
    planning_refusal: ClassVar[str] = ("the paper accounting plans the paper's own design only "
                                       "(halting 'paper', restarts 'per-top'); use --accounting tight")

    def refusal(self, design: Design) -> str | None:
        if design != PAPER:
            return f"the paper's accounting has no lemma for the {design.name} design (use the tight accounting)"
        return None

    def _round(self, ev: RoundAnswers) -> Receipt:
        """Lemma C.3 per instance, Observation 2 over the c instances as declared."""
        spec, rnd, ch = ev.spec, ev.round, ev.chain
        eps0, d0, T, gamma = spec.eps_bt, spec.delta_bt or 0.0, spec.T, spec.band
        p2 = bt.ranges_ok(eps0, d0)
        checks = [Check("P2: eps' in (0,1), delta' in (0,1)", "Lemma C.3", "privacy", p2, eps0, 1.0, rnd,
                        f"delta'={d0:.3g}")]
        p1 = p2 and bt.gap_holds(gamma, eps0, d0, T)
        need = bt.gap_required(eps0, min(max(d0, 1e-300), 1.0 - 1e-16), T) if 0 < eps0 < 1 else math.inf
        checks.append(Check("P1: BT gap 2*gamma >= 12/(eps' T)(ln(10/eps')+ln(1/delta')+1)", "Lemma C.3",
                            "privacy", p1, need, 2.0 * gamma, rnd))
        reason = "" if p1 else f"round {rnd}: Lemma C.3's conditions fail (T={T}, eps'={eps0:.3g}, gamma={gamma:.3g})"
        steps = [Step.make(ch, f"BT instance, round {rnd}", "Lemma C.3 (idealised: continuous noise)",
                           eps0 if p1 else math.inf, d0, {"T": T, "gamma": gamma, "eps_bt": eps0, "delta_bt": d0},
                           rnd, valid=p1, note=reason)]
        E, d_out = comp.observation_2(eps0, d0, spec.c) if p1 else (math.inf, 1.0)
        ok = spec.c * d0 < 1.0
        checks.append(Check("Observation 2: c*delta' < 1", "Observation 2", "privacy", ok, spec.c * d0, 1.0, rnd))
        if p1 and not ok:
            reason = f"round {rnd}: Observation 2 needs c*delta' < 1"
        steps.append(Step.make(ch, f"BT composition, round {rnd}",
                               "Observation 2 (advanced composition; Claim D.1 states <= 1)", E, d_out,
                               {"c": spec.c, "eps_bt": eps0, "delta_bt": d0}, rnd))
        return Receipt(E, d_out, tuple(steps), tuple(checks), reason)

    def subsample(self, ev: Subsample) -> Receipt:
        """Claim 2.7, stated only for an output epsilon <= 1: +inf (with a failed check) beyond."""
        r = exact_rate(ev.kept, ev.of)
        eps, delta = amp.claim_2_7(r, ev.eps, ev.delta_factor * ev.delta)
        ok = math.isfinite(eps) or not math.isfinite(ev.eps)
        check = Check(ev.check, "Claim 2.7", "privacy", ok, r * (3.0 + math.exp(min(ev.eps, 700.0))), 1.0, ev.round)
        step = Step.make(ev.chain, ev.name, CLAIM_2_7, eps, delta, {**dict(ev.inputs), "rate": r}, ev.round)
        return Receipt(eps, delta, (step,), (check,), "" if ok else ev.refusal)

    def allot(self, target: float, factor: float | Fraction) -> float:
        return math.nan


TIGHT = TightAccountant()
TIGHT_LEMMA_C1 = TightAccountant("lemma-c1")
PUBLISHED = PublishedAccountant()
ACCOUNTANTS: dict[str, Accountant] = {a.name: a for a in (TIGHT, PUBLISHED)}


def accountant(name: str | Accountant) -> Accountant:
    """The accountant an ``--accounting`` value names (the one place strings become objects)."""
    if isinstance(name, Accountant):
        return name
    try:
        return ACCOUNTANTS[name]
    except KeyError:
        raise ValueError(f"unknown accounting {str(name)[:20]!r}; known: {', '.join(ACCOUNTANTS)}") from None
