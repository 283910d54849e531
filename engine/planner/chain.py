"""Certify a schedule: the privacy chains of GenericBBL, step by step, for the training set and for
the queries (docs/privacy/genericbbl.md sections 3-8), under an accountant (``accountants``).

Every number is computed for what the engine runs: the integer thresholds and exact noise scales of
``engine.design.noise_plan`` (a schedule it cannot run exactly is refused, with the reason).

Notation (per round i, all from the schedule; ``engine.schedule.RoundSpec``): T_i chunks of lambda_i
points, |S_i| = lambda_i T_i; R_i queries, hard cap c_i on the tops; S-hat_i has m_S points (rate
r_S = m_S/|S_i|), D-hat_i keeps m_D of the R_i queries (rate r_D = m_D/R_i); S_1 is a uniform subset
of the n training examples (rate r_1 = |S_1|/n). All rates are exact ratios, rounded up.

The route, in the order a reader follows it (:func:`certify`):

1. ``_runnable_checks``: can the engine run the schedule (exactly, and within one engine's
   capacity), can each S_{i+1} be formed (Claim D.6), the accuracy floors (accuracy only).
2. ``_training_chain`` (Claim E.5, repaired; section 3): the adversary's view is post-processing of
   (round-1 answers, S_2). ``_phi`` prices Phi_1 = (round-1 answers, S_2) w.r.t. S_1: the round
   (T1-T2), LabelBoost with a labeled-part neighbour and the subsample S-hat_1 (T3), composed (T4);
   then the subsample S_1 from S (T5).
3. ``_query_chain`` (Claim E.6, repaired; section 4), for every listed round i: the in-round step
   (Q0, Theorem Q), then Phi_{i+1} (Q1-Q4), LabelBoost with an unlabeled-part neighbour (Q5), the
   subsample D-hat_i (Q6); the worst round is reported, composed with its Q0 (Q7).

Delta allocation (tight): Delta_1 = delta/r_1 and Delta_{i+1} = (delta - delta_in)/(f r_D) (f = 1
under Lemma LB, 4e under Lemma C.1), each
shaved to the largest float whose product with its rate is <= the target, so no printed delta
exceeds its target; E is the smallest level the round certifies at that Delta. A failed privacy
precondition makes the chain's epsilon +inf with the reason; no number is made up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from everlast.engine.design import PAPER, Design, capacity_problem, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.noise import MAX_SCALE, saturation_tv
from everlast.engine.planner.above_threshold import up_sum
from everlast.engine.planner.accountants import (
    ENGINE,
    Accountant,
    LabelBoostStep,
    RoundAnswers,
    Subsample,
    accountant,
    compose,
    exact_rate,
    within,
)
from everlast.engine.planner.design_rules import ClientTests, rules
from everlast.engine.planner.steps import Chain, Check, Receipt, Step
from everlast.engine.schedule import RoundSpec, Schedule

__all__ = ["Certificate", "certify", "exact_rate", "in_round_step", "within"]


@dataclass(frozen=True, slots=True)
class Certificate:
    """What a schedule run on n training examples certifies."""

    accounting: str
    """The accountant's name (``--accounting``): tight or paper."""
    n: int
    delta_target: float
    halting: str
    restarts: str
    epsilon_training: float
    delta_training: float
    epsilon_queries: float
    """+inf unless every step of the query chain is proven (Theorem Q's designs)."""
    epsilon_queries_conditional: float
    """The query chain without its in-round step when that step is not valid (Claim E.6 as
    published): NOT a guarantee."""
    delta_queries: float
    query_private: bool
    worst_query_round: int | None
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]
    design: str
    """The design's name (``engine.design``): the one the chain was certified for, always given."""
    warnings: tuple[str, ...] = ()
    training_reason: str = ""
    queries_reason: str = ""
    runnable: bool = True
    not_runnable_reason: str = ""
    per_round_queries: tuple[tuple[int, float, float], ...] = field(default=())
    """(round, conditional eps_D, delta_D) for every round the query chain was evaluated at."""
    describes: str = ENGINE
    """What the numbers are about: the engine's mechanism (tight accounting) or the paper's
    idealised one (paper accounting)."""

    @property
    def epsilon(self) -> float:
        """The larger of the two chains (+inf if either is not certified)."""
        return max(self.epsilon_training, self.epsilon_queries)

    @property
    def delta(self) -> float:
        return max(self.delta_training, self.delta_queries)

    @property
    def epsilon_claimed(self) -> float:
        """What the certificate can be quoted at: both proven chains for a query-private design,
        else the training chain and the conditional query chain (NOT a guarantee for queries)."""
        if self.query_private:
            return self.epsilon
        return max(self.epsilon_training, self.epsilon_queries_conditional)

    def meets(self, epsilon: float, delta: float, slack: float = 1e-9) -> bool:
        """Both chains certified at <= epsilon (relative float slack) and delta <= its target."""
        return (self.epsilon <= epsilon * (1.0 + slack) and self.delta <= delta
                and self.describes == ENGINE)

    @property
    def privacy_checks_hold(self) -> bool:
        return all(c.holds for c in self.checks if c.kind == "privacy")


@dataclass(frozen=True, slots=True)
class _Context:
    """What every step of :func:`certify` reads."""

    rounds: tuple[RoundSpec, ...]
    repeat_last: bool
    design: Design
    n: int
    delta: float
    acct: Accountant
    tests: ClientTests | None = None
    """The schedule's per-client quotas and burn-rate signal (Theorem Q+), when on."""

    def spec(self, i: int) -> RoundSpec | None:
        """Round i's parameters (rounds past the last listed one repeat it, if it repeats)."""
        if i <= len(self.rounds):
            return self.rounds[i - 1]
        return self.rounds[-1] if self.repeat_last else None


def certify(
    schedule: Schedule | Sequence[RoundSpec],
    n: int,
    accounting: str | Accountant = "tight",
    delta: float = 1e-6,
    *,
    repeat_last: bool | None = None,
    design: Design | None = None,
    tests: ClientTests | None = None,
) -> Certificate:
    """Certify ``schedule`` run on ``n`` training examples (the route: the module docstring).

    ``delta`` is the target delta of each chain (tight: epsilon is minimised at this delta and no
    printed delta exceeds it; paper accounting: the chain's own delta is reported). A bare
    sequence of rounds (e.g. the paper's schedule, which the engine cannot run) is accepted; its
    design defaults to the paper's. ``tests``: per-client quotas and the burn-rate signal of a bare
    sequence of rounds (a ``Schedule`` carries its own).
    """
    ctx = _context(schedule, n, accountant(accounting), delta, repeat_last, design, tests)
    runnable_reason, checks, warnings = _runnable_checks(ctx)
    training = _training_chain(ctx, runnable_reason)
    queries = _query_chain(ctx)
    warnings += rules(ctx.design).warnings(ctx.rounds, ctx.repeat_last)
    return Certificate(
        accounting=ctx.acct.name, n=n, delta_target=delta, halting=ctx.design.halting.value,
        restarts=ctx.design.restarts.value, epsilon_training=training.eps_S, delta_training=training.delta_S,
        epsilon_queries=queries.eps, epsilon_queries_conditional=queries.eps_cond, delta_queries=queries.delta,
        query_private=math.isfinite(queries.eps), worst_query_round=queries.worst,
        steps=training.steps + queries.steps, checks=tuple(checks) + training.checks + queries.checks,
        warnings=tuple(dict.fromkeys(warnings)), training_reason=training.reason, queries_reason=queries.reason,
        runnable=not runnable_reason, not_runnable_reason=runnable_reason,
        per_round_queries=queries.per_round, design=ctx.design.name, describes=ctx.acct.describes,
    )


def _context(schedule: Schedule | Sequence[RoundSpec], n: int, acct: Accountant, delta: float,
             repeat_last: bool | None, design: Design | None, tests: ClientTests | None = None) -> _Context:
    if isinstance(schedule, Schedule):
        rounds, rep, dsg = schedule.rounds, schedule.repeat_last, schedule.design
        tests = ClientTests.of(schedule.quotas, schedule.burn)
    else:
        rounds, rep, dsg = tuple(schedule), True, PAPER  # a bare list of rounds: the paper's schedule
    if not rounds:
        raise ValueError("a schedule needs at least one round")
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must lie in (0, 1)")
    return _Context(rounds, rep if repeat_last is None else repeat_last, design or dsg, n, delta, acct, tests)


# ---------------------------------------------------------------------------------------------
# 1. Runnability and accuracy floors


def _runnable_checks(ctx: _Context) -> tuple[str, list[Check], list[str]]:
    """('' or why the engine cannot run the schedule, the checks, warnings). Only inexactness voids
    the certificate (the round's step says so); a round too large for one engine is certified but
    flagged not runnable, and so is one whose S_{i+1} cannot be formed (Claim D.6)."""
    reason = _runnable(ctx.rounds, ctx.design)
    checks: list[Check] = []
    dsg = rules(ctx.design)
    for i, r in enumerate(ctx.rounds, start=1):
        nxt = ctx.spec(i + 1)
        if nxt is not None:
            ok = r.m_D >= nxt.labeled_size and r.m_D <= r.R
            checks.append(Check("D.6: m_D >= |S_{i+1}| (S_{i+1} can be formed)", "Claim D.6",
                                "accuracy", ok, nxt.labeled_size, r.m_D, i))
            if not ok and not reason:
                reason = (f"round {i}: D-hat_{i} has {r.m_D} points but S_{i + 1} needs "
                          f"{nxt.labeled_size} (Claim D.6): the algorithm is undefined")
        checks.extend(dsg.accuracy_checks(r, i))
    warnings = ["not runnable: " + reason] if reason else []
    if ctx.acct.describes == ENGINE:
        checks.extend(_scale_checks(ctx.rounds, ctx.design))
    else:
        warnings.append(f"{ctx.acct.name} accounting: {ctx.acct.describes}")
    return reason, checks, warnings


def _runnable(rounds: Sequence[RoundSpec], design: Design) -> str:
    """'' if the engine runs every round (exactly, and within what one engine holds), else the
    first reason it cannot."""
    for i, r in enumerate(rounds, start=1):
        try:
            noise_plan(design, r)
        except InvalidSchedule as exc:
            return f"round {i}: {exc}"
        too_big = capacity_problem(r)
        if too_big:
            return f"round {i}: {too_big}"
    return ""


def _scale_checks(rounds: Sequence[RoundSpec], design: Design) -> list[Check]:
    """The noise saturation (engine.noise): per draw, the total variation to the exact law is at most
    2 exp(-2^62/t), which is 0.0 in floating point for every scale the engine runs (t <= 2^40)."""
    out = []
    for i, r in enumerate(rounds, start=1):
        try:
            plan = noise_plan(design, r)
        except InvalidSchedule:
            continue
        t = max(float(s) for s in (plan.query, plan.threshold, plan.halt_query, plan.halt_threshold) if s)
        out.append(Check("noise saturation at 2^62: per-draw total variation <= 2 exp(-2^62/t)", "engine.noise",
                         "privacy", saturation_tv(plan.query) == 0.0 and t <= float(MAX_SCALE), t,
                         float(MAX_SCALE), i, "value = the largest noise scale t of the round"))
    return out


# ---------------------------------------------------------------------------------------------
# 2. The training chain (section 3)


@dataclass(frozen=True, slots=True)
class _Training:
    eps_S: float
    delta_S: float
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]
    reason: str


def _phi(ctx: _Context, spec: RoundSpec, rnd: int, Delta: float, chain: Chain) -> Receipt:
    """Phi_rnd: (round-rnd answers, S_{rnd+1}) w.r.t. S_rnd (steps T1-T4, or Q1-Q4 for round i+1)."""
    answers = ctx.acct.round_answers(RoundAnswers(ctx.design, spec, rnd, Delta, chain))
    s_ok = 1 <= spec.m_S <= spec.labeled_size
    s_check = Check("S-hat is a subset of S_i (m_S <= lambda T)", "step 3(f)", "privacy",
                    s_ok, spec.m_S, spec.labeled_size, rnd)
    lb = ctx.acct.labelboost(LabelBoostStep("labeled", rnd, chain))
    s_hat = ctx.acct.subsample(Subsample(
        spec.m_S, spec.labeled_size, lb.epsilon, 0.0, f"subsample S-hat_{rnd} from S_{rnd}", rnd, chain,
        (("m_S", spec.m_S), ("S_size", spec.labeled_size)), check="Claim 2.7 applies: r_S (3 + e^3) <= 1"))
    E = answers.epsilon if s_ok else math.inf
    reason = answers.reason or ("" if s_ok else f"round {rnd}: m_S = {spec.m_S} is not a subsample size of S_{rnd}")
    if not reason and math.isfinite(E) and not math.isfinite(s_hat.epsilon):
        reason = f"round {rnd}: Claim 2.7 does not apply to S-hat (r_S (3+e^3) > 1)"
    phi = compose(f"Phi_{rnd}: (answers_{rnd}, S_{rnd + 1}) w.r.t. S_{rnd}", "Proposition 2.5 (basic adaptive "
                  "composition)", rnd, chain, Receipt(E, 0.0), s_hat, delta=answers.delta)
    return Receipt(phi.epsilon, answers.delta, answers.steps + lb.steps + s_hat.steps + phi.steps,
                   (*answers.checks, s_check, *s_hat.checks), reason)


def _training_chain(ctx: _Context, runnable_reason: str) -> _Training:
    """T1-T5 for round 1, then the subsample S_1 from the training set."""
    s1 = ctx.rounds[0].labeled_size
    n_check = Check("n >= |S_1|", "step 2", "privacy", ctx.n >= s1, s1, ctx.n, 1)
    if ctx.n < s1:
        return _Training(math.inf, 1.0, (), (n_check,), f"n = {ctx.n} < |S_1| = {s1}: round 1 cannot be formed")
    r1 = exact_rate(s1, ctx.n)
    ph = _phi(ctx, ctx.rounds[0], 1, ctx.acct.allot(ctx.delta, r1), "training")
    s_1 = ctx.acct.subsample(Subsample(
        s1, ctx.n, ph.epsilon, ph.delta, "subsample S_1 from S (training set)", 1, "training",
        (("S1_size", s1), ("n", ctx.n)), short_lemma=True, check="Claim 2.7 applies to S_1 <- S",
        refusal="Claim 2.7 does not apply to S_1 <- S (r_1 (3 + e^Phi_1) > 1)"))
    reason = ph.reason or s_1.reason
    if not math.isfinite(s_1.epsilon) and not reason:
        reason = "training chain not certified"
    if ctx.acct.describes == ENGINE and runnable_reason and math.isfinite(s_1.epsilon):
        reason = reason or f"not runnable: {runnable_reason}"
    return _Training(s_1.epsilon, s_1.delta, ph.steps + s_1.steps, (n_check, *ph.checks, *s_1.checks), reason)


# ---------------------------------------------------------------------------------------------
# 3. The query chain (section 4)


@dataclass(frozen=True, slots=True)
class _Queries:
    eps: float
    eps_cond: float
    delta: float
    worst: int
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]
    per_round: tuple[tuple[int, float, float], ...]
    reason: str


@dataclass(frozen=True, slots=True)
class _RoundQueries:
    """The query chain of a query in round i, without the final composition (Q7)."""

    eps_D: float
    delta_D: float
    steps: list[Step]
    checks: tuple[Check, ...]
    pre_reason: str

    @property
    def q0(self) -> Step:
        return self.steps[0]


def in_round_step(design: Design, spec: RoundSpec, rnd: int, cap_floor: float = 0.0,
                  tests: ClientTests | None = None) -> Step:
    """Step Q0 of the query chain: the other answers of the query's own round (Theorem Q for the
    target-charged design; not valid for the paper's). ``cap_floor``: the largest halting-cap
    probability of any round of the schedule (a cap may act in any round)."""
    ir = rules(design).in_round(spec, cap_floor, tests)
    inputs: dict[str, float | int | str | bool | None] = {
        "c": spec.c, "R": spec.R, "design": design.name, "eps_h": ir.eps_h, "delta_cap_h": ir.delta_cap_h,
    }
    if tests is not None:  # Theorem Q+: the quota tests' and the burn-rate signal's charges
        inputs["eps_q"] = float(ClientTests(tests.quotas).epsilon(spec)) if tests.quotas is not None else None
        inputs["eps_b"] = float(ClientTests(burn=tests.burn).epsilon(spec)) if tests.burn is not None else None
    return Step.make("queries", f"in-round answers, round {rnd}", ir.lemma, ir.epsilon, ir.delta,
                     inputs, rnd, valid=ir.valid, note=ir.note)


def _round_queries(ctx: _Context, i: int, cap_floor: float) -> _RoundQueries:
    """Q0-Q6 for a query of round i."""
    cur, nxt = ctx.rounds[i - 1], ctx.spec(i + 1)
    q0 = in_round_step(ctx.design, cur, i, cap_floor, ctx.tests)
    if nxt is None:
        after = Step.make("queries", f"after round {i}", "nothing follows the last round", 0.0, 0.0, {}, i)
        return _RoundQueries(0.0, 0.0, [q0, after], (), "")
    d_ok = 1 <= cur.m_D <= cur.R
    d_check = Check("D-hat is a subset of D_i (m_D <= R)", "step 3(f)", "privacy", d_ok, cur.m_D, cur.R, i)
    # the in-round step's delta (Lemma Cap) is taken off the target first; the rest is shaved so
    # that d_in + r_D 4e Delta <= delta holds in floating point too
    room = _room(ctx.delta, q0.delta if q0.valid else 0.0)
    if room <= 0.0:
        q0, room = _refuse_in_round(q0, ctx.delta), ctx.delta
    r_D = exact_rate(cur.m_D, cur.R)
    factor = ctx.acct.labelboost_delta_factor
    ph = _phi(ctx, nxt, i + 1, ctx.acct.allot(room, Fraction(factor) * Fraction(r_D)), "queries")
    lb = ctx.acct.labelboost(LabelBoostStep("unlabeled", i, "queries", ph.epsilon, ph.delta))
    d_hat = ctx.acct.subsample(Subsample(
        cur.m_D, cur.R, lb.epsilon, ph.delta, f"subsample D-hat_{i} from D_{i}", i, "queries",
        (("m_D", cur.m_D), ("R", cur.R)), delta_factor=factor, short_lemma=True,
        check="Claim 2.7 applies to D-hat_i <- D_i"))
    eps_D = d_hat.epsilon if d_ok else math.inf
    pre = "" if d_ok else f"round {i}: m_D = {cur.m_D} exceeds R = {cur.R}"
    pre = pre or ph.reason
    if not pre and not math.isfinite(eps_D):
        pre = f"round {i}: query chain not certified (Claim 2.7 does not apply)"
    return _RoundQueries(eps_D, d_hat.delta, [q0, *ph.steps, *lb.steps, *d_hat.steps],
                         (d_check, *ph.checks, *d_hat.checks), pre)


def _query_chain(ctx: _Context) -> _Queries:
    """Q0-Q6 for every listed round (later rounds repeat the last one); the worst round, composed
    with its Q0 (Q7, Proposition 2.5)."""
    cap_floor = max(rules(ctx.design).in_round(r).delta_cap_h for r in ctx.rounds)  # Theorem Q, step 1
    per = [_round_queries(ctx, i, cap_floor) for i in range(1, len(ctx.rounds) + 1)]
    checks = tuple(c for p in per for c in p.checks)
    # the worst round, by the full chain when every Q0 is valid, else by the conditional chain;
    # ties within a relative 1e-9 go to the earliest round (stable output)
    all_valid = all(p.q0.valid for p in per)

    def key(p: _RoundQueries) -> float:
        return p.eps_D + p.q0.epsilon if all_valid else p.eps_D

    top = max(key(p) for p in per)
    worst = next(i for i, p in enumerate(per, start=1) if key(p) >= top * (1.0 - 1e-9))
    w = per[worst - 1]
    # the tie rule only picks the round whose steps are shown; the figures are the maxima over rounds
    # (a round within 1e-9 of the top must never lower the epsilon or the delta certified)
    shown = per if all_valid else [w]
    eps_q = max(up_sum(p.eps_D, p.q0.epsilon) if math.isfinite(p.eps_D + p.q0.epsilon) else math.inf
                for p in shown)
    delta_q = max(up_sum(p.delta_D, p.q0.delta) for p in shown)
    final = Step.make("queries", f"query chain, round {worst} (worst round)",
                      "Proposition 2.5 (in-round step + later rounds)", eps_q, delta_q, {}, worst,
                      valid=math.isfinite(eps_q))
    first_pre = next((p.pre_reason for p in per if p.pre_reason), "")
    return _Queries(eps_q, max(p.eps_D for p in per), delta_q, worst, (*w.steps, final), checks,
                    tuple((i, p.eps_D, p.delta_D) for i, p in enumerate(per, start=1)),
                    _queries_reason(ctx, w, worst, eps_q, first_pre))


def _queries_reason(ctx: _Context, w: _RoundQueries, worst: int, eps_q: float, first_pre: str) -> str:
    if math.isfinite(eps_q):
        return ""
    if first_pre and not math.isfinite(w.eps_D):
        return first_pre
    if w.q0.valid:
        return "query chain not certified"
    return rules(ctx.design).q0_reason(worst, w.q0.note)


def _room(delta: float, d_in: float) -> float:
    """The largest float x with d_in + x <= delta exactly (<= 0 when d_in >= delta)."""
    x = delta - d_in
    while x > 0.0 and Fraction(d_in) + Fraction(x) > Fraction(delta):
        x = math.nextafter(x, 0.0)
    return x


def _refuse_in_round(step: Step, delta: float) -> Step:
    """Q0 whose own delta already reaches the target: the query chain cannot be certified at delta."""
    note = (f"the halting test's hard-cap charge (Lemma Cap: (1 + e^e') delta_h, e' the in-round epsilon, "
            f"= {step.delta:.3g}) is not "
            f"below the target delta = {delta:.3g} (widen c - c0, raise eps_h, or certify at a larger delta)")
    return Step.make("queries", step.name, step.lemma, math.inf, step.delta, dict(step.inputs), step.round,
                     valid=False, note=note)
