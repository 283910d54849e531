"""What the planner does differently per design, in one object per design (docs/privacy/genericbbl.md 5-7).

``engine.design.Design`` is the engine's value (which noises a round draws); this module holds the
planner's side of each design, so that certifying, planning and checking dispatch on the design
object instead of branching on it:

* :class:`TargetCharged` -- a round is priced by Lemma Q and Lemma TC' (6.1, 16.2); its in-round
  step is Theorem Q (5); its accuracy floor is section 6.3's; its solver takes the largest
  per-query level the round's budget allows (``target_charging.max_eps0``).
* :class:`PaperDesign` -- a round is at most min(c, R) BetweenThresholds instances, each priced by
  Theorem B (discrete, one top) and composed by KOV (7); its in-round step is NOT valid (section 4:
  halting and restart channels); Claim D.7 is its accuracy floor.

``rules(design)`` returns the object for a design.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction

from everlast.engine.burn import Burn
from everlast.engine.design import DEFAULT, PAPER, Design, NoisePlan, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.noise import exact_scale
from everlast.engine.planner import above_threshold as at
from everlast.engine.planner import bt
from everlast.engine.planner import composition as comp
from everlast.engine.planner import target_charging as tc
from everlast.engine.planner import theorem_b as tb
from everlast.engine.planner.above_threshold import up
from everlast.engine.planner.accuracy import Reading, RelabelNeed, RoundAccuracy, relabel_needs, schedule_accuracy
from everlast.engine.planner.learning import d2_floor, p_top
from everlast.engine.planner.steps import Chain, Check, Receipt, Step
from everlast.engine.planner.top_rate import top_rate_exact
from everlast.engine.quotas import Quotas, quota_plan
from everlast.engine.quotas import epsilon as quota_epsilon
from everlast.engine.schedule import RoundSpec

LEMMA_Q = ("Theorem Q (in-round step: AboveThreshold, Dwork-Roth Thm 3.23, discrete form, on the round's "
           "top count; no hard cap runs (section 16): Lemma Cap's delta is a valid over-statement)")
LEMMA_Q_PLUS = ("Theorem Q+ (in-round step: the halting test, each client's quota test and the burn-rate "
                "signal, each on its own noise; no hard cap runs, Lemma Cap's delta an over-statement; "
                "client ids treated as public; "
                "docs/privacy/genericbbl.md 5.5)")
LEMMA_FALSE = "Claim E.6, in-round step (FALSE for this design; the halting-channel audit)"


@dataclass(frozen=True, slots=True)
class ClientTests:
    """A schedule's per-client quotas and burn-rate signal (``engine.quotas``, ``engine.burn``), as the
    in-round step charges them: eps_q (Lemma AT on the querying client's count) and eps_b (Lemma
    DL(iv) on its window's release), at the exact scales the engine runs."""

    quotas: Quotas | None = None
    burn: Burn | None = None

    def epsilon(self, spec: RoundSpec | None = None) -> Fraction:
        """eps_q + eps_b at the engine's exact scales (they do not depend on the round)."""
        out = Fraction(0)
        if self.quotas is not None:
            out += (quota_epsilon(quota_plan(self.quotas, spec)) if spec is not None else
                    1 / exact_scale(2.0 / self.quotas.eps) + 2 / exact_scale(4.0 / self.quotas.eps))
        if self.burn is not None:
            out += self.burn.epsilon
        return out

    @classmethod
    def of(cls, quotas: Quotas | None, burn: Burn | None) -> ClientTests | None:
        return None if quotas is None and burn is None else cls(quotas, burn)


BETA_H_SHARE = 1e-3
"""Premature-halt probability of the noisy halting test, as a share of beta_i (accuracy only)."""


class InRound:
    """The in-round step (Q0) for one round of a design: Theorem Q's (epsilon, delta), or why it
    does not hold."""

    __slots__ = ("delta", "delta_cap_h", "eps_h", "epsilon", "lemma", "problems", "valid")

    def __init__(self, epsilon: float, delta: float, valid: bool, eps_h: float, delta_cap_h: float,
                 lemma: str, problems: tuple[str, ...] = ()) -> None:
        self.epsilon, self.delta, self.valid = epsilon, delta, valid
        self.eps_h, self.delta_cap_h, self.lemma, self.problems = eps_h, delta_cap_h, lemma, problems

    @property
    def note(self) -> str:
        return "; ".join(self.problems)


class DesignRules(abc.ABC):
    """The planner's behaviour for one design."""

    design: Design
    schedule_columns: tuple[str, str]
    """The two design-specific columns of the schedule table, and the RoundSpec fields they show."""
    schedule_fields: tuple[str, str]
    privacy_floor_on_T: bool
    """Whether privacy (not only accuracy) puts a floor on T (Theorem B's gap condition)."""

    @abc.abstractmethod
    def round_receipt(self, spec: RoundSpec, plan: NoisePlan, rnd: int, Delta: float, chain: Chain) -> Receipt:
        """Steps 1-2 of Phi_rnd under the tight accounting: the round's answers at total delta Delta."""

    @abc.abstractmethod
    def in_round(self, spec: RoundSpec, cap_floor: float = 0.0, tests: ClientTests | None = None) -> InRound:
        """Step Q0: what a query costs in the other answers of its own round (``tests``: the
        schedule's per-client quotas and burn-rate signal, when on)."""

    @abc.abstractmethod
    def accuracy_checks(self, spec: RoundSpec, rnd: int) -> list[Check]:
        """The round's accuracy floors on T that need nothing but the round (accuracy only)."""

    def warnings(self, rounds: Sequence[RoundSpec], repeat_last: bool) -> list[str]:
        """Plain sentences about channels this design leaves open (none by default)."""
        return []

    def halt_budget_of(self, spec: RoundSpec, policy_budget: Callable[[], int]) -> int:
        """The tops honest traffic may spend before the round is at risk (``policy_budget()``: the
        halt budget of the planner's policy, for designs that halt at c)."""
        return spec.c

    def early_halt_checks(self, spec: RoundSpec, rnd: int, c_util: int) -> list[Check]:
        """Checks that the halting rule does not fire before ``c_util`` tops (accuracy only)."""
        return []

    def top_rate_of(self, spec: RoundSpec, boundaries: int) -> float:
        """The share of honest queries that are tops (docs/halt_budget.md): the split-votes rule."""
        return p_top(spec.band, spec.lam, boundaries)

    def answer_accuracy(self, rounds: Sequence[RoundSpec], vc: int, reading: Reading) -> tuple[RoundAccuracy, ...]:
        """Theorem A's bound per round, where the design has one (docs/privacy/genericbbl.md 6.3)."""
        return ()

    def relabel_needs(self, rounds: Sequence[RoundSpec], vc: int) -> tuple[RelabelNeed, ...]:
        """What Theorem A's relabelling chain asks of each S-hat, where the design has Theorem A."""
        return ()

    def halt_rule_checks(self, spec: RoundSpec, rnd: int) -> list[Check]:
        """Accuracy checks of the paper's own halt rule (c = 64 alpha R), when it is used."""
        return []

    def q0_reason(self, rnd: int, note: str) -> str:
        """Why the query chain is not certified when its in-round step is not valid."""
        return f"round {rnd}: {note}"


class TargetCharged(DesignRules):
    design = DEFAULT
    schedule_columns = ("c0", "eps0")
    schedule_fields = ("halt_threshold", "eps_bt")
    privacy_floor_on_T = False

    def round_receipt(self, spec: RoundSpec, plan: NoisePlan, rnd: int, Delta: float, chain: Chain) -> Receipt:
        """Lemma Q and Lemma TC' (docs/privacy/genericbbl.md 6.1, 16.2)."""
        eps0 = up(1 / plan.query)  # exact 1/t as a Fraction, rounded up
        m = plan.band + 1
        # no hard cap runs (a paused round is followed by more rounds: genericbbl.md 16): Lemma TC'
        # charges the probability that the count passes c before the test fires
        passing = count_passing(self.design, spec)
        r = tc.round_epsilon(eps0, m, plan.c, spec.R, Delta, passing=passing)
        tailed = r.K < spec.R  # K = R: no tail, neither the binomial one nor tau_c
        binom = tc.binom_lower_tail(r.K, r.q, plan.c - 1) if tailed else 0.0
        steps = (
            Step.make(chain, f"per-query mechanism, round {rnd}",
                      "Lemma Q (discrete): TOP is a q-target, B-level eps0 = 1/t (docs/privacy/genericbbl.md 6.1)",
                      eps0, 0.0, {"scale_t": float(plan.query), "band_counts_m": m, "q": r.q, "lo": plan.lo,
                                  "hi": plan.hi}, rnd),
            Step.make(chain, f"round composition, round {rnd}",
                      "Lemma TC' (target charging, no hard cap: K charged steps, KOV; delta_K + delta_tail + "
                      "tau_c; docs/privacy/genericbbl.md 16.2, 6.2)", r.E, Delta,
                      {"K": r.K, "c": plan.c, "R": spec.R, "delta_K": r.delta_K, "delta_tail": binom,
                       "tau_c": passing if tailed else 0.0, "q": r.q}, rnd,
                      note="K = R: every query charged, no tail" if r.K >= spec.R else ""),
        )
        reason = "" if math.isfinite(r.E) else (
            f"round {rnd}: no split of Delta = {Delta:.3g} certifies the round (c = {plan.c}, eps0 = {eps0:.3g})")
        return Receipt(r.E, Delta, steps, (), reason)

    def in_round(self, spec: RoundSpec, cap_floor: float = 0.0, tests: ClientTests | None = None) -> InRound:
        """Theorem Q (docs/privacy/genericbbl.md 5): eps_h of the halting test at the exact scales,
        with Lemma Cap's delta for the hard cap; ``cap_floor`` is the largest cap probability over
        the schedule's rounds (a cap may act in any round: 5.3, step 1). With per-client quotas and
        the burn-rate signal, Theorem Q+ (5.5): eps_h + eps_q + eps_b, the cap's delta unchanged."""
        try:
            eps_h, cap = halting_test(self.design, spec)
            extra = tests.epsilon(spec) if tests is not None else Fraction(0)
        except InvalidSchedule as exc:
            return InRound(math.inf, 0.0, False, 0.0, 0.0, LEMMA_Q, (f"not runnable exactly: {exc}",))
        d_h = max(cap, cap_floor)
        if not extra:
            return InRound(eps_h, at.cap_charge(eps_h, d_h), True, eps_h, d_h, LEMMA_Q)
        eps = up(Fraction(eps_h) + extra)
        return InRound(eps, at.cap_charge(eps, d_h), True, eps_h, d_h, LEMMA_Q_PLUS)

    def halt_budget_of(self, spec: RoundSpec, policy_budget: Callable[[], int]) -> int:
        """c0 less the margin by which the noisy test fires early only w.p. <= 1e-3 beta_i (the
        planner's construction, ``round_solvers``: that probability rounded down to a power of 2)."""
        if spec.halt_eps is None or spec.halt_threshold is None:
            return spec.c
        early = 2.0 ** math.floor(math.log2(BETA_H_SHARE * spec.beta / spec.R))
        return spec.halt_threshold - at.at_margin(spec.halt_eps, early)

    def early_halt_checks(self, spec: RoundSpec, rnd: int, c_util: int) -> list[Check]:
        """Lemma T(iii): the noisy test fires before the halt budget is spent w.p. <= 1e-3 beta_i."""
        if spec.halt_eps is None or spec.halt_threshold is None:
            return []
        tq, tr = at.scales(spec.halt_eps)
        early = min(1.0, spec.R * at.at_tail(spec.halt_threshold - c_util, tq, tr))
        return [Check("noisy halting fires early (tops <= the halt budget): "
                      "<= R P[xi - rho >= c0 - budget]", "Lemma T (iii)", "accuracy",
                      early <= BETA_H_SHARE * spec.beta * (1.0 + 1e-9), early, BETA_H_SHARE * spec.beta, rnd)]

    def top_rate_of(self, spec: RoundSpec, boundaries: int) -> float:
        """The split-votes model with the round's own noise (``top_rate``, docs/halt_budget.md 3b)."""
        try:
            plan = noise_plan(self.design, spec)
        except InvalidSchedule:
            return 1.0
        return top_rate_exact(plan.T, plan.lo, plan.hi, plan.query, spec.lam, boundaries)

    def answer_accuracy(self, rounds: Sequence[RoundSpec], vc: int, reading: Reading) -> tuple[RoundAccuracy, ...]:
        return schedule_accuracy(rounds, self.design, vc, reading)

    def relabel_needs(self, rounds: Sequence[RoundSpec], vc: int) -> tuple[RelabelNeed, ...]:
        return relabel_needs(rounds, vc)

    def accuracy_checks(self, spec: RoundSpec, rnd: int) -> list[Check]:
        """None: Theorem A (docs/privacy/genericbbl.md 6.3) bounds the answers' error from the whole
        schedule and the concept class (``engine.planner.accuracy``), not by a floor on T."""
        return []


class PaperDesign(DesignRules):
    design = PAPER
    schedule_columns = ("eps'", "delta'")
    schedule_fields = ("eps_bt", "delta_bt")
    privacy_floor_on_T = True

    def round_receipt(self, spec: RoundSpec, plan: NoisePlan, rnd: int, Delta: float, chain: Chain) -> Receipt:
        """Theorem B (discrete, one top) per instance, KOV over the min(c, R) instances (an instance
        started after the last query answers nothing)."""
        assert plan.threshold is not None and spec.delta_bt is not None
        count = min(spec.c, spec.R)
        e_i, d_i, m = tb.instance(plan.threshold, plan.query, plan.band, spec.delta_bt, tops=1)
        ok = math.isfinite(e_i)
        checks = (Check("Theorem B gap: m* = G - 2 mu* - 1 >= 1", "Theorem B (discrete)", "privacy", ok,
                        m, 1, rnd, "value = m*, the band's counts left at the threshold noise bound mu*"),)
        reason = "" if ok else (f"round {rnd}: Theorem B's gap condition fails (band G = {plan.band} counts, "
                                f"delta_mu = {spec.delta_bt:.3g}; a larger T or eps')")
        steps = [Step.make(chain, f"BT instance, round {rnd}", "Theorem B (discrete, one top per instance; "
                           "docs/privacy/genericbbl.md 7)", e_i, d_i,
                           {"T": spec.T, "band_G": plan.band, "t_mu": float(plan.threshold),
                            "t_nu": float(plan.query), "m_star": m, "delta_mu": d_i}, rnd, valid=ok, note=reason)]
        E = comp.kov_epsilon(e_i, d_i, count, Delta) if ok else math.inf
        if ok and not math.isfinite(E):
            reason = f"round {rnd}: the instances' own delta already exceeds Delta={Delta:.3g}"
        steps.append(Step.make(chain, f"BT composition, round {rnd}",
                               "Kairouz-Oh-Viswanath 2015 Thm 3.3 (exact optimal composition)", E, Delta,
                               {"instances": count, "c": spec.c, "R": spec.R, "eps_instance": e_i,
                                "delta_instance": d_i}, rnd))
        return Receipt(E, Delta, tuple(steps), checks, reason)

    def in_round(self, spec: RoundSpec, cap_floor: float = 0.0, tests: ClientTests | None = None) -> InRound:
        """Not valid: both channels of docs/privacy/genericbbl.md 4 are open."""
        problems = []
        if spec.c <= spec.R:
            problems.append(f"halting channel open (c={spec.c} <= R={spec.R}): a query can spend a top "
                            "and make a later query be refused")
        problems.append("restart channel open: each top restarts the threshold noise, which later "
                        "answers reveal (no bound of order eps' exists)")
        return InRound(math.inf, 0.0, False, 0.0, 0.0, LEMMA_FALSE, tuple(problems))

    def halt_rule_checks(self, spec: RoundSpec, rnd: int) -> list[Check]:
        """Claims D.4 and D.5 (the paper's c = 64 alpha R)."""
        need = 3.0 * math.log(1.0 / spec.beta) / spec.alpha
        x = math.exp(-spec.eps_bt * spec.T / 48.0)
        return [Check("D.5: R >= 3 ln(1/beta)/alpha", "Claim D.5", "accuracy", need <= spec.R, need, spec.R, rnd),
                Check("D.4/D.5: exp(-eps' T/48) < alpha", "Claims D.4, D.5", "accuracy",
                      x < spec.alpha, x, spec.alpha, rnd)]

    def accuracy_checks(self, spec: RoundSpec, rnd: int) -> list[Check]:
        """Claims D.7 (Lemma C.4's floor) and D.2, the paper's accuracy floors."""
        acc = bt.accuracy_t(spec.alpha, spec.eps_bt, spec.R, spec.beta) if spec.eps_bt > 0 else math.inf
        return [Check("D.7: T >= 8/(alpha eps')(ln(R+1)+ln(1/beta))", "Claim D.7 / Lemma C.4",
                      "accuracy", acc <= spec.T, acc, spec.T, rnd),
                Check("D.2: T >= 96 ln(1/alpha)", "Claim D.2", "accuracy",
                      d2_floor(spec.alpha) <= spec.T, d2_floor(spec.alpha), spec.T, rnd)]

    def q0_reason(self, rnd: int, note: str) -> str:
        return f"Claim E.6's in-round step does not hold for this design (the halting-channel audit): {note}"

    def warnings(self, rounds: Sequence[RoundSpec], repeat_last: bool) -> list[str]:
        """One plain sentence per open channel, naming the rounds it affects."""
        out = []
        everywhere = _span(list(range(1, len(rounds) + 1)), len(rounds), repeat_last)
        halt = [i for i, r in enumerate(rounds, start=1) if r.c <= r.R]
        if halt:
            out.append(f"QUERY PRIVACY NOT PROVEN: halting channel open in {_span(halt, len(rounds), repeat_last)} "
                       "(c <= R: a query can spend a top and make a later query be refused; the halting-channel "
                       "audit)")
        out.append(f"QUERY PRIVACY NOT PROVEN: threshold-noise restart channel open in {everywhere} "
                   "(each top restarts BT's threshold noise, which later answers reveal; the restart audit)")
        return out


RULES: dict[Design, DesignRules] = {DEFAULT: TargetCharged(), PAPER: PaperDesign()}
"""Each design's rules, registered once; ``design_table.PLANNERS`` pairs them with the solvers (this
module imports no solver, so the planner's imports stay a tree)."""


def rules(design: Design) -> DesignRules:
    """The planner's rules for ``design``."""
    return RULES[design]


def halting_test(design: Design, spec: RoundSpec) -> tuple[float, float]:
    """(eps_h, cap probability) of a target-charged round's halting test at the scales the engine
    runs (0 cap probability when c > R: the cap cannot be reached)."""
    plan = noise_plan(design, spec)
    assert plan.halt_threshold is not None and plan.halt_query is not None and plan.c0 is not None
    eps_h = at.at_epsilon(plan.halt_threshold, plan.halt_query)
    cap = 0.0 if spec.c > spec.R else at.at_tail(plan.c - plan.c0, plan.halt_query, plan.halt_threshold)
    return eps_h, cap


def count_passing(design: Design, spec: RoundSpec) -> float:
    """Lemma TC' (docs/privacy/genericbbl.md 16.2): a bound on the probability that a target-charged
    round's top count reaches c before its halting test fires, P[xi - rho >= c - c0 + 1] (Lemma T(ii));
    0 when c > R (the count cannot reach c)."""
    if spec.c > spec.R:
        return 0.0
    plan = noise_plan(design, spec)
    assert plan.halt_threshold is not None and plan.halt_query is not None and plan.c0 is not None
    return at.at_tail(plan.c - plan.c0 + 1, plan.halt_query, plan.halt_threshold)


def _span(rounds: list[int], last: int, rep: bool) -> str:
    if not rounds:
        return ""
    tail = " and every later round" if rep and rounds[-1] == last else ""
    if rounds == list(range(rounds[0], rounds[-1] + 1)) and len(rounds) > 1:
        return f"rounds {rounds[0]}-{rounds[-1]}{tail}"
    return ("round " if len(rounds) == 1 else "rounds ") + ", ".join(map(str, rounds)) + tail
