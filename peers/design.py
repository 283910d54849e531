"""The accuracy rules that size the peers, shared by ``registry`` (to build a peer for a target
error alpha) and ``sample_complexity`` (to compute the n a method needs).

Criterion for every method: the *expected* error rate of its answers on i.i.d. queries, over the
training sample, the mechanism's randomness and the query, is at most alpha (realizable case,
thresholds c_t(x) = 1[x >= t] on the reals; natural logs). The bounds below are the ones we can
prove in a few lines; they are loose by constant factors, the same factors for every method.

Chunk learner (all ensembles). ERM on lam i.i.d. examples labeled by a threshold t* outputs a
threshold inside the empty gap of the sample around t*, so its error is at most that gap's mass G;
for U = F(x) and t* at quantile q, E[G] = int_0^q (1-s)^lam ds + int_0^{1-q} (1-s)^lam ds <= 2/(lam+1).

Majority of T such classifiers (Markov over the query x): the fraction of x on which at least T/4
classifiers err is at most 4 * mean error, so in expectation at most 8/(lam+1); off that set the
vote margin |v - T/2| exceeds T/4. Hence:
  * plain majority: E[err] <= 4/(lam+1) (at least T/2 wrong classifiers);
  * noisy majority v + Lap(1/e) vs T/2: E[err] <= 8/(lam+1) + (1/2) exp(-e T/4).
Rule: lam = ceil(16/alpha) - 1 makes 8/(lam+1) <= alpha/2; e T >= 4 ln(1/alpha) makes the Laplace
term <= alpha/2.
"""

from __future__ import annotations

import math

from everlast.engine.concepts import ConceptClass
from everlast.peers.base import UnsupportedConcept


def check_alpha(alpha: float) -> None:
    if not (0.0 < alpha < 1.0):
        raise ValueError("alpha must be in (0, 1)")


def require_thresholds(concept: ConceptClass | str, what: str) -> None:
    name = concept if isinstance(concept, str) else concept.name
    if name != "thresholds":
        raise UnsupportedConcept(
            f"{what} is sized by a rule proved for thresholds only; pass the ensemble sizes explicitly "
            f"(T, lam and the noise parameter) for the class {name!r}"
        )


def chunk_size(alpha: float) -> int:
    """lam = ceil(16/alpha) - 1: the smallest lam with 8/(lam+1) <= alpha/2."""
    check_alpha(alpha)
    lam = math.ceil(16.0 / alpha) - 1
    while 8.0 / (lam + 1) > alpha / 2:  # guard the float ceil: 8/(lam+1) <= alpha/2
        lam += 1
    return lam


def chunk_error_bound(lam: int) -> float:
    """E[error of ERM on lam examples] <= 2/(lam+1) (realizable thresholds)."""
    return 2.0 / (lam + 1)


def noisy_majority_eps(T: int, alpha: float) -> float:
    """The smallest per-answer epsilon e with (1/2) exp(-e T/4) <= alpha/2: e = 4 ln(1/alpha) / T."""
    check_alpha(alpha)
    return 4.0 * math.log(1.0 / alpha) / T


def noisy_majority_t(eps: float, alpha: float) -> int:
    """The smallest T with (1/2) exp(-eps T/4) <= alpha/2: T = ceil(4 ln(1/alpha) / eps)."""
    check_alpha(alpha)
    return max(1, math.ceil(4.0 * math.log(1.0 / alpha) / eps))


def noisy_majority_error_bound(lam: int, T: int, eps: float) -> float:
    """E[err] <= 8/(lam+1) + (1/2) exp(-eps T / 4) (see the module docstring)."""
    return 4.0 * chunk_error_bound(lam) + 0.5 * math.exp(-eps * T / 4.0)


def majority_error_bound(lam: int) -> float:
    """E[err of the plain majority] <= 4/(lam+1)."""
    return 2.0 * chunk_error_bound(lam)


# --- Dagan-Feldman 2020 (Corollary 1) -----------------------------------------------------------
#
# E[err] <= rho + E[err_D(h)] and, for the exponential mechanism over the cover of n0 indices,
#   E[err_D(h)] <= 2/(n0+1)                      (the cover misses a gap of expected mass <= 2/(n0+1))
#               + 2 (ln(n0+1) + 1) / (gamma n)   (exponential mechanism, Sorrell Thm 0.2 integrated)
#               + sqrt(2 pi / n)                 (|err_D - err_S| <= 2 sup|F_n - F|, DKW-Massart)
# Rule: rho = alpha/2 and each of the three terms <= alpha/6.


def df_flip(alpha: float) -> float:
    check_alpha(alpha)
    return alpha / 2.0


def df_subset_size(alpha: float) -> int:
    """n0 = ceil(12/alpha) - 1: 2/(n0+1) <= alpha/6."""
    check_alpha(alpha)
    n0 = math.ceil(12.0 / alpha) - 1
    while 2.0 / (n0 + 1) > alpha / 6.0:
        n0 += 1
    return n0


def df_gamma(n: int, n0: int, alpha: float) -> float:
    """gamma = 12 (ln(n0+1) + 1) / (alpha n): the exponential-mechanism term is alpha/6."""
    check_alpha(alpha)
    return 12.0 * (math.log(n0 + 1) + 1.0) / (alpha * n)


def df_min_n(alpha: float) -> int:
    """The generalization term sqrt(2 pi / n) <= alpha/6 needs n >= 72 pi / alpha^2."""
    check_alpha(alpha)
    return math.ceil(72.0 * math.pi / alpha**2)


def df_error_bound(n: int, n0: int, gamma: float, rho: float) -> float:
    return rho + 2.0 / (n0 + 1) + 2.0 * (math.log(n0 + 1) + 1.0) / (gamma * n) + math.sqrt(2.0 * math.pi / n)


# --- the generic private learner (KLNRS 2008) ----------------------------------------------------
#
# Realizable on the grid. E[err] <= alpha/2 + P[A] + P[B], A: some h with err_D > alpha/2 has
# err_S <= alpha/4 (multiplicative Chernoff: <= |H| e^{-n alpha/16}); B: the exponential mechanism
# releases an h with err_S > alpha/4 (OPT = 0: <= |H| e^{-eps n alpha/8}).


def learner_error_bound(n: int, domain_size: int, epsilon: float, alpha: float) -> float:
    h = domain_size + 1.0
    return alpha / 2.0 + h * (math.exp(-n * alpha / 16.0) + math.exp(-epsilon * n * alpha / 8.0))
