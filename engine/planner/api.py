"""The planner's entry points: targets -> plan, n -> best epsilon.

``plan(targets)`` builds a schedule (``paper`` accounting: the paper's own formulas, section 5;
``tight``: ``engine.planner.tight``) and certifies it with ``engine.planner.chain.certify`` -- the
certificate is always re-derived from the schedule alone, never copied from the solver.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from engine.errors import InvalidSchedule
from engine.planner.chain import Accounting, Certificate, certify
from engine.planner.learning import (
    HaltBudget,
    LambdaLog,
    boundaries,
    p_top,
    split_votes_failure,
    vc_dimension,
)
from engine.planner.paper import PaperSchedule, paper_schedule
from engine.planner.steps import Check, Step
from engine.planner.tight import RoundPlan, TightOptions, solve
from engine.schedule import RoundSpec, Schedule

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
        """Training epsilon and the conditional query epsilon are within the target."""
        c, e = self.certificate, self.targets.epsilon * (1.0 + TARGET_SLACK)
        return c.epsilon_training <= e and c.epsilon_queries_conditional <= e


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


def _schedule(rounds: tuple[RoundSpec, ...]) -> tuple[Schedule | None, str]:
    try:
        return Schedule(rounds=rounds, repeat_last=True, halting="paper"), ""
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
    for i, r in enumerate(rounds, start=1):
        if t.halts == "split-votes":
            p = p_top(r.band, r.lam, nb)
            fail = split_votes_failure(r.c, r.R, p)
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
    """Compute a schedule meeting ``targets`` and certify it. Raises :class:`PlanInfeasible`."""
    t = targets
    if not (t.epsilon > 0.0 and 0.0 < t.delta < 1.0 and 0.0 < t.alpha < 0.5 and 0.0 < t.beta < 1.0):
        raise PlanInfeasible("need epsilon > 0, delta in (0,1), alpha in (0,1/2), beta in (0,1)")
    try:
        vc = t.vc
    except ValueError as exc:
        raise PlanInfeasible(str(exc)) from None
    warnings: list[str] = []
    if t.accounting == "paper":
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

    opts = TightOptions(halts=t.halts, k=t.k, rounds=t.rounds, lambda_log=t.lambda_log,
                        boundaries=boundaries(t.concept), cap_c=t.cap_c)
    try:
        sol = solve(t.epsilon, t.delta, t.alpha, t.beta, vc, opts)
    except ValueError as exc:
        raise PlanInfeasible(str(exc)) from None
    rounds = sol.specs
    sched, why = _schedule(rounds)
    cert = certify(sched if sched is not None else rounds, sol.n_required, "tight", t.delta)
    acc, w = _accuracy_checks(t, rounds)
    warnings.append(f"rounds after {len(rounds)} repeat round {len(rounds)} with alpha fixed at "
                    f"{rounds[-1].alpha:.3g}: privacy is unaffected; Claim E.1's accuracy argument "
                    "(sum of alpha_j) is not covered beyond it")
    return Plan(targets=t, rounds=rounds, repeat_last=True, n_required=sol.n_required,
                certificate=cert, schedule=sched, not_runnable_reason=_why(cert, why),
                round_plans=sol.rounds, E1=sol.E1, E2=sol.E2, r1=sol.r1, rD=sol.rD,
                checks=tuple(acc), warnings=tuple(warnings + w))


def _try_plan(t: Targets) -> Plan | None:
    try:
        return plan(t)
    except PlanInfeasible:
        return None


def best_epsilon(n: int, targets: Targets, lo: float = 1e-2, hi: float | None = None,
                 rel_tol: float = 5e-3) -> Achievable:
    """Smallest target epsilon whose plan needs <= n training examples (bisection on log epsilon;
    n_required is decreasing in epsilon over the searched range). The paper accounting searches
    (0, 1] (Theorem 5.1's range)."""
    if hi is None:
        hi = 1.0 if targets.accounting == "paper" else 64.0
    top = _try_plan(targets.with_epsilon(hi))
    if top is None or top.n_required > n:
        need = "" if top is None else f" (epsilon = {hi:g} already needs n = {top.n_required:.3g})"
        need = need.replace("e+0", "e").replace("e+", "e")
        return Achievable(n=n, epsilon=math.inf, target=math.inf, plan=None,
                          reason=f"no epsilon <= {hi:g} can be certified with n = {n}{need}")
    bottom = _try_plan(targets.with_epsilon(lo))
    if bottom is not None and bottom.n_required <= n:
        return Achievable(n=n, epsilon=_eps(bottom), target=lo, plan=bottom,
                          reason=f"searched down to epsilon = {lo:g} only")
    best, a, b = top, math.log(lo), math.log(hi)
    while b - a > rel_tol:
        mid = 0.5 * (a + b)
        p = _try_plan(targets.with_epsilon(math.exp(mid)))
        if p is not None and p.n_required <= n:
            best, b = p, mid
        else:
            a = mid
    return Achievable(n=n, epsilon=_eps(best), target=math.exp(b), plan=best)


def _eps(p: Plan) -> float:
    c = p.certificate
    return max(c.epsilon_training, c.epsilon_queries_conditional)

