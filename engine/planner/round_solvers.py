"""Sizing one round of each design for the tight planner (``engine.planner.tight``): given the
round's queries R and its privacy budget (E, Delta), the smallest T and the per-query level that
meet both privacy and accuracy. The search calls them many times with ``exact=False`` (fast
Gaussian-DP estimates); the final schedule is sized with ``exact=True`` and then certified by
``chain.certify`` from the schedule alone.

* :class:`TargetChargedSolver` (docs/privacy/genericbbl.md 6.3, Theorem A): alpha is the bound
  every answer's error must meet. theta alpha pays the relabelling chain (alpha_i, LabelBoost's
  sample sizes; ``TightOptions.chunks``), lambda_i is sized for the round's answers
  (``sized_chunk``); what the relabelling chain (a_i) leaves is split between the per-query flip probability p_i and the
  ensemble's disagreement ebar_i/rho_i, so T (1/2 - gamma - rho_i) >= ln(2/p_i)/eps0 (per-query
  reading; every-answer: ln(2 R_i/beta_z)/eps0). The band gamma_i and x = eps0 T are chosen per
  round: a narrow band spends fewer tops but makes each charged step less likely to be a top
  (Lemma Q's q falls with eps0 m), and a small eps0 T turns far-away queries into tops by their
  noise alone (``top_rate``). The largest eps0 the budget allows comes from Lemmas Q and TC
  (``target_charging.max_eps0``).
* :class:`PaperSolver`: the paper's parameterisation (alpha_i = alpha/2^i, gamma_i = alpha_i,
  Claims D.2/D.7's floors): each of the min(c_i, R_i) BetweenThresholds instances is Theorem B
  (discrete, one top), their (eps_inst, delta_mu) meet the budget by KOV, and (eps', band slack)
  minimise Theorem B's T. Its accuracy is the paper's (Theorem 5.1), not Theorem A's.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from fractions import Fraction

from everlast.engine import roots
from everlast.engine.design import DEFAULT
from everlast.engine.errors import InvalidSchedule
from everlast.engine.noise import exact_scale
from everlast.engine.planner import above_threshold as at
from everlast.engine.planner import composition as comp
from everlast.engine.planner import target_charging as tc
from everlast.engine.planner import theorem_b as tb
from everlast.engine.planner.above_threshold import up
from everlast.engine.planner.accuracy import (
    ENSEMBLE_BETA_SHARE,
    STRICT_BETA_SHARE,
    Reading,
    ensemble_error,
    labels_error,
    log_pairs_growth,
    mean_error_bound,
    round_accuracy,
)
from everlast.engine.planner.bt import accuracy_t
from everlast.engine.planner.design_rules import BETA_H_SHARE, ClientTests
from everlast.engine.planner.learning import SPLIT_VOTES, chernoff_budget, chunk_size, d2_floor, halt_budget
from everlast.engine.planner.options import TightOptions
from everlast.engine.planner.top_rate import top_rate, top_rate_exact
from everlast.engine.round_spec import RoundSpec

IN_ROUND_DELTA_SHARE = 1e-3
"""Share of the query chain's delta given to the in-round step (Lemma Cap's charge for the caps)."""
TAIL_TARGET_SHARE = 1e-3
"""Search only: the share of Delta the fast estimate gives to Lemma TC's tail."""
FLIP_SHARE = 1.0 / 16.0
"""Per-query reading: the share of a round's answer-error budget (alpha - a_i) given to the
answer's own noise, P[|z| >= k] <= p_i (the rest pays the ensemble's disagreement)."""
GAMMAS = (0.0025, 0.005, 0.01, 0.02, 0.04, 0.08)
"""Band half-widths the planner tries per round (shares of T)."""
X_FACTORS = (1.0, 1.25, 1.6, 2.0, 2.5, 3.2)
"""eps0 T as multiples of the accuracy floor ln(2/p_i)/(1/2 - gamma - rho_i) the planner tries."""
CHUNK_BAND = 0.02
"""Search only: the band half-width assumed when sizing the chunks (``sized_chunk``)."""
CHUNK_SLACK = 1.1
"""Search only: ebar over mu (Lemma A2's Hoeffding margin) assumed when sizing the chunks."""
CAPS_MEMO_SIZE = 1 << 16
"""Entries of a solver's memo of the estimate's halt caps before it is emptied (search speed only)."""
ROUND_MEMO_SIZE = 1 << 18
"""Entries of a solver's memo of its rounds (``TargetChargedSolver._round``) before it is emptied."""
SETTLE_MAX_R = 1 << 60
"""``TargetChargedSolver._settles`` stops at the first candidate that settles for rounds up to this many
queries (beyond it a later candidate's halt budget could raise, as the full round would)."""
SHRINK_ROUNDS = 1
"""Rounds re-tuned after the exact pass (``TargetChargedSolver._shrink``): n depends on round 1's T
(and on round 2's only through R_1, weakly)."""
LAST_ROUND_SIZE = 2**31
"""The ``growing`` relabelling's target for the last round's labeled set |S_K| = lambda_K T_K (= its
D-hat m_D, which the engine's round transition orders up to 2^32 points: a factor 2 of headroom for
the T the grown rounds need)."""
GROWTH_FROM = 3
"""The ``growing`` relabelling: rounds up to this one keep the even schedule's sizes (R_1, hence n,
depends on round 2's size, and round 2's on round 3's), later ones grow."""
LISTED_SHARE = 0.25
"""The ``growing`` relabelling: the share of theta alpha the listed relabellings take (the rest pays
the repetitions of the last round, which set the accuracy horizon)."""
LAST_OWN_SHARE = 0.5
"""The ``growing`` relabelling: the share of (1 - theta) alpha round K's own terms (its flips and
ensemble, Theorem A) may take; the rest of alpha is room for its repetitions' labels' error."""
TOP_RATE_MARGIN = 1.02
"""The halt budget is sized on the estimate's top rate raised by 2% (the certifier checks the exact one)."""


def sized_chunk(left: float, vc: int, reading: Reading) -> int:
    """lambda for a round whose answers may err by ``left`` = alpha - a_i: the lambda minimising
    lambda/(1/2 - gamma - rho(lambda)), rho = ebar/(the ensemble's share of ``left``), which is
    lambda T up to the privacy terms (T ~ 1/(1/2 - gamma - rho)); a geometric grid of 2% steps.
    Search only: the certifier recomputes Theorem A from the schedule."""
    share = left * ((1.0 - FLIP_SHARE) if reading == "per-query" else 1.0)
    w0 = 0.5 - CHUNK_BAND

    def cost(lam: int) -> float:
        w = w0 - CHUNK_SLACK * mean_error_bound(lam, vc) / share
        return lam / w if w > 0.0 else math.inf

    lam = max(1, math.ceil(8.0 * CHUNK_SLACK / (w0 * share)))
    best, best_cost, worse = lam, cost(lam), 0
    while worse < 20:  # cost falls, then rises (lambda grows faster than 1/w shrinks)
        lam = math.ceil(lam * 1.02) + 1
        c = cost(lam)
        if c < best_cost:
            best, best_cost, worse = lam, c, 0
        else:
            worse += 1 if math.isfinite(c) else 0
    return best


def growing_chunks(alpha: float, theta: float, K: int, vc: int, reading: Reading, betas: Sequence[float],
                   T_even: Sequence[int]) -> tuple[list[float], list[float], list[int], list[float], float]:
    """(alpha_i, a_i, lambda_i, what each round's own terms may take, the share r) of the ``growing`` relabelling
    (docs/privacy/genericbbl.md 6.3, "What this asks of the schedule"). The labeled sets grow
    geometrically from about |S_2| (rounds up to ``GROWTH_FROM``) to ``LAST_ROUND_SIZE`` (rounds K - 1
    and K), with ``T_even`` (the T of each round of the schedule the estimate sized) turning a size
    into a chunk size. alpha_i is what LabelBoost's sample, one share r of the labeled set it is drawn
    from (S_{i-1}; S_K for round K's repetition), gives by Lemma R and Lemma C.2, with r chosen so that
    the listed relabellings take ``LISTED_SHARE`` of theta alpha: every round's S-hat then costs about
    the same (its privacy charge, steps T3 and Q1-Q4) while the relabelling error falls as the rounds
    grow. Round K's own terms get ``LAST_OWN_SHARE`` of (1 - theta) alpha, the rest of alpha being room
    for its repetitions' labels' error; the other rounds' own terms get alpha - a_i. Search only: any
    alpha_i and lambda_i are valid (the certifier recomputes Theorem A). Needs K > ``GROWTH_FROM``
    (no round grows otherwise; the caller uses the even split there)."""
    if K <= GROWTH_FROM:
        raise ValueError(f"rounds: the growing relabelling needs more than {GROWTH_FROM} rounds, got {K}")
    own_K = LAST_OWN_SHARE * (1.0 - theta) * alpha
    S2 = sized_chunk(alpha - theta * alpha / (K - 1), vc, reading) * T_even[1]  # about the even |S_2|
    top = max(S2, LAST_ROUND_SIZE)
    span = max(1, K - 1 - GROWTH_FROM)  # K = GROWTH_FROM + 1: round K alone grows, to the top
    size = [S2 * (top / S2) ** min(1.0, max(0, i - GROWTH_FROM) / span) for i in range(1, K + 1)]

    def relabel_alpha(m: float, beta: float, m_D: float) -> float:  # Lemma R's and Lemma C.2's alpha at m
        m = max(2.0, m)
        lemma_r = 8.0 * (math.log(4.0 / beta) + log_pairs_growth(2 * math.ceil(m), vc)) / m
        lemma_c2 = 2.0 * max(1, vc) * math.log(math.e * (m_D + m) / (beta * max(1, vc))) / m
        return max(lemma_r, lemma_c2)

    def alphas(r: float) -> list[float]:  # alpha_2..alpha_K; the relabelling into round i samples S_{i-1}
        return [relabel_alpha(r * size[i - 2], betas[i - 1], size[i - 1]) for i in range(2, K + 1)]

    budget = LISTED_SHARE * theta * alpha
    # the sum falls as r grows: the smallest share whose relabellings fit the budget
    hi_r = roots.smallest_float(lambda r: 2.0 * math.fsum(alphas(r)) <= budget, 1e-9, 1.0, steps=80,
                                geometric=True)
    tail = alphas(hi_r)
    a = [tail[0], *tail]
    labels = labels_error(a)
    left = [alpha - x for x in labels[:-1]] + [own_K]
    want = [math.ceil(size[i] / T_even[i]) if i >= GROWTH_FROM else 1 for i in range(K)]
    lam = [max(sized_chunk(lf, vc, reading), w) for lf, w in zip(left, want, strict=True)]
    return a, labels, lam, left, hi_r


class Infeasible(Exception):
    """No round of this design meets the budget."""


@dataclass(frozen=True, slots=True)
class RoundSize:
    T: int
    R: int
    c: int
    eps0: float
    delta0: float
    theta: float
    t_priv: int
    t_acc: int
    c0: int | None = None
    gamma: float | None = None
    """The band's half-width the solver chose (None: the design's default, alpha_i)."""


class _Problem:  # the part of ``tight._Problem`` a solver reads (documentation of the interface)
    o: TightOptions
    K: int
    a: list[float]
    b: list[float]
    lam: list[int]
    delta_cap: float


class TargetChargedSolver:
    """Rounds of the target-charged design under Theorem A (module docstring)."""

    def __init__(self, P: _Problem, alpha: float, beta: float, vc: int) -> None:
        self.P, self.alpha, self.vc = P, alpha, vc
        o = P.o
        K, theta = P.K, o.accuracy_share
        self.b = [beta / 2 ** (i + 2) for i in range(1, K + 1)]
        self.share: float | None = None
        """The growing relabelling's S-hat share r of S_i (the LabelBoost reserve's estimate)."""
        self.left: list[float] | None = None
        """Per round, what the round's own terms may take (alpha - a_i unless set)."""
        if (o.chunks == "sized" and o.relabelling == "growing" and o.sizes_from is not None
                and K > GROWTH_FROM):  # with K <= GROWTH_FROM no round grows: the even split
            self.a, self.labels, self.lam, self.left, self.share = growing_chunks(
                alpha, theta, K, vc, o.reading, self.b, o.sizes_from)
        elif o.chunks == "sized":  # theta alpha spread over the K - 1 relabellings; chunks for the ensemble
            self.a = [theta * alpha / (2 * (K - 1))] * K
            self.labels = labels_error(self.a)
            self.lam = [sized_chunk(alpha - a_i, vc, o.reading) for a_i in self.labels]
        else:  # the paper's alpha_i = theta alpha/2^i, lambda_i by Theorem A.2 at alpha_i
            self.a = [theta * alpha / 2**i for i in range(1, K + 1)]
            self.labels = labels_error(self.a)
            self.lam = [chunk_size(a, b, vc, o.lambda_log) for a, b in zip(self.a, self.b, strict=True)]
        self.band_alpha = self.a if self.share is None else [theta * alpha / (2 * (K - 1))] * K
        """The band's half-width when it is not chosen (``band = "alpha"``): alpha_i, the even
        relabelling's under the growing one (whose late alpha_i would leave the band no count)."""
        self.mu = [mean_error_bound(lam, vc) for lam in self.lam]
        self._caps_memo: dict[tuple[int, int, float, int | None], tuple[int, int]] = {}
        """``_caps`` of the estimate, by (round, R, band, sigma's index on its grid): a pure function of them."""
        self._margins_memo: dict[tuple[int, int], tuple[int, int]] = {}
        """``_caps_margins`` by (round, R)."""
        self.T_guess: dict[int, int] = {}
        """Per round, the T the ensemble's error bound was last evaluated at (Lemma A2 tightens with T)."""
        self._round_memo: dict[tuple[int, int, float, float, bool, int], RoundSize | str] = {}
        """``_round`` by its arguments (a pure function of them and the solver's constants; a str: the
        ``Infeasible`` it raised). The searches ask for the same rounds again (search speed only)."""

    def in_round_budget(self, delta: float) -> tuple[float, float, float]:
        """(eps_in, delta_in, delta_cap): the halting test's epsilon at the exact scales the engine
        runs, the share of delta given to its hard cap (Lemma Cap), and the cap probability."""
        o = self.P.o
        tq, tr = at.scales(o.eps_h)
        eps_in = at.at_epsilon(tr, tq)
        tests = ClientTests.of(o.quotas, o.burn)
        if tests is not None:  # Theorem Q+: the quota tests and the burn-rate signal add theirs
            eps_in = up(Fraction(eps_in) + tests.epsilon())
        delta_in = IN_ROUND_DELTA_SHARE * delta
        return eps_in, delta_in, delta_in / at.cap_charge(eps_in, 1.0)

    def _margins(self, i: int, R: int, T_guess: int) -> tuple[float, float]:
        """(L, rho) at the ensemble's error bound for a round of about ``T_guess`` classifiers:
        T (1/2 - gamma - rho) >= L/eps0 makes Theorem A's bound meet alpha."""
        left = self.alpha - self.labels[i - 1] if self.left is None else self.left[i - 1]
        beta_i = self.b[i - 1]
        ebar = ensemble_error(self.mu[i - 1], T_guess, ENSEMBLE_BETA_SHARE * beta_i)
        if self.P.o.reading == "every-answer":
            return math.log(2.0 * R / (STRICT_BETA_SHARE * beta_i)), ebar / left
        p = FLIP_SHARE * left
        return math.log(2.0 / p), ebar / ((1.0 - FLIP_SHARE) * left)

    def round_t(self, i: int, R: int, E: float, Delta: float, exact: bool) -> RoundSize:
        """The round's size, with the ensemble's error bound (Lemma A2) evaluated at a guess G of T
        and T never below G (valid: the bound only tightens with T). The fixed point is the smallest
        G whose round is feasible and needs no more than G classifiers (an up-set: a larger G only
        shrinks the margin the round needs): bracketed geometrically from the last round's G, then
        bisected to 2% with the fast estimate. The exact pass runs at that G, and once more at the
        T it needs when that is smaller."""
        def settles(G: int) -> bool:
            return self._settles(i, R, E, Delta, G)

        guess = self.T_guess.get(i, 1000)
        if settles(guess):
            lo, hi = guess, guess
            while lo > 1 and settles(lo):
                hi, lo = lo, max(1, math.floor(lo / 1.25))
            if lo == hi:  # G = 1 settles
                lo = 0
        else:
            lo, hi = guess, math.ceil(guess * 1.25)
            while not settles(hi):
                if hi > 1 << 40:
                    raise Infeasible(f"round {i}: no number of classifiers leaves room for the accuracy margin")
                lo, hi = hi, math.ceil(hi * 1.25)
        G = roots.smallest_int(settles, lo, hi, rel_tol=0.02) if hi - lo > 1 else hi
        size = self._round(i, R, E, Delta, False, G)
        if exact:
            size = self._round(i, R, E, Delta, True, G)
            if size.t_acc < G:
                with contextlib.suppress(Infeasible):
                    size, G = self._round(i, R, E, Delta, True, size.t_acc), size.t_acc
            if i <= SHRINK_ROUNDS:
                size = self._shrink(i, R, E, Delta, size)
        self.T_guess[i] = G
        return size

    def _shrink(self, i: int, R: int, E: float, Delta: float, size: RoundSize) -> RoundSize:
        """The exact round re-tuned at its band: the smallest T (bisection, to 0.2%) at which the
        largest per-query level the budget allows at T's exact band (Lemmas Q, TC), with the halt budget
        at the exact top rate (9.2), still meets Theorem A's bound exactly. The search's accuracy
        floor is conservative (fixed flip share, Hoeffding margin); this closes most of the gap. Search
        only: the certifier recomputes everything; the round found is checked once more here."""
        o = self.P.o
        g = size.gamma if size.gamma is not None else self.a[i - 1]
        lam = self.lam[i - 1]
        found: dict[int, RoundSize] = {}

        def at(T: int) -> RoundSize | None:
            gf = Fraction(g)
            lo, hi = math.ceil(T * (Fraction(1, 2) - gf)), math.floor(T * (Fraction(1, 2) + gf))
            if hi < lo:
                return None
            m = hi - lo + 1
            c0, c = size.c0 or 1, size.c
            for _ in range(4):
                eps0 = _level_at(E, Delta, c, R, m, _passing(c, c0, R, o.eps_h))
                if not eps0 > 0.0:
                    return None
                if o.halt_budget != SPLIT_VOTES:
                    break
                c0_x, c_x = self._caps(i, R, g, eps0 * T, _exact_rate(T, g, eps0, lam, o.boundaries))
                if c0_x <= c0:
                    break
                c0, c = c0_x, c_x
            else:
                return None  # the halt budget did not settle: keep the round as sized
            spec = RoundSpec(T=T, lam=lam, R=R, c=c, eps_bt=eps0, delta_bt=None, alpha=self.a[i - 1], m_S=1,
                             m_D=1, gamma=g, beta=self.b[i - 1], halt_eps=o.eps_h, halt_threshold=c0)
            try:
                acc = round_accuracy(spec, DEFAULT, i, self.labels[i - 1], self.vc, o.reading)
            except (InvalidSchedule, ValueError):
                return None
            if not acc.bound <= self.alpha:
                return None
            found[T] = RoundSize(T, R, c, eps0, math.nan, math.nan, 1, T, c0, g)
            return found[T]

        lo_T = max(1, math.floor(size.T * 0.75))
        if at(lo_T) is not None:  # do not search below a quarter off: keep the search's neighbourhood
            return found[lo_T]
        best = roots.smallest_int(lambda T: T >= size.T or at(T) is not None, lo_T, size.T, rel_tol=0.002)
        return found.get(best, size)

    def _round(self, i: int, R: int, E: float, Delta: float, exact: bool, T_guess: int) -> RoundSize:
        """``_round_at``, memoised on its arguments (the same value, or the same ``Infeasible``)."""
        key = (i, R, E, Delta, exact, T_guess)
        hit = self._round_memo.get(key)
        if hit is None:
            try:
                hit = self._round_at(i, R, E, Delta, exact, T_guess)
            except Infeasible as exc:
                hit = str(exc)
            if len(self._round_memo) >= ROUND_MEMO_SIZE:  # bounded memory; a pure function: values unchanged
                self._round_memo.clear()
            self._round_memo[key] = hit
        if isinstance(hit, str):
            raise Infeasible(hit)
        return hit

    def _round_at(self, i: int, R: int, E: float, Delta: float, exact: bool, T_guess: int) -> RoundSize:
        """The round at the ensemble's bound for ``T_guess`` classifiers: T = max(x/eps0, T_guess)
        (``t_acc``: the first alone)."""
        o = self.P.o
        best: tuple[int, int, float, float, int, int] | None = None
        best_key: tuple[int, int] | None = None
        for need, g, x, c0, c in self._candidates(i, R, E, Delta, T_guess, False):
            key = (need if need > T_guess else T_guess, need)
            if best_key is None or best_key > key:
                best_key, best = key, (*key, g, x, c0, c)
        if best is None:
            raise Infeasible(f"round {i}: no band leaves room for the accuracy margin")
        T, need, g, x, c0, c = best
        if exact:
            for _ in range(4):  # the halt budget at the exact top rate of the round it sizes (9.2)
                # the band's m at T = x/e0 alone: T_guess can only raise T, hence m and q (Lemma Q), and
                # max_eps0's argument needs q(e0, m(e0)) to fall with e0, which a floor on T would break
                # Lemma TC' as the certifier applies it: tau(c - c0 + 1) added to the tail (no hard cap)
                passing = _passing(c, c0, R, o.eps_h)
                eps0 = tc.max_eps0(E, Delta, c, R, lambda e0: max(1, math.floor(2.0 * g * math.ceil(x / e0)) - 1),
                                   passing)
                eps0 *= 1.0 - 1e-9
                if not eps0 > 0.0:
                    raise Infeasible(f"round {i}: no per-query level meets the round budget")
                need = math.ceil(x / eps0)
                T = max(need, T_guess)
                if o.halt_budget != SPLIT_VOTES:
                    break
                rate = _exact_rate(T, g, eps0, self.lam[i - 1], o.boundaries)
                c0_x, c_x = self._caps(i, R, g, x, rate)
                if c0_x <= c0:
                    break
                c0, c = c0_x, c_x
        else:
            eps0 = x / need
        return RoundSize(T, R, c, eps0, math.nan, math.nan, 1, need, c0, g)

    def _candidates(self, i: int, R: int, E: float, Delta: float, T_guess: int,
                    settle: bool) -> Iterator[tuple[int, float, float, int, int]]:
        """The estimate's candidate rounds at the ensemble's bound for ``T_guess`` classifiers, one per
        band g and eps0 T = x tried, in order: (need = ceil(x/eps0), g, x, c0, c) for those with eps0 > 0.
        ``settle``: only the candidates that may need <= T_guess (``_settles``): one whose need is
        bounded below (c >= the margins + 1) above T_guess is passed over before its caps are looked up."""
        o = self.P.o
        L, rho = self._margins(i, R, T_guess)
        gammas = GAMMAS if o.band == "planned" else (self.band_alpha[i - 1],)
        # _approx_tct_eps0 and _q inlined, their round constants hoisted (the same float operations)
        z = math.sqrt(2.0 * math.log(1.0 / (TAIL_TARGET_SHARE * Delta)))
        zz, mu = z * z, comp.gdp_mu(E, (1.0 - TAIL_TARGET_SHARE) * Delta)
        # _caps's memo looked up inline (its key: the grid index of sigma = 1/x, ``_grid_index``)
        memo, fill, split = self._caps_memo, self._caps_fill, o.halt_budget == SPLIT_VOTES
        log, ceil, sqrt, expm1 = math.log, math.ceil, math.sqrt, math.expm1
        xLs = [xm * L for xm in X_FACTORS]  # x = xm L / w, evaluated as (xm L)/w
        floor_sum = -1.0  # settle: c + z sqrt(c) + zz at c's floor, the margins + 1 (c_util >= 1), once asked for
        step = GRID_STEP
        for g in gammas:
            w = 0.5 - g - rho
            if o.answer_margin == "band":  # every noise inside the band's margin (the ablation's lever)
                w = min(w, g)
            if w <= 0.0:
                continue
            m2g = -2.0 * g
            for xL in xLs:
                x = xL / w
                q = -expm1(m2g * x) / 2.0
                if settle and q > 0.0 and mu > 0.0:  # the same operations at c's floor: need's floor
                    if floor_sum < 0.0:
                        floor_c = 1 + sum(self._margins_memo.get((i, R)) or self._caps_margins(i, R))
                        floor_sum = floor_c + z * sqrt(floor_c) + zz
                    if ceil(x / (mu / sqrt(min(R, ceil(floor_sum / q))))) > T_guess:
                        continue
                ck = (i, R, g, ceil(log(1.0 / x) / step) if split else None)
                c0, c = memo.get(ck) or fill(ck)
                eps0 = mu / sqrt(min(R, ceil((c + z * sqrt(c) + zz) / q)))
                if eps0 > 0.0:
                    yield ceil(x / eps0), g, x, c0, c

    def _settles(self, i: int, R: int, E: float, Delta: float, G: int) -> bool:
        """``_round(i, R, E, Delta, False, G).t_acc <= G`` (False where it raises ``Infeasible``): some
        candidate needs <= G (the smallest key (max(need, G), need) then has need <= G). With the
        split-votes budget and R <= ``SETTLE_MAX_R`` no caps lookup can raise (chernoff_budget's
        search ends below 2^62 whenever R p > 0 and R <= 2^60; the top rate is > 0; no float step
        overflows), so the first such candidate answers and the rest are not sized."""
        hit = self._round_memo.get((i, R, E, Delta, False, G))
        if hit is not None or self.P.o.halt_budget != SPLIT_VOTES or R > SETTLE_MAX_R:
            try:
                return self._round(i, R, E, Delta, False, G).t_acc <= G
            except Infeasible:
                return False
        return self._settle_scan(i, R, E, Delta, G)

    def _settle_scan(self, i: int, R: int, E: float, Delta: float, G: int) -> bool:
        """``any(need <= G for need, *_ in self._candidates(i, R, E, Delta, G, True))``, the generator
        and its tuples unrolled into one loop (the same float operations in the same order, the same
        candidates passed over, the same caps looked up). Search speed only;
        tests/planner/test_planner_speedups.py compares it with the generator's answer."""
        o = self.P.o
        L, rho = self._margins(i, R, G)
        gammas = GAMMAS if o.band == "planned" else (self.band_alpha[i - 1],)
        z = math.sqrt(2.0 * math.log(1.0 / (TAIL_TARGET_SHARE * Delta)))
        zz, mu = z * z, comp.gdp_mu(E, (1.0 - TAIL_TARGET_SHARE) * Delta)
        memo, fill, split = self._caps_memo, self._caps_fill, o.halt_budget == SPLIT_VOTES
        log, ceil, sqrt, expm1 = math.log, math.ceil, math.sqrt, math.expm1
        xLs = [xm * L for xm in X_FACTORS]
        floor_sum = -1.0
        step = GRID_STEP
        band_margin = o.answer_margin == "band"
        for g in gammas:
            w = 0.5 - g - rho
            if band_margin:
                w = min(w, g)
            if w <= 0.0:
                continue
            m2g = -2.0 * g
            for xL in xLs:
                x = xL / w
                q = -expm1(m2g * x) / 2.0
                if q > 0.0 and mu > 0.0:
                    if floor_sum < 0.0:
                        floor_c = 1 + sum(self._margins_memo.get((i, R)) or self._caps_margins(i, R))
                        floor_sum = floor_c + z * sqrt(floor_c) + zz
                    if ceil(x / (mu / sqrt(min(R, ceil(floor_sum / q))))) > G:
                        continue
                ck = (i, R, g, ceil(log(1.0 / x) / step) if split else None)
                c = (memo.get(ck) or fill(ck))[1]
                eps0 = mu / sqrt(min(R, ceil((c + z * sqrt(c) + zz) / q)))
                if eps0 > 0.0 and ceil(x / eps0) <= G:
                    return True
        return False

    def _caps(self, i: int, R: int, g: float, x: float, rate: float | None = None) -> tuple[int, int]:
        """(c0, c): the halting test's threshold (the halt budget plus the premature-fire margin)
        and its hard cap (Lemma T), for a round of R queries with band g and eps0 T = x (``rate``:
        the top rate, if known exactly)."""
        if rate is None:  # the estimate depends on x only through sigma on its grid: memoised
            key = (i, R, g, _grid_index(1.0 / x) if self.P.o.halt_budget == SPLIT_VOTES else None)
            return self._caps_memo.get(key) or self._caps_fill(key)
        return self._caps_at(i, R, g, None, rate)

    def _caps_fill(self, key: tuple[int, int, float, int | None]) -> tuple[int, int]:
        """The estimate's caps for a memo key (round, R, band, sigma's grid index), stored in the memo."""
        if len(self._caps_memo) >= CAPS_MEMO_SIZE:  # bounded memory; a pure function: values unchanged
            self._caps_memo.clear()
        i, R, g, n = key
        hit = self._caps_memo[key] = self._caps_at(i, R, g, None if n is None else _grid_sigma(n))
        return hit

    def _caps_at(self, i: int, R: int, g: float, sigma: float | None, rate: float | None = None) -> tuple[int, int]:
        o = self.P.o
        b, lam = self.b[i - 1], self.lam[i - 1]
        if o.halt_budget == SPLIT_VOTES:
            if rate is None:
                assert sigma is not None
                rate = _cached_top_rate(g, sigma, lam, o.boundaries) * TOP_RATE_MARGIN
            try:
                c_util = chernoff_budget(R, rate, b, o.k)
            except ArithmeticError:  # no budget the engine counts: this round cannot be planned
                raise Infeasible(f"round {i}: no halt budget below 2^62 for R = {R}") from None
        else:
            c_util = halt_budget(o.halt_budget, R, self.a[i - 1], g, lam, o.k, o.boundaries, o.cap_c)
        early, cap = self._margins_memo.get((i, R)) or self._caps_margins(i, R)
        c0 = c_util + early
        return c0, c0 + cap  # hard cap (Lemma T)

    def _caps_margins(self, i: int, R: int) -> tuple[int, int]:
        """The premature-fire margin and the hard cap's (Lemma T) of round i with R queries (memoised)."""
        o, b = self.P.o, self.b[i - 1]
        if len(self._margins_memo) >= CAPS_MEMO_SIZE:
            self._margins_memo.clear()
        # premature halts (accuracy): the margin for a probability rounded down to a power of two,
        # which can only widen it (and lets the search reuse it)
        early = 2.0 ** math.floor(math.log2(BETA_H_SHARE * b / R))
        hit = self._margins_memo[(i, R)] = (at.at_margin(o.eps_h, early), at.at_margin(o.eps_h, self.P.delta_cap))
        return hit

    def spec_fields(self, rt: RoundSize) -> dict[str, float | int | None]:
        return {"delta_bt": None, "halt_eps": self.P.o.eps_h, "halt_threshold": rt.c0, "gamma": rt.gamma}

    def binding(self, rt: RoundSize) -> str:
        return "accuracy (Theorem A: every answer's error <= alpha)"


class PaperSolver:
    """Rounds of the paper's design (module docstring). No in-round step is valid, so none is
    budgeted (its queries are not private)."""

    def __init__(self, P: _Problem, alpha: float, beta: float, vc: int) -> None:
        self.P = P
        o = P.o
        self.a = [alpha / 2**i for i in range(1, P.K + 1)]
        self.b = [beta / 2**i for i in range(1, P.K + 1)]
        self.lam = [chunk_size(a, b, vc, o.lambda_log) for a, b in zip(self.a, self.b, strict=True)]

    def in_round_budget(self, delta: float) -> tuple[float, float, float]:
        return 0.0, 0.0, 0.0

    def round_t(self, i: int, R: int, E: float, Delta: float, exact: bool) -> RoundSize:
        o = self.P.o
        a, b, lam = self.a[i - 1], self.b[i - 1], self.lam[i - 1]
        gamma = a
        # the halt budget (capped at R unless cap_c is off: docs/notes/calibration.md (iii))
        c = count = halt_budget(o.halt_budget, R, a, gamma, lam, o.k, o.boundaries, o.cap_c)
        if exact:
            ch = _choose_instances(count, E, Delta)
            if ch is None:
                raise Infeasible(f"round {i}: no instance parameters meet the composition budget")
            eps_inst, delta_mu, theta = ch
            eps0, _, t_priv = tb.plan_instance(eps_inst, delta_mu, gamma)
        else:
            eps_inst, delta_mu = _approx_instances(count, E, Delta)
            eps0 = tb.eps_bt_for(eps_inst, 3.0)
            theta = math.nan
            t_priv = math.ceil((4.0 * math.log(1.0 / (2.0 * delta_mu)) + 18.0 + eps0) / (2.0 * gamma * eps0))
        t_acc = 1
        if o.accuracy_floors:
            t_acc = max(d2_floor(a), math.ceil(accuracy_t(a, eps0, R, b)))
        return RoundSize(max(t_priv, t_acc), R, c, eps0, delta_mu, theta, t_priv, t_acc, None)

    def spec_fields(self, rt: RoundSize) -> dict[str, float | int | None]:
        return {"delta_bt": rt.delta0, "halt_eps": None, "halt_threshold": rt.c0, "gamma": None}

    def binding(self, rt: RoundSize) -> str:
        return "privacy (Theorem B)" if rt.t_priv >= rt.t_acc else "accuracy (Claims D.2/D.7)"


def _passing(c: int, c0: int, R: int, eps_h: float) -> float:
    """tau(c - c0): the chance the round's top count passes the charged c before its halting test
    fires (Lemma T(ii)), which Lemma TC' adds to the round's delta; 0 when c > R (no tail)."""
    return 0.0 if c > R else at.at_tail(c - c0 + 1, *at.scales(eps_h))


def _level_at(E: float, Delta: float, c: int, R: int, m: int, passing: float = 0.0) -> float:
    """The largest eps0 (to a relative 3e-4) at the fixed band count m whose round the certifier's own
    Lemma TC' (``round_epsilon`` with ``passing``) confirms to meet (E, Delta); 0 if none. A bisection
    in log eps0 below the planning estimate (``max_eps0``, whose q argument assumes T falls as eps0
    grows), on which the round's epsilon increases."""
    def meets(e0: float) -> bool:
        return tc.round_meets(e0 * (1.0 + 1e-9), m, c, R, Delta, E, passing)

    hi = 2.0 * tc.max_eps0(E, Delta, c, R, lambda e0: m, passing)
    if not hi > 0.0:
        return 0.0
    lo = hi / 2.0
    while not meets(lo):
        hi, lo = lo, lo / 2.0
        if lo < 1e-12:
            return 0.0
    return roots.largest_float(meets, lo, hi, rel_tol=3e-4, geometric=True) * (1.0 - 1e-9)


@functools.lru_cache(maxsize=65536)
def _cached_top_rate(gamma: float, sigma: float, lam: int, boundaries: int) -> float:
    return top_rate(gamma, sigma, lam, boundaries)


def _exact_rate(T: int, g: float, eps0: float, lam: int, boundaries: int) -> float:
    """The top rate of the round the engine runs (integer band, DLap(1/eps0); ``top_rate_exact``)."""
    gf = Fraction(g)
    lo, hi = math.ceil(T * (Fraction(1, 2) - gf)), math.floor(T * (Fraction(1, 2) + gf))
    return top_rate_exact(T, lo, hi, exact_scale(1.0 / eps0), lam, boundaries)


GRID_STEP = 0.01
"""The estimate's sigma grid: steps of 1% in log scale (``_up_to_grid``)."""


def _up_to_grid(sigma: float) -> float:
    """sigma rounded up to a grid of 1% steps in log scale: more noise means more tops in the
    model's regime, so the rate at the rounded value is the larger (and the cache can reuse it)."""
    return _grid_sigma(_grid_index(sigma))


def _grid_index(sigma: float) -> int:
    """The index n of ``_up_to_grid(sigma)`` = exp(n GRID_STEP) (a memo key)."""
    return math.ceil(math.log(sigma) / GRID_STEP)


def _grid_sigma(n: int) -> float:
    return math.exp(n * GRID_STEP)


def _q(gamma: float, x: float) -> float:
    """Lemma Q's q at band m ~ 2 gamma T and eps0 T = x (the estimate: eps0 << 1)."""
    return -math.expm1(-2.0 * gamma * x) / 2.0


def _approx_tct_eps0(E: float, Delta: float, c: int, R: int, q: float = 0.5) -> float:
    """Search-only estimate of the largest eps0 (Gaussian-DP composition over K ~ c/q charged
    steps with a normal tail margin); never used to certify."""
    target = TAIL_TARGET_SHARE * Delta
    z = math.sqrt(2.0 * math.log(1.0 / target))
    K = min(R, math.ceil((c + z * math.sqrt(c) + z * z) / q))
    return comp.gdp_mu(E, (1.0 - TAIL_TARGET_SHARE) * Delta) / math.sqrt(K)


def _approx_instances(count: int, E: float, Delta: float) -> tuple[float, float]:
    """Search-only estimate of (eps_inst, delta_mu) for count instances (Gaussian-DP)."""
    theta = 0.1
    delta_mu = theta * Delta / count
    return comp.gdp_mu(E, (1.0 - theta) * Delta) / math.sqrt(count), delta_mu


def _choose_instances(count: int, E: float, Delta: float) -> tuple[float, float, float] | None:
    """(eps_inst, delta_mu, theta) minimising Theorem B's T over the delta split theta, where
    eps_inst is the largest level whose count-fold KOV composition meets (E, Delta)."""
    best: tuple[float, float, float, float] | None = None
    for theta in (0.5, 0.3, 0.1, 0.03, 0.01, 1e-3):
        delta_mu = -math.expm1(math.log1p(-theta * Delta) / count)
        budget = Delta * (1.0 - theta) / (1.0 - theta * Delta)
        if delta_mu <= 0.0 or budget <= 0.0:
            continue
        eps_inst = comp.kov_max_eps0(count, E, budget, cap=tc.EPS0_CAP)
        if eps_inst <= 0.0:
            continue
        e = tb.eps_bt_for(eps_inst, 3.0)
        t_norm = (4.0 * math.log(1.0 / (2.0 * delta_mu)) + 18.0 + e) / e
        if best is None or t_norm < best[0]:
            best = (t_norm, eps_inst, delta_mu, theta)
    return None if best is None else best[1:]
