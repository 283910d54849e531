"""Certify a schedule: the privacy chain of GenericBBL, step by step, for the training set and for
the queries, under the ``paper`` or the ``tight`` accounting, for every (halting, restarts) design
of ``engine.schedule`` (docs/PRIVACY.md sections 3-8).

Notation (per round i, all from the schedule; see ``engine.schedule.RoundSpec``): T_i chunks of
lambda_i points, |S_i| = lambda_i T_i; BT with (eps'_i, delta'_i), band half-width gamma_i, at most
c_i tops among R_i queries; S-hat_i has m_S points (rate r_S = m_S/|S_i|), D-hat_i keeps m_D of
the R_i queries (rate r_D = m_D/R_i); S_1 is a uniform subset of the n training examples
(rate r_1 = |S_1|/n). All rates are exact ratios, rounded up in floating point.

**Training set (Claim E.5, repaired as in calibration.md sections 1-2).** The adversary's view is
post-processing of (round-1 answers, S_2):
  1-2. The round's BetweenThresholds, by restart policy:
     * per-top: <= min(c_1, R_1) instances, each Lemma C.3 (eps'_1, delta'_1) if P1/P2 hold,
       composed by Observation 2 (paper) or KOV (tight) -> (E_1, Delta_1);
     * stateless: R_1 instances (one per query), the same lemmas;
     * private: blocks of one threshold noise, each Theorem B (eps'/2 + k eta_plus, delta_mu) with
       k = min(k_max, c) tops, at most min(R, c/k_low + 1) blocks except w.p. delta_fail (Lemma
       N), composed by KOV (tight only). ``block_bound="lemma-s"`` uses the unreviewed Lemma S
       instead and makes the whole certificate conditional (``conditional_on``).
     Halting (any policy) is post-processing of BT's answers plus independent noise; it enters
     only through c, the most tops a round can have.
  3. LabelBoost on S-hat_1 o D-hat_1, neighbour in the labeled part, followed by A = "output
     S_2 (a subset of D-hat_1')" which discards the labeled part, so A is (0,0)-DP and Lemma C.1
     gives (3, 0); subsampling S-hat_1 from S_1: Claim 2.7 (paper) or BBG (tight) -> eps_LS.
  4. Basic composition: Phi_1 = (E_1 + eps_LS, Delta_1).
  5. S_1 drawn from S at rate r_1: Claim 2.7 (paper) or BBG (tight) -> (eps_S, delta_S).
Rounds >= 2 read S only through S_2, so they are post-processing.

**Queries (Claim E.6, repaired).** A query in round i reaches:
  0. the other round-i answers: Theorem Q (``query_side.in_round``): eps_h (noisy halting) +
     eps_r (private restarts) with Lemma Cap's delta for the hard caps, for the designs whose
     channels are closed; NOT valid (+inf) with per-top restarts (restart channel) or with
     halting "paper" and c <= R (halting channel), where Claim E.6's "identically distributed"
     is false (issue 8);
  1-4. Phi_{i+1} = (E_{i+1} + eps_LS,i+1, Delta_{i+1}), as steps 1-4 above for round i+1;
  5. LabelBoost, neighbour in the unlabeled part D-hat_i, followed by A = (S_{i+1} subset of
     D-hat_i', then Phi_{i+1}): Lemma C.1 -> (Phi_{i+1} + 3, 4e Delta_{i+1});
  6. D-hat_i drawn from D_i at rate r_D: Claim 2.7 (paper) or BBG (tight) -> (eps_D, delta_D);
  7. basic composition with step 0.
The maximum over rounds is reported (rounds past the last listed repeat it when
``repeat_last``; otherwise the last round's queries reach nothing after it).
``epsilon_queries_conditional`` is the chain *without* step 0 when step 0 is not valid: what
Claim E.6 would give if its in-round step were true, never presented as proven.

Delta allocation (tight): the whole target delta goes to the BT composition, Delta_1 = delta/r_1 and
Delta_{i+1} = delta_D/(4e r_D,i) (capped at 1/2), where delta_D is what the in-round step leaves of
delta, and E is the smallest level KOV certifies at that Delta. The paper accounting instead uses
the schedule's own delta'_i and reports the delta its chain yields.

Any failed privacy precondition makes the chain's epsilon +inf with the reason in
``training_reason``/``queries_reason``; no number is made up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from engine.planner import amplification as amp
from engine.planner import block as blk
from engine.planner import bt, lemma_s
from engine.planner import composition as comp
from engine.planner.learning import d2_floor
from engine.planner.query_side import in_round
from engine.planner.steps import Check, Step
from engine.schedule import RoundSpec, Schedule

Accounting = Literal["tight", "paper"]
BlockBound = Literal["pure", "lemma-s"]
"""How a private-restarts block is charged: ``pure`` = Theorem B (proven); ``lemma-s`` = Lemma S
(query_privacy.md section 3.3, UNREVIEWED: every epsilon is then conditional on it)."""
LABELBOOST_EPS = 3.0
"""Lemma C.1's additive epsilon (Beimel-Nissim-Stemmer 2021): (eps_A + 3, 4 e delta_A)."""
LABELBOOST_DELTA_FACTOR = 4.0 * math.e
DELTA_CAP = 0.5


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
    """None, or the unreviewed lemma ("Lemma S") every epsilon of this certificate rests on; then
    ``epsilon_training`` and ``epsilon_queries`` are +inf and the numbers are in
    ``epsilon_training_conditional`` and ``epsilon_queries_conditional``."""
    epsilon_training_conditional: float = math.inf
    """The training chain's epsilon (equal to ``epsilon_training`` unless ``conditional_on``)."""

    @property
    def epsilon(self) -> float:
        """The larger of the two chains (+inf if either is not certified)."""
        return max(self.epsilon_training, self.epsilon_queries)

    @property
    def delta(self) -> float:
        return max(self.delta_training, self.delta_queries)

    @property
    def privacy_checks_hold(self) -> bool:
        return all(c.holds for c in self.checks if c.kind == "privacy")


# ---------------------------------------------------------------------------------------------


def exact_rate(num: int, den: int) -> float:
    """num/den rounded up in floating point (privacy-safe), clipped to 1."""
    if den <= 0:
        return math.inf
    return min(1.0, math.nextafter(num / den, math.inf))


@dataclass(frozen=True, slots=True)
class _Phi:
    eps: float
    delta: float
    steps: tuple[Step, ...]
    checks: tuple[Check, ...]
    reason: str


def _bt_instances(spec: RoundSpec, rnd: int, Delta: float, accounting: Accounting,
                  ch: Literal["training", "queries"], restarts: str) -> _Phi:
    """Steps 1-2 for per-top restarts (min(c, R) instances) and stateless BT (R instances):
    Lemma C.3 per instance, Observation 2 (paper) or KOV (tight) over the instances."""
    steps: list[Step] = []
    checks: list[Check] = []
    gamma, eps0, T = spec.band, spec.eps_bt, spec.T
    count = spec.R if restarts == "stateless" else min(spec.c, spec.R)
    reason = ""

    # Step 1: one BT instance (Lemma C.3). P2: ranges.
    p2 = bt.ranges_ok(eps0, spec.delta_bt)
    checks.append(Check("P2: eps' in (0,1), delta' in (0,1)", "Lemma C.3", "privacy", p2,
                        eps0, 1.0, rnd, f"delta'={spec.delta_bt:.3g}"))
    declared_ok = bt.gap_holds(gamma, eps0, spec.delta_bt, T)
    if accounting == "tight":
        # delta' is accounting-only: use the smaller of the declared one (if Lemma C.3 certifies
        # it) and the smallest one Lemma C.3 certifies at this T.
        d_inst = bt.min_delta(gamma, eps0, T)
        if declared_ok:
            d_inst = min(d_inst, spec.delta_bt)
        p1 = d_inst < 1.0 and 0.0 < eps0 < 1.0
        detail = ("tight uses min(declared delta', smallest delta' Lemma C.3 certifies at this T) "
                  f"(declared delta_bt {'meets' if declared_ok else 'does NOT meet'} P1)")
    else:
        d_inst = spec.delta_bt
        p1 = declared_ok
        detail = "paper uses the declared delta_bt"
    need = bt.gap_required(eps0, min(max(d_inst, 1e-300), 1.0 - 1e-16), T) if 0 < eps0 < 1 else math.inf
    checks.append(Check("P1: BT gap 2*gamma >= 12/(eps' T)(ln(10/eps')+ln(1/delta')+1)", "Lemma C.3",
                        "privacy", p1, need, 2.0 * gamma, rnd, detail))
    if not p1:
        t_need = (bt.min_t(gamma, eps0, spec.delta_bt) if bt.ranges_ok(eps0, spec.delta_bt)
                  else None)
        reason = (f"round {rnd}: Lemma C.3's gap condition fails (T={T}, eps'={eps0:.3g}, "
                  f"gamma={gamma:.3g}" + (f"; needs T >= {t_need}" if t_need else "") + ")")
    steps.append(Step.make(ch, f"BT instance, round {rnd}", "Lemma C.3", eps0 if p1 else math.inf,
                           d_inst, {"T": T, "gamma": gamma, "eps_bt": eps0,
                                    "delta_bt_declared": spec.delta_bt,
                                    "declared_meets_P1": declared_ok}, rnd, valid=p1,
                           note="" if p1 else reason))

    # Step 2: composition over the round's instances.
    if accounting == "tight":
        E = comp.kov_epsilon(eps0, d_inst, count, Delta) if p1 else math.inf
        feasible = math.isfinite(E)
        if p1 and not feasible:
            reason = (f"round {rnd}: the instances' own delta already exceeds Delta={Delta:.3g} "
                      f"(c={count}, delta'={d_inst:.3g})")
        steps.append(Step.make(ch, f"BT composition, round {rnd}",
                               "Kairouz-Oh-Viswanath 2015 Thm 3.3 (exact optimal composition)",
                               E, Delta, {"instances": count, "c": spec.c, "R": spec.R,
                                          "eps_bt": eps0, "delta_bt": d_inst}, rnd,
                               note="instances = R (stateless BT)" if restarts == "stateless" else
                               "instances = min(c, R): an instance started after the last query "
                               "answers nothing"))
        d_out = Delta
    else:
        c_paper = spec.R if restarts == "stateless" else spec.c  # the paper charges c as declared
        E, d_out = comp.observation_2(eps0, d_inst, c_paper) if p1 else (math.inf, 1.0)
        ok = c_paper * d_inst < 1.0
        checks.append(Check("Observation 2: c*delta' < 1", "Observation 2", "privacy", ok,
                            c_paper * d_inst, 1.0, rnd))
        if p1 and not ok:
            reason = f"round {rnd}: Observation 2 needs c*delta' < 1"
        steps.append(Step.make(ch, f"BT composition, round {rnd}",
                               "Observation 2 (advanced composition; Claim D.1 states <= 1)",
                               E, d_out, {"c": c_paper, "eps_bt": eps0, "delta_bt": d_inst}, rnd))

    return _Phi(E, d_out, tuple(steps), tuple(checks), reason)


def _bt_blocks(spec: RoundSpec, rnd: int, Delta: float, accounting: Accounting,
               ch: Literal["training", "queries"], block_bound: BlockBound) -> _Phi:
    """Steps 1-2 for private restarts: Theorem B (or, conditionally, Lemma S) per block, Lemma N
    for the number of blocks, KOV over the blocks (docs/PRIVACY.md section 6)."""
    steps: list[Step] = []
    checks: list[Check] = []
    gamma, eps0, T, R = spec.band, spec.eps_bt, spec.T, spec.R
    tops = min(spec.c, R)
    d_mu = spec.delta_bt
    if accounting != "tight":
        reason = (f"round {rnd}: the paper accounting has no lemma for private restarts "
                  "(use the tight accounting)")
        steps.append(Step.make(ch, f"BT blocks, round {rnd}", "none (paper accounting)", math.inf,
                               1.0, {}, rnd, valid=False, note=reason))
        return _Phi(math.inf, 1.0, tuple(steps), tuple(checks), reason)
    if spec.restart_eps is None or spec.restart_threshold is None or spec.block_cap is None:
        reason = f"round {rnd}: restarts 'private' needs restart_eps, restart_threshold and block_cap"
        steps.append(Step.make(ch, f"BT blocks, round {rnd}", "Theorem B", math.inf, 1.0, {}, rnd,
                               valid=False, note=reason))
        return _Phi(math.inf, 1.0, tuple(steps), tuple(checks), reason)
    cert = blk.certify_blocks(eps0, T, gamma, d_mu, tops, R, spec.restart_threshold,
                              spec.block_cap, spec.restart_eps, Delta)
    x = cert.x
    if block_bound == "lemma-s":
        e_b = lemma_s.block_epsilon(eps0, T, gamma, d_mu, cert.tops_per_block)
        d_b = 3.0 * d_mu
        ok = x >= lemma_s.MIN_SLACK
        lemma = "Lemma S (CONDITIONAL: unreviewed sketch, query_privacy.md 3.3)"
        check_name = "Lemma S gap: band slack x >= 10"
        E, k_low, blocks = math.inf, 0, R
        if ok:
            for phi in blk.FAIL_GRID:  # the same Lemma N search as certify_blocks
                kl = blk.k_low_for(R, spec.restart_threshold, spec.restart_eps, phi * Delta,
                                   spec.block_cap)
                if kl < 1:
                    continue
                nb = blk.blocks_bound(tops, R, kl)
                e_round = blk.compose_blocks(e_b, d_b, nb, Delta, phi * Delta)
                if e_round < E:
                    E, k_low, blocks = e_round, kl, nb
        d_fail_note = ""
    else:
        e_b, d_b, ok = cert.eps_block, d_mu, x > 0.0
        lemma = "Theorem B (one threshold noise per block, pure bound; docs/PRIVACY.md 6)"
        check_name = "Theorem B gap: band slack x = (gamma T - 1) eps'/3 - (2/3) ln(1/(2 delta_mu)) > 0"
        E, k_low, blocks = cert.E, cert.k_low, cert.blocks
        which = "Lemmas N' + K' (noise-only events, charged once)" if cert.lemma == "N'" else \
            "Lemmas N + K (charged (1 + e^E) times, Lemma Cap)"
        d_fail_note = f"{which}: failures {cert.delta_fail:.3g} (phi = {cert.phi:.0e} of Delta)"
    checks.append(Check(check_name, lemma.split(" (")[0], "privacy", ok, x,
                        lemma_s.MIN_SLACK if block_bound == "lemma-s" else 0.0, rnd,
                        "value = x (band slack in units of b_nu), must exceed the bound"))
    reason = "" if ok else (f"round {rnd}: {lemma.split(' (')[0]}'s gap condition fails "
                            f"(band slack x = {x:.3g}; T={T}, eps'={eps0:.3g}, delta_mu={d_mu:.3g})")
    steps.append(Step.make(ch, f"BT block, round {rnd}", lemma, e_b if ok else math.inf, d_b,
                           {"T": T, "gamma": gamma, "eps_bt": eps0, "delta_mu": d_mu,
                            "tops_per_block": cert.tops_per_block, "band_slack_x": x,
                            "block_cap": spec.block_cap}, rnd, valid=ok, note=reason))
    feasible = ok and k_low >= 1
    if ok and k_low < 1:
        k0, e_r, cap = spec.restart_threshold, spec.restart_eps, spec.block_cap
        admissible = any(max(blk.k_low_for(R, k0, e_r, phi * Delta, cap),
                             blk.k_low_noise(R, k0, e_r, phi * Delta, cap)) >= 1 for phi in blk.FAIL_GRID)
        if admissible:  # Lemma N holds for some delta_fail, but no composition fits the budget with its charge
            reason = (f"round {rnd}: blocks of up to {cert.tops_per_block} tops cost epsilon {e_b:.3g} each; "
                      f"composed over the blocks, Lemma N's failure charge (1 + e^E) delta_fail exceeds "
                      f"Delta = {Delta:.3g} for every admissible delta_fail (more data, or a larger T)")
        else:
            reason = (f"round {rnd}: restart_threshold = {spec.restart_threshold:g} is too low for Lemma N "
                      "(no k_low >= 1 has a small enough early-fire probability)")
    steps.append(Step.make(ch, f"blocks per round, round {rnd}",
                           "Lemma N or N' (a block followed by another holds >= k_low tops except w.p. "
                           "delta_fail)", 0.0, 0.0,
                           {"k_low": k_low, "blocks": blocks, "tops": tops, "R": R,
                            "restart_threshold": spec.restart_threshold,
                            "restart_eps": spec.restart_eps}, rnd, valid=feasible,
                           note=d_fail_note))
    if feasible and not math.isfinite(E):
        reason = f"round {rnd}: the blocks' own delta already exceeds Delta={Delta:.3g}"
    steps.append(Step.make(ch, f"BT composition, round {rnd}",
                           "Kairouz-Oh-Viswanath 2015 Thm 3.3 over the blocks (+ Lemma N's failure, "
                           "Lemma Cap)", E, Delta,
                           {"instances": blocks, "c": spec.c, "R": R, "eps_block": e_b,
                            "delta_block": d_b}, rnd))
    return _Phi(E, Delta, tuple(steps), tuple(checks), reason)


def _phi(spec: RoundSpec, rnd: int, Delta: float, accounting: Accounting, chain: str,
         restarts: str = "per-top", block_bound: BlockBound = "pure") -> _Phi:
    """Privacy of (round-rnd answers, S_{rnd+1}) with respect to S_rnd: steps 1-4.

    Steps 1-2 (the round's BetweenThresholds) depend on the restart policy: per-top, min(c, R)
    Lemma C.3 instances (Observation 2); stateless, R instances (one per query); private, blocks
    of one threshold noise each (Theorem B, Lemma N, KOV; :func:`_bt_blocks`). Halting is
    post-processing of BT's answers (plus independent noise for "noisy"); it enters only through
    c, the most tops a round can have."""
    ch: Literal["training", "queries"] = "training" if chain == "training" else "queries"
    if restarts == "private":
        bt_part = _bt_blocks(spec, rnd, Delta, accounting, ch, block_bound)
    else:
        bt_part = _bt_instances(spec, rnd, Delta, accounting, ch, restarts)
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
    phi = E + e_ls
    steps.append(Step.make(ch, f"Phi_{rnd}: (answers_{rnd}, S_{rnd + 1}) w.r.t. S_{rnd}",
                           "Proposition 2.5 (basic adaptive composition)", phi, d_out, {}, rnd))
    return _Phi(phi, d_out, tuple(steps), tuple(checks), reason)


def in_round_step(spec: RoundSpec, rnd: int, halting: str, restarts: str,
                  cap_floor: float = 0.0) -> Step:
    """Step 0 of the query chain: the other answers of the query's own round (Theorem Q,
    ``engine.planner.query_side``; docs/PRIVACY.md section 5).

    Valid designs: halting "never" (or "paper") with c > R, or "noisy"; restarts "stateless" or
    "private". Its epsilon is eps_h (noisy halting) + eps_r (private restarts), its delta Lemma
    Cap's charge for the hard caps. Halting "paper" with c <= R (halting channel) and restarts
    "per-top" (restart channel) are NOT valid (issue 8): epsilon +inf. ``cap_floor``: the largest
    halting-cap probability of any round of the schedule (a cap may act in any round, not only in
    the challenge's: Theorem Q, step 1).
    """
    ir = in_round(spec, halting, restarts, cap_floor)
    inputs: dict[str, float | int | str | bool | None] = {
        "c": spec.c, "R": spec.R, "halting": halting, "restarts": restarts,
        "eps_h": ir.eps_h, "eps_r": ir.eps_r, "delta_cap_h": ir.delta_cap_h,
        "delta_cap_r": ir.delta_cap_r,
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


def _in_round_warnings(rounds: Sequence[RoundSpec], halting: str, restarts: str,
                       rep: bool) -> list[str]:
    """One plain sentence per open channel, naming the rounds it affects."""
    out = []
    everywhere = _span(list(range(1, len(rounds) + 1)), len(rounds), rep)
    if halting in ("paper", "never"):
        halt = [i for i, r in enumerate(rounds, start=1) if r.c <= r.R]
        if halt:
            out.append(f"QUERY PRIVACY NOT PROVEN: halting channel open in "
                       f"{_span(halt, len(rounds), rep)} (c <= R: a query can spend a top and make "
                       "a later query be refused; issue 8)")
    elif halting != "noisy":
        out.append(f"QUERY PRIVACY NOT PROVEN: unknown halting policy {halting!r}")
    if restarts == "per-top":
        out.append(f"QUERY PRIVACY NOT PROVEN: threshold-noise restart channel open in {everywhere} "
                   "(each top restarts BT's threshold noise, which later answers reveal; issue 8)")
    elif restarts not in ("stateless", "private"):
        out.append(f"QUERY PRIVACY NOT PROVEN: unknown restart policy {restarts!r}")
    return out


def _rounds_of(schedule: Schedule | Sequence[RoundSpec]) -> tuple[tuple[RoundSpec, ...], bool, str, str]:
    if isinstance(schedule, Schedule):
        return (schedule.rounds, schedule.repeat_last, schedule.halting,
                str(getattr(schedule, "restarts", "per-top")))
    return tuple(schedule), True, "paper", "per-top"


def certify(
    schedule: Schedule | Sequence[RoundSpec],
    n: int,
    accounting: Accounting = "tight",
    delta: float = 1e-6,
    *,
    repeat_last: bool | None = None,
    halting: str | None = None,
    restarts: str | None = None,
    block_bound: BlockBound = "pure",
) -> Certificate:
    """Certify ``schedule`` run on ``n`` training examples (see the module docstring for the chain).

    ``delta`` is the target delta of each chain (tight accounting: epsilon is minimised at this
    delta; paper accounting: the chain's own delta is reported). ``halting`` and ``restarts``
    default to the schedule's policies. A bare sequence of rounds (e.g. a paper schedule the
    engine cannot run) is accepted; ``repeat_last``, ``halting`` and ``restarts`` then default to
    True, "paper" and "per-top". ``block_bound="lemma-s"`` charges private-restart blocks with the
    UNREVIEWED Lemma S: the certificate is then conditional on it (``conditional_on``) and never
    query-private.
    """
    rounds, rep, halt, rst = _rounds_of(schedule)
    if repeat_last is not None:
        rep = repeat_last
    if halting is not None:
        halt = halting
    if restarts is not None:
        rst = restarts
    restarts = rst
    conditional = "Lemma S" if (block_bound == "lemma-s" and restarts == "private") else None
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

    # Runnability (accuracy/definability, Claim D.6): the engine refuses otherwise.
    runnable, not_runnable = True, ""
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
        acc = bt.accuracy_t(r.alpha, r.eps_bt, r.R, r.beta) if r.eps_bt > 0 else math.inf
        checks.append(Check("D.7: T >= 8/(alpha eps')(ln(R+1)+ln(1/beta))", "Claim D.7 / Lemma C.4",
                            "accuracy", acc <= r.T, acc, r.T, i))
        checks.append(Check("D.2: T >= 96 ln(1/alpha)", "Claim D.2", "accuracy",
                            d2_floor(r.alpha) <= r.T, d2_floor(r.alpha), r.T, i))
    if not runnable:
        warnings.append("not runnable: " + not_runnable)

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
        Delta1 = min(DELTA_CAP, delta / r1) if accounting == "tight" else math.nan
        ph = _phi(rounds[0], 1, Delta1, accounting, "training", restarts, block_bound)
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
    cap_floor = max(in_round(r, halt, restarts).delta_cap_h for r in rounds)  # Theorem Q, step 1
    for i in range(1, last + 1):
        cur = rounds[i - 1]
        nxt = spec(i + 1)
        qsteps: list[Step] = [in_round_step(cur, i, halt, restarts, cap_floor)]
        if nxt is None:
            eps_D, delta_D = 0.0, 0.0
            qsteps.append(Step.make("queries", f"after round {i}", "nothing follows the last round",
                                    0.0, 0.0, {}, i))
        else:
            r_D = exact_rate(cur.m_D, cur.R)
            d_ok = 1 <= cur.m_D <= cur.R
            checks.append(Check("D-hat is a subset of D_i (m_D <= R)", "step 3(f)", "privacy",
                                d_ok, cur.m_D, cur.R, i))
            # the in-round step's delta (Lemma Cap) is taken off the target first
            d_in = qsteps[0].delta if qsteps[0].valid and qsteps[0].delta < delta else 0.0
            Delta = (min(DELTA_CAP, (delta - d_in) / (LABELBOOST_DELTA_FACTOR * r_D))
                     if accounting == "tight" else math.nan)
            ph = _phi(nxt, i + 1, Delta, accounting, "queries", restarts, block_bound)
            checks.extend(ph.checks)
            qsteps.extend(ph.steps)
            lb_eps, lb_delta = ph.eps + LABELBOOST_EPS, LABELBOOST_DELTA_FACTOR * ph.delta
            qsteps.append(Step.make("queries", f"LabelBoost, unlabeled-part neighbour, round {i}",
                                    "Lemma C.1 with A = (S_{i+1} from D-hat', then Phi_{i+1})",
                                    lb_eps, lb_delta, {}, i))
            if accounting == "tight":
                eps_D, delta_D = amp.bbg(r_D, lb_eps, lb_delta)
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
    eps_q = eps_cond + ir_step.epsilon
    delta_q = delta_cond + ir_step.delta
    qsteps.append(Step.make("queries", f"query chain, round {worst_round} (worst round)",
                            "Proposition 2.5 (in-round step + later rounds)", eps_q, delta_q, {},
                            worst_round, valid=math.isfinite(eps_q)))
    steps.extend(qsteps)
    query_private = math.isfinite(eps_q)
    if not query_private:
        if any_invalid_pre and not math.isfinite(eps_cond):
            queries_reason = any_invalid_pre
        else:
            queries_reason = ("Claim E.6's in-round step does not hold for this design "
                              f"(issue 8): {ir_step.note}" if not ir_step.valid
                              else "query chain not certified")
    warnings.extend(_in_round_warnings(rounds, halt, restarts, rep))
    eps_train_cond = eps_S
    if conditional is not None:
        # Every number below rests on the unreviewed Lemma S: report them only as conditional.
        note = (f"CONDITIONAL ON {conditional} (unreviewed; query_privacy.md 3.3): not a guarantee")
        warnings.insert(0, f"{note}; the proven (Theorem B) accounting of this schedule is "
                           "certify(..., block_bound='pure')")
        if query_private:
            eps_cond = eps_q  # the full chain, in-round step included, conditional on Lemma S
        eps_S, eps_q, query_private = math.inf, math.inf, False
        training_reason = training_reason or note
        queries_reason = queries_reason or note
    return Certificate(
        accounting=accounting, n=n, delta_target=delta, halting=halt, restarts=restarts,
        epsilon_training=eps_S, delta_training=delta_S, epsilon_queries=eps_q,
        epsilon_queries_conditional=eps_cond, delta_queries=delta_q, query_private=query_private,
        worst_query_round=worst_round, steps=tuple(steps), checks=tuple(checks),
        warnings=tuple(dict.fromkeys(warnings)), training_reason=training_reason,
        queries_reason=queries_reason, runnable=runnable, not_runnable_reason=not_runnable,
        per_round_queries=tuple(per_round), conditional_on=conditional,
        epsilon_training_conditional=eps_train_cond,
    )
