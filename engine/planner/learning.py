"""Accuracy-only formulas: none of these can weaken privacy (privacy holds for any value of them),
they only decide how often a round fails or how accurate its answers are.

* lambda_i, chunk size: Theorem A.2 (VC bound, Blumer-Ehrenfeucht-Haussler-Warmuth 1989):
  lambda = (8 VC log(13/alpha) + 4 log(2/beta)) / alpha. The paper does not give the base; Blumer
  et al. state it with log base 2, which is the default here (``lambda_log="log2"``, as
  docs/notes/calibration.md); ``"ln"`` is accepted.
* |S-hat_i|: LabelBoost's utility, Lemma C.2 / Claim D.8: |D-hat| <= (beta/e) VC exp(alpha |S-hat| /
  (2 VC)) - |S-hat|, and |S-hat_i| >= lambda_{i+1} so that Claim E.1's generalisation step applies.
* the halt budget c_i (Claims D.2-D.5): :data:`CLAIM_D5` = 64 alpha_i R_i (capped at R_i, since a round has
  only R_i queries); :data:`SPLIT_VOTES` = ceil(k R_i p_top) with the per-concept top rate of
  docs/halt_budget.md: p_top = b ln((1 - s)/(1 - 2 gamma - 2 s))/lambda, b the class's decision
  boundaries (thresholds 1, intervals 2, stumps 1) and s the share of stumps an irrelevant
  coordinate can steal (0 for the other classes; below 1e-50 at every planned lambda). It is the
  exact large-lambda share of queries whose vote lands in the band, an upper bound at finite
  lambda, when the data are continuous with a density that is continuous and positive at each
  boundary, the labels come from a concept of the class and the ERM puts its cut at the midpoint
  (measured in docs/halt_budget.md; atoms, ties, mass piled up at a boundary and label noise break
  it, which the safety factor k only partly covers).
* T floors: Claim D.2 (T >= 96 ln(1/alpha_i)) and Claim D.7 / Lemma C.4.
"""

from __future__ import annotations

import math
from typing import Final, Literal

from everlast.engine import roots

LambdaLog = Literal["log2", "ln"]
HaltBudget = Literal["paper", "split-votes"]
"""The halt-budget policies, as ``--halts`` and the plan's JSON spell them (contracts)."""
CLAIM_D5: Final = "paper"
"""The paper's halt budget, Claim D.5: c_i = 64 alpha_i R_i (capped at R_i). A budget, not the
paper's design: spelt "paper" only where a user writes or reads it (``--halts paper``)."""
SPLIT_VOTES: Final = "split-votes"
"""The split-votes halt budget: c_i = ceil(k R_i p_top) (docs/halt_budget.md); the CLI's default."""


def lambda_real(alpha: float, beta: float, vc_dim: int, lambda_log: LambdaLog = "log2") -> float:
    """Theorem A.2: (8 VC log(13/alpha) + 4 log(2/beta)) / alpha (not rounded)."""
    lg = math.log2 if lambda_log == "log2" else math.log
    return (8.0 * vc_dim * lg(13.0 / alpha) + 4.0 * lg(2.0 / beta)) / alpha


def chunk_size(alpha: float, beta: float, vc_dim: int, lambda_log: LambdaLog = "log2") -> int:
    """lambda_i rounded up (a chunk holds an integer number of points)."""
    return math.ceil(lambda_real(alpha, beta, vc_dim, lambda_log) - 1e-9)


def p_top(gamma: float, lam: int, boundaries: int = 1, spurious: float = 0.0) -> float:
    """The per-concept top rate (docs/halt_budget.md): b ln((1 - s)/(1 - 2 gamma - 2 s))/lambda.

    Per boundary: with midpoint ERM on lambda realizable points of a density continuous and
    positive at the boundary, a query at quantile distance u from it is voted across by a share
    (1 - 2u)^lambda / 2 ~ e^{-2 lambda u}/2 of the classifiers, which is in [1/2 - gamma, 1/2 +
    gamma] on a quantile width 1 - (1 - 2 gamma)^{1/lambda} <= -ln(1 - 2 gamma)/lambda. A share s
    of classifiers that vote on something else (stumps: an irrelevant coordinate) widens the band
    to [(1/2 - gamma - s)/(1 - s), (1/2 + gamma)/(1 - s)]; no bound (1.0) once s >= 1/2 - gamma."""
    if not 0.0 <= spurious < 0.5 - gamma:
        return 1.0
    s = spurious
    return min(1.0, boundaries * math.log((1.0 - s) / (1.0 - 2.0 * gamma - 2.0 * s)) / lam)


def halt_budget(policy: HaltBudget, R: int, alpha: float, gamma: float, lam: int, k: float = 2.0,
                boundaries: int = 1, cap: bool = True) -> int:
    """c_i for a round of R queries: ``CLAIM_D5`` = min(R, ceil(64 alpha R)) (capped),
    ``SPLIT_VOTES`` = min(R, ceil(k R p_top)). ``cap=False`` leaves the paper's 64 alpha R uncapped
    (only to reproduce docs/notes/calibration.md table (iii); a round never has more than R tops)."""
    share = 64.0 * alpha if policy == CLAIM_D5 else k * p_top(gamma, lam, boundaries)
    c = math.ceil(share * R)
    return max(1, min(R, c) if cap else c)


def split_votes_failure(c: int, R: int, p: float) -> float:
    """Chernoff bound on P[more than c tops among R queries] when each is a top w.p. <= p
    (accuracy only): exp(-(x^2/(2+x)) R p) with c = (1+x) R p; 1 if c <= R p."""
    mean = R * p
    if c <= mean or mean <= 0.0:
        return 1.0
    x = c / mean - 1.0
    return math.exp(-x * x / (2.0 + x) * mean)


def chernoff_budget(R: int, p: float, beta: float, k: float) -> int:
    """The split-votes halt budget for R queries of top rate p: ceil(k R p), raised (where R p is
    small) to the smallest c with ``split_votes_failure(c, R, p)`` <= beta; at most R."""
    c = max(1, min(R, math.ceil(k * R * p)))
    if c >= R or split_votes_failure(c, R, p) <= beta:
        return c
    return min(R, roots.smallest_int_from(lambda n: split_votes_failure(n, R, p) <= beta, c + 1, limit=1 << 62))


def labelboost_size(m_D: int, alpha: float, beta: float, vc_dim: int) -> int:
    """Smallest m with (beta/e) VC exp(alpha m / (2 VC)) - m >= m_D (Lemma C.2 with |T| = m_D)."""
    m = 1
    for _ in range(200):
        need = math.ceil(2.0 * vc_dim / alpha * math.log(math.e * (m_D + m) / (beta * vc_dim)))
        if need <= m:
            break
        m = need
    while beta / math.e * vc_dim * math.exp(min(700.0, alpha * m / (2.0 * vc_dim))) - m < m_D:
        m += 1
    return m


def d2_floor(alpha: float) -> int:
    """Claim D.2: T_i >= 96 ln(1/alpha_i)."""
    return math.ceil(96.0 * math.log(1.0 / alpha))


def stumps_vc_bound(d: int) -> int:
    """Upper bound on the VC dimension of decision stumps on R^d (x_j >= theta or x_j < theta):
    on m points they realise at most 2 + 2 d (m - 1) dichotomies, so a shattered set has
    2^m <= 2 + 2 d (m - 1). Gives 2 for d = 1, 3 for d = 2, ~log2(d) in general."""
    m = 1
    while 2 ** (m + 1) <= 2 + 2 * d * m:
        m += 1
    return m


def vc_dimension(concept: str, d: int = 1, vc_dim: int | None = None) -> int:
    """VC dimension used for lambda_i: thresholds 1, intervals 2, stumps ``stumps_vc_bound(d)``,
    finite: ``vc_dim`` (must be given)."""
    if concept == "thresholds":
        return 1
    if concept == "intervals":
        return 2
    if concept == "stumps":
        return stumps_vc_bound(d)
    if concept == "finite":
        if vc_dim is None or vc_dim < 1:
            raise ValueError("the finite class needs its VC dimension (vc_dim >= 1)")
        return vc_dim
    raise ValueError(f"unknown concept class {concept!r}")


def boundaries(concept: str) -> int:
    """How many decision boundaries a classifier of the class has (the b of :func:`p_top`):
    thresholds 1, intervals 2, stumps 1 (one coordinate's threshold). Other classes (finite): 1,
    with no derivation behind it (docs/halt_budget.md)."""
    return {"thresholds": 1, "intervals": 2, "stumps": 1}.get(concept, 1)


def p_top_any_erm(gamma: float, lam: int, boundaries: int = 1) -> float:
    """A bound for every continuous distribution and every consistent ERM (docs/halt_budget.md 3):
    b 2 ln(2/(1 - 2 gamma))/lambda. A classifier can vote across the boundary at a query a
    quantile distance u from it only if none of its lambda points fell in between (probability
    (1 - u)^lambda <= e^{-lambda u}), so the share voting across is >= 1/2 - gamma only within
    u <= ln(1/(1/2 - gamma))/lambda on either side. No smoothness needed, so it covers mass piled
    up at a boundary; atoms and label noise still break it. (For intervals it needs each end's
    chunks to hold points of the interval, i.e. an interval mass well above 1/lambda.)"""
    return min(1.0, boundaries * 2.0 * math.log(2.0 / (1.0 - 2.0 * gamma)) / lam)


def spurious_share(concept: str, d: int, lam: int) -> float:
    """Stumps on R^d: an upper bound on the expected share of chunks whose ERM may pick another
    coordinate than the target's (ties go to the lowest coordinate, so the target's can lose one):
    each of the d - 1 others separates a chunk's labels perfectly with probability 2/C(lam, K)
    when they are independent of the labels (K positives, 0 < K < lam), which averages to
    2 (lam - 1)/2^lam over K ~ Bin(lam, 1/2) (a balanced target). 0 for the other classes."""
    if concept != "stumps" or d <= 1:
        return 0.0
    return min(1.0, (d - 1) * 2.0 * (lam - 1) / 2.0 ** min(lam, 1023))


def top_rate(concept: str, gamma: float, lam: int, d: int = 1) -> float:
    """The rule of docs/halt_budget.md for a concept class: :func:`p_top` with its boundaries and,
    for stumps, :func:`spurious_share`."""
    return p_top(gamma, lam, boundaries(concept), spurious_share(concept, d, lam))
