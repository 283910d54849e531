"""Sizing one round of each design for the tight planner (``engine.planner.tight``): given the
round's queries R and its privacy budget (E, Delta), the smallest T and the per-query level that
meet both privacy and accuracy. The search calls them many times with ``exact=False`` (fast
Gaussian-DP estimates); the final schedule is sized with ``exact=True`` and then certified by
``chain.certify`` from the schedule alone.

* :class:`TargetChargedSolver` (docs/privacy/genericbbl.md 6.3, Theorem A): alpha is the bound
  every answer's error must meet. alpha_i = theta alpha/2^i sets lambda_i (Theorem A.2); what the
  relabelling chain (a_i) leaves is split between the per-query flip probability p_i and the
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

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from everlast.engine.planner import above_threshold as at
from everlast.engine.planner import composition as comp
from everlast.engine.planner import target_charging as tc
from everlast.engine.planner import theorem_b as tb
from everlast.engine.planner.above_threshold import up
from everlast.engine.planner.accuracy import ENSEMBLE_BETA_SHARE, STRICT_BETA_SHARE, ensemble_error, mean_error_bound
from everlast.engine.planner.bt import accuracy_t
from everlast.engine.planner.design_rules import BETA_H_SHARE, ClientTests
from everlast.engine.planner.learning import chunk_size, d2_floor, halt_budget
from everlast.engine.planner.options import TightOptions
from everlast.engine.planner.top_rate import top_rate

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
TOP_RATE_MARGIN = 1.02
"""The halt budget is sized on the estimate's top rate raised by 2% (the certifier checks the exact one)."""


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
        self.a = [o.accuracy_share * alpha / 2**i for i in range(1, P.K + 1)]
        self.b = [beta / 2 ** (i + 2) for i in range(1, P.K + 1)]
        self.lam = [chunk_size(a, b, vc, o.lambda_log) for a, b in zip(self.a, self.b, strict=True)]
        self.labels = [sum(self.a[1:i]) for i in range(1, P.K + 1)]
        self.mu = [mean_error_bound(lam, vc) for lam in self.lam]
        self.T_guess: dict[int, int] = {}
        """Per round, the T the ensemble's error bound was last evaluated at (Lemma A2 tightens with T)."""

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
        left = self.alpha - self.labels[i - 1]
        beta_i = self.b[i - 1]
        ebar = ensemble_error(self.mu[i - 1], T_guess, ENSEMBLE_BETA_SHARE * beta_i)
        if self.P.o.reading == "every-answer":
            return math.log(2.0 * R / (STRICT_BETA_SHARE * beta_i)), ebar / left
        p = FLIP_SHARE * left
        return math.log(2.0 / p), ebar / ((1.0 - FLIP_SHARE) * left)

    def round_t(self, i: int, R: int, E: float, Delta: float, exact: bool) -> RoundSize:
        """The round's size, with the ensemble's error bound (Lemma A2) evaluated at a T no larger
        than the round's own (valid: the bound only tightens with T). The guess moves towards the
        fixed point with the fast estimate; the exact pass then runs once (twice if its T falls
        below the guess). A guess too small can leave no room for the margin: it grows first."""
        guess = self.T_guess.get(i, 1000)
        while True:
            try:
                size = self._round(i, R, E, Delta, False, guess)
                break
            except Infeasible:
                if guess > 1 << 40:
                    raise
                guess *= 8
        for _ in range(6):
            if guess <= size.T <= guess * 1.02:
                break
            guess = max(1, size.T if guess <= size.T else math.floor(size.T / 1.02))
            size = self._round(i, R, E, Delta, False, guess)
        if exact:
            size = self._round(i, R, E, Delta, True, guess)
            while guess > size.T:  # evaluate the bound at the smaller T: valid by construction
                guess = size.T
                size = self._round(i, R, E, Delta, True, guess)
        elif guess > size.T:
            size = self._round(i, R, E, Delta, False, size.T)
        self.T_guess[i] = guess
        return size

    def _round(self, i: int, R: int, E: float, Delta: float, exact: bool, T_guess: int) -> RoundSize:
        o = self.P.o
        L, rho = self._margins(i, R, T_guess)
        gammas = GAMMAS if o.band == "planned" else (self.a[i - 1],)
        best: tuple[int, float, float, int, int] | None = None
        for g in gammas:
            w = 0.5 - g - rho
            if w <= 0.0:
                continue
            for xm in X_FACTORS:
                x = xm * L / w
                c0, c = self._caps(i, R, g, x)
                q = _q(g, x)
                eps0 = _approx_tct_eps0(E, Delta, c, R, q)
                if eps0 > 0.0:
                    T = math.ceil(x / eps0)
                    if best is None or best[0] > T:
                        best = (T, g, x, c0, c)
        if best is None:
            raise Infeasible(f"round {i}: no band leaves room for the accuracy margin")
        T, g, x, c0, c = best
        if exact:
            eps0 = tc.max_eps0(E, Delta, c, R, lambda e0: max(1, math.floor(2.0 * g * math.ceil(x / e0)) - 1))
            eps0 *= 1.0 - 1e-9
            if not eps0 > 0.0:
                raise Infeasible(f"round {i}: no per-query level meets the round budget")
            T = math.ceil(x / eps0)
        else:
            eps0 = x / T
        return RoundSize(T, R, c, eps0, math.nan, math.nan, 1, T, c0, g)

    def _caps(self, i: int, R: int, g: float, x: float) -> tuple[int, int]:
        """(c0, c): the halting test's threshold (the halt budget plus the premature-fire margin)
        and its hard cap (Lemma T), for a round of R queries with band g and eps0 T = x."""
        P, o = self.P, self.P.o
        b, lam = self.b[i - 1], self.lam[i - 1]
        if o.halts == "split-votes":
            rate = _cached_top_rate(g, _up_to_grid(1.0 / x), lam, o.boundaries) * TOP_RATE_MARGIN
            c_util = max(1, min(R, math.ceil(o.k * R * rate)))
        else:
            c_util = halt_budget(o.halts, R, self.a[i - 1], g, lam, o.k, o.boundaries, o.cap_c)
        # premature halts (accuracy): the margin for a probability rounded down to a power of two,
        # which can only widen it (and lets the search reuse it)
        early = 2.0 ** math.floor(math.log2(BETA_H_SHARE * b / R))
        c0 = c_util + at.at_margin(o.eps_h, early)
        return c0, c0 + at.at_margin(o.eps_h, P.delta_cap)  # hard cap (Lemma T)

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
        c = count = halt_budget(o.halts, R, a, gamma, lam, o.k, o.boundaries, o.cap_c)
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


SOLVERS: dict[str, type[TargetChargedSolver] | type[PaperSolver]] = {
    "target-charged": TargetChargedSolver, "paper": PaperSolver}
"""The round solver of each design (by ``Design.name``)."""


@functools.lru_cache(maxsize=65536)
def _cached_top_rate(gamma: float, sigma: float, lam: int, boundaries: int) -> float:
    return top_rate(gamma, sigma, lam, boundaries)


def _up_to_grid(sigma: float) -> float:
    """sigma rounded up to a grid of 1% steps in log scale: more noise means more tops in the
    model's regime, so the rate at the rounded value is the larger (and the cache can reuse it)."""
    return math.exp(math.ceil(math.log(sigma) / 0.01) * 0.01)


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
