"""The planner's entry points: targets -> plan, n -> best epsilon, targets -> the data cost of
every design.

``plan(targets)`` builds a schedule (``paper`` accounting: the paper's own formulas and design,
section 5; ``tight``: ``engine.planner.tight``) and certifies it with
``engine.planner.chain.certify`` -- the certificate is always re-derived from the schedule alone,
never copied from the solver.

**Designs** (engine.design; docs/privacy/genericbbl.md 9): the default is target-charged, the only design whose
query privacy is proven (Theorem Q) and the cheapest; the paper's design is planned for comparison
(its queries are not private). ``designs(targets)`` plans both and reports their n_required.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from everlast.engine.burn import Burn
from everlast.engine.design import DEFAULT, PAPER, Design, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import solve_store
from everlast.engine.planner.accountants import (
    PUBLISHED,
    TIGHT,
    Accountant,
    AccountingName,
    LabelBoostLemma,
    accountant,
)
from everlast.engine.planner.accuracy import Reading, accuracy_horizon, relabel_failure
from everlast.engine.planner.chain import Certificate, certify
from everlast.engine.planner.design_rules import ClientTests, rules
from everlast.engine.planner.learning import (
    SPLIT_VOTES,
    HaltBudget,
    LambdaLog,
    boundaries,
    halt_budget,
    split_votes_failure,
    vc_dimension,
)
from everlast.engine.planner.options import AnswerMargin, Band, Chunks, Relabelling, TightOptions
from everlast.engine.planner.paper import PaperSchedule, paper_schedule
from everlast.engine.planner.steps import Check, Step
from everlast.engine.planner.tight import RoundPlan, TightSchedule, estimate_n, solve
from everlast.engine.quotas import Quotas
from everlast.engine.schedule import RoundSpec, Schedule

EPS_H_CHOICES = (0.01, 0.03, 0.1, 0.3, 1.0)
"""The eps_h the planner tries for the noisy halting test when none is given (those below epsilon/4).
Neither end is free: eps_h is charged to every query (Theorem Q), while its margins, ~ (4/eps_h)
ln(R/beta_h) tops each, widen the hard cap c that Lemma TC charges for -- at epsilon = 8 the margins
of eps_h = 0.01 cost far more than the budget eps_h = 1 takes (``choose_eps_h``)."""
EPS_H_PROXY_ROUNDS = 4
"""``choose_eps_h`` compares the choices on schedules of this many rounds (n moves by a few % with
the rounds listed, the ranking rarely; 2-4x faster than the full schedule)."""
DEFAULT_EPS_H = EPS_H_CHOICES[0]
"""eps_h where no choice is made (the paper accounting, which has no noisy halting)."""
DESIGNS: tuple[Design, ...] = (DEFAULT, PAPER)

TARGET_SLACK = 1e-9
"""Relative slack with which a certified epsilon counts as meeting its target (float error)."""


class PlanInfeasible(ValueError):
    """No schedule of the planner's shape meets the targets."""


@dataclass(frozen=True, slots=True)
class Targets:
    """What the operator asks for. Privacy: (epsilon, delta) for the training set and (conditionally,
    see ``Certificate``) for the queries. Accuracy: (alpha, beta) and the concept class."""

    epsilon: float
    delta: float = 1e-6
    alpha: float = 0.1
    beta: float = 0.05
    concept: str = "thresholds"
    d: int = 1
    """Dimension, for stumps on R^d."""
    vc_dim: int | None = None
    """VC dimension for the finite class (required there); overrides the class's otherwise."""
    accounting: AccountingName = "tight"
    """Which accountant prices the chain (``engine.planner.accountants``): the CLI's
    ``--accounting`` value."""
    halt_budget: HaltBudget = SPLIT_VOTES
    """The halt-budget policy: the CLI's ``--halts`` value (``engine.planner.learning``); not the
    halting rule (``halting``)."""
    k: float = 2.0
    """Safety factor of the split-votes halt budget."""
    rounds: int = 12
    lambda_log: LambdaLog = "log2"
    cap_c: bool = True
    halting: str | None = None
    """Halting policy; None (with ``restarts`` None) = the default design (target-charged; the
    paper's under the paper accounting)."""
    restarts: str | None = None
    """Restart policy; None: see ``halting``."""
    eps_h: float | None = None
    """eps_h of the noisy halting test (None: ``DEFAULT_EPS_H``)."""
    accuracy: Reading = "per-query"
    """The reading of alpha (target-charged; docs/privacy/genericbbl.md 6.3): every answer's error
    with its own noise inside the hypothesis, or Definition 3.1 literally (``every-answer``)."""
    band: Band = "planned"
    """The band's half-width: chosen per round by the planner, or the paper's gamma_i = alpha_i."""
    chunks: Chunks = "sized"
    """lambda_i and alpha_i: sized for each round's ensemble with the relabelling spread evenly, or the
    paper's (``TightOptions.chunks``)."""
    relabelling: Relabelling = "growing"
    """How theta alpha is spread over the relabellings (``TightOptions.relabelling``): the rounds grow
    and part of it pays the last round's repetitions (the accuracy horizon), or evenly over the listed
    ones."""
    answer_margin: AnswerMargin = "lemma-a1"
    """The share of T the answer's noise may use: Lemma A1's, or the band's (``TightOptions``; the
    ablation's margin lever)."""
    labelboost: LabelBoostLemma = "direct"
    """How LabelBoost is charged: the direct Lemma LB (docs/privacy/genericbbl.md 3) or Lemma C.1."""
    quotas: Quotas | None = None
    """Per-client top quotas the schedule runs (target-charged; ``engine.quotas``): charged to every
    query by Theorem Q+ (docs/privacy/genericbbl.md 5.5)."""
    burn: Burn | None = None
    """The private burn-rate signal the schedule runs (``engine.burn``): charged by Theorem Q+."""

    @property
    def accountant(self) -> Accountant:
        """The accountant ``accounting`` names."""
        return accountant(self.accounting)

    @property
    def is_default_design(self) -> bool:
        """True when the planner chooses the design (tight accounting, nothing fixed)."""
        return self.accountant is TIGHT and self.halting is None and self.restarts is None

    @property
    def design(self) -> Design:
        """The design to plan (``engine.design.Design.parse`` refuses retired or unknown ones):
        the accountant's own (the engine's default under the tight accounting, the paper's under
        the paper's) unless halting or restarts name another."""
        base = self.accountant.default_design
        if self.halting is None and self.restarts is None:
            return base
        return Design.parse(self.halting or base.halting.value, self.restarts or base.restarts.value)

    @property
    def vc(self) -> int:
        if self.vc_dim is not None and self.concept != "finite":
            return self.vc_dim
        return vc_dimension(self.concept, self.d, self.vc_dim)

    def with_epsilon(self, epsilon: float) -> Targets:
        return dataclasses.replace(self, epsilon=epsilon)


@dataclass(frozen=True, slots=True)
class Plan:
    targets: Targets
    rounds: tuple[RoundSpec, ...]
    repeat_last: bool
    n_required: int
    certificate: Certificate
    schedule: Schedule | None
    """The engine's schedule, or None when the engine cannot run it (``not_runnable_reason``)."""
    not_runnable_reason: str = ""
    round_plans: tuple[RoundPlan, ...] = ()
    paper: PaperSchedule | None = None
    E1: float = math.nan
    E2: float = math.nan
    r1: float = math.nan
    rD: float = math.nan
    checks: tuple[Check, ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def steps(self) -> tuple[Step, ...]:
        """The certified chain, step by step (training set, then queries at the worst round)."""
        return self.certificate.steps

    @property
    def meets_targets(self) -> bool:
        """Both chains are within the targets, epsilon and delta: the proven query chain for a
        query-private design, the conditional one (the chain without an invalid in-round step)
        otherwise."""
        e = self.targets.epsilon * (1.0 + TARGET_SLACK)
        return _eps(self) <= e and self.certificate.delta <= self.targets.delta


@dataclass(frozen=True, slots=True)
class Achievable:
    """The best epsilon a given n supports (``best_epsilon``)."""

    n: int
    epsilon: float
    """max(epsilon_training, epsilon_queries_conditional) of ``plan``; +inf if no plan fits."""
    target: float
    """The smallest target epsilon (to bisection precision) whose plan needs <= n."""
    plan: Plan | None
    reason: str = ""


def _schedule(rounds: tuple[RoundSpec, ...], design: Design, quotas: Quotas | None = None,
              burn: Burn | None = None) -> tuple[Schedule | None, str]:
    try:
        return Schedule(rounds=rounds, repeat_last=True, design=design, quotas=quotas, burn=burn), ""
    except InvalidSchedule as exc:
        return None, str(exc)


def _why(cert: Certificate, engine_reason: str) -> str:
    if not engine_reason:
        return ""
    return cert.not_runnable_reason or f"the engine rejects the schedule: {engine_reason}"


def _accuracy_checks(t: Targets, rounds: tuple[RoundSpec, ...]) -> tuple[list[Check], list[str]]:
    """The accuracy-only checks of a plan: the halt budget under honest traffic and, where the
    design has it, Theorem A's bound on every answer's error against ``t.alpha``."""
    checks: list[Check] = []
    warnings: list[str] = []
    nb = boundaries(t.concept)
    dr = rules(t.design)
    halt_failures: list[float] = []  # per round: P[the halt budget is exceeded] + P[an early fire]
    for i, r in enumerate(rounds, start=1):
        c_util = dr.halt_budget_of(r, lambda r=r: halt_budget(  # type: ignore[misc]
            t.halt_budget, r.R, r.alpha, r.band, r.lam, t.k, nb, t.cap_c))
        early = dr.early_halt_checks(r, i, c_util)
        checks.extend(early)
        if t.halt_budget == SPLIT_VOTES:
            p = dr.top_rate_of(r, nb)
            fail = split_votes_failure(c_util, r.R, p)
            checks.append(Check("halt budget: P[more than c tops] (Chernoff, split-votes p_top)",
                                "docs/privacy/genericbbl.md 9.2", "accuracy", fail <= r.beta, fail,
                                r.beta, i))
            halt_failures.append(fail + math.fsum(c.value for c in early))
        else:
            checks.extend(dr.halt_rule_checks(r, i))
    accs = dr.answer_accuracy(rounds, t.vc, t.accuracy)
    for acc in accs:
        checks.append(Check(f"Theorem A: every answer errs w.p. <= alpha ({acc.reading} reading)",
                            "docs/privacy/genericbbl.md 6.3", "accuracy", acc.bound <= t.alpha,
                            acc.bound, t.alpha, acc.round, acc.note))
    if accs and t.halt_budget == SPLIT_VOTES:
        total = math.fsum([*(a.failure for a in accs), relabel_failure(rounds), *halt_failures]) * (1.0 + 1e-12)
        checks.append(Check("accuracy failure: Theorem A's events, Claim E.1's and the halts' <= beta",
                            "docs/privacy/genericbbl.md 6.3", "accuracy", total <= t.beta, total, t.beta))
    for need in dr.relabel_needs(rounds, t.vc):
        checks.append(Check("relabelling: LabelBoost's sample S-hat holds m_S >= Lemma C.2's and "
                            "Lemma R's sizes (Claim E.1 made exact)", "docs/privacy/genericbbl.md 6.3",
                            "accuracy", need.need <= need.m_S, need.need, need.m_S, need.round,
                            f"Lemma C.2 needs {need.labelboost}, Lemma R {need.relabel}"
                            + (" (the last round's, for its repetition)" if need.round == len(rounds) else "")))
    if t.halt_budget == SPLIT_VOTES:
        warnings.append(f"split-votes halt budget: the top rate of {t.concept} (with the round's own noise) holds "
                        "for continuous data with no mass piled up at a decision boundary, labels "
                        "from a concept of the class (docs/halt_budget.md); atoms, ties, mass at a boundary "
                        "and label noise raise it -- accuracy only: raise k (the doc says how to watch "
                        "the burn rate)"
                        if t.concept in ("thresholds", "intervals", "stumps") else
                        f"split-votes halt budget: no top-rate rule is derived for {t.concept} (one boundary "
                        "assumed) -- accuracy only, measure the halt rate by simulation")
    return checks, warnings


def plan(targets: Targets) -> Plan:
    """Compute a schedule meeting ``targets`` and certify it. Raises :class:`PlanInfeasible`.

    Results are cached (targets are frozen values; a plan is a pure function of them)."""
    return _plan_cached(targets)


@functools.lru_cache(maxsize=256)
def _plan_cached(targets: Targets) -> Plan:
    p = _plan_design(targets)
    if targets.is_default_design:
        why = (f"default design {p.certificate.design}: the only design whose query privacy is proven "
               "(docs/privacy/genericbbl.md 9), and the cheapest")
        return dataclasses.replace(p, warnings=(why, *p.warnings))
    return p


@functools.lru_cache(maxsize=256)
def _plan_design(targets: Targets) -> Plan:
    return _PLANNERS[targets.accountant](targets, _validated(targets))


def _validated(t: Targets) -> int:
    """The targets' VC dimension, or :class:`PlanInfeasible` saying why no plan is made for them."""
    try:
        t.design  # noqa: B018  (validates: retired designs are refused with the reason)
    except InvalidSchedule as exc:
        raise PlanInfeasible(str(exc)) from None
    if not (t.epsilon > 0.0 and 0.0 < t.delta < 1.0 and 0.0 < t.alpha < 0.5 and 0.0 < t.beta < 1.0):
        raise PlanInfeasible("need epsilon > 0, delta in (0,1), alpha in (0,1/2), beta in (0,1)")
    try:
        vc = t.vc
    except ValueError as exc:
        raise PlanInfeasible(str(exc)) from None
    if t.accountant.refusal(t.design) is not None:
        raise PlanInfeasible(t.accountant.planning_refusal)
    return vc


def _plan_published(t: Targets, vc: int) -> Plan:
    """The paper's own schedule (section 5), certified by the paper's lemmas (its idealised
    mechanism): its n is reported, never run."""
    warnings: list[str] = []
    ps = paper_schedule(t.epsilon, t.delta, t.alpha, t.beta, vc, t.rounds,
                        lambda_log=t.lambda_log, budget=t.halt_budget, k=t.k,
                        cap_c=False, boundaries=boundaries(t.concept))
    rounds = ps.specs
    sched, why = _schedule(rounds, PAPER)
    cert = certify(sched if sched is not None else rounds, ps.n_required, PUBLISHED, t.delta, design=PAPER)
    if not t.epsilon < 1.0:
        warnings.append("Theorem 5.1 assumes epsilon < 1 (and Claim 2.7 an output epsilon <= 1): "
                        "the paper's analysis does not cover this target")
    if max(t.alpha, t.beta, t.delta) >= 1.0 / 16.0:
        warnings.append("Theorem 5.1 assumes alpha, beta, delta < 1/16")
    if any(r > 1.0 for r in ps.d6_ratios):
        warnings.append(f"Claim D.6 fails (lambda_2 T_2 / |D-hat_1| = {ps.d6_ratios[0]:.3g}): "
                        "the paper's schedule cannot form S_2; its n is reported only")
    acc, w = _accuracy_checks(t, rounds)
    return Plan(targets=t, rounds=rounds, repeat_last=True, n_required=ps.n_required,
                certificate=cert, schedule=sched, not_runnable_reason=_why(cert, why), paper=ps,
                checks=tuple(acc), warnings=tuple(warnings + w))


def tight_options(t: Targets) -> TightOptions:
    """The tight solver's options for ``t`` (eps_h: ``t.eps_h``, else ``choose_eps_h``)."""
    return TightOptions(halt_budget=t.halt_budget, k=t.k, rounds=t.rounds, lambda_log=t.lambda_log,
                        boundaries=boundaries(t.concept), cap_c=t.cap_c, design=t.design,
                        eps_h=t.eps_h if t.eps_h is not None else choose_eps_h(t), reading=t.accuracy,
                        band=t.band, chunks=t.chunks, relabelling=t.relabelling, answer_margin=t.answer_margin,
                        labelboost=t.labelboost, quotas=t.quotas, burn=t.burn)


@functools.lru_cache(maxsize=256)
def choose_eps_h(t: Targets) -> float:
    """The eps_h of ``EPS_H_CHOICES`` (below epsilon/4) with the smallest estimated n_required
    (``tight.estimate_n`` on ``EPS_H_PROXY_ROUNDS`` rounds; search only: every eps_h is certified the
    same way). ``DEFAULT_EPS_H`` for a design without a
    noisy halting test, or when no estimate exists."""
    if t.design != DEFAULT:
        return DEFAULT_EPS_H
    try:
        vc = t.vc
    except ValueError:
        return DEFAULT_EPS_H
    base = dataclasses.replace(_options_with(t, DEFAULT_EPS_H), rounds=min(t.rounds, EPS_H_PROXY_ROUNDS))
    choices = [e for e in EPS_H_CHOICES if e < t.epsilon / 4.0] or [DEFAULT_EPS_H]
    est = {e: _estimate_n(t.epsilon, t.delta, t.alpha, t.beta, vc, dataclasses.replace(base, eps_h=e))
           for e in choices}
    best = min(choices, key=lambda e: est[e])
    return best if math.isfinite(est[best]) else DEFAULT_EPS_H


def _options_with(t: Targets, eps_h: float) -> TightOptions:
    return tight_options(dataclasses.replace(t, eps_h=eps_h))


@functools.lru_cache(maxsize=256, typed=True)
def _estimate_n(*args: object) -> float:
    """``tight.estimate_n`` is a pure function of its arguments (a fresh search per call): the design table's
    targets (which name the default design) ask for the same estimates as the plan's own; a process's
    ``solve_store`` keeps them between processes."""
    return solve_store.estimate_through(estimate_n, args)


@functools.lru_cache(maxsize=256)
def _solve(*args: object) -> TightSchedule:
    """``tight.solve`` is a pure function of its arguments: two Targets that differ only in how they
    name the same design (``designs`` names the default one) share one solve; a process's
    ``solve_store`` keeps it between processes (the certificate is derived afresh either way)."""
    opts = args[-1]
    assert isinstance(opts, TightOptions)
    return solve_store.solve_through(solve, args, opts.rounds, lambda sol: _stored_meets(args, sol))


def forget_plans() -> None:
    """Drop this process's memo of plans, solves and estimates (the next plan asks the solve store, or
    searches): what a new process would see."""
    for f in (_plan_cached, _plan_design, _solve, _estimate_n, choose_eps_h):
        f.cache_clear()


def _stored_meets(args: tuple[object, ...], sol: TightSchedule) -> bool:
    """A stored solve whose schedule the engine runs is used only if the certificate ``_plan_tight``
    derives from it meets the targets it was stored for (else it is searched afresh): an entry cannot
    make the planner serve less. One the engine cannot run is used as it is: nothing is served from it
    (``_tight_solution`` lists fewer rounds, or the plan is refused as not runnable)."""
    epsilon, delta, _, _, _, opts = args
    assert isinstance(epsilon, float | int) and isinstance(delta, float | int) and isinstance(opts, TightOptions)
    sched, _ = _schedule(sol.specs, opts.design, opts.quotas, opts.burn)
    if sched is None:
        return True
    cert = certify(sched, sol.n_required, opts.accountant, delta, design=opts.design,
                   tests=ClientTests.of(opts.quotas, opts.burn))
    return cert.epsilon_claimed <= epsilon * (1.0 + TARGET_SLACK) and cert.delta <= delta


def _tight_solution(t: Targets, vc: int) -> tuple[TightSchedule, int, Schedule | None, str]:
    """The tight solver's schedule for ``t`` with as many of its rounds listed as the engine runs exactly:
    (solution, rounds listed, the runnable schedule or None, why not ("" when runnable))."""
    opts = tight_options(t)
    listed = t.rounds
    while True:
        try:
            sol = _solve(t.epsilon, t.delta, t.alpha, t.beta, vc, dataclasses.replace(opts, rounds=listed))
        except ValueError as exc:
            raise PlanInfeasible(str(exc)) from None
        sched, why = _schedule(sol.specs, t.design, t.quotas, t.burn)
        first_bad = _first_unrunnable(sol.specs, t.design)
        if sched is not None or first_bad is None or first_bad <= 2 or listed <= 2:
            return sol, listed, sched, why
        # the rounds grow; list fewer (the last repeats) so that every round fits the engine's counters
        listed = min(listed - 1, first_bad - 1)


def n_required(targets: Targets) -> int:
    """``plan(targets).n_required`` without the certificate and the accuracy checks (the same solve; the
    ablation's rows, which report n alone). Raises :class:`PlanInfeasible` as ``plan`` does."""
    if _PLANNERS[targets.accountant] is not _plan_tight:
        return plan(targets).n_required
    return _tight_solution(targets, _validated(targets))[0].n_required


def _plan_tight(t: Targets, vc: int) -> Plan:
    """The tight solver's schedule (``engine.planner.tight``), certified for the engine's mechanism."""
    design = t.design
    warnings: list[str] = []
    opts = tight_options(t)
    sol, listed, sched, why = _tight_solution(t, vc)
    rounds = sol.specs
    if listed < t.rounds:
        warnings.append(f"{listed} rounds listed instead of {t.rounds}: a later round would exceed what the "
                        "engine counts exactly (2^62 queries)")
    cert = certify(sched if sched is not None else rounds, sol.n_required, opts.accountant, t.delta, design=design,
                   tests=ClientTests.of(t.quotas, t.burn))
    acc, w = _accuracy_checks(t, rounds)
    if design.target_charged:
        hz = accuracy_horizon(rounds, design, vc, t.alpha, t.beta, t.accuracy)
        if hz.queries is not None:
            warnings.append(f"rounds after {len(rounds)} repeat round {len(rounds)} (alpha_K = "
                            f"{rounds[-1].alpha:.3g}): privacy is unaffected; Theorem A-infinity proves every "
                            f"answer's accuracy for the first {hz.queries:.3g} queries ({hz.repetitions} "
                            f"repetitions; {hz.limit}), not beyond")
    else:
        warnings.append(f"rounds after {len(rounds)} repeat round {len(rounds)} with alpha fixed at "
                        f"{rounds[-1].alpha:.3g}: privacy is unaffected; the paper's accuracy argument "
                        "(Claim E.1's sum of alpha_j) is not covered beyond it")
    return Plan(targets=t, rounds=rounds, repeat_last=True, n_required=sol.n_required,
                certificate=cert, schedule=sched, not_runnable_reason=_why(cert, why),
                round_plans=sol.rounds, E1=sol.E1, E2=sol.E2, r1=sol.r1, rD=sol.rD,
                checks=tuple(acc), warnings=tuple(warnings + w))


_PLANNERS: dict[Accountant, Callable[[Targets, int], Plan]] = {PUBLISHED: _plan_published, TIGHT: _plan_tight}
"""Each accountant's planner: the paper's formulas for the paper's accounting, the tight solver else."""


def _first_unrunnable(rounds: tuple[RoundSpec, ...], design: Design) -> int | None:
    """The first round the engine cannot run exactly (engine.design.noise_plan), if any."""
    for i, r in enumerate(rounds, start=1):
        try:
            noise_plan(design, r)
        except InvalidSchedule:
            return i
    return None


@dataclass(frozen=True, slots=True)
class DesignCost:
    """One design planned for the same targets."""

    halting: str
    restarts: str
    n_required: int | None
    """None when no schedule of the design meets the targets (``reason``)."""
    epsilon_training: float
    epsilon_queries: float
    """+inf unless the design's query chain is proven (``query_private``)."""
    query_private: bool
    eps_h: float | None
    reason: str = ""
    epsilon_conditional: float = math.inf
    """max of the conditional chains (the chain without an invalid in-round step)."""
    in_round_epsilon: float = math.inf
    """Theorem Q's epsilon for the design (+inf: a channel is open)."""
    in_round_delta: float = 0.0
    in_round_lemma: str = ""
    in_round_note: str = ""
    is_default: bool = False
    design: str = ""

    @property
    def name(self) -> str:
        return self.design or f"{self.halting}+{self.restarts}"


def designs(targets: Targets) -> tuple[DesignCost, ...]:
    """Plan every design for the same targets (tight accounting), the default first."""
    t = dataclasses.replace(targets, accounting="tight")
    out: list[DesignCost] = []
    for d in DESIGNS:
        h, r = d.halting.value, d.restarts.value
        try:
            p = plan(dataclasses.replace(t, halting=h, restarts=r))
        except PlanInfeasible as exc:
            out.append(DesignCost(h, r, None, math.inf, math.inf, False, None, str(exc),
                                  is_default=d == DEFAULT, design=d.name))
            continue
        c = p.certificate
        q0 = next(st for st in c.steps if st.name.startswith("in-round answers"))
        out.append(DesignCost(
            halting=h, restarts=r, n_required=p.n_required, epsilon_training=c.epsilon_training,
            epsilon_queries=c.epsilon_queries, query_private=c.query_private, eps_h=p.rounds[0].halt_eps,
            reason=c.queries_reason if not c.query_private else "",
            epsilon_conditional=max(c.epsilon_training, c.epsilon_queries_conditional),
            in_round_epsilon=q0.epsilon, in_round_delta=q0.delta, in_round_lemma=q0.lemma,
            in_round_note=q0.note, is_default=d == DEFAULT, design=d.name,
        ))
    return tuple(out)


def cheapest_sound(costs: tuple[DesignCost, ...]) -> DesignCost | None:
    """The query-private (proven) design with the smallest n_required."""
    sound = [d for d in costs if d.query_private and d.n_required]
    return min(sound, key=lambda d: d.n_required or 0) if sound else None


def _eps(p: Plan) -> float:
    """What a plan certifies: max(training, queries) for a query-private design; otherwise the
    conditional numbers (the chain without an invalid in-round step)."""
    return p.certificate.epsilon_claimed


@dataclass(frozen=True, slots=True)
class LeverCost:
    """n_required with one of the data-cost levers of docs/privacy/genericbbl.md 9 switched off."""

    key: str
    """The JSON key (``ablation``)."""
    name: str
    lemma: str
    off: tuple[tuple[str, str], ...]
    """The Targets fields that switch it off."""
    n_required: int | None
    reason: str = ""


LEVERS: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("per_query_accuracy", "per-query error tolerance",
     "Theorem A, per-query reading: the promise is about the randomized answer (off: every answer's "
     "fixed hypothesis, Definition 3.1 literally, a union bound over the round)", {"accuracy": "every-answer"}),
    ("labelboost_direct", "LabelBoost's own bound",
     "Lemma LB: ln 4 and ln(4e) (off: Lemma C.1's 3 and 4e)", {"labelboost": "lemma-c1"}),
    ("band_width", "band width chosen per round",
     "Theorem A covers any band (off: gamma_i = alpha_i, the paper's)", {"band": "alpha"}),
    ("answer_margin", "Lemma A1's answer margin",
     "Lemma A1: an answer errs only where >= lo - k + 1 classifiers do, so the noise may use (1/2 - gamma - "
     "rho_i) T of the count (off: gamma T, every noise inside the band's margin as before Lemma A1)",
     {"answer_margin": "band"}),
    ("chunk_sizing", "chunks sized for the ensemble",
     "Lemma A2 over pairs and the relative VC bound for the relabelling (off: the paper's lambda_i by "
     "Theorem A.2 at alpha_i = theta alpha/2^i)", {"chunks": "alpha"}),
)
"""(JSON key, name, the lemma that makes it sound, the Targets fields that switch it off)."""


def ablation(targets: Targets, include_all_off: bool = True,
             on_row: Callable[[str], None] | None = None) -> tuple[LeverCost, ...]:
    """n_required of the default design with each lever switched off in turn (and, unless told
    otherwise, all of them at once): what each lemma buys. Empty for other designs or accountings.
    ``on_row(key)`` is called as each row is done (a caller's progress)."""
    if not targets.is_default_design:
        return ()
    cases = [(key, name, lemma, off) for key, name, lemma, off in LEVERS]
    if include_all_off:
        every = {k: v for *_, off in LEVERS for k, v in off.items()}
        cases.append(("all_off", f"all {len(LEVERS)}", "every lever off", every))
    if targets.eps_h is None:  # each lever alone: the plan's own eps_h, not one chosen anew
        targets = dataclasses.replace(targets, eps_h=choose_eps_h(targets))
    out = []
    for key, name, lemma, off in cases:
        try:
            n: int | None = n_required(dataclasses.replace(targets, **off))  # type: ignore[arg-type]
            why = ""
        except PlanInfeasible as exc:
            n, why = None, str(exc)
        out.append(LeverCost(key, name, lemma, tuple(off.items()), n, why))
        if on_row is not None:
            on_row(key)
    return tuple(out)
