"""The private learner's accuracy beyond the realizable case (docs/privacy/learner.md 9), and the
trees' bounds (docs/privacy/learner.md 8).

Agnostic, one exponential mechanism over a finite class H (thresholds, intervals, stumps; Theorem
L3): for every distribution D of (x, y) and S = n i.i.d. draws from D, with probability >= 1 - beta
over S and the mechanism,

    err_D(h) <= min_{h' in H} err_D(h') + t / n + sqrt(ln(|H| / beta_uc) / (2n)) + sqrt(ln(1 / beta_h) / (2n)),
    t = (2 / epsilon) ln(|H| / beta_em),  beta = beta_em + beta_uc + beta_h.

Trees of depth k (Theorem T3): the comparator is not the best tree of the class but the *greedy
completion* G(T) of the released tree T: T's splits above its last level, and at each last-level
node the stump with the fewest training errors there. For every D and S ~ D^n, with probability
>= 1 - beta over S and the mechanism,

    err_D(T) <= err_D(G(T)) + 2^(k-1) t_k / n + 2 sqrt(ln(2 |H_k| / beta_uc) / (2n)),
    t_k = (2 / epsilon_{k-1}) ln(2^(k-1) |H_1| / beta_em),  beta = beta_em + beta_uc.

Trees, realizable (Theorem T2): if the labels are those of one stump (the target T2 covers: any
partition of a stump's labels is fitted by a stump in every cell; no bound for a deeper target is
proven for this greedy learner), Theorem L2's argument with t = 2^(k-1) t_k and |H_k| gives error <= alpha.

Pure functions; |H| exact (``hypothesis_count``), logs in float with the planner's slack.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from everlast.engine import roots
from everlast.engine.learner.hypothesis import hypothesis_count
from everlast.engine.learner.tree import level_epsilons
from everlast.engine.planner import learner as pl

FRACTIONS = tuple(i / 20 for i in range(1, 20))
"""beta fractions searched (any split is sound; the grid only affects how tight the bound is)."""
COMPARATOR = {
    "thresholds": "the best threshold's error",
    "intervals": "the best interval's error",
    "stumps": "the best stump's error",
    "trees": ("the error of the greedy completion of the released tree (its splits, then the stump with "
              "the fewest training errors under each last-level node) -- not the best tree of its depth"),
}


@dataclass(frozen=True, slots=True)
class ClassShape:
    """What the bounds need of the class: its name, dimension, depth (trees) and domain size."""

    concept: str
    d: int
    depth: int
    domain_size: int

    def ln_h(self, depth: int | None = None) -> float:
        k = self.depth if depth is None else depth
        if self.concept == "trees":
            return math.log(hypothesis_count("trees", self.domain_size, self.d, k))
        return math.log(hypothesis_count(self.concept, self.domain_size, self.d))

    def ln_node(self) -> float:
        return math.log(hypothesis_count("stumps", self.domain_size, self.d))


def _hoeffding(ln_count: float, n: int) -> float:
    return math.sqrt(max(ln_count, 0.0) / (2.0 * n))


def excess(shape: ClassShape, n: int, epsilon: float, beta: float) -> float:
    """The least excess over the comparator (Theorem L3, or T3 for trees) at n, over the beta splits;
    may exceed 1 (vacuous). n >= 1."""
    best = math.inf
    if shape.concept == "trees":
        k = shape.depth
        eps_last = level_epsilons(epsilon, k, n, shape.d, shape.domain_size)[-1]
        leaves = 1 << (k - 1)
        ln_hk = shape.ln_h()
        for f in FRACTIONS:
            b_em, b_uc = f * beta, (1 - f) * beta
            t = 2.0 / eps_last * (math.log(leaves) + shape.ln_node() - math.log(b_em))
            best = min(best, leaves * t / n + 2.0 * _hoeffding(math.log(2.0) + ln_hk - math.log(b_uc), n))
        return best * (1 + pl.SLACK)
    ln_h = shape.ln_h()
    for f in FRACTIONS:
        for g in FRACTIONS:
            if f + g >= 1.0:
                continue
            b_em, b_uc, b_h = f * beta, g * beta, (1.0 - f - g) * beta
            t = pl.em_errors(epsilon, ln_h, b_em)
            best = min(best, t / n + _hoeffding(ln_h - math.log(b_uc), n) + _hoeffding(-math.log(b_h), n))
    return best * (1 + pl.SLACK)


def _least_n(ok_at: Callable[[int], bool], start: int = 1) -> int:
    """The least n >= start with ok(n), for a condition monotone in n (doubling, then bisection)."""
    hi = max(start, 2)
    while not ok_at(hi):
        hi *= 2
        if hi > 1 << 62:
            raise ValueError("no n satisfies the bound")
    return roots.smallest_int(ok_at, max(1, hi // 2) - 1, hi)


def n_for_excess(shape: ClassShape, alpha: float, epsilon: float, beta: float) -> int:
    """The least n whose agnostic excess is <= alpha (the excess decreases in n)."""
    return _least_n(lambda n: excess(shape, n, epsilon, beta) <= alpha)


# -- trees, realizable (Theorem T2) --------------------------------------------------------------------


def tree_t(shape: ClassShape, n: int, epsilon: float, b_em: float) -> float:
    """2^(k-1) t_k: the training errors the last level adds, except with probability b_em."""
    k = shape.depth
    eps_last = level_epsilons(epsilon, k, n, shape.d, shape.domain_size)[-1]
    leaves = 1 << (k - 1)
    return leaves * 2.0 / eps_last * (math.log(leaves) + shape.ln_node() - math.log(b_em))


def tree_realizable_holds(shape: ClassShape, n: int, epsilon: float, alpha: float, beta: float) -> bool:
    ln_hk = shape.ln_h()
    for f in pl.SPLITS:
        b_em, b_uc = f * beta, beta - f * beta
        t = tree_t(shape, n, epsilon, b_em)
        if t <= n * alpha and ln_hk - n * pl.kl(t / n, alpha) + pl.SLACK * (ln_hk + 1) <= math.log(b_uc):
            return True
    return False


def tree_n_required(shape: ClassShape, epsilon: float, alpha: float, beta: float) -> int:
    """The least n for which Theorem T2 proves error <= alpha with probability >= 1 - beta."""
    return _least_n(lambda n: tree_realizable_holds(shape, n, epsilon, alpha, beta))


def tree_best_alpha(shape: ClassShape, n: int, epsilon: float, beta: float) -> float:
    """The least alpha Theorem T2 proves at n (1.0 if none below 1)."""
    if not tree_realizable_holds(shape, n, epsilon, 1.0 - 1e-12, beta):
        return 1.0
    return roots.smallest_float(lambda a: tree_realizable_holds(shape, n, epsilon, a, beta), 0.0, 1.0 - 1e-12,
                                steps=50)


def epsilon_for_n(shape: ClassShape, n: int, alpha: float, beta: float) -> float:
    """The least epsilon whose excess at n is <= alpha (Theorem L3, or T3 for trees; the excess decreases
    in epsilon: t / n does, and a tree's last-level budget grows with epsilon); +inf when none does
    (the uniform-convergence terms alone exceed alpha)."""
    def ok(e: float) -> bool:
        return excess(shape, n, e, beta) <= alpha

    if not ok(2.0**60):
        return math.inf
    lo, hi = roots.grow_until(ok, 0.5, 1.0)
    while ok(lo):
        hi, lo = lo, lo / 2.0
    return roots.smallest_float(ok, lo, hi, steps=60)
