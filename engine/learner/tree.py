"""Depth-k decision trees by the exponential mechanism, level by level (docs/privacy/learner.md 8).

The tree is complete: 2^k - 1 nodes in heap order (node i has children 2i + 1 and 2i + 2). Each node
holds a stump (coordinate, cut, sign): a record goes right iff its position on the coordinate is
>= the cut. At the last level the stump's orientation gives the two leaves' labels (sign +1: right
1, left 0; sign -1: the reverse). A stump whose cut lies beyond every record of its node splits
nothing: that is the mechanism's "no split" (the constant stumps are in the class).

Fitting (``sample_tree``): level l's nodes each run the exact stump sampler (``engine.learner.stumps``)
at epsilon_l on the records that reach them; records are then routed by the released stumps.
A record reaches one node per level (parallel composition within a level); the levels compose
sequentially: the release is (sum_l epsilon_l, 0)-DP under substitution (Theorem T1). ``level_epsilons``
says how epsilon is split, ``uses_split_score`` which score the levels above the last use; both are
functions of public numbers. Each node draws from its own bit source (``PrivateLearner.fit``: its own
256 bits of OS entropy; the nodes' seeds are as independent as the OS generator's outputs, a
computational assumption, docs/privacy/learner.md 8).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.errors import CorruptState, InvalidInput
from everlast.engine.learner.exact import BitSource
from everlast.engine.learner.hypothesis import hypothesis_count
from everlast.engine.learner.stumps import SPLIT, SPLIT_SCALE, check_split_records, sample_stump_rows

I64 = NDArray[np.int64]
MAX_DEPTH = 8
DEFAULT_DEPTH = 3
SPLIT_SCORE_FROM = 0.0
"""From this configured epsilon the levels above the last score splits by Q (a Gini-like count), below
it by the stump's errors. 0: one rule, Q at every epsilon (an earlier threshold of 2 made accuracy
drop where the rule switched; docs/privacy/learner.md 8 gives the measurements behind the choice)."""
ROOT_SIGNAL = 4.0
"""The root's floor: epsilon_0 >= min(epsilon / 2, ROOT_SIGNAL ln|H_node| / n) (docs/privacy/learner.md 8)."""


def uses_split_score(epsilon: float) -> bool:
    """Whether the levels above the last score splits by Q: decided on the configured epsilon alone (not
    on the float sum of the level budgets, which can round below it: 1.9999999999999998 at epsilon 2)."""
    return epsilon >= SPLIT_SCORE_FROM


def level_epsilons(epsilon: float, depth: int, n: int, d: int, domain_size: int) -> tuple[float, ...]:
    """The split of epsilon over the levels (docs/privacy/learner.md 8): epsilon_l proportional to 2^l
    (a level-l node sees ~n / 2^l records, so every node gets the same epsilon_l n_l), except that
    the root gets at least min(epsilon / 2, 4 ln|H_node| / n), where its exponential mechanism's
    excess (2 / epsilon_0) ln|H_node| (Lemma L2a) falls to n / 2; the other levels share the rest in
    proportion to 2^l. A function of the public (epsilon, depth, n, d, |X|) only. The last level takes
    the remainder, so that the float64 values sum, as real numbers, to at most epsilon (checked exactly)."""
    if depth == 1:
        return (epsilon,)
    w = [float(1 << i) for i in range(depth)]
    floor = min(epsilon / 2.0, ROOT_SIGNAL * math.log(hypothesis_count("stumps", domain_size, d)) / max(n, 1))
    root = epsilon * w[0] / sum(w)
    if root < floor:
        rest = sum(w[1:])
        out = [floor] + [(epsilon - floor) * wi / rest for wi in w[1:-1]]
    else:
        out = [epsilon * wi / sum(w) for wi in w[:-1]]
    last = epsilon - math.fsum(out)
    while sum(map(Fraction, [*out, last])) > Fraction(epsilon):  # the real sum: never more than epsilon
        last = float(np.nextafter(last, 0.0))
    return (*out, last)


@dataclass(frozen=True, slots=True)
class Tree:
    """A released depth-k tree (a secret of the model: checkpoints hold it)."""

    depth: int
    coords: tuple[int, ...]
    cuts: tuple[int, ...]
    signs: tuple[int, ...]
    concept: str = "trees"

    def labels(self, pos: I64) -> NDArray[np.int8]:
        """Labels of validated positions (n, d) (or (n,) for d = 1): one vectorized step per level."""
        pos = pos if pos.ndim == 2 else pos[:, None]
        coords = np.asarray(self.coords, dtype=np.int64)
        cuts = np.asarray(self.cuts, dtype=np.int64)
        rows = np.arange(pos.shape[0])
        node = np.zeros(pos.shape[0], dtype=np.int64)
        for _ in range(self.depth - 1):
            node = 2 * node + 1 + (pos[rows, coords[node]] >= cuts[node])
        up = pos[rows, coords[node]] >= cuts[node]
        signs = np.asarray(self.signs, dtype=np.int64)[node]
        return np.where(signs > 0, up, ~up).astype(np.int8)

    def constant(self, lo_pos: int, hi_pos: int, d: int) -> bool:
        """Whether every point of the domain ([lo_pos, hi_pos] on each of the d coordinates) gets the
        same label: the reachable leaves' labels, by propagating each node's box of positions."""
        seen: set[int] = set()
        stack = [(0, 0, [lo_pos] * d, [hi_pos] * d)]  # (node, level, box lower, box upper), inclusive
        while stack:
            i, level, lo, hi = stack.pop()
            k, c = self.coords[i], self.cuts[i]
            left = lo[k] < c  # some position of the box goes left (pos < c)
            right = hi[k] >= c
            if level + 1 == self.depth:
                s = self.signs[i]
                if left:
                    seen.add(0 if s > 0 else 1)
                if right:
                    seen.add(1 if s > 0 else 0)
                if len(seen) > 1:
                    return False
                continue
            if left:
                h2 = list(hi)
                h2[k] = min(hi[k], c - 1)
                stack.append((2 * i + 1, level + 1, lo, h2))
            if right:
                l2 = list(lo)
                l2[k] = max(lo[k], c)
                stack.append((2 * i + 2, level + 1, l2, hi))
        return len(seen) <= 1

    def to_dict(self) -> dict[str, Any]:
        return {"concept": "trees", "depth": self.depth, "coords": list(self.coords), "cuts": list(self.cuts),
                "signs": list(self.signs)}

    @classmethod
    def from_dict(cls, d: dict[str, Any], lo_pos: int, hi_pos: int, dim: int) -> Tree:
        """Inverse of ``to_dict``, checked against the domain and dimension (``CorruptState``)."""
        try:
            depth = int(d["depth"])
            t = cls(depth, tuple(int(v) for v in d["coords"]), tuple(int(v) for v in d["cuts"]),
                    tuple(int(v) for v in d["signs"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptState(f"tree is malformed ({type(exc).__name__})") from None
        size = (1 << depth) - 1 if 1 <= depth <= MAX_DEPTH else -1
        ok = d.get("concept") == "trees" and len(t.coords) == len(t.cuts) == len(t.signs) == size
        ok = ok and all(0 <= k < dim for k in t.coords) and all(lo_pos <= c <= hi_pos + 1 for c in t.cuts)
        if not (ok and all(s in (1, -1) for s in t.signs)):
            raise CorruptState("tree does not fit its domain, dimension and depth")
        return t


def sample_tree(pos: I64, y: NDArray[np.int8], lo_pos: int, hi_pos: int, epsilons: tuple[float, ...],
                node_bits: Callable[[int], BitSource], *, split_score: bool, fast: bool = True) -> Tree:
    """The tree, top-down: level l's 2^l nodes each draw a stump at ``epsilons[l]`` from the records
    that reach them (none: the uniform law over the class, data-independent), node i (heap order) from
    ``node_bits(i)``. Above the last level the score is the stump's errors, or with ``split_score``
    (``uses_split_score`` of the configured epsilon) the split score Q (``stumps.ColumnCells.score``,
    sensitivity ``SPLIT_SCALE``: the mechanism runs at epsilon_l / SPLIT_SCALE; a training set of
    ``stumps.MAX_SPLIT_RECORDS`` or more is refused, ``InvalidInput``, before any draw)."""
    pos = pos if pos.ndim == 2 else pos[:, None]
    n = int(pos.shape[0])
    if split_score and len(epsilons) > 1:
        check_split_records(n)
        if any((e / SPLIT_SCALE) * SPLIT_SCALE != e or e / SPLIT_SCALE < 2.0**-1022 for e in epsilons[:-1]):
            raise InvalidInput("a level's epsilon / 256 is not exact (subnormal): epsilon is too small")
    coords: list[int] = []
    cuts: list[int] = []
    signs: list[int] = []
    node = np.zeros(n, dtype=np.int64)  # node index within the level
    rows_all = np.arange(n)
    for level, eps in enumerate(epsilons):
        width = 1 << level
        if level == 0:
            groups: list[I64 | None] = [None]
        else:
            order = np.argsort(node, kind="stable")
            bounds = np.searchsorted(node[order], np.arange(width + 1))
            groups = [order[bounds[v]:bounds[v + 1]] for v in range(width)]
        last = level + 1 == len(epsilons)
        for v, rows in enumerate(groups):
            bits = node_bits(width - 1 + v)
            if last or not split_score:
                h = sample_stump_rows(pos, rows, y, lo_pos, hi_pos, eps, bits, "trees", fast)
            else:
                h = sample_stump_rows(pos, rows, y, lo_pos, hi_pos, eps / SPLIT_SCALE, bits, "trees", fast, (SPLIT,))
            coords.append(h.coord)
            cuts.append(h.lo)
            signs.append(h.sign)
        del groups
        if level + 1 < len(epsilons):
            first = width - 1
            c = np.asarray(coords[first:], dtype=np.int64)[node]
            t = np.asarray(cuts[first:], dtype=np.int64)[node]
            node = 2 * node + (pos[rows_all, c] >= t)
    return Tree(len(epsilons), tuple(coords), tuple(cuts), tuple(signs))
