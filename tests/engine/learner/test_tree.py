"""Depth-k trees (engine.learner.tree): the law of the whole tree against brute force (the product
of every node's exponential mechanism on the records that reach it), routing, the split of epsilon,
checkpoints, and learning a tree-shaped concept."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from everlast.engine.errors import CorruptState
from everlast.engine.learner import PrivateLearner
from everlast.engine.learner.exact import Bits
from everlast.engine.learner.ordinals import FLOAT64_POINTS
from everlast.engine.learner.stumps import SPLIT_SCALE
from everlast.engine.learner.tree import Tree, level_epsilons, sample_tree
from everlast.engine.restore import restore
from tests.engine.learner.test_sampler import _chi2

G = 4  # grid positions 0..3, cuts 0..4
POS = np.array([0, 1, 1, 2, 3, 3], dtype=np.int64)[:, None]
Y = np.array([0, 1, 0, 1, 0, 1], dtype=np.int8)
STUMPS = [(c, s) for c in range(G + 1) for s in (1, -1)]


def _node_law(pos: np.ndarray, y: np.ndarray, eps: float) -> dict[tuple[int, int], float]:
    grid = np.arange(G)
    w = {}
    for c, s in STUMPS:
        lab = (grid >= c) if s > 0 else (grid < c)
        w[(c, s)] = math.exp(-eps * int((lab[pos] != y).sum()) / 2)
    z = sum(w.values())
    return {k: v / z for k, v in w.items()}


def _split_law(pos: np.ndarray, y: np.ndarray, eps: float) -> dict[tuple[int, int], float]:
    """The split score's law: Q = floor(A o z / m) summed over both sides, at eps / A; sign +1."""
    w = {}
    for c in range(G + 1):
        q = 0
        for side in (pos < c, pos >= c):
            o, m = int(y[side].sum()), int(side.sum())
            q += (SPLIT_SCALE * o * (m - o)) // m if m else 0
        w[(c, 1)] = math.exp(-(eps / SPLIT_SCALE) * q / 2)
    z = sum(w.values())
    return {k: v / z for k, v in w.items()}


def _tree_law(eps: tuple[float, float], split: bool = False) -> dict[tuple[int, ...], float]:
    """P[(root, left, right)] = P_root(root) P_left(left | records < root's cut) P_right(...)."""
    col = POS[:, 0]
    out = {}
    for root, pr in (_split_law if split else _node_law)(col, Y, eps[0]).items():
        right = col >= root[0]
        left_law = _node_law(col[~right], Y[~right], eps[1])
        right_law = _node_law(col[right], Y[right], eps[1])
        for (lk, pl), (rk, prr) in itertools.product(left_law.items(), right_law.items()):
            out[(*root, *lk, *rk)] = pr * pl * prr
    return out


@pytest.mark.statistical
@pytest.mark.parametrize(("fast", "split"), [(True, False), (False, False), (True, True)])
def test_whole_tree_law_against_brute_force(fast: bool, split: bool) -> None:
    eps = (0.8, 1.7) if not split else (300.0, 1.7)  # the split score runs at eps / 256
    probs = _tree_law(eps, split)
    bits = Bits(np.random.default_rng(11 if fast else 12))
    n = 12_000 if fast else 3000
    freq: dict[tuple[int, ...], int] = {}
    for _ in range(n):
        t = sample_tree(POS, Y, 0, G - 1, eps, lambda _node: bits, fast=fast, split_score=split)
        key = (t.cuts[0], t.signs[0], t.cuts[1], t.signs[1], t.cuts[2], t.signs[2])
        freq[key] = freq.get(key, 0) + 1
    assert _chi2(freq, probs, n) > 1e-6


def test_routing_matches_a_plain_walk() -> None:
    g = np.random.default_rng(0)
    t = Tree(3, (0, 1, 0, 1, 1, 0, 0), tuple(int(v) for v in g.integers(-5, 5, 7)), (1, -1, 1, 1, -1, -1, 1))
    pos = g.integers(-6, 6, (500, 2))
    want = []
    for p in pos:
        i = 0
        for _ in range(2):
            i = 2 * i + 1 + int(p[t.coords[i]] >= t.cuts[i])
        up = p[t.coords[i]] >= t.cuts[i]
        want.append(int(up if t.signs[i] > 0 else not up))
    assert t.labels(pos).tolist() == want


@pytest.mark.parametrize(("eps", "depth", "n", "d"), [(1.0, 3, 3710, 2), (1.0, 3, 398, 30), (0.1, 5, 50, 1),
                                                     (8.0, 1, 10, 3), (1e-9, 2, 10**6, 10), (3.3, 4, 1, 2)])
def test_level_epsilons_spend_at_most_epsilon(eps: float, depth: int, n: int, d: int) -> None:
    levels = level_epsilons(eps, depth, n, d, FLOAT64_POINTS)
    assert len(levels) == depth and all(e > 0 for e in levels)
    assert sum(map(Fraction, levels)) <= Fraction(eps) and math.isclose(sum(levels), eps, rel_tol=1e-12)


def test_level_split_doubles_per_level_unless_the_root_is_starved() -> None:
    big = level_epsilons(1.0, 3, 10**5, 2, FLOAT64_POINTS)
    assert big == pytest.approx((1 / 7, 2 / 7, 4 / 7))
    small = level_epsilons(1.0, 3, 398, 30, FLOAT64_POINTS)
    ln_h = math.log(2 * 30 * (FLOAT64_POINTS + 1))
    assert small[0] == pytest.approx(4 * ln_h / 398) and small[2] == pytest.approx(2 * small[1])


def _xy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).uniform(0.0, 1.0, (n, 2))
    y = ((x[:, 0] >= 0.5) & (x[:, 1] >= 0.3)).astype(np.int8)
    return x, y


@pytest.mark.statistical
def test_learns_a_depth_two_concept() -> None:
    x, y = _xy(4000, 0)
    xq, yq = _xy(4000, 1)
    acc = [float((PrivateLearner.fit("trees", x, y, epsilon=2.0, d=2, depth=2, seed=s).answer(xq).labels
                  == yq).mean()) for s in range(10)]
    # a stump reaches at most 0.85 here (x0 >= 0.5); the depth-2 target is exact, and the greedy rule
    # finds it (the root's best stump is x0 >= 0.5, the right child's x1 >= 0.3)
    assert float(np.mean(acc)) >= 0.9


def _tree_model() -> PrivateLearner:
    x, y = _xy(300, 2)
    return PrivateLearner.fit("trees", x, y, epsilon=1.0, d=2, depth=3, seed=4)


@pytest.mark.parametrize("mutate", [
    lambda h: h.update(depth=2),
    lambda h: h.update(coords=[0, 1, 2, 0, 0, 0, 0]),
    lambda h: h.update(cuts=[2**63 - 1] * 7),
    lambda h: h.update(signs=[0] * 7),
    lambda h: h.update(concept="stumps"),
    lambda h: h.pop("cuts"),
    lambda h: h.update(depth=40),
])
def test_corrupt_tree_checkpoints_are_refused(mutate: Any) -> None:
    m = _tree_model()
    r, lv = m.round_part(), m.live_part()
    mutate(r["hypothesis"])
    with pytest.raises(CorruptState):
        restore(r, lv, None)


def test_a_tree_checkpoint_is_restored_not_refitted() -> None:
    m = _tree_model()
    r = m.round_part()
    assert r["concept"] == {"name": "trees", "d": 2, "depth": 3} and r["hypothesis"]["depth"] == 3
    m2 = restore(r, m.live_part(), None)
    assert isinstance(m2, PrivateLearner) and m2.hypothesis == m.hypothesis


def test_the_split_score_is_chosen_on_the_configured_epsilon(monkeypatch: pytest.MonkeyPatch) -> None:
    """At epsilon = 2 the level budgets can sum to 1.9999999999999998 in floats (n = 398, k = 3, d = 9);
    the choice of Q is made on the configured epsilon, not on that sum (review of learner.md 8, N4)."""
    from everlast.engine.learner import model, tree

    assert math.fsum(level_epsilons(2.0, 3, 398, 9, FLOAT64_POINTS)) < 2.0
    seen: list[bool] = []
    real = tree.sample_tree

    def spy(*a: Any, split_score: bool, **kw: Any) -> Tree:
        seen.append(split_score)
        return real(*a, split_score=split_score, **kw)

    monkeypatch.setattr(model, "sample_tree", spy)
    x = np.random.default_rng(0).random((398, 9))
    for eps in (2.0, np.nextafter(2.0, 0.0), 0.5, 8.0):
        PrivateLearner.fit("trees", x, (x[:, 0] >= 0.5).astype(np.int8), epsilon=float(eps), d=9, depth=3, seed=1)
    assert seen == [True, True, True, True]  # one rule at every epsilon (no switch: accuracy rises with epsilon)


def test_only_the_split_score_limits_n(monkeypatch: pytest.MonkeyPatch) -> None:
    """Q is exact in int64 below MAX_SPLIT_RECORDS records; a larger training set is refused with the
    limit named, before any draw, at every epsilon (one rule). Errors (thresholds, stumps, a depth-1 tree)
    have no such limit."""
    from everlast.engine.errors import InvalidInput
    from everlast.engine.learner import stumps

    monkeypatch.setattr(stumps, "MAX_SPLIT_RECORDS", 100)
    x = np.random.default_rng(0).random((100, 2))
    y = (x[:, 0] >= 0.5).astype(np.int8)
    with pytest.raises(InvalidInput, match=r"exact for fewer than 1e\+02 training records; this training set has 100"):
        PrivateLearner.fit("trees", x, y, epsilon=2.0, d=2, depth=2, seed=1)
    with pytest.raises(InvalidInput, match=r"exact for fewer than"):
        PrivateLearner.fit("trees", x, y, epsilon=0.5, d=2, depth=2, seed=1)
    PrivateLearner.fit("trees", x, y, epsilon=2.0, d=2, depth=1, seed=1)  # depth 1: no level above the last
    PrivateLearner.fit("stumps", x, y, epsilon=2.0, d=2, seed=1)
    PrivateLearner.fit("thresholds", x[:, 0], y, epsilon=2.0, seed=1)


def test_every_node_draws_from_its_own_entropy_without_a_seed() -> None:
    """Without a seed each node gets a generator on fresh OS entropy (learner.md 8: a tree exposes more
    output bits than one seed holds); a seed gives one reproducible generator for the tree."""
    from everlast.engine.learner.model import node_bits

    fresh = node_bits(None)
    words = {fresh(i).word() for i in range(7)}
    assert len(words) == 7  # 7 independent 64-bit words: equal ones with probability < 2^-59
    seeded = node_bits(5)
    assert seeded(0) is seeded(6)
    x, y = _xy(300, 2)
    a = PrivateLearner.fit("trees", x, y, epsilon=1.0, d=2, depth=3, seed=4).hypothesis
    assert a == _tree_model().hypothesis


def test_the_budgets_move_with_n_only_inside_the_band_of_corollary_t1() -> None:
    """learner.md 8, Corollary T1': the level budgets at n and n + 1 coincide (so adding or removing an
    example costs the release epsilon / 2) except for 365 <= n <= 1,280 at depth 3, d = 2, epsilon 1 on
    float64; at n - 1, n and n + 1 (both neighbours of a data set of size n) except for 365-1,281."""
    moving = [n for n in range(1, 3000)
              if level_epsilons(1.0, 3, n, 2, FLOAT64_POINTS) != level_epsilons(1.0, 3, n + 1, 2, FLOAT64_POINTS)]
    assert moving == list(range(365, 1281))
    ln_h = math.log(2 * 2 * (FLOAT64_POINTS + 1))
    assert math.floor(8 * ln_h) == 365 and math.floor(28 * ln_h) == 1280
    # a data set of size n has neighbours of sizes n - 1 and n + 1: covered iff all three tuples coincide
    at = {n: level_epsilons(1.0, 3, n, 2, FLOAT64_POINTS) for n in range(1, 3001)}
    uncovered = [n for n in range(2, 3000) if not at[n - 1] == at[n] == at[n + 1]]
    assert uncovered == list(range(365, 1282))


def test_without_a_seed_each_generator_gets_256_bits_of_os_entropy() -> None:
    """learner.md 2: an interval exposes 126.9986 bits; a 128-bit seed would leave a margin of one bit,
    so each generator is seeded from 256 bits (PCG64 keeps 255 as state and increment)."""
    from everlast.engine.learner.model import SEED_BITS, os_seed

    seeds = [os_seed() for _ in range(4)]
    assert SEED_BITS == 256 and all(ss.pool_size == 8 for ss in seeds)
    ents = [int(ss.entropy) for ss in seeds]  # type: ignore[arg-type]
    assert all(e < 2**256 for e in ents)
    assert any(e >= 2**128 for e in ents)  # the high half is drawn: all four below 2^128 w.p. 2^-512
    assert len({e >> 128 for e in ents}) == 4 and len({e % 2**128 for e in ents}) == 4  # w.p. 1 - 2^-124
    log2_intervals = math.log2((FLOAT64_POINTS + 1) * (FLOAT64_POINTS + 2) // 2)
    assert 126.998 < log2_intervals < 126.999 and 255 - log2_intervals > 128


def test_a_subnormal_split_budget_is_refused() -> None:
    """epsilon_l / 256 must be exact: below 2^-1000 a fit is refused (naming epsilon); at 2^-1000 the
    smallest budget of a depth-8 tree divides exactly; a level budget whose quotient is subnormal is
    refused by the sampler itself (the mutant that divides anyway would round 3 2^-1067 / 256 = 1.5
    2^-1074 up to 2^-1073, 4/3 of its share; 3 2^-1074 / 256 rounds to 0, an underspend, refused too)."""
    from everlast.engine.errors import InvalidInput
    from everlast.engine.learner.model import MIN_EPSILON

    x, y = _xy(200, 3)
    with pytest.raises(InvalidInput, match="epsilon must be at least"):
        PrivateLearner.fit("trees", x, y, epsilon=2.0**-1001, d=2, depth=3, seed=1)
    for depth in (2, 8):
        levels = level_epsilons(MIN_EPSILON, depth, 200, 2, FLOAT64_POINTS)
        assert all((e / SPLIT_SCALE) * SPLIT_SCALE == e and e / SPLIT_SCALE >= 2.0**-1022 for e in levels[:-1])
    assert PrivateLearner.fit("trees", x, y, epsilon=MIN_EPSILON, d=2, depth=3, seed=1).hypothesis.depth == 3
    pos = np.zeros((4, 1), dtype=np.int64)
    assert (3 * 2.0**-1067) / SPLIT_SCALE == 2.0**-1073  # the overspend the refusal prevents
    for budget in (3 * 2.0**-1067, 3 * 2.0**-1074):
        with pytest.raises(InvalidInput, match="subnormal"):
            sample_tree(pos, np.zeros(4, dtype=np.int8), 0, 3, (budget, 1.0),
                        lambda i: Bits(np.random.default_rng(1)), split_score=True)
