"""The planner's entry points: targets -> plan, n -> best epsilon, targets -> the data cost of
every design.

``plan(targets)`` builds a schedule (``paper`` accounting: the paper's own formulas and design,
section 5; ``tight``: ``engine.planner.tight``) and certifies it with
``engine.planner.chain.certify`` -- the certificate is always re-derived from the schedule alone,
never copied from the solver.

**Designs** (issue 8; docs/PRIVACY.md sections 5-9) are the engine's (halting, restarts) policies.
The default (``halting=None, restarts=None``) is the cheapest design whose query privacy is proven
in docs/PRIVACY.md. Two designs can be cheapest (section 9): ``noisy`` + ``private`` (Theorem Q,
Theorem B, Lemma N), whose cost grows with the halt budget c, and ``never`` + ``stateless``, whose
cost does not depend on c; the planner plans both and keeps the cheaper (with the split-votes halt
budget it is noisy + private, with the paper's c ~ R it is never + stateless). The other sound
designs are dominated (noisy + stateless pays eps_h for nothing; never + private pays blocks over
R tops). ``designs(targets)`` plans every design and reports its n_required.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Literal

from engine.errors import InvalidSchedule
from engine.planner import above_threshold as at
from engine.planner.chain import Accounting, BlockBound, Certificate, certify
from engine.planner.learning import (
    HaltBudget,
    LambdaLog,
    boundaries,
    halt_budget,
    p_top,
    split_votes_failure,
    vc_dimension,
)
from engine.planner.paper import PaperSchedule, paper_schedule
from engine.planner.steps import Check, Step
from engine.planner.tight import BETA_H_SHARE, RoundPlan, TightOptions, estimate_n, solve
from engine.schedule import RoundSpec, Schedule

Halting = Literal["paper", "never", "noisy"]
Restarts = Literal["per-top", "private", "stateless"]
DEFAULT_CANDIDATES: tuple[tuple[Halting, Restarts], ...] = (("noisy", "private"), ("never", "stateless"))
"""The sound designs the default chooses from (the cheaper for the targets; the others are
dominated, docs/PRIVACY.md section 9)."""
DEFAULT_EPS_H = 0.01
"""eps_h of the noisy halting test: its margins cost ~ (4/eps_h) ln(R/beta_h) tops, negligible
against c, so a small eps_h leaves the query budget to the rest of the chain."""
DESIGNS: tuple[tuple[Halting, Restarts], ...] = tuple(
    (h, r) for h in ("noisy", "never", "paper") for r in ("private", "stateless", "per-top"))

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
    accounting: Accounting = "tight"
    halts: HaltBudget = "paper"
    k: float = 2.0
    """Safety factor of the split-votes halt budget."""
    rounds: int = 12
    lambda_log: LambdaLog = "log2"
    cap_c: bool = True
    halting: Halting | None = None
    """Halting policy; None (with ``restarts`` None) = the default design: the cheapest of
    ``DEFAULT_CANDIDATES`` (tight) or the paper's ("paper", paper accounting)."""
    restarts: Restarts | None = None
    """Restart policy; None: see ``halting`` ("per-top" under the paper accounting)."""
    eps_h: float | None = None
    """eps_h of the noisy halting test (None: ``DEFAULT_EPS_H``)."""
    eps_r: float | None = None
    """eps_r of the private restart test (None: chosen to minimise n)."""
    block_bound: BlockBound = "pure"
    """"pure": Theorem B (proven). "lemma-s": the UNREVIEWED Lemma S, one threshold noise per
    round; the plan's numbers are then conditional on it and never query-private."""

    @property
    def is_default_design(self) -> bool:
        """True when the planner chooses the design (tight accounting, nothing fixed)."""
        return (self.accounting == "tight" and self.halting is None and self.restarts is None
                and self.block_bound == "pure")

    @property
    def design(self) -> tuple[Halting, Restarts]:
        """(halting, restarts) with unset fields filled: the paper's design under the paper
        accounting; otherwise noisy + private for a half-set design. (The default design is
        resolved by :func:`plan`, which compares ``DEFAULT_CANDIDATES``.)"""
        if self.accounting == "paper":
            return (self.halting or "paper", self.restarts or "per-top")
        return (self.halting or "noisy", self.restarts or "private")

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
        """Both chains are within the target: the proven query chain for a query-private design,
        the conditional one otherwise (``conditional_on`` or an open channel)."""
        e = self.targets.epsilon * (1.0 + TARGET_SLACK)
        return _eps(self) <= e


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


def _schedule(rounds: tuple[RoundSpec, ...], halting: str = "paper",
              restarts: str = "per-top") -> tuple[Schedule | None, str]:
    try:
        return Schedule(rounds=rounds, repeat_last=True, halting=halting,  # type: ignore[arg-type]
                        restarts=restarts), ""  # type: ignore[arg-type]
    except InvalidSchedule as exc:
        return None, str(exc)


def _why(cert: Certificate, engine_reason: str) -> str:
    if not engine_reason:
        return ""
    return cert.not_runnable_reason or f"the engine rejects the schedule: {engine_reason}"


def _accuracy_checks(t: Targets, rounds: tuple[RoundSpec, ...]) -> tuple[list[Check], list[str]]:
    checks: list[Check] = []
    warnings: list[str] = []
    nb = boundaries(t.concept)
    halting, _ = t.design
    for i, r in enumerate(rounds, start=1):
        c_util = r.c
        if halting == "noisy" and r.halt_eps is not None and r.halt_threshold is not None:
            c_util = halt_budget(t.halts, r.R, r.alpha, r.band, r.lam, t.k, nb, t.cap_c)
            early = at.early_fire_probability(r.R, r.halt_threshold, c_util, r.halt_eps)
            checks.append(Check("noisy halting fires early (tops <= the halt budget): "
                                "<= R at_tail(c0 - budget, eps_h)", "Lemma T (b)", "accuracy",
                                early <= BETA_H_SHARE * r.beta * (1.0 + 1e-9), early,
                                BETA_H_SHARE * r.beta, i))
        if t.halts == "split-votes":
            p = p_top(r.band, r.lam, nb)
            fail = split_votes_failure(c_util, r.R, p)
            checks.append(Check("halt budget: P[more than c tops] (Chernoff, split-votes p_top)",
                                "calibration.md section 2", "accuracy", fail <= r.beta, fail,
                                r.beta, i))
        else:
            need = 3.0 * math.log(1.0 / r.beta) / r.alpha
            checks.append(Check("D.5: R >= 3 ln(1/beta)/alpha", "Claim D.5", "accuracy",
                                need <= r.R, need, r.R, i))
            x = math.exp(-r.eps_bt * r.T / 48.0)
            checks.append(Check("D.4/D.5: exp(-eps' T/48) < alpha", "Claims D.4, D.5", "accuracy",
                                x < r.alpha, x, r.alpha, i))
    if t.halts == "split-votes" and t.concept != "thresholds":
        warnings.append(f"split-votes halt budget: p_top is derived for thresholds (midpoint ERM); "
                        f"for {t.concept} it is a heuristic ({nb} boundary(ies)) -- accuracy only, "
                        "measure the halt rate by simulation")
    return checks, warnings


def plan(targets: Targets) -> Plan:
    """Compute a schedule meeting ``targets`` and certify it. Raises :class:`PlanInfeasible`.

    Results are cached (targets are frozen values; a plan is a pure function of them)."""
    return _plan_cached(targets)


@functools.lru_cache(maxsize=256)
def _plan_cached(targets: Targets) -> Plan:
    if not targets.is_default_design:
        return _plan_design(targets)
    plans: list[Plan] = []
    errors: list[str] = []
    for h, r in DEFAULT_CANDIDATES:
        try:
            plans.append(_plan_design(dataclasses.replace(targets, halting=h, restarts=r)))
        except PlanInfeasible as exc:
            errors.append(f"{h}+{r}: {exc}")
    sound = [p for p in plans if p.certificate.query_private and p.schedule is not None]
    pool = sound or plans
    if not pool:
        raise PlanInfeasible("; ".join(errors))
    best = min(pool, key=lambda p: p.n_required)
    names = ", ".join(f"{p.certificate.halting}+{p.certificate.restarts} (n = {p.n_required:.3g})"
                      for p in plans)
    why = (f"default design {best.certificate.halting}+{best.certificate.restarts}: the cheapest "
           f"design with proven query privacy among {names}")
    return dataclasses.replace(best, targets=targets, warnings=(why, *best.warnings))


@functools.lru_cache(maxsize=256)
def _plan_design(targets: Targets) -> Plan:
    t = targets
    if not (t.epsilon > 0.0 and 0.0 < t.delta < 1.0 and 0.0 < t.alpha < 0.5 and 0.0 < t.beta < 1.0):
        raise PlanInfeasible("need epsilon > 0, delta in (0,1), alpha in (0,1/2), beta in (0,1)")
    try:
        vc = t.vc
    except ValueError as exc:
        raise PlanInfeasible(str(exc)) from None
    halting, restarts = t.design
    warnings: list[str] = []
    if t.accounting == "paper":
        if (halting, restarts) != ("paper", "per-top"):
            raise PlanInfeasible("the paper accounting plans the paper's own design only "
                                 "(halting 'paper', restarts 'per-top'); use --accounting tight")
        ps = paper_schedule(t.epsilon, t.delta, t.alpha, t.beta, vc, t.rounds,
                            lambda_log=t.lambda_log, halts=t.halts, k=t.k,
                            cap_c=False, boundaries=boundaries(t.concept))
        rounds = ps.specs
        sched, why = _schedule(rounds)
        cert = certify(sched if sched is not None else rounds, ps.n_required, "paper", t.delta)
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

    if t.block_bound == "lemma-s" and restarts != "private":
        raise PlanInfeasible("Lemma S (conditional accounting) applies to restarts 'private' only")
    opts = _tight_options(t, vc)
    try:
        sol = solve(t.epsilon, t.delta, t.alpha, t.beta, vc, opts)
    except ValueError as exc:
        raise PlanInfeasible(str(exc)) from None
    rounds = sol.specs
    sched, why = _schedule(rounds, halting, restarts)
    cert = certify(sched if sched is not None else rounds, sol.n_required, "tight", t.delta,
                   halting=halting, restarts=restarts, block_bound=t.block_bound)
    acc, w = _accuracy_checks(t, rounds)
    warnings.append(f"rounds after {len(rounds)} repeat round {len(rounds)} with alpha fixed at "
                    f"{rounds[-1].alpha:.3g}: privacy is unaffected; Claim E.1's accuracy argument "
                    "(sum of alpha_j) is not covered beyond it")
    return Plan(targets=t, rounds=rounds, repeat_last=True, n_required=sol.n_required,
                certificate=cert, schedule=sched, not_runnable_reason=_why(cert, why),
                round_plans=sol.rounds, E1=sol.E1, E2=sol.E2, r1=sol.r1, rD=sol.rD,
                checks=tuple(acc), warnings=tuple(warnings + w))


def _tight_options(t: Targets, vc: int) -> TightOptions:
    """The solver's options for the targets' design; eps_r (if not given) minimises the estimated
    n (golden-section search on log eps_r; any eps_r is privacy-valid)."""
    halting, restarts = t.design
    eps_h = t.eps_h if t.eps_h is not None else DEFAULT_EPS_H
    base = TightOptions(halts=t.halts, k=t.k, rounds=t.rounds, lambda_log=t.lambda_log,
                        boundaries=boundaries(t.concept), cap_c=t.cap_c, halting=halting,
                        restarts=restarts, eps_h=eps_h, block_bound=t.block_bound)
    if restarts != "private" or t.block_bound == "lemma-s":
        return base
    if t.eps_r is not None:
        return dataclasses.replace(base, eps_r=t.eps_r)
    return dataclasses.replace(base, eps_r=_best_eps_r(t, vc, base))


def _best_eps_r(t: Targets, vc: int, base: TightOptions) -> float:
    room = t.epsilon - (base.eps_h if base.halting == "noisy" else 0.0)
    if room <= 0.0:
        return 0.5 * t.epsilon  # infeasible anyway; the solver says why

    def cost(log_er: float) -> float:
        o = dataclasses.replace(base, eps_r=math.exp(log_er))
        return math.log(estimate_n(t.epsilon, t.delta, t.alpha, t.beta, vc, o))

    lo, hi = math.log(0.1 * room), math.log(min(0.7 * room, 10.0))
    g = (math.sqrt(5.0) - 1.0) / 2.0
    a, b = lo, hi
    x1, x2 = b - g * (b - a), a + g * (b - a)
    f1, f2 = cost(x1), cost(x2)
    for _ in range(7):
        if f1 <= f2:
            b, x2, f2 = x2, x1, f1
            x1 = b - g * (b - a)
            f1 = cost(x1)
        else:
            a, x1, f1 = x1, x2, f2
            x2 = a + g * (b - a)
            f2 = cost(x2)
    best = x1 if f1 <= f2 else x2
    return round(math.exp(best), 4)


@dataclass(frozen=True, slots=True)
class DesignCost:
    """One (halting, restarts) design planned for the same targets."""

    halting: str
    restarts: str
    n_required: int | None
    """None when no schedule of the design meets the targets (``reason``)."""
    epsilon_training: float
    epsilon_queries: float
    """+inf unless the design's query chain is proven (``query_private``)."""
    query_private: bool
    conditional_on: str | None
    """"Lemma S" for the conditional accounting: its epsilons are then conditional on it."""
    eps_h: float | None
    eps_r: float | None
    reason: str = ""
    epsilon_conditional: float = math.inf
    """max of the conditional chains (``conditional_on`` or the chain without an invalid Q0)."""
    in_round_epsilon: float = math.inf
    """Theorem Q's epsilon for the design (+inf: a channel is open)."""
    in_round_delta: float = 0.0
    in_round_lemma: str = ""
    in_round_note: str = ""
    is_default: bool = False

    @property
    def name(self) -> str:
        tag = " (Lemma S)" if self.conditional_on else ""
        return f"{self.halting}+{self.restarts}{tag}"


def designs(targets: Targets, include_conditional: bool = True) -> tuple[DesignCost, ...]:
    """Plan every (halting, restarts) design for the same targets (tight accounting), the
    default first, and the conditional Lemma S design last when ``include_conditional``.

    The other private-restart designs reuse the default design's eps_r (chosen to minimise its
    n) unless the targets fix one."""
    t = dataclasses.replace(targets, accounting="tight")
    out: list[DesignCost] = []
    try:
        chosen = plan(dataclasses.replace(t, halting=None, restarts=None, block_bound="pure"))
        default = (chosen.certificate.halting, chosen.certificate.restarts)
    except PlanInfeasible:
        default = ("", "")
    todo: list[tuple[Halting, Restarts, BlockBound]] = [(h, r, "pure") for h, r in DESIGNS]
    if include_conditional:
        todo.append(("noisy", "private", "lemma-s"))
    eps_r = t.eps_r
    for h, r, bb in todo:
        tt = dataclasses.replace(t, halting=h, restarts=r, block_bound=bb,
                                 eps_r=eps_r if bb == "pure" else None)
        try:
            p = plan(tt)
        except PlanInfeasible as exc:
            out.append(DesignCost(h, r, None, math.inf, math.inf, False,
                                  "Lemma S" if bb == "lemma-s" else None, None, None, str(exc)))
            continue
        c = p.certificate
        r1 = p.rounds[0]
        if eps_r is None and r == "private" and bb == "pure":
            eps_r = r1.restart_eps
        q0 = next(st for st in c.steps if st.name.startswith("in-round answers"))
        out.append(DesignCost(
            halting=h, restarts=r, n_required=p.n_required, epsilon_training=c.epsilon_training,
            epsilon_queries=c.epsilon_queries, query_private=c.query_private,
            conditional_on=c.conditional_on, eps_h=r1.halt_eps, eps_r=r1.restart_eps,
            reason=c.queries_reason if not c.query_private else "",
            epsilon_conditional=max(c.epsilon_training_conditional, c.epsilon_queries_conditional),
            in_round_epsilon=q0.epsilon, in_round_delta=q0.delta, in_round_lemma=q0.lemma,
            in_round_note=q0.note,
            is_default=(h, r) == default and bb == "pure",
        ))
    return tuple(out)


def cheapest_sound(costs: tuple[DesignCost, ...]) -> DesignCost | None:
    """The query-private (proven, unconditional) design with the smallest n_required."""
    sound = [d for d in costs if d.query_private and d.conditional_on is None and d.n_required]
    return min(sound, key=lambda d: d.n_required or 0) if sound else None


def _try_plan(t: Targets) -> Plan | None:
    try:
        return plan(t)
    except PlanInfeasible:
        return None


EPS_R_SHARE = 0.4
"""best_epsilon's eps_r for private restarts: EPS_R_SHARE of what eps_h leaves (plan() searches
eps_r instead; this share is within a few percent of n of the searched optimum for eps <= 2)."""


def _try_plan_fast(t: Targets) -> Plan | None:
    """:func:`plan` with eps_r set by rule (no search), for :func:`best_epsilon`'s bisection; the
    default design still compares ``DEFAULT_CANDIDATES``."""
    room = t.epsilon - (t.eps_h if t.eps_h is not None else DEFAULT_EPS_H)
    if t.eps_r is not None or room <= 0.0 or t.accounting != "tight" or t.block_bound != "pure":
        return _try_plan(t)
    rule = round(EPS_R_SHARE * room, 6)
    if not t.is_default_design:
        return _try_plan(dataclasses.replace(t, eps_r=rule) if t.design[1] == "private" else t)
    cands = [_try_plan(dataclasses.replace(t, halting=h, restarts=r,
                                           eps_r=rule if r == "private" else None))
             for h, r in DEFAULT_CANDIDATES]
    ok = [p for p in cands if p is not None and p.certificate.query_private]
    if not ok:
        return None
    return dataclasses.replace(min(ok, key=lambda p: p.n_required), targets=t)


def best_epsilon(n: int, targets: Targets, lo: float = 1e-2, hi: float | None = None,
                 rel_tol: float = 5e-3) -> Achievable:
    """Smallest target epsilon whose plan needs <= n training examples (bisection on log epsilon;
    n_required is decreasing in epsilon over the searched range). The paper accounting searches
    (0, 1] (Theorem 5.1's range). With private restarts and no eps_r given, eps_r is set by rule
    (``EPS_R_SHARE``), so the plan found may need slightly more data than :func:`plan`'s."""
    if hi is None:
        hi = 1.0 if targets.accounting == "paper" else 64.0
    top = _try_plan_fast(targets.with_epsilon(hi))
    if top is None or top.n_required > n:
        need = "" if top is None else f" (epsilon = {hi:g} already needs n = {top.n_required:.3g})"
        need = need.replace("e+0", "e").replace("e+", "e")
        return Achievable(n=n, epsilon=math.inf, target=math.inf, plan=None,
                          reason=f"no epsilon <= {hi:g} can be certified with n = {n}{need}")
    bottom = _try_plan_fast(targets.with_epsilon(lo))
    if bottom is not None and bottom.n_required <= n:
        return Achievable(n=n, epsilon=_eps(bottom), target=lo, plan=bottom,
                          reason=f"searched down to epsilon = {lo:g} only")
    best, a, b = top, math.log(lo), math.log(hi)
    while b - a > rel_tol:
        mid = 0.5 * (a + b)
        p = _try_plan_fast(targets.with_epsilon(math.exp(mid)))
        if p is not None and p.n_required <= n:
            best, b = p, mid
        else:
            a = mid
    return Achievable(n=n, epsilon=_eps(best), target=math.exp(b), plan=best)


def _eps(p: Plan) -> float:
    """What a plan certifies: max(training, queries) for a query-private design; otherwise the
    conditional numbers (Lemma S, or the chain without an invalid in-round step)."""
    c = p.certificate
    if c.query_private:
        return max(c.epsilon_training, c.epsilon_queries)
    return max(c.epsilon_training_conditional, c.epsilon_queries_conditional)

