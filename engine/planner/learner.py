"""How much data the generic private learner needs (docs/privacy/learner.md section 4).

Realizable case: the examples are i.i.d. from a distribution D on the domain X and labeled by some
h* in H. The learner releases h by the exponential mechanism, P[h] proportional to
exp(-eps E_S(h) / 2) (E_S = training errors). Theorem L2: for any split beta = beta_em + beta_uc
and t = (2 / eps) ln(|H| / beta_em), if t <= n alpha and

    ln|H| - n KL(t/n || alpha) <= ln(beta_uc)        (KL: Bernoulli relative entropy)

then P[err_D(h) > alpha] <= beta. (The mechanism puts mass <= |H| e^{-eps t / 2} <= beta_em on
hypotheses with >= t training errors, because h* has none; Chernoff-Hoeffding plus a union bound
over H says every h with err_D(h) > alpha has more than t training errors except with probability
<= |H| exp(-n KL(t/n || alpha)) <= beta_uc.)

Privacy does not depend on anything here: the release is (eps, 0)-DP for every n and every data
set (Theorem L1), and the queries are 0-DP. These functions only say when it is also accurate.

Pure functions; |H| is exact (``engine.learner.hypothesis_count``), its log a float.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from everlast.engine import roots
from everlast.engine.learner.hypothesis import CLASSES, hypothesis_count
from everlast.engine.learner.ordinals import FLOAT64_POINTS

SPLITS = tuple(i / 200 for i in range(1, 200))
"""beta_em / beta fractions searched (any split is sound; the grid only affects how small n gets)."""
SLACK = 1e-9
"""Relative slack on the float comparisons (the bound is then a hair conservative)."""


def ln_hypotheses(concept: str, domain_size: int = FLOAT64_POINTS, d: int = 1) -> float:
    """ln |H| of the learner's class on a domain of ``domain_size`` points (docs/privacy/learner.md 1)."""
    return math.log(hypothesis_count(concept, domain_size, d))


def kl(p: float, q: float) -> float:
    """KL(Bernoulli(p) || Bernoulli(q)) for 0 <= p <= q < 1."""
    a = 0.0 if p == 0.0 else p * math.log(p / q)
    return a + (1.0 - p) * (math.log1p(-p) - math.log1p(-q))


def em_errors(epsilon: float, ln_h: float, beta_em: float) -> float:
    """t = (2/eps) ln(|H| / beta_em): the mechanism's output has >= t training errors with
    probability <= beta_em (Lemma L2a)."""
    return 2.0 / epsilon * (ln_h - math.log(beta_em))


def _uc_holds(n: int, alpha: float, t: float, ln_h: float, beta_uc: float) -> bool:
    """|H| exp(-n KL(t/n || alpha)) <= beta_uc with t <= n alpha (Lemma L2b)."""
    if n <= 0 or t > n * alpha:
        return False
    lhs = ln_h - n * kl(t / n, alpha)
    return lhs + SLACK * (abs(ln_h) + 1.0) <= math.log(beta_uc)


def holds(n: int, epsilon: float, alpha: float, beta: float, ln_h: float, beta_em: float) -> bool:
    """Theorem L2's condition for one split."""
    if not 0.0 < beta_em < beta:
        return False
    return _uc_holds(n, alpha, em_errors(epsilon, ln_h, beta_em), ln_h, beta - beta_em)


@dataclass(frozen=True, slots=True)
class LearnerBound:
    """Theorem L2 instantiated: the smallest n the planner found and the split that proves it."""

    n_required: int | None
    """None when no n works (never for finite targets)."""
    epsilon: float
    alpha: float
    beta: float
    ln_h: float
    beta_em: float
    beta_uc: float
    t_errors: float
    """The training-error threshold t of the proof."""


def _min_n(epsilon: float, alpha: float, beta: float, ln_h: float, beta_em: float) -> int:
    def ok(n: int) -> bool:
        return holds(n, epsilon, alpha, beta, ln_h, beta_em)

    t = em_errors(epsilon, ln_h, beta_em)
    lo = max(1, math.floor(t / alpha))
    hi = max(lo, 2)
    _, hi = roots.grow_until(ok, lo, hi)  # doubling hi; the search keeps lo
    # holds() is monotone in n: d/dn [n KL(t/n || alpha)] = ln((1 - t/n)/(1 - alpha)) >= 0
    return roots.smallest_int(ok, lo - 1, hi)


def n_required(epsilon: float, alpha: float, beta: float, ln_h: float) -> LearnerBound:
    """The smallest n (over the split grid) for which Theorem L2 proves accuracy (alpha, beta)."""
    _check(epsilon, alpha, beta)
    best: tuple[int, float] | None = None
    for f in SPLITS:
        n = _min_n(epsilon, alpha, beta, ln_h, f * beta)
        if best is None or n < best[0]:
            best = (n, f * beta)
    assert best is not None
    n, b_em = best
    return LearnerBound(n, epsilon, alpha, beta, ln_h, b_em, beta - b_em, em_errors(epsilon, ln_h, b_em))


EXPECTED_SPLITS = tuple(i / 50 for i in range(25, 50))
"""alpha' / alpha fractions searched by ``n_expected_error``."""


def n_expected_error(epsilon: float, alpha: float, ln_h: float) -> LearnerBound:
    """The smallest n (over the split grids) for which Theorem L2 proves an *expected* error
    E[err_D(h)] <= alpha: at (alpha', beta') with alpha' + beta' = alpha, since err_D <= 1 gives
    E[err_D] <= alpha' + P[err_D > alpha'] <= alpha' + beta'. (``everlast compare``'s criterion.)"""
    _check(epsilon, alpha, 0.5)
    best: LearnerBound | None = None
    for f in EXPECTED_SPLITS:
        b = n_required(epsilon, f * alpha, alpha - f * alpha, ln_h)
        if best is None or (b.n_required or 0) < (best.n_required or 0):
            best = b
    assert best is not None
    return best


def expected_error_holds(n: int, epsilon: float, alpha: float, ln_h: float) -> bool:
    """Whether ``n_expected_error(epsilon, alpha, ln_h).n_required <= n`` (Theorem L2's condition is
    monotone in n, so it is whether some pair of splits holds at n)."""
    for f in EXPECTED_SPLITS:
        a, b = f * alpha, alpha - f * alpha
        if any(holds(n, epsilon, a, b, ln_h, g * b) for g in SPLITS):
            return True
    return False


def best_alpha(n: int, epsilon: float, beta: float, ln_h: float) -> float:
    """The smallest alpha Theorem L2 proves with n examples (1.0 if none below 1)."""
    _check(epsilon, 0.5, beta)

    def ok(a: float) -> bool:
        return any(holds(n, epsilon, a, beta, ln_h, f * beta) for f in SPLITS)

    if not ok(1.0 - 1e-12):
        return 1.0
    return roots.smallest_float(ok, 0.0, 1.0 - 1e-12, steps=60)


def epsilon_for_n(n: int, alpha: float, beta: float, ln_h: float) -> float:
    """The smallest epsilon for which Theorem L2 proves accuracy (alpha, beta) with n examples;
    +inf when no epsilon does (n < ln(|H|/beta) / -ln(1 - alpha) or so: even a noiseless ERM
    would need more data under this proof)."""
    _check(1.0, alpha, beta)
    best = math.inf
    for f in SPLITS:
        b_em, b_uc = f * beta, beta - f * beta
        if not _uc_holds(n, alpha, 1e-300, ln_h, b_uc):
            continue
        uc = functools.partial(_uc_holds, n, alpha, ln_h=ln_h, beta_uc=b_uc)
        hi = n * alpha  # largest t with the UC condition (KL decreasing in t on [0, n alpha])
        lo = hi if uc(hi) else roots.largest_float(uc, 0.0, hi, steps=100)
        if lo > 0.0:
            best = min(best, 2.0 * (ln_h - math.log(b_em)) / lo)
    return best * (1.0 + 1e-12)


def _check(epsilon: float, alpha: float, beta: float) -> None:
    if not (epsilon > 0.0 and math.isfinite(epsilon)):
        raise ValueError("epsilon must be positive and finite")
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie in (0, 1)")
    if not 0.0 < beta < 1.0:
        raise ValueError("beta must lie in (0, 1)")


def classes() -> tuple[str, ...]:
    return CLASSES


DOC_CASES = (("thresholds", 1), ("intervals", 1), ("stumps", 10), ("stumps", 100))


def sizes_table() -> str:
    """The table of docs/privacy/learner.md section 4 (regenerated by tests/planner/test_learner_doc.py)."""
    rows = ["| class on all finite float64 | \\|H\\| | ln\\|H\\| | eps = 1 | eps = 0.5 | eps = 0.1 "
            "| eps = 1, alpha = 0.05 | eps = 1, beta = 1e-6 |", "|---|---|---|---|---|---|---|---|"]
    for concept, d in DOC_CASES:
        size = hypothesis_count(concept, FLOAT64_POINTS, d)
        ln_h = math.log(size)
        ns = [n_required(e, a, b, ln_h).n_required for e, a, b in
              ((1.0, 0.1, 0.05), (0.5, 0.1, 0.05), (0.1, 0.1, 0.05), (1.0, 0.05, 0.05), (1.0, 0.1, 1e-6))]
        name = concept if concept != "stumps" else f"stumps, d = {d}"
        rows.append(f"| {name} | {size:.3e} | {ln_h:.2f} | " + " | ".join(f"{n:,}" for n in ns) + " |")
    return "\n".join(rows)
