"""The generic private learner (Kasiviswanathan-Lee-Nissim-Raskhodnikova-Smith 2008; Nissim's
slides, "PPAC learning of finite concept classes") for thresholds over a finite grid domain X.

Class: H = {h_j : j = 0..|X|}, h_j(x) = 1[index(x) >= j] on the grid X = {g_0 < ... < g_{|X|-1}}
(h_0 is all ones, h_|X| all zeros), |H| = |X| + 1.

Mechanism: the exponential mechanism (McSherry-Talwar 2007) with score(h, S) = -(number of
examples of S that h mislabels). One substitution changes the score of every h by at most 1
(sensitivity 1), so releasing h_j with probability exp(-eps err_S(h_j) / 2) / Z is (eps, 0)-DP
(McSherry-Talwar 2007; stated and proved in Sorrell's notes, Thm 0.1). Sampled exactly in
O(n log n) whatever |X|: err_S(h_j) is constant for j between consecutive distinct data
indices, so the mechanism picks one of the <= n+1 blocks with weight
(block size) * exp(-eps err / 2), then j uniformly in the block.

Queries: the released hypothesis answers every query forever; an answer depends only on the
released hypothesis, so the training set stays (eps, 0)-DP for any number of queries
(post-processing), and the queries need no protection -- no answer depends on another query.

Sample need: with |H| = |X| + 1 hypotheses the utility bound has ln|X| in it (KLNRS 2008; Sorrell's
notes Thm 0.3; ``sample_complexity``), and for pure DP that is the truth up to constants: the
representation dimension of thresholds is Theta(log |X|) (Beimel-Nissim-Stemmer 2013; Feldman-Xiao
2014). On i.i.d. data from a smooth distribution the exponential mechanism does far better than
this worst case (its blocks of equal error scale with |X| together), so runs need not show it.
On an infinite domain (thresholds on the reals) there is no such learner at all: proper or
improper private learning of thresholds needs a sample that grows with the domain
(Bun-Nissim-Stemmer-Vadhan 2015; Alon-Livni-Malliaris-Moran 2019), so this peer raises
``InfiniteDomain`` without a grid, and ``OutsideDomain`` (naming the position, never the value)
for a training or query point off the grid.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts import ConceptClass
from everlast.peers.base import (
    F64,
    I8,
    I64,
    Grid,
    InfiniteDomain,
    PeerState,
    PrivacyAccounting,
    streams,
    training_set,
)
from everlast.peers.design import require_thresholds


def block_scores(k: I64, y: I8, size: int) -> tuple[I64, I64, I64]:
    """The blocks of hypotheses with equal empirical error.

    ``k`` grid indices of the examples, ``y`` their labels. With u_1 < ... < u_r the distinct
    indices, block 0 is j in [0, u_1], block i is (u_i, u_{i+1}], block r is (u_r, |X|]. Returns
    (first j of each block, block sizes, errors), where the error of block i is
    #(ones among indices <= u_i) + #(zeros among indices > u_i)."""
    u, inv = np.unique(k, return_inverse=True)
    r = u.size
    ones = np.bincount(inv, weights=(y == 1), minlength=r).astype(np.int64)
    zeros = np.bincount(inv, weights=(y == 0), minlength=r).astype(np.int64)
    c1 = np.concatenate([[0], np.cumsum(ones)])  # ones among the first i distinct indices
    c0 = np.concatenate([[0], np.cumsum(zeros)])
    err = c1 + (c0[-1] - c0)
    first = np.concatenate([[0], u + 1]).astype(np.int64)
    last = np.concatenate([u, [size]]).astype(np.int64)
    return first, last - first + 1, err.astype(np.int64)


def output_distribution_blocks(k: I64, y: I8, size: int, epsilon: float) -> tuple[I64, I64, F64]:
    """(first j, sizes, probability of each block): P[block i] = size_i exp(-eps err_i / 2) / Z."""
    first, sizes, err = block_scores(k, y, size)
    logw = np.log(sizes.astype(np.float64)) - 0.5 * epsilon * err.astype(np.float64)
    p = np.exp(logw - logw.max())
    return first, sizes, p / p.sum()


def hypothesis_distribution(k: I64, y: I8, size: int, epsilon: float) -> F64:
    """P[h_j] for every j = 0..|X| (length |X| + 1): for tests on small grids."""
    _, sizes, pb = output_distribution_blocks(k, y, size, epsilon)
    return np.repeat(pb / sizes, sizes)


def sample_hypothesis(k: I64, y: I8, size: int, epsilon: float, rng: np.random.Generator) -> int:
    """Draw j exactly: a block by inverse CDF on one uniform, then j uniform in the block."""
    first, sizes, pb = output_distribution_blocks(k, y, size, epsilon)
    c = np.cumsum(pb)
    i = min(int(np.searchsorted(c, rng.random() * c[-1], side="right")), pb.size - 1)
    return int(first[i] + rng.integers(0, int(sizes[i])))


class PrivateLearner(PeerState):
    """Releases one threshold h_j by the exponential mechanism and answers 1[index(x) >= j] forever."""

    name = "private_learner"

    def __init__(
        self,
        concept: ConceptClass,
        x: Any,
        y: Any,
        *,
        grid: Grid | None,
        epsilon: float,
        seed: int | None = None,
    ) -> None:
        require_thresholds(concept, "the private learner")
        if grid is None:
            raise InfiniteDomain(
                "the generic private learner needs a finite domain: thresholds on the reals admit no "
                "private learner with finite sample complexity; give a grid"
            )
        if not epsilon > 0.0:
            raise ValueError("epsilon must be positive")
        xs, ys = training_set(concept, x, y)
        self.concept = concept
        self.grid = grid
        self.epsilon = epsilon
        self.n = int(xs.size)
        self.j = sample_hypothesis(grid.index(xs, "training"), ys, grid.size, epsilon, streams(seed, ("em",))["em"])
        self._answered = 0
        self._privacy = PrivacyAccounting(
            epsilon=epsilon,
            delta=0.0,
            protects_queries=True,
            note=(
                f"Training set: one hypothesis released by the exponential mechanism over the "
                f"{grid.size + 1} thresholds of the grid (score = -errors, sensitivity 1 under "
                f"substitution), ({epsilon:.3g}, 0)-DP (McSherry-Talwar 2007; KLNRS 2008); every answer is "
                f"a post-processing of it, so the guarantee holds for any number of queries. Queries need "
                f"no protection: an answer depends only on the released hypothesis and its own query."
            ),
            max_queries=None,
            per_query_epsilon=0.0,
            extra=(("grid_size", float(grid.size)),),
        )

    @property
    def exhausted(self) -> bool:
        return False

    @property
    def threshold(self) -> float:
        """The released threshold as a point (inf when h is all zeros)."""
        return float(self.grid.points(np.array([self.j]))[0]) if self.j < self.grid.size else float("inf")

    def answer(self, x: Any) -> I8:
        xs = self.concept.validate_points(x)
        k: NDArray[np.int64] = self.grid.index(xs)
        self._answered += k.size
        return (k >= self.j).astype(np.int8)
