"""The trees' broken control for the learner audit (``everlast audit --mechanism private-learner
--concept trees --variant plain-erm``): the tree grown greedily *without noise*, each node taking the
first cut of the first cell with the fewest training errors (docs/privacy/learner.md 6, 8).

It is deterministic, so the canary's label decides the released tree, and the canary game separates
the two worlds perfectly: an audit that could not catch it would prove nothing about the real trees.

The grid game (``run_grid_audit``; ``everlast audit --game training --mechanism private-learner --concept
trees``, the variants ``real`` and ``overspend-levels``): depth-2 trees on a 3-point grid, two training sets
that differ in one example, and an event -- a set of released trees -- fixed from the claimed mechanism's
exact law (``exact_tree_law``, enumerated from docs/privacy/learner.md 8) before any fit. The broken
control ``overspend-levels`` spends the whole epsilon at every level (a composition error, 2x at depth 2);
the game catches it with fixed seeds (docs/privacy/learner.md 6).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.learner import Domain, PrivateLearner
from everlast.engine.learner.cells import cells
from everlast.engine.learner.tree import Tree


def _erm_stump(pos: NDArray[np.int64], y: NDArray[np.int8], dom: Domain) -> tuple[int, int, int]:
    """(coord, cut, sign) of the first minimum-error cell, sign +1 first, coordinates in order."""
    c = cells(pos, y, dom.lo_pos, dom.hi_pos)
    up = c.err_up
    err = np.concatenate([up, c.n - up], axis=1).astype(np.float64)  # (d, 2 (n + 1))
    sizes = np.concatenate([c.sizes, c.sizes], axis=1)
    err[sizes == 0] = np.inf
    k = int(np.argmin(err))
    coord, rest = divmod(k, 2 * (c.n + 1))
    sgn, j = divmod(rest, c.n + 1)
    return coord, int(c.starts[coord, j]), 1 if sgn == 0 else -1


def plain_erm_tree(x: NDArray[np.float64], y: NDArray[np.int8], epsilon: float, depth: int) -> PrivateLearner:
    """The greedy tree without noise, served through ``PrivateLearner`` (its *claim* is still epsilon)."""
    dom = Domain.float64()
    xs = x.reshape(x.shape[0], -1)
    pos = dom.positions(xs, "training")
    coords: list[int] = []
    cuts: list[int] = []
    signs: list[int] = []
    node = np.zeros(pos.shape[0], dtype=np.int64)
    for level in range(depth):
        first = (1 << level) - 1
        for v in range(1 << level):
            rows = node == v
            k, cut, s = _erm_stump(pos[rows], y[rows], dom)
            coords.append(k)
            cuts.append(cut)
            signs.append(s)
        c = np.asarray(coords[first:])[node]
        t = np.asarray(cuts[first:])[node]
        node = 2 * node + (pos[np.arange(pos.shape[0]), c] >= t)
    spec = {"name": "trees", "d": xs.shape[1], "depth": depth}
    return PrivateLearner(spec, dom, epsilon, int(xs.shape[0]), Tree(depth, tuple(coords), tuple(cuts), tuple(signs)))


# -- the grid game: depth-2 trees on a 3-point grid, an event fixed from the exact law ---------------------

GRID = (0.0, 1.0, 2.0)
"""The audited domain: a grid of K = 3 points (4 cuts per node)."""
GRID_BASE = ((0, 1),) * 3 + ((2, 0),) * 30
"""The examples both worlds share, as (grid index, label): 3 ones at 0, 30 zeros at 2. The differing
example sits at index 0 with label 0 (world 0) or 1 (world 1). Chosen by an offline search over small
data sets for the largest expected bound of the ``overspend-levels`` control at 8,000 fits per world (1.18
at epsilon 1, against 0.51 for the real trees)."""
GRID_DEPTH = 2
GRID_PER_WORLD = 8000
"""Fits per world by default (the grid game ignores --trials below it: fewer cannot show a 2x overspend)."""


def grid_training_set(world: int) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    pts = [p for p, _ in GRID_BASE] + [0]
    labels = [lab for _, lab in GRID_BASE] + [world]
    return np.asarray([GRID[p] for p in pts], dtype=np.float64)[:, None], np.asarray(labels, dtype=np.int8)


def _node_law(pos: NDArray[np.int64], y: NDArray[np.int8], k: int, eps: float,
              split: bool) -> tuple[list[tuple[int, int]], NDArray[np.float64]]:
    """One node's exponential mechanism as docs/privacy/learner.md 8 defines it, by enumeration: over
    (cut t in 0..K, sign +1) with the split score Q at eps / A (above the last level), or over (t, sign)
    with the errors at eps (the last level). Written from the doc, not from the sampler."""
    from everlast.engine.learner.stumps import SPLIT_SCALE as A

    ts = range(k + 1)
    if split:
        params = [(t, 1) for t in ts]

        def half(m: NDArray[np.bool_]) -> int:
            nn, o = int(m.sum()), int(y[m].sum())
            return 0 if nn == 0 else (A * o * (nn - o)) // nn

        score = np.array([half(pos < t) + half(pos >= t) for t in ts], dtype=np.float64)
        e = eps / A
    else:
        params = [(t, s) for s in (1, -1) for t in ts]
        score = np.array([int(np.sum(((pos >= t) if s > 0 else (pos < t)).astype(np.int8) != y))
                          for t, s in params], dtype=np.float64)
        e = eps
    lw = -e * score / 2.0
    w = np.exp(lw - lw.max())
    return params, w / w.sum()


def exact_tree_law(world: int, levels: tuple[float, float]) -> dict[tuple[tuple[int, int], ...], float]:
    """P[tree] of the depth-2 mechanism on the grid game's training set: {((t0, s0), (t1, s1), (t2, s2)): p}
    (heap order; float arithmetic: it chooses the event, it proves nothing)."""
    x, y = grid_training_set(world)
    pos = np.asarray(Domain.grid(GRID).positions(x[:, 0]), dtype=np.int64)
    k = len(GRID)
    out: dict[tuple[tuple[int, int], ...], float] = {}
    roots, pr = _node_law(pos, y, k, levels[0], True)
    for (t, s), p in zip(roots, pr, strict=True):
        right = pos >= t
        lp, lw = _node_law(pos[~right], y[~right], k, levels[1], False)
        rp, rw = _node_law(pos[right], y[right], k, levels[1], False)
        for a, pa in zip(lp, lw, strict=True):
            for b, pb in zip(rp, rw, strict=True):
                out[((t, s), a, b)] = float(p * pa * pb)
    return out


def grid_event(epsilon: float, per_world: int, alpha: float) -> tuple[set[tuple[tuple[int, int], ...]], int]:
    """The event (a set of trees) and the world it favours, fixed from the *claimed* mechanism's exact law
    before any fit: the trees with the largest likelihood ratio, as many as maximise the Clopper-Pearson
    bound expected at ``per_world`` fits."""
    from everlast.adversary_sim.audit.stats import clopper_pearson
    from everlast.engine.learner.tree import level_epsilons

    x, _ = grid_training_set(0)
    lv = level_epsilons(epsilon, GRID_DEPTH, x.shape[0], 1, len(GRID))
    l0, l1 = exact_tree_law(0, (lv[0], lv[1])), exact_tree_law(1, (lv[0], lv[1]))
    keys = list(l0)
    a = np.array([l0[t] for t in keys])
    b = np.array([l1[t] for t in keys])
    best: tuple[float, int, int] = (-math.inf, 0, 1)
    for fav, (pa, pb) in ((1, (a, b)), (0, (b, a))):
        order = np.argsort(-(np.log(pb) - np.log(pa)), kind="stable")
        ca, cb = np.cumsum(pa[order]), np.cumsum(pb[order])
        for i in range(len(order)):
            kf, ko = round(cb[i] * per_world), round(ca[i] * per_world)
            if kf < 20 or ko >= per_world:
                continue
            lb = math.log(clopper_pearson(kf, per_world, alpha)[0] / clopper_pearson(ko, per_world, alpha)[1])
            if lb > best[0]:
                best = (lb, i, fav)
    _, i, fav = best
    pa, pb = (a, b) if fav == 1 else (b, a)
    order = np.argsort(-(np.log(pb) - np.log(pa)), kind="stable")
    return {keys[j] for j in order[: i + 1]}, fav


def overspent_tree(x: NDArray[np.float64], y: NDArray[np.int8], epsilon: float, depth: int, domain: Domain,
                   seed: int) -> PrivateLearner:
    """The broken control ``overspend-levels``: every level spends the whole epsilon (a composition error:
    the release is up to (depth epsilon)-DP), served under the claim epsilon."""
    from everlast.engine.learner.model import node_bits
    from everlast.engine.learner.tree import sample_tree

    pos = domain.positions(x, "training")
    t = sample_tree(pos, y, domain.lo_pos, domain.hi_pos, (epsilon,) * depth, node_bits(seed), split_score=True)
    return PrivateLearner({"name": "trees", "d": x.shape[1], "depth": depth}, domain, epsilon, int(x.shape[0]), t)


def play_grid(variant: str, world: int, fits: int, seed: int, epsilon: float,
              progress: Callable[[int], None] | None = None) -> list[tuple[tuple[int, int], ...]]:
    """The released trees of ``fits`` fits in ``world`` (fixed seeds: the seed, a tag and the world)."""
    x, y = grid_training_set(world)
    dom = Domain.grid(GRID)
    seeds = np.random.SeedSequence([seed, 43, world]).generate_state(fits, dtype=np.uint64)
    spec = {"name": "trees", "d": 1, "depth": GRID_DEPTH}
    out = []
    for i in range(fits):
        if variant == "overspend-levels":
            m = overspent_tree(x, y, epsilon, GRID_DEPTH, dom, int(seeds[i]))
        else:
            m = PrivateLearner.fit(spec, x, y, epsilon=epsilon, domain=dom, seed=int(seeds[i]))
        t = m.hypothesis
        assert isinstance(t, Tree)
        out.append(tuple(zip(t.cuts, t.signs, strict=True)))
        if progress is not None:
            progress(1)
    return out


def run_grid_audit(variant: str, per_world: int, seed: int, epsilon: float, confidence: float,
                   progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """The grid game: count the event's trees in each world; the bound is ln(CP lower of the favoured
    world's rate / CP upper of the other's), each at (1 - confidence) / 2."""
    from everlast.adversary_sim.audit.stats import clopper_pearson

    alpha = 1.0 - confidence
    event, fav = grid_event(epsilon, per_world, alpha)
    counts = [sum(t in event for t in play_grid(variant, w, per_world, seed, epsilon, progress)) for w in (0, 1)]
    kf, ko = counts[fav], counts[1 - fav]
    lo = clopper_pearson(kf, per_world, alpha)[0]
    hi = clopper_pearson(ko, per_world, alpha)[1]
    bound = math.log(lo / hi) if lo > 0 else -math.inf
    return {"epsilon_lower_bound": max(bound, 0.0), "counts": counts, "event_size": len(event),
            "event_favours_world": fav, "per_world": per_world}
