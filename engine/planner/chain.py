"""Certify a schedule: the privacy chain of GenericBBL, step by step, for the training set and for
the queries (docs/privacy/genericbbl.md sections 3-8), for the engine's two designs (engine.design).

Every number is computed for what the engine runs: the integer thresholds and exact noise scales of
``engine.design.noise_plan`` (a schedule it cannot run exactly is refused, with the reason).

Notation (per round i, all from the schedule; see ``engine.schedule.RoundSpec``): T_i chunks of
lambda_i points, |S_i| = lambda_i T_i; R_i queries, hard cap c_i on the tops; S-hat_i has m_S points
(rate r_S = m_S/|S_i|), D-hat_i keeps m_D of the R_i queries (rate r_D = m_D/R_i); S_1 is a uniform
subset of the n training examples (rate r_1 = |S_1|/n). All rates are exact ratios, rounded up.

**Training set (Claim E.5, repaired).** The adversary's view is post-processing of (round-1
answers, S_2):
  1-2. The round's mechanism, by design:
     * target-charged: Lemma Q (TOP is a q-target, B-level eps0 = 1/t) and Lemma TC (charged steps
       <= K except w.p. delta_tail, K-fold KOV) -> (E_1, Delta_1);
     * paper: <= min(c_1, R_1) BetweenThresholds instances (a top ends one), each Theorem B
       (discrete, one top), composed by KOV (tight). The ``paper`` accounting instead applies the
       paper's own lemmas (Lemma C.3, Observation 2, Claim 2.7), which are stated for continuous
       noise on real vote shares: it describes the paper's idealised mechanism, not the engine's.
     Halting is post-processing of the answers plus independent noise.
  3. LabelBoost on S-hat_1 o D-hat_1, neighbour in the labeled part, followed by A = "output S_2";
     Lemma C.1 gives (3, 0); subsampling S-hat_1 from S_1: BBG (Claim 2.7 under the paper
     accounting) -> eps_LS.
  4. Basic composition: Phi_1 = (E_1 + eps_LS, Delta_1).
  5. S_1 drawn from S at rate r_1: BBG (Claim 2.7) -> (eps_S, delta_S).

**Queries (Claim E.6, repaired).** A query in round i reaches:
  0. the other round-i answers: Theorem Q (``query_side.in_round``): target-charged, eps_h with Lemma
     Cap's delta for the hard cap; paper: NOT valid (+inf), Claim E.6's step is false (issue 8);
  1-4. Phi_{i+1}, as steps 1-4 above for round i+1;
  5. LabelBoost, neighbour in the unlabeled part, followed by A = (S_{i+1} from D-hat_i', then
     Phi_{i+1}): Lemma C.1 -> (Phi_{i+1} + 3, 4e Delta_{i+1});
  6. D-hat_i drawn from D_i at rate r_D: BBG (Claim 2.7) -> (eps_D, delta_D);
  7. basic composition with step 0.
The maximum over rounds is reported. ``epsilon_queries_conditional`` is the chain *without* step 0
when step 0 is not valid: what Claim E.6 would give if its in-round step were true, never
presented as proven.

Delta allocation (tight): Delta_1 = delta/r_1 and Delta_{i+1} = (delta - delta_in)/(4e r_D), each
shaved to the largest float whose product with its rate is <= the target, so no printed delta
exceeds its target; E is the smallest level the round certifies at that Delta.

Any failed privacy precondition makes the chain's epsilon +inf with the reason in
``training_reason``/``queries_reason``; no number is made up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from everlast.engine.design import PAPER, Design, NoisePlan, capacity_problem, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.noise import MAX_SCALE, saturation_tv
from everlast.engine.planner import amplification as amp
from everlast.engine.planner import bt
from everlast.engine.planner import composition as comp
from everlast.engine.planner import target_charging as tc
from everlast.engine.planner import theorem_b as tb
from everlast.engine.planner.above_threshold import up, up_sum
from everlast.engine.planner.learning import d2_floor
from everlast.engine.planner.query_side import in_round
from everlast.engine.planner.steps import Check, Step
from everlast.engine.schedule import RoundSpec, Schedule

Accounting = Literal["tight", "paper"]
LABELBOOST_EPS = 3.0
"""Lemma C.1's additive epsilon (Beimel-Nissim-Stemmer 2021): (eps_A + 3, 4 e delta_A)."""
LABELBOOST_DELTA_FACTOR = math.nextafter(4.0 * math.e, math.inf)
"""4e rounded up (Lemma C.1's delta factor)."""
DELTA_CAP = 0.5
ENGINE = "the engine's mechanism (integer counts, exact discrete Laplace noise)"
IDEALISED = ("the paper's idealised mechanism (continuous Laplace noise on real vote shares): the paper's "
             "lemmas are stated for it, not for the engine's discrete mechanism")


@dataclass(frozen=True, slots=True)
class Certificate:
    """What a schedule run on n training examples certifies."""

    accounting: Accounting
    n: int
    delta_target: float
    halting: str
    restarts: str
    epsilon_training: float
    delta_training: float
    epsilon_queries: float
    """+inf unless every step of the query chain is proven (Theorem Q's designs, docs/PRIVACY.md)."""
    epsilon_queries_conditional: float
    """The query chain without its in-round step when that step is not valid (Claim E.6 as
    published), or the whole chain under ``conditional_on``: NOT a guarantee."""
    delta_queries: float
    query_private: bool
    worst_query_round: int | None
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]
    warnings: tuple[str, ...] = ()
    training_reason: str = ""
    queries_reason: str = ""
    runnable: bool = True
    not_runnable_reason: str = ""
    per_round_queries: tuple[tuple[int, float, float], ...] = field(default=())
    """(round, conditional eps_D, delta_D) for every round the query chain was evaluated at."""
    conditional_on: str | None = None
    """Always None: no certificate rests on an unproven lemma (kept as a JSON key)."""
    epsilon_training_conditional: float = math.inf
    """The training chain's epsilon (equal to ``epsilon_training``)."""
    design: str = "paper"
    """The design's name (engine.design)."""
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

    def meets(self, epsilon: float, delta: float, slack: float = 1e-9) -> bool:
        """Both chains certified at <= epsilon (relative float slack) and delta <= its target."""
        return (self.epsilon <= epsilon * (1.0 + slack) and self.delta <= delta
                and self.describes == ENGINE)

    @property
    def privacy_checks_hold(self) -> bool:
        return all(c.holds for c in self.checks if c.kind == "privacy")


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


@dataclass(frozen=True, slots=True)
class _Phi:
    eps: float
    delta: float
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]
    reason: str


Chain = Literal["training", "queries"]


def _invalid(ch: Chain, rnd: int, name: str, lemma: str, reason: str) -> _Phi:
    step = Step.make(ch, name, lemma, math.inf, 1.0, {}, rnd, valid=False, note=reason)
    return _Phi(math.inf, 1.0, (step,), (), reason)


def _tct_round(spec: RoundSpec, plan: NoisePlan, rnd: int, Delta: float, ch: Chain) -> _Phi:
    """Steps 1-2, target-charged: Lemma Q and Lemma TC (docs/privacy/genericbbl.md 6)."""
    eps0 = up(1 / plan.query)  # exact 1/t as a Fraction, rounded up
    m = plan.band + 1
    r = tc.round_epsilon(eps0, m, plan.c, spec.R, Delta)
    steps = [
        Step.make(ch, f"per-query mechanism, round {rnd}",
                  "Lemma Q (discrete): TOP is a q-target, B-level eps0 = 1/t (docs/privacy/genericbbl.md 6.1)",
                  eps0, 0.0, {"scale_t": float(plan.query), "band_counts_m": m, "q": r.q, "lo": plan.lo,
                              "hi": plan.hi}, rnd),
        Step.make(ch, f"round composition, round {rnd}",
                  "Lemma TC (target charging: K charged steps, KOV; docs/privacy/genericbbl.md 6.2)", r.E, Delta,
                  {"K": r.K, "c": plan.c, "R": spec.R, "delta_K": r.delta_K, "delta_tail": r.delta_tail,
                   "q": r.q}, rnd,
                  note="K = R: every query charged, no tail" if r.K >= spec.R else ""),
    ]
    reason = "" if math.isfinite(r.E) else (
        f"round {rnd}: no split of Delta = {Delta:.3g} certifies the round (c = {plan.c}, eps0 = {eps0:.3g})")
    return _Phi(r.E, Delta, tuple(steps), (), reason)


def _paper_round_tight(spec: RoundSpec, plan: NoisePlan, rnd: int, Delta: float, ch: Chain) -> _Phi:
    """Steps 1-2, paper design, tight: Theorem B (discrete, one top) per instance, KOV over the
    min(c, R) instances (an instance started after the last query answers nothing)."""
    assert plan.threshold is not None and spec.delta_bt is not None
    count = min(spec.c, spec.R)
    e_i, d_i, m = tb.instance(plan.threshold, plan.query, plan.band, spec.delta_bt, tops=1)
    ok = math.isfinite(e_i)
    checks = [Check("Theorem B gap: m* = G - 2 mu* - 1 >= 1", "Theorem B (discrete)", "privacy", ok,
                    m, 1, rnd, "value = m*, the band's counts left at the threshold noise bound mu*")]
    reason = "" if ok else (f"round {rnd}: Theorem B's gap condition fails (band G = {plan.band} counts, "
                            f"delta_mu = {spec.delta_bt:.3g}; a larger T or eps')")
    steps = [Step.make(ch, f"BT instance, round {rnd}", "Theorem B (discrete, one top per instance; "
                       "docs/privacy/genericbbl.md 7)", e_i, d_i,
                       {"T": spec.T, "band_G": plan.band, "t_mu": float(plan.threshold),
                        "t_nu": float(plan.query), "m_star": m, "delta_mu": d_i}, rnd, valid=ok, note=reason)]
    E = comp.kov_epsilon(e_i, d_i, count, Delta) if ok else math.inf
    if ok and not math.isfinite(E):
        reason = f"round {rnd}: the instances' own delta already exceeds Delta={Delta:.3g}"
    steps.append(Step.make(ch, f"BT composition, round {rnd}",
                           "Kairouz-Oh-Viswanath 2015 Thm 3.3 (exact optimal composition)", E, Delta,
                           {"instances": count, "c": spec.c, "R": spec.R, "eps_instance": e_i,
                            "delta_instance": d_i}, rnd))
    return _Phi(E, Delta, tuple(steps), tuple(checks), reason)


def _paper_round_paper(spec: RoundSpec, rnd: int, ch: Chain) -> _Phi:
    """Steps 1-2 under the paper's own accounting (idealised mechanism): Lemma C.3 per instance,
    Observation 2 over the c instances as declared."""
    checks: list[Check] = []
    eps0, d0, T, gamma = spec.eps_bt, spec.delta_bt or 0.0, spec.T, spec.band
    p2 = bt.ranges_ok(eps0, d0)
    checks.append(Check("P2: eps' in (0,1), delta' in (0,1)", "Lemma C.3", "privacy", p2, eps0, 1.0, rnd,
                        f"delta'={d0:.3g}"))
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
    return _Phi(E, d_out, tuple(steps), tuple(checks), reason)


def _phi(design: Design, spec: RoundSpec, rnd: int, Delta: float, accounting: Accounting, ch: Chain) -> _Phi:
    """Privacy of (round-rnd answers, S_{rnd+1}) with respect to S_rnd: steps 1-4."""
    if accounting == "paper":
        if design != PAPER:
            bt_part = _invalid(ch, rnd, f"round mechanism, round {rnd}", "none (paper accounting)",
                               f"round {rnd}: the paper's accounting has no lemma for the {design.name} design "
                               "(use the tight accounting)")
        else:
            bt_part = _paper_round_paper(spec, rnd, ch)
    else:
        try:
            plan = noise_plan(design, spec)
        except InvalidSchedule as exc:
            bt_part = _invalid(ch, rnd, f"round mechanism, round {rnd}", "engine.design.noise_plan",
                               f"round {rnd}: the engine cannot run it exactly ({exc})")
        else:
            bt_part = (_tct_round if design.target_charged else _paper_round_tight)(spec, plan, rnd, Delta, ch)
    E, d_out, reason = bt_part.eps, bt_part.delta, bt_part.reason
    steps: list[Step] = list(bt_part.steps)
    checks: list[Check] = list(bt_part.checks)

    # Step 3: LabelBoost on S-hat (labeled-part neighbour), then subsampling S-hat from S_i.
    r_S = exact_rate(spec.m_S, spec.labeled_size)
    s_ok = 1 <= spec.m_S <= spec.labeled_size
    checks.append(Check("S-hat is a subset of S_i (m_S <= lambda T)", "step 3(f)", "privacy",
                        s_ok, spec.m_S, spec.labeled_size, rnd))
    if not s_ok:
        reason = reason or f"round {rnd}: m_S = {spec.m_S} is not a subsample size of S_{rnd}"
        E = math.inf
    steps.append(Step.make(ch, f"LabelBoost, labeled-part neighbour, round {rnd}",
                           "Lemma C.1 with A = 'output S_{i+1}' ((0,0)-DP: it drops the labeled part)",
                           LABELBOOST_EPS, 0.0, {}, rnd))
    if accounting == "tight":
        e_ls, _ = amp.bbg(r_S, LABELBOOST_EPS, 0.0)
        lemma = "Balle-Barthe-Gaboardi 2018 Thm 10 (subsampling w/o replacement, substitution)"
    else:
        e_ls, _ = amp.claim_2_7(r_S, LABELBOOST_EPS, 0.0)
        lemma = "Claim 2.7 (needs eps_out <= 1)"
        checks.append(Check("Claim 2.7 applies: r_S (3 + e^3) <= 1", "Claim 2.7", "privacy",
                            math.isfinite(e_ls), r_S * (3.0 + math.exp(3.0)), 1.0, rnd))
        if math.isfinite(E) and not math.isfinite(e_ls):
            reason = f"round {rnd}: Claim 2.7 does not apply to S-hat (r_S (3+e^3) > 1)"
    steps.append(Step.make(ch, f"subsample S-hat_{rnd} from S_{rnd}", lemma, e_ls, 0.0,
                           {"m_S": spec.m_S, "S_size": spec.labeled_size, "rate": r_S}, rnd))

    # Step 4: basic composition.
    phi = up_sum(E, e_ls) if math.isfinite(E + e_ls) else math.inf
    steps.append(Step.make(ch, f"Phi_{rnd}: (answers_{rnd}, S_{rnd + 1}) w.r.t. S_{rnd}",
                           "Proposition 2.5 (basic adaptive composition)", phi, d_out, {}, rnd))
    return _Phi(phi, d_out, tuple(steps), tuple(checks), reason)


def in_round_step(design: Design, spec: RoundSpec, rnd: int, cap_floor: float = 0.0) -> Step:
    """Step 0 of the query chain: the other answers of the query's own round (Theorem Q,
    ``engine.planner.query_side``; docs/privacy/genericbbl.md section 5). ``cap_floor``: the largest
    halting-cap probability of any round of the schedule (a cap may act in any round)."""
    ir = in_round(design, spec, cap_floor)
    inputs: dict[str, float | int | str | bool | None] = {
        "c": spec.c, "R": spec.R, "design": design.name, "eps_h": ir.eps_h, "delta_cap_h": ir.delta_cap_h,
    }
    return Step.make("queries", f"in-round answers, round {rnd}", ir.lemma, ir.epsilon, ir.delta,
                     inputs, rnd, valid=ir.valid, note=ir.note)


def _span(rounds: list[int], last: int, rep: bool) -> str:
    if not rounds:
        return ""
    tail = " and every later round" if rep and rounds[-1] == last else ""
    if rounds == list(range(rounds[0], rounds[-1] + 1)) and len(rounds) > 1:
        return f"rounds {rounds[0]}-{rounds[-1]}{tail}"
    return ("round " if len(rounds) == 1 else "rounds ") + ", ".join(map(str, rounds)) + tail


def _in_round_warnings(rounds: Sequence[RoundSpec], design: Design, rep: bool) -> list[str]:
    """One plain sentence per open channel, naming the rounds it affects."""
    if design.target_charged:
        return []
    out = []
    everywhere = _span(list(range(1, len(rounds) + 1)), len(rounds), rep)
    halt = [i for i, r in enumerate(rounds, start=1) if r.c <= r.R]
    if halt:
        out.append(f"QUERY PRIVACY NOT PROVEN: halting channel open in {_span(halt, len(rounds), rep)} "
                   "(c <= R: a query can spend a top and make a later query be refused; issue 8)")
    out.append(f"QUERY PRIVACY NOT PROVEN: threshold-noise restart channel open in {everywhere} "
               "(each top restarts BT's threshold noise, which later answers reveal; issue 8)")
    return out


def _rounds_of(schedule: Schedule | Sequence[RoundSpec]) -> tuple[tuple[RoundSpec, ...], bool, Design]:
    if isinstance(schedule, Schedule):
        return schedule.rounds, schedule.repeat_last, schedule.design
    return tuple(schedule), True, PAPER


def _runnable(rounds: Sequence[RoundSpec], design: Design) -> str:
    """'' if the engine runs every round (exactly, and within what one engine holds), else the first
    reason it cannot. Only inexactness voids the certificate (``_phi``); a round too large for one
    engine is certified but flagged not runnable."""
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


def certify(
    schedule: Schedule | Sequence[RoundSpec],
    n: int,
    accounting: Accounting = "tight",
    delta: float = 1e-6,
    *,
    repeat_last: bool | None = None,
    design: Design | None = None,
) -> Certificate:
    """Certify ``schedule`` run on ``n`` training examples (see the module docstring for the chain).

    ``delta`` is the target delta of each chain (tight: epsilon is minimised at this delta and no
    printed delta exceeds it; paper accounting: the chain's own delta is reported). A bare
    sequence of rounds (e.g. the paper's schedule, which the engine cannot run) is accepted; its
    design defaults to the paper's.
    """
    rounds, rep, dsg = _rounds_of(schedule)
    if repeat_last is not None:
        rep = repeat_last
    if design is not None:
        dsg = design
    if not rounds:
        raise ValueError("a schedule needs at least one round")
    if not 0.0 < delta < 1.0:
        raise ValueError("delta must lie in (0, 1)")

    def spec(i: int) -> RoundSpec | None:
        if i <= len(rounds):
            return rounds[i - 1]
        return rounds[-1] if rep else None

    steps: list[Step] = []
    checks: list[Check] = []
    warnings: list[str] = []

    # Runnability: exactly (engine.design.noise_plan) and at all (Claim D.6).
    not_runnable = _runnable(rounds, dsg)
    runnable = not not_runnable
    for i, r in enumerate(rounds, start=1):
        nxt = spec(i + 1)
        if nxt is not None:
            ok = r.m_D >= nxt.labeled_size and r.m_D <= r.R
            checks.append(Check("D.6: m_D >= |S_{i+1}| (S_{i+1} can be formed)", "Claim D.6",
                                "accuracy", ok, nxt.labeled_size, r.m_D, i))
            if not ok and runnable:
                runnable, not_runnable = False, (
                    f"round {i}: D-hat_{i} has {r.m_D} points but S_{i + 1} needs "
                    f"{nxt.labeled_size} (Claim D.6): the algorithm is undefined")
        if not dsg.target_charged:
            acc = bt.accuracy_t(r.alpha, r.eps_bt, r.R, r.beta) if r.eps_bt > 0 else math.inf
            checks.append(Check("D.7: T >= 8/(alpha eps')(ln(R+1)+ln(1/beta))", "Claim D.7 / Lemma C.4",
                                "accuracy", acc <= r.T, acc, r.T, i))
        else:
            acc = tct_accuracy_t(r.band, r.eps_bt, r.R, r.beta)
            checks.append(Check("accuracy: T >= (ln(2R/beta)/eps0 + 2)/gamma (every |z_j| < gamma T - 1)",
                                "docs/privacy/genericbbl.md 6.3", "accuracy", acc <= r.T, acc, r.T, i))
        checks.append(Check("D.2: T >= 96 ln(1/alpha)", "Claim D.2", "accuracy",
                            d2_floor(r.alpha) <= r.T, d2_floor(r.alpha), r.T, i))
    if not runnable:
        warnings.append("not runnable: " + not_runnable)
    if accounting == "tight":
        checks.extend(_scale_checks(rounds, dsg))
    else:
        warnings.append("paper accounting: " + IDEALISED)

    # ---- training chain
    s1 = rounds[0].labeled_size
    training_reason = ""
    if n < s1:
        eps_S, delta_S = math.inf, 1.0
        training_reason = f"n = {n} < |S_1| = {s1}: round 1 cannot be formed"
        checks.append(Check("n >= |S_1|", "step 2", "privacy", False, s1, n, 1))
    else:
        r1 = exact_rate(s1, n)
        checks.append(Check("n >= |S_1|", "step 2", "privacy", True, s1, n, 1))
        Delta1 = min(DELTA_CAP, within(delta, r1)) if accounting == "tight" else math.nan
        ph = _phi(dsg, rounds[0], 1, Delta1, accounting, "training")
        steps.extend(ph.steps)
        checks.extend(ph.checks)
        training_reason = ph.reason
        if accounting == "tight":
            eps_S, delta_S = amp.bbg(r1, ph.eps, ph.delta)
            lemma = "Balle-Barthe-Gaboardi 2018 Thm 10"
        else:
            eps_S, delta_S = amp.claim_2_7(r1, ph.eps, ph.delta)
            lemma = "Claim 2.7 (needs eps_out <= 1)"
            ok = math.isfinite(eps_S) or not math.isfinite(ph.eps)
            checks.append(Check("Claim 2.7 applies to S_1 <- S", "Claim 2.7", "privacy", ok,
                                r1 * (3.0 + math.exp(min(ph.eps, 700.0))), 1.0, 1))
            if not ok and not training_reason:
                training_reason = "Claim 2.7 does not apply to S_1 <- S (r_1 (3 + e^Phi_1) > 1)"
        steps.append(Step.make("training", "subsample S_1 from S (training set)", lemma, eps_S,
                               delta_S, {"S1_size": s1, "n": n, "rate": r1}, 1))
        if not math.isfinite(eps_S) and not training_reason:
            training_reason = "training chain not certified"

    # ---- query chain, for every listed round (later rounds repeat the last one)
    last = len(rounds)
    candidates: list[tuple[float, int, list[Step], float]] = []
    per_round: list[tuple[int, float, float]] = []
    queries_reason = ""
    any_invalid_pre = ""
    cap_floor = max(in_round(dsg, r).delta_cap_h for r in rounds)  # Theorem Q, step 1
    for i in range(1, last + 1):
        cur = rounds[i - 1]
        nxt = spec(i + 1)
        qsteps: list[Step] = [in_round_step(dsg, cur, i, cap_floor)]
        if nxt is None:
            eps_D, delta_D = 0.0, 0.0
            qsteps.append(Step.make("queries", f"after round {i}", "nothing follows the last round",
                                    0.0, 0.0, {}, i))
        else:
            r_D = exact_rate(cur.m_D, cur.R)
            d_ok = 1 <= cur.m_D <= cur.R
            checks.append(Check("D-hat is a subset of D_i (m_D <= R)", "step 3(f)", "privacy",
                                d_ok, cur.m_D, cur.R, i))
            # the in-round step's delta (Lemma Cap) is taken off the target first; the rest is shaved
            # so that d_in + r_D 4e Delta <= delta holds in floating point too
            d_in = qsteps[0].delta if qsteps[0].valid else 0.0
            room = _room(delta, d_in)
            if room <= 0.0:
                qsteps[0] = _refuse_in_round(qsteps[0], delta)
                room = delta
            Delta = (min(DELTA_CAP, within(room, Fraction(LABELBOOST_DELTA_FACTOR) * Fraction(r_D)))
                     if accounting == "tight" else math.nan)
            ph = _phi(dsg, nxt, i + 1, Delta, accounting, "queries")
            checks.extend(ph.checks)
            qsteps.extend(ph.steps)
            lb_eps, lb_delta = ph.eps + LABELBOOST_EPS, LABELBOOST_DELTA_FACTOR * ph.delta
            qsteps.append(Step.make("queries", f"LabelBoost, unlabeled-part neighbour, round {i}",
                                    "Lemma C.1 with A = (S_{i+1} from D-hat', then Phi_{i+1})",
                                    lb_eps, lb_delta, {}, i))
            if accounting == "tight":
                eps_D, _ = amp.bbg(r_D, lb_eps, lb_delta)
                delta_D = up(Fraction(r_D) * Fraction(LABELBOOST_DELTA_FACTOR) * Fraction(ph.delta))  # <= room
                lemma = "Balle-Barthe-Gaboardi 2018 Thm 10"
            else:
                eps_D, delta_D = amp.claim_2_7(r_D, lb_eps, lb_delta)
                lemma = "Claim 2.7 (needs eps_out <= 1)"
                ok = math.isfinite(eps_D) or not math.isfinite(lb_eps)
                checks.append(Check("Claim 2.7 applies to D-hat_i <- D_i", "Claim 2.7", "privacy",
                                    ok, r_D * (3.0 + math.exp(min(lb_eps, 700.0))), 1.0, i))
            qsteps.append(Step.make("queries", f"subsample D-hat_{i} from D_{i}", lemma, eps_D,
                                    delta_D, {"m_D": cur.m_D, "R": cur.R, "rate": r_D}, i))
            if not d_ok:
                eps_D = math.inf
                any_invalid_pre = any_invalid_pre or f"round {i}: m_D = {cur.m_D} exceeds R = {cur.R}"
            if ph.reason and not any_invalid_pre:
                any_invalid_pre = ph.reason
            if not math.isfinite(eps_D) and not any_invalid_pre:
                any_invalid_pre = f"round {i}: query chain not certified (Claim 2.7 does not apply)"
        per_round.append((i, eps_D, delta_D))
        candidates.append((eps_D, i, qsteps, delta_D))

    # The worst round (by the full chain when every in-round step is valid, else by the
    # conditional chain); ties within a relative 1e-9 go to the earliest round (stable output).
    all_valid = all(c[2][0].valid for c in candidates)

    def key(x: tuple[float, int, list[Step], float]) -> float:
        return x[0] + x[2][0].epsilon if all_valid else x[0]

    top = max(key(x) for x in candidates)
    best = next(x for x in candidates if key(x) >= top * (1.0 - 1e-9))
    eps_cond, worst_round, qsteps, delta_cond = best
    ir_step = qsteps[0]
    eps_q = up_sum(eps_cond, ir_step.epsilon) if math.isfinite(eps_cond + ir_step.epsilon) else math.inf
    delta_q = up_sum(delta_cond, ir_step.delta)
    qsteps.append(Step.make("queries", f"query chain, round {worst_round} (worst round)",
                            "Proposition 2.5 (in-round step + later rounds)", eps_q, delta_q, {},
                            worst_round, valid=math.isfinite(eps_q)))
    steps.extend(qsteps)
    query_private = math.isfinite(eps_q)
    if not query_private:
        if any_invalid_pre and not math.isfinite(eps_cond):
            queries_reason = any_invalid_pre
        else:
            if ir_step.valid:
                queries_reason = "query chain not certified"
            elif dsg.target_charged:
                queries_reason = f"round {worst_round}: {ir_step.note}"
            else:
                queries_reason = f"Claim E.6's in-round step does not hold for this design (issue 8): {ir_step.note}"
    warnings.extend(_in_round_warnings(rounds, dsg, rep))
    if accounting == "tight" and not runnable and math.isfinite(eps_S):
        training_reason = training_reason or f"not runnable: {not_runnable}"
    return Certificate(
        accounting=accounting, n=n, delta_target=delta, halting=dsg.halting.value, restarts=dsg.restarts.value,
        epsilon_training=eps_S, delta_training=delta_S, epsilon_queries=eps_q,
        epsilon_queries_conditional=eps_cond, delta_queries=delta_q, query_private=query_private,
        worst_query_round=worst_round, steps=tuple(steps), checks=tuple(checks),
        warnings=tuple(dict.fromkeys(warnings)), training_reason=training_reason,
        queries_reason=queries_reason, runnable=runnable, not_runnable_reason=not_runnable,
        per_round_queries=tuple(per_round), conditional_on=None, epsilon_training_conditional=eps_S,
        design=dsg.name, describes=ENGINE if accounting == "tight" else IDEALISED,
    )


def _room(delta: float, d_in: float) -> float:
    """The largest float x with d_in + x <= delta exactly (<= 0 when d_in >= delta)."""
    x = delta - d_in
    while x > 0.0 and Fraction(d_in) + Fraction(x) > Fraction(delta):
        x = math.nextafter(x, 0.0)
    return x


def _refuse_in_round(step: Step, delta: float) -> Step:
    """Q0 whose own delta already reaches the target: the query chain cannot be certified at delta."""
    note = (f"the halting test's hard-cap charge (Lemma Cap: (1 + e^eps_h) delta_h = {step.delta:.3g}) is not "
            f"below the target delta = {delta:.3g} (widen c - c0, raise eps_h, or certify at a larger delta)")
    return Step.make("queries", step.name, step.lemma, math.inf, step.delta, dict(step.inputs), step.round,
                     valid=False, note=note)


def tct_accuracy_t(gamma: float, eps0: float, R: int, beta: float) -> float:
    """The target-charged round's accuracy floor (accuracy only): every one of the R per-query
    noises satisfies |z| < gamma T - 1 except w.p. beta when T >= (ln(2R/beta)/eps0 + 2)/gamma
    (P[|z| >= k] <= 2 e^{-eps0 k}; then L => v < T/2, R => v > T/2)."""
    if eps0 <= 0.0 or gamma <= 0.0:
        return math.inf
    return (math.log(2.0 * R / beta) / eps0 + 2.0) / gamma
