"""Sparse-vector private prediction in the style of Bassily-Thakurta-Thakkar (2018): the ensemble's
*noiseless* majority on queries where it is stable, a *noisy* majority on the few where it is not,
privacy paid only for the unstable ones, up to a cutoff c; then refusal. No relabeling: the
training set is never renewed, so this is not an everlasting predictor.

Mechanism (T classifiers on disjoint chunks, vote count v(x), as in ``peers.dwork_feldman``):
  dist(x) = distance to instability of the majority (``peers.base.distance_to_instability``):
            sensitivity 1 under substitution, and dist(x) >= 1 implies that no neighbouring training
            set changes the majority on x (Thakurta-Smith 2013).
  A sparse-vector instance (AboveThreshold, Dwork-Roth 2014 Alg. 1) with parameter eps1: threshold
  noise rho ~ Lap(2/eps1), drawn at the start of each instance; query noise nu ~ Lap(4/eps1) per query;
  x is *unstable* iff dist(x) + nu <= w + rho.
    * stable:   answer the noiseless majority 1[2 v > T];
    * unstable: answer 1[v + Z > T/2], Z ~ Lap(1/eps_answer); the instance ends, a new one starts
      with fresh rho. The c-th unstable query is answered, then every further query is refused.
  A fixed query budget ``max_queries`` also ends the interaction (refusals after it).

Privacy of the training set (substitution), proved here from cited pieces:
  1. One instance -- AboveThreshold on the sensitivity-1 queries -dist(x) (Dwork-Roth Thm 3.23:
     eps1-DP) followed by the Laplace answer of its one unstable query (eps_answer-DP) -- is
     (eps_inst, 0)-DP with eps_inst = eps1 + eps_answer (basic composition). There are at most c
     instances, composed adaptively: (eps_comp, delta_comp) by the tightest of basic / advanced /
     optimal (KOV15) composition (``peers.accounting``).
  2. Stable answers are not noisy. Fix neighbours D, D' and let H(E) be the mechanism that runs the
     instances on E but answers stable queries with maj_{D'}(x) (a fixed function of x). Then
     M(D') = H(D'), and M(D) = H(D) except on the event B_D that some query with dist_D(x) = 0 is
     declared stable (only then can maj_D(x) differ from maj_{D'}(x)). H is (eps_comp, delta_comp)-DP,
     so P[M(D) in O] <= e^eps_comp P[M(D') in O] + delta_comp + P[B_D]  (the propose-test-release
     argument of Thakurta-Smith 2013 / Dwork-Roth 2014 Ch. 7, applied per query).
  3. P[B_D] <= c * min_{0<=a<=w} [ (1/2) e^{-a/b1} + (1/2) e^{-(w-a)/b2} ], b1 = 2/eps1, b2 = 4/eps1:
     within one instance, given rho >= -a, the first dist-0 query is declared stable with probability
     <= P[nu > w - a] = (1/2) e^{-(w-a)/b2}, and if it is declared unstable the instance ends; union
     over the <= c instances and over rho < -a. (``svt_bad_event``; the minimizing a is closed-form.)
  Total: (eps_comp, delta_comp + P_B)-DP, independent of how many stable queries are answered.
BTT18 prove their own (eps, delta) theorem for their Algorithm (A_stab with sparse vector); the
accounting above is the one this implementation certifies, and it does not rely on theirs.

Noise: ``engine.rng.laplace`` (the floating-point caveat of Mironov 2012 applies; unlike the engine,
whose noise is exact discrete Laplace, docs/privacy/genericbbl.md 8).
Queries are *not* protected: when the peer halts depends on how many earlier queries were
unstable, so one querier's point moves everyone else's refusal time (``protects_queries = False``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from everlast.engine import roots
from everlast.engine.concepts import ConceptClass
from everlast.engine.rng import laplace
from everlast.peers import accounting, design
from everlast.peers.base import (
    I8,
    PeerState,
    PrivacyAccounting,
    distance_to_instability,
    fit_ensemble,
    majority,
    refusals,
    streams,
    training_set,
)

_FIRST_WINDOW = 64


# --- the math, as pure functions -----------------------------------------------------------------


def laplace_difference_sf(s: float, b1: float, b2: float) -> float:
    """P[nu - rho >= s] for s >= 0, nu ~ Lap(b2), rho ~ Lap(b1) independent (symmetric in sign):
    (b2^2 e^{-s/b2} - b1^2 e^{-s/b1}) / (2 (b2^2 - b1^2)) for b1 != b2, and
    e^{-s/b} (2 + s/b) / 4 for b1 = b2 = b."""
    if s <= 0.0:
        return 1.0 - laplace_difference_sf(-s, b1, b2) if s < 0.0 else 0.5
    if math.isclose(b1, b2, rel_tol=1e-9):
        b = 0.5 * (b1 + b2)
        return math.exp(-s / b) * (2.0 + s / b) / 4.0
    return (b2 * b2 * math.exp(-s / b2) - b1 * b1 * math.exp(-s / b1)) / (2.0 * (b2 * b2 - b1 * b1))


def svt_bad_event(w: float, b1: float, b2: float, c: int) -> float:
    """P[B] <= c * min_{0<=a<=w} [(1/2) e^{-a/b1} + (1/2) e^{-(w-a)/b2}] (module docstring, item 3).
    The bracket is convex in a with minimizer a* = (w/b2 + ln(b2/b1)) / (1/b1 + 1/b2), clipped."""
    a = (w / b2 + math.log(b2 / b1)) / (1.0 / b1 + 1.0 / b2)
    a = min(max(a, 0.0), w)
    return min(1.0, c * 0.5 * (math.exp(-a / b1) + math.exp(-(w - a) / b2)))


def svt_threshold(delta_b: float, b1: float, b2: float, c: int) -> float:
    """The smallest w >= 0 with ``svt_bad_event(w, b1, b2, c) <= delta_b`` (bisection; the value
    returned satisfies the inequality). w = (b1 + b2) ln(c / delta_b) always does."""
    if not (0.0 < delta_b < 1.0):
        raise ValueError("the bad-event budget must be in (0, 1)")
    hi = (b1 + b2) * math.log(max(c / delta_b, 1.0))
    lo = 0.0
    if svt_bad_event(lo, b1, b2, c) <= delta_b:
        return lo
    return roots.smallest_float(lambda w: svt_bad_event(w, b1, b2, c) <= delta_b, lo, hi, abs_tol=1e-9, rel_tol=1e-9)


@dataclass(frozen=True, slots=True)
class SVTParams:
    """The mechanism's parameters (see the module docstring)."""

    c: int
    """Cutoff: unstable queries allowed; the c-th is answered, then everything is refused."""
    eps1: float
    """AboveThreshold's parameter: rho ~ Lap(2/eps1), nu ~ Lap(4/eps1)."""
    eps_answer: float
    """Noisy majority on unstable queries: Z ~ Lap(1/eps_answer)."""
    w: float
    """Threshold on the distance to instability."""
    delta_comp: float
    """The delta at which the c instances' composition is evaluated."""

    @property
    def b1(self) -> float:
        return 2.0 / self.eps1

    @property
    def b2(self) -> float:
        return 4.0 / self.eps1

    @property
    def eps_instance(self) -> float:
        return self.eps1 + self.eps_answer


def calibrate(c: int, epsilon: float, delta: float, *, answer_share: float = 0.5,
              delta_share: float = 0.5) -> SVTParams:
    """Parameters certifying (epsilon, delta) for cutoff c: delta_comp = (1 - delta_share) delta; the
    largest per-instance eps_inst whose c-fold composition is (epsilon, delta_comp)-DP
    (``accounting.max_eps0``), split eps_answer = answer_share * eps_inst, eps1 = the rest; and the
    smallest w with P[B] <= delta_share * delta."""
    if not (c >= 1 and epsilon > 0.0 and 0.0 < delta < 1.0 and 0.0 < answer_share < 1.0 and 0.0 < delta_share < 1.0):
        raise ValueError("need c >= 1, epsilon > 0, 0 < delta < 1 and shares in (0, 1)")
    delta_comp = (1.0 - delta_share) * delta
    eps_inst = accounting.max_eps0(c, epsilon, delta_comp)
    eps_answer = answer_share * eps_inst
    eps1 = eps_inst - eps_answer
    w = svt_threshold(delta_share * delta, 2.0 / eps1, 4.0 / eps1, c)
    return SVTParams(c=c, eps1=eps1, eps_answer=eps_answer, w=w, delta_comp=delta_comp)


def unstable_rate_bound(lam: int, T: int, p: SVTParams) -> float:
    """Expected fraction of i.i.d. queries declared unstable, at most 8/(lam+1) + P[nu - rho > s],
    s = T/4 - 1 - w: off the (<= 8/(lam+1)) set where T/4 classifiers err, dist(x) > T/4 - 1."""
    s = T / 4.0 - 1.0 - p.w
    return min(1.0, 4.0 * design.chunk_error_bound(lam) + laplace_difference_sf(s, p.b1, p.b2))


def error_bound(lam: int, T: int, p: SVTParams) -> float:
    """E[err] <= 8/(lam+1) + (1/2) exp(-eps_answer T/4): off the bad set, stable answers are the
    correct majority and unstable ones a noisy majority with margin > T/4."""
    return design.noisy_majority_error_bound(lam, T, p.eps_answer)


def design_for_n(T: int, lam: int, epsilon: float, delta: float, alpha: float) -> tuple[SVTParams, int]:
    """The largest cutoff c whose calibrated parameters keep (i) eps_answer >= 4 ln(1/alpha)/T (error
    <= alpha) and (ii) the unstable-rate bound u <= alpha; and the query budget floor(c / (2u)) (so
    that the expected number of unstable queries in the budget is at most c/2). Falls back to c = 1
    when even that is infeasible (the error bound then exceeds alpha; reported by the peer)."""
    need_eps = design.noisy_majority_eps(T, alpha)

    def feasible(c: int) -> bool:
        p = calibrate(c, epsilon, delta)
        return p.eps_answer >= need_eps and unstable_rate_bound(lam, T, p) <= alpha

    c_lo = roots.largest_int_from(feasible, 2) if feasible(1) else 1
    p = calibrate(c_lo, epsilon, delta)
    u = unstable_rate_bound(lam, T, p)
    return p, max(1, math.floor(c_lo / (2.0 * u)))


# --- the peer --------------------------------------------------------------------------------------


class SparseVector(PeerState):
    """Answers stable queries with the noiseless majority and unstable ones with a noisy majority;
    refuses after the c-th unstable query or after ``max_queries`` queries."""

    name = "sparse_vector"

    def __init__(
        self,
        concept: ConceptClass,
        x: Any,
        y: Any,
        *,
        T: int,
        lam: int,
        params: SVTParams,
        max_queries: int | None = None,
        seed: int | None = None,
    ) -> None:
        xs, ys = training_set(concept, x, y)
        g = streams(seed, ("partition", "query_noise", "threshold_noise", "answer_noise"))
        self.concept = concept
        self.T = T
        self.lam = lam
        self.params = params
        self.max_queries = max_queries
        self.ensemble = fit_ensemble(concept, xs, ys, T, lam, g["partition"])
        self._gq, self._gt, self._ga = g["query_noise"], g["threshold_noise"], g["answer_noise"]
        self._rho = float(laplace(self._gt, params.b1, 1)[0])
        self._answered = 0
        self._unstable = 0
        self._halted = False
        comp = accounting.compose(params.c, params.eps_instance, params.delta_comp)
        p_bad = svt_bad_event(params.w, params.b1, params.b2, params.c)
        name, eps = comp.best
        self._privacy = PrivacyAccounting(
            epsilon=eps,
            delta=params.delta_comp + p_bad,
            protects_queries=False,
            note=(
                f"Training set: at most c = {params.c} sparse-vector instances, each AboveThreshold "
                f"(eps1 = {params.eps1:.3g}, Dwork-Roth Thm 3.23) plus one Laplace noisy majority "
                f"(eps = {params.eps_answer:.3g}), composed by the {name} accountant to "
                f"({eps:.4g}, {params.delta_comp:.3g}); stable answers are the noiseless majority, "
                f"covered by the propose-test-release coupling at extra delta {p_bad:.3g} (threshold "
                f"w = {params.w:.4g} on the distance to instability). Any number of stable queries is "
                f"free. Queries are NOT protected: the refusal time depends on how many earlier queries "
                f"were unstable."
            ),
            max_queries=max_queries,
            per_query_epsilon=params.eps_instance,
            accountants=comp.as_pairs(),
            accountant_used=name,
            extra=(("T", float(T)), ("lam", float(lam)), ("c", float(params.c)), ("w", params.w),
                   ("p_bad_event", p_bad)),
        )

    @property
    def unstable(self) -> int:
        """Unstable queries so far (private in the training set: diagnostics only)."""
        return self._unstable

    @property
    def exhausted(self) -> bool:
        return self._halted or (self.max_queries is not None and self._answered >= self.max_queries)

    def answer(self, x: Any) -> I8:
        xs = self.concept.validate_points(x)
        n = xs.shape[0]
        out = refusals(n)
        if self.exhausted:
            return out
        k = n if self.max_queries is None else min(n, self.max_queries - self._answered)
        p = self.params
        v = self.ensemble.votes(xs[:k])
        labels = majority(v, self.T)
        slack = distance_to_instability(v, self.T).astype(np.float64) + laplace(self._gq, p.b2, k) - p.w
        pos, win = 0, _FIRST_WINDOW
        while pos < k:  # sequential only between unstable queries: rho changes after each
            end = min(k, pos + win)
            hits = np.flatnonzero(slack[pos:end] <= self._rho)
            if hits.size == 0:
                pos, win = end, 2 * win
                continue
            j = pos + int(hits[0])
            z = float(laplace(self._ga, 1.0 / p.eps_answer, 1)[0])
            labels[j] = 1 if float(v[j]) + z > 0.5 * self.T else 0
            self._unstable += 1
            pos, win = j + 1, _FIRST_WINDOW
            if self._unstable >= p.c:
                self._halted = True
                break
            self._rho = float(laplace(self._gt, p.b1, 1)[0])
        done = pos if self._halted else k
        out[:done] = labels[:done]
        self._answered += done
        return out
