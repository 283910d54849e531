"""The trees' broken control for the learner audit (``everlast audit --mechanism private-learner
--concept trees --variant plain-erm``): the tree grown greedily *without noise*, each node taking the
first cut of the first cell with the fewest training errors (docs/privacy/learner.md 6, 8).

It is deterministic, so the canary's label decides the released tree, and the canary game separates
the two worlds perfectly: an audit that could not catch it would prove nothing about the real trees.
"""

from __future__ import annotations

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
