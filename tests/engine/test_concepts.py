"""Conformance suite for the concept classes (engine/concepts).

Every class is checked against brute force written here, independently of its own code:
LabelBoost's exponential mechanism (paper, Appendix C.1, step 4; Lemmas C.1/C.2) against an
enumeration of all dichotomies on a fine parameter grid, ERM against per-chunk exhaustive
search, ensemble votes against summing individual classifiers, plus serialization and input
validation.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from everlast.engine.concepts import exact_em, from_spec
from everlast.engine.concepts.base import ConceptClass, Ensemble
from everlast.engine.concepts.finite import vc_dimension
from everlast.engine.concepts.stumps import stumps_vc_upper_bound
from everlast.engine.errors import InvalidInput

Params = dict[str, Any]
INF = float("inf")

_M = np.random.default_rng(7).integers(0, 2, size=(10, 7))
FINITE_MATRIX = np.vstack([_M, _M[:2], np.zeros((1, 7), dtype=np.int64)])  # duplicate rows on purpose
N_DOMAIN = FINITE_MATRIX.shape[1]

EXTREMES = np.array(
    [-np.finfo(float).max, -1e308, -1.0, np.nextafter(0.0, -1.0), -0.0, 0.0, 5e-324, 1e-323,
     1.0, np.nextafter(1.0, 2.0), 1e308, np.finfo(float).max]
)  # fmt: skip


def grid_1d(values: np.ndarray) -> np.ndarray:
    """Every distinct value, every (overflow-free) midpoint and +-inf: each gap is represented."""
    v = np.unique(values)
    mids = v[:-1] / 2 + v[1:] / 2
    return np.unique(np.concatenate([v, mids, [-INF, INF]]))


@dataclass(frozen=True)
class Kit:
    """What the suite needs to know about one class, implemented independently of the class."""

    id: str
    spec: dict[str, Any]
    points: Callable[[np.random.Generator, int], np.ndarray]
    grid: Callable[[np.ndarray], list[Params]]  # params covering every dichotomy on the points
    apply: Callable[[Params, np.ndarray], np.ndarray]  # the concept, evaluated here
    single: Callable[[dict[str, Any]], Params]  # params of a one-classifier ensemble
    extreme: Callable[[np.random.Generator, int], np.ndarray] | None = None

    def concept(self) -> ConceptClass:
        return from_spec(self.spec)

    def distinct(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if x.ndim == 2:
            u, inv = np.unique(x, axis=0, return_inverse=True)
        else:
            u, inv = np.unique(x, return_inverse=True)
        return u, inv.reshape(-1)


# thresholds ---------------------------------------------------------------------------------


def _thr_grid(x: np.ndarray) -> list[Params]:
    return [{"t": t} for t in grid_1d(x)]


THRESHOLDS = Kit(
    id="thresholds",
    spec={"name": "thresholds"},
    points=lambda g, n: g.integers(0, 6, n).astype(float),
    grid=_thr_grid,
    apply=lambda p, x: (x >= p["t"]).astype(np.int8),
    single=lambda a: {"t": float(a["t"][0])},
    extreme=lambda g, n: g.choice(EXTREMES, n),
)

# intervals ----------------------------------------------------------------------------------


def _int_grid(x: np.ndarray) -> list[Params]:
    g = grid_1d(x)
    out = [{"a": INF, "b": INF}]
    out += [{"a": a, "b": b} for i, a in enumerate(g) for b in g[i:]]
    return out


INTERVALS = Kit(
    id="intervals",
    spec={"name": "intervals"},
    points=lambda g, n: g.integers(0, 6, n).astype(float),
    grid=_int_grid,
    apply=lambda p, x: ((x >= p["a"]) & (x <= p["b"])).astype(np.int8),
    single=lambda a: {"a": float(a["a"][0]), "b": float(a["b"][0])},
    extreme=lambda g, n: g.choice(EXTREMES, n),
)

# stumps -------------------------------------------------------------------------------------


def _stump_grid(x: np.ndarray) -> list[Params]:
    return [
        {"j": j, "s": s, "t": t}
        for j in range(x.shape[1])
        for s in (1, -1)
        for t in grid_1d(s * x[:, j])
    ]


def _stump_single(a: dict[str, Any]) -> Params:
    g = int(np.argmax(np.diff(np.asarray(a["offsets"]))))
    return {"j": g // 2, "s": 1 if g % 2 == 0 else -1, "t": float(a["t"][0])}


def _stump_kit(d: int) -> Kit:
    return Kit(
        id=f"stumps{d}",
        spec={"name": "stumps", "d": d},
        points=lambda g, n: g.integers(0, 3, (n, d)).astype(float),
        grid=_stump_grid,
        apply=lambda p, x: (p["s"] * x[:, p["j"]] >= p["t"]).astype(np.int8),
        single=_stump_single,
        extreme=lambda g, n: g.choice(EXTREMES, (n, d)),
    )


STUMPS2, STUMPS3 = _stump_kit(2), _stump_kit(3)

# finite -------------------------------------------------------------------------------------

FINITE = Kit(
    id="finite",
    spec={"name": "finite", "matrix": FINITE_MATRIX.tolist()},
    points=lambda g, n: g.integers(0, N_DOMAIN, n).astype(float),
    grid=lambda x: [{"index": i} for i in range(FINITE_MATRIX.shape[0])],
    apply=lambda p, x: FINITE_MATRIX[p["index"], x.astype(int)].astype(np.int8),
    single=lambda a: {"index": int(a["index"][0])},
)

KITS = [THRESHOLDS, INTERVALS, STUMPS2, STUMPS3, FINITE]
kits = pytest.mark.parametrize("kit", KITS, ids=[k.id for k in KITS])


# --- helpers ---------------------------------------------------------------------------------


def brute_dichotomies(kit: Kit, distinct: np.ndarray) -> set[tuple[int, ...]]:
    return {tuple(kit.apply(p, distinct).tolist()) for p in kit.grid(distinct)}


def agreements(z: np.ndarray, inv_lab: np.ndarray, y_lab: np.ndarray) -> int:
    return int((z[inv_lab] == y_lab).sum())


def scenario(kit: Kit, seed: int, n_lab: int, n_unlab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Labeled/unlabeled points with ties, a point labeled twice (possibly both ways) and an
    unlabeled point that repeats a labeled one."""
    g = np.random.default_rng(seed)
    x_lab = kit.points(g, n_lab)
    x_lab = np.concatenate([x_lab, x_lab[:1]])
    y_lab = np.asarray(g.integers(0, 2, x_lab.shape[0]), dtype=np.int8)
    x_unlab = np.concatenate([kit.points(g, n_unlab), x_lab[1:2]])
    return x_lab, y_lab, x_unlab


# --- LabelBoost: exact exponential mechanism ---------------------------------------------------

# every class also gets the exact test below (its law computed exactly from the primitives' laws);
# this end-to-end Monte-Carlo check runs the real bits through the real code
MC_CASES = [(THRESHOLDS, 11), (INTERVALS, 11), (INTERVALS, 12), (STUMPS2, 11), (STUMPS3, 12), (FINITE, 12)]
Z = float(stats.norm.isf(1e-7 / (2 * 60 * len(MC_CASES))))  # Bonferroni over <= 60 outcomes/case


@pytest.mark.statistical
@pytest.mark.parametrize("kit,seed", MC_CASES, ids=[f"{k.id}-{s}" for k, s in MC_CASES])
def test_labelboost_matches_brute_force_distribution(kit: Kit, seed: int) -> None:
    c = kit.concept()
    x_lab, y_lab, x_unlab = scenario(kit, seed, n_lab=5, n_unlab=4)
    allx = np.concatenate([x_lab, x_unlab])
    distinct, inv = kit.distinct(allx)
    inv_lab = inv[: x_lab.shape[0]]
    support = sorted(brute_dichotomies(kit, distinct))
    score = np.array([agreements(np.array(z), inv_lab, y_lab) for z in support])
    p = np.exp(score / 2 - score.max() / 2)
    p /= p.sum()
    assert len(support) <= 60

    N_DRAWS = 20_000
    g = np.random.default_rng(seed + 1000)
    counts: Counter[tuple[int, ...]] = Counter()
    for _ in range(N_DRAWS):
        r = c.labelboost(x_lab, y_lab, x_unlab, g)
        labels = np.concatenate([r.labels_labeled, r.labels_unlabeled])
        zd = np.full(distinct.shape[0], -1, dtype=np.int8)
        zd[inv] = labels
        assert (zd[inv] == labels).all(), "repeated points got different labels"
        assert r.n_dichotomies == len(support)
        assert r.score == agreements(zd, inv_lab, y_lab)
        counts[tuple(zd.tolist())] += 1
    assert set(counts) <= set(support), "sampled a labeling that is not a dichotomy of the class"
    observed = np.array([counts[z] for z in support])
    for z, k, pz in zip(support, observed, p, strict=True):
        tol = Z * np.sqrt(N_DRAWS * pz * (1 - pz)) + 1
        assert abs(k - N_DRAWS * pz) <= tol, (z, k, N_DRAWS * pz)
    # jointly (catches small systematic distortions, e.g. a wrong epsilon): chi-square, alpha 1e-6
    assert stats.chisquare(observed, N_DRAWS * p).pvalue > 1e-6


# --- LabelBoost: the implemented law, exactly ----------------------------------------------------
#
# Every LabelBoost draws through exact primitives whose laws are proven and tested on their own
# (docs/privacy/learner.md 3, tests/engine/learner/): ``sample_cell`` returns group g with probability
# n_g e^{-E_g/2} / Z, ``below(n)`` a uniform integer; intervals go through
# ``exact_em.sample_range``, whose law is computed the same way further down. Forcing each
# primitive's outcome in turn walks every path of a LabelBoost call, so the implemented law is
# known exactly -- as integers and powers of e^{1/2}, no floats -- and compared with the exponential
# mechanism over the brute-force distinct dichotomies.


class Recorded(Exception):
    """Raised by a forced primitive to end a call once the law it was asked for is recorded."""


class ForcedGroup:
    """Stands in for ``exact_em.sample_cell`` and ``exact_em.below``: records the law asked for and
    returns the chosen group and member (``group=None``: record and stop)."""

    def __init__(self, group: int | None = None, member: int = 0) -> None:
        self.group, self.member = group, member
        self.law: tuple[np.ndarray, np.ndarray] | None = None
        self.belows: list[int] = []

    def sample_cell(self, sizes: Any, err: Any, eps: float, bits: Any, fast: bool = True) -> int:
        assert eps == 1.0
        self.law = (np.asarray(sizes).astype(np.int64).copy(), np.asarray(err).astype(np.int64).copy())
        if self.group is None:
            raise Recorded
        return self.group

    def below(self, bits: Any, n: int) -> int:
        self.belows.append(int(n))
        return self.member


def labeling(kit: Kit, r: Any, inv: np.ndarray, n_distinct: int) -> tuple[int, ...]:
    labels = np.concatenate([r.labels_labeled, r.labels_unlabeled])
    z = np.full(n_distinct, -1, dtype=np.int8)
    z[inv] = labels
    assert (z[inv] == labels).all(), "repeated points got different labels"
    return tuple(z.tolist())


def check_law(support: dict[tuple[int, ...], int], law: dict[tuple[int, ...], tuple[Fraction, Fraction]]) -> None:
    """``support``: every distinct dichotomy and its score; ``law``: the implemented probability of
    each outcome as (c, x) meaning c e^x. The exponential mechanism is P[z] = e^{score(z)/2} / Z:
    same outcomes, the same c for all, and x - score / 2 the same for all."""
    assert set(law) == set(support), "the implemented law and the class's distinct dichotomies differ"
    coefs = {c for c, _ in law.values()}
    shifts = {x - Fraction(support[z], 2) for z, (_, x) in law.items()}
    assert len(coefs) == 1 and len(shifts) == 1, (coefs, shifts)


def exact_law_grouped(kit: Kit, x_lab: np.ndarray, y_lab: np.ndarray, x_unlab: np.ndarray,
                      mp: pytest.MonkeyPatch) -> tuple[dict[tuple[int, ...], tuple[Fraction, Fraction]], int]:
    """The implemented law of a class drawing through ``exact_em.sample_group``: path (g, r) has
    probability n_g e^{-E_g/2} / Z * 1/n_g."""
    c = kit.concept()
    distinct, inv = kit.distinct(np.concatenate([x_lab, x_unlab]))
    rec = ForcedGroup()
    mp.setattr(exact_em, "sample_cell", rec.sample_cell)
    with pytest.raises(Recorded):
        c.labelboost(x_lab, y_lab, x_unlab, np.random.default_rng(0))
    assert rec.law is not None
    sizes, err = rec.law
    law: dict[tuple[int, ...], tuple[Fraction, Fraction]] = {}
    n_dich = set()
    for g in np.flatnonzero(sizes).tolist():
        for member in range(int(sizes[g])):
            f = ForcedGroup(g, member)
            mp.setattr(exact_em, "sample_cell", f.sample_cell)
            mp.setattr(exact_em, "below", f.below)
            r = c.labelboost(x_lab, y_lab, x_unlab, np.random.default_rng(0))
            assert f.belows == [int(sizes[g])]  # the member is uniform over the whole group
            z = labeling(kit, r, inv, distinct.shape[0])
            assert z not in law, "two paths give the same dichotomy"
            law[z] = (Fraction(1), Fraction(-int(err[g]), 2))  # n_g e^{-E_g/2} / n_g, times 1/Z
            assert r.score == agreements(np.array(z), inv[: x_lab.shape[0]], y_lab)
            n_dich.add(r.n_dichotomies)
    assert len(n_dich) == 1
    return law, n_dich.pop()


def exact_law_intervals(x_lab: np.ndarray, y_lab: np.ndarray, x_unlab: np.ndarray,
                        mp: pytest.MonkeyPatch) -> tuple[dict[tuple[int, ...], tuple[Fraction, Fraction]], int]:
    """The implemented law of intervals' LabelBoost, given ``sample_range``'s law (the empty
    labeling and diagonal pairs e^{-dD/2}, a pair of groups a < b e^{-(dA_a + dB_b)/2}: proven in
    its docstring, computed exactly in ``test_range_sampler_law_is_exact``)."""
    c = INTERVALS.concept()
    distinct, inv = INTERVALS.distinct(np.concatenate([x_lab, x_unlab]))
    seen: list[tuple[np.ndarray, np.ndarray]] = []

    def record(sizes: Any, V: Any, bits: Any) -> Any:
        seen.append((np.asarray(sizes).copy(), np.asarray(V).copy()))
        raise Recorded

    mp.setattr(exact_em, "sample_range", record)
    with pytest.raises(Recorded):
        c.labelboost(x_lab, y_lab, x_unlab, np.random.default_rng(0))
    sizes, V = seen[0]
    dD = int(V.max() - V.min())
    outcomes: list[tuple[Any, int]] = [(None, dD)]
    for a, s in enumerate(sizes.tolist()):
        outcomes += [(exact_em.RangeDraw(a, i, a, j), dD) for j in range(s) for i in range(j)]
        for b in range(a + 1, sizes.size):
            e = int(V[a] - V.min()) + int(V.max() - V[b])
            outcomes += [(exact_em.RangeDraw(a, i, b, j), e) for i in range(s) for j in range(int(sizes[b]))]
    law: dict[tuple[int, ...], tuple[Fraction, Fraction]] = {}
    n_dich = set()
    for o, e in outcomes:
        mp.setattr(exact_em, "sample_range", lambda *_, o=o: o)
        r = c.labelboost(x_lab, y_lab, x_unlab, np.random.default_rng(0))
        z = labeling(INTERVALS, r, inv, distinct.shape[0])
        assert z not in law, "two outcomes give the same dichotomy"
        law[z] = (Fraction(1), Fraction(-e, 2))
        assert r.score == agreements(np.array(z), inv[: x_lab.shape[0]], y_lab)
        n_dich.add(r.n_dichotomies)
    assert len(n_dich) == 1
    return law, n_dich.pop()


def exact_law(kit: Kit, x_lab: np.ndarray, y_lab: np.ndarray, x_unlab: np.ndarray,
              mp: pytest.MonkeyPatch) -> tuple[dict[tuple[int, ...], tuple[Fraction, Fraction]], int]:
    if kit.id == "intervals":
        return exact_law_intervals(x_lab, y_lab, x_unlab, mp)
    return exact_law_grouped(kit, x_lab, y_lab, x_unlab, mp)


def brute_support(kit: Kit, x_lab: np.ndarray, y_lab: np.ndarray, x_unlab: np.ndarray) -> dict[tuple[int, ...], int]:
    distinct, inv = kit.distinct(np.concatenate([x_lab, x_unlab]))
    inv_lab = inv[: x_lab.shape[0]]
    return {z: agreements(np.array(z), inv_lab, y_lab) for z in brute_dichotomies(kit, distinct)}


@kits
@pytest.mark.parametrize("seed", [21, 22, 23])
def test_labelboost_law_is_the_exponential_mechanism_exactly(kit: Kit, seed: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Every distinct dichotomy (repeated points counted once, conflicting labels, unlabeled copies
    of labeled points) is reached by exactly one path, with probability exactly e^{score/2} / Z."""
    x_lab, y_lab, x_unlab = scenario(kit, seed, n_lab=8, n_unlab=4)
    if seed == 23:
        y_lab = np.zeros_like(y_lab)  # the empty labeling wins (intervals: its own outcome)
    support = brute_support(kit, x_lab, y_lab, x_unlab)
    law, n_dich = exact_law(kit, x_lab, y_lab, x_unlab, monkeypatch)
    check_law(support, law)
    assert n_dich == len(support)


@pytest.mark.parametrize("kit", [THRESHOLDS, INTERVALS], ids=["thresholds", "intervals"])
def test_labelboost_law_is_exact_with_large_groups(kit: Kit, monkeypatch: pytest.MonkeyPatch) -> None:
    """Few labeled points among many unlabeled ones: groups of many cuts of equal score, a
    labeled point shared with D-hat and one labeled both ways."""
    g = np.random.default_rng(4)
    x_unlab = np.concatenate([g.random(40), [0.25, 0.25, 0.75]])
    x_lab = np.array([0.25, 0.5, 0.5, 0.9, 0.7])
    y_lab = np.array([1, 0, 1, 0, 1], dtype=np.int8)
    support = brute_support(kit, x_lab, y_lab, x_unlab)
    law, n_dich = exact_law(kit, x_lab, y_lab, x_unlab, monkeypatch)
    check_law(support, law)
    assert n_dich == len(support)


# --- intervals: sample_range's law, exactly ---------------------------------------------------------


class Forced2:
    """Stands in for the primitives ``sample_range`` uses; returns chosen outcomes in call order
    and records every law it was asked for."""

    def __init__(self, k: int, t: int, members: list[int]) -> None:
        self.k, self.t, self.members = k, t, list(members)
        self.stage2: list[list[Fraction]] = []
        self.accepts: list[tuple[Fraction, int]] = []
        self.belows: list[int] = []
        self.float_calls = self.invert_calls = 0

    def float_decide(self, c: Any, rho: Any, theta: Any, u: Any) -> int:
        self.float_calls += 1
        return self.k

    def invert(self, bounds: Any, u: Any) -> int:
        self.invert_calls += 1
        return self.k

    def dyadic(self, sizes: Any, m: Any, fast: bool = True) -> Any:
        self.stage2.append([Fraction(int(s)) * Fraction(2) ** -int(e) for s, e in zip(sizes, m, strict=True)])
        outer = self

        class Draw:
            def draw(self, bits: Any) -> int:
                return outer.t

        return Draw()

    def bernoulli(self, bits: Any, g: Fraction, m: int) -> bool:
        self.accepts.append((g, m))
        return True

    def below(self, bits: Any, n: int) -> int:
        self.belows.append(n)
        return self.members.pop(0)


class ZeroBits:
    def word(self) -> int:
        return 0


def stage1_exact(sizes: list[int], V: list[int]) -> tuple[list[Fraction], list[int], list[int], int]:
    """omega_E, omega_0, ..., omega_q of ``sample_range``'s docstring, from its definition."""
    from everlast.engine.learner.exponents import exponents

    v = np.array(V, dtype=np.int64)
    mA = [int(x) for x in exponents(1.0, v - v.min())]
    mB = [int(x) for x in exponents(1.0, v.max() - v)]
    mD = int(exponents(1.0, np.array([int(v.max() - v.min())]))[0])
    two = Fraction(2)
    omega = [Fraction(0)] * len(sizes)
    G = Fraction(0)  # sum_{b > a} s_b 2^-mB_b
    for a in range(len(sizes) - 1, -1, -1):
        s = sizes[a]
        omega[a] = Fraction(s) * two ** -mA[a] * G + Fraction(s * (s - 1) // 2) * two**-mD
        G += Fraction(s) * two ** -mB[a]
    return [two**-mD, *omega], mA, mB, mD


RANGE_CASES = [
    ([1], [0]), ([3], [0]), ([1, 1], [0, 1]), ([2, 1, 3], [0, -2, 1]), ([4, 1, 2, 1], [0, 3, -1, 2]),
    ([1, 2, 1, 3, 1], [0, -1, -2, -1, 0]), ([2, 3], [0, 1700]), ([3, 1, 2], [0, -900, 900]),
]


@pytest.mark.parametrize("fast", [True, False])
@pytest.mark.parametrize("case", range(len(RANGE_CASES)))
def test_range_sampler_law_is_exact(case: int, fast: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every accepted path of ``sample_range`` (stage 1 index, stage 2 index, acceptance, members)
    with its exact probability: (omega_k / Omega) (stage-2 weight / total) (prod e^{-g} 2^m) (prod
    1/n). Each outcome must come from one path, the coefficient must be the same for all and the
    exponent must be -dD/2 (empty, diagonal) or -(dA_a + dB_b)/2: then P[outcome | accepted] is
    exactly W / sum W of the docstring."""
    sizes, V = RANGE_CASES[case]
    omega, _, _, _ = stage1_exact(sizes, V)
    Omega = sum(omega)
    v = np.array(V)
    dD = int(v.max() - v.min())
    law: dict[Any, tuple[Fraction, Fraction]] = {}
    for k in range(len(omega)):
        if omega[k] == 0:
            continue
        n2 = 1 if k == 0 else 1 + len(sizes) - k
        for t in range(n2):
            a = k - 1
            if k and t == 0 and sizes[a] < 2:
                continue  # a diagonal of weight 0
            nm = 0 if k == 0 else (1 if t == 0 else 2)
            ranges = [] if nm == 0 else ([range(sizes[a] * (sizes[a] - 1) // 2)] if t == 0
                                          else [range(sizes[a]), range(sizes[a + t])])
            for members in itertools.product(*ranges):
                f = Forced2(k, t, list(members))
                for name, fn in [("float_decide", f.float_decide), ("invert", f.invert), ("DyadicSampler", f.dyadic),
                                 ("bernoulli_exp", f.bernoulli), ("below", f.below)]:
                    monkeypatch.setattr(exact_em, name, fn)
                o = exact_em.sample_range(np.array(sizes), np.array(V), ZeroBits(), fast=fast)
                p = omega[k] / Omega
                if k:
                    (w2,) = f.stage2
                    assert w2[t] > 0
                    p *= w2[t] / sum(w2)
                x = Fraction(0)
                for g, m in f.accepts:
                    p *= Fraction(2) ** m
                    x -= g
                for n in f.belows:
                    p /= n
                key = None if o is None else (o.a, o.i_off, o.b, o.j_off)
                assert key not in law
                law[key] = (p, x)
                assert (f.float_calls, f.invert_calls) == ((1, 0) if fast else (0, 1))
    want: dict[Any, Fraction] = {None: Fraction(-dD, 2)}
    for a, s in enumerate(sizes):
        for j in range(s):
            for i in range(j):
                want[(a, i, a, j)] = Fraction(-dD, 2)
        for b in range(a + 1, len(sizes)):
            e = Fraction(-(int(v[a] - v.min()) + int(v.max() - v[b])), 2)
            for i in range(s):
                for j in range(sizes[b]):
                    want[(a, i, b, j)] = e
    assert set(law) == set(want)
    assert len({p for p, _ in law.values()}) == 1
    assert all(law[o][1] == want[o] for o in want)


def test_range_sampler_stage1_bounds_enclose_the_exact_marginal() -> None:
    """What ``sample_range`` gives Lemma X1: the enclosure pass (any size, any exponent) and the
    float pass (Lemma X2's bound, checked in exact rationals) both bound omega / Omega."""
    rng = np.random.default_rng(17)
    for trial in range(60):
        K = int(rng.integers(1, 12))
        big = trial % 5 == 0
        sizes = [int(x) for x in rng.integers(1, 2**62 if big else 50, K, dtype=np.int64)]
        span = [8, 80, 800, 4000, 40_000][trial % 5]
        V = [int(x) for x in rng.integers(-span, span + 1, K)]
        V[0] = 0
        omega, mA, mB, mD = stage1_exact(sizes, V)
        cum = list(itertools.accumulate(omega))
        for p in (64, 128, 300):
            clo, chi = exact_em._marginal_bounds(sizes, mA, mB, mD, p)
            for k in range(K + 1):
                assert Fraction(clo[k], chi[-1]) <= cum[k] / cum[-1] <= Fraction(chi[k], clo[-1])
            assert Fraction(chi[-1] - clo[-1], clo[-1]) < Fraction(8 * (K + 1), 2**p)
        if max(sizes) < 2**53:
            c, rho, theta, E = exact_em._float_pass(np.array(sizes), np.array(mA), np.array(mB), mD)
            scaled = [x * Fraction(2) ** E for x in cum]  # the float pass works at scale 2^E
            for k in range(K + 1):
                assert abs(Fraction(float(c[k])) - scaled[k]) <= rho * scaled[k] + theta
            assert scaled[-1] >= Fraction(1, 2**500)


def test_range_float_pass_over_many_exponent_bands() -> None:
    """Hundreds of groups whose exponents span many bands of ``exact_em.LEVEL``: the float pass
    still meets Lemma X2's bound against the exact marginal."""
    rng = np.random.default_rng(23)
    K = 300
    sizes = [int(x) for x in rng.integers(1, 2**40, K)]
    V = np.cumsum(rng.integers(-1500, 1500, K)).tolist()
    omega, mA, mB, mD = stage1_exact(sizes, V)
    assert mD > 10 * exact_em.LEVEL
    cum = list(itertools.accumulate(omega))
    c, rho, theta, E = exact_em._float_pass(np.array(sizes), np.array(mA), np.array(mB), mD)
    for k in range(K + 1):
        x = cum[k] * Fraction(2) ** E
        assert abs(Fraction(float(c[k])) - x) <= rho * x + theta


@pytest.mark.parametrize("dD", [2_977_043_087, 2_977_044_480, 5_954_088_890, 5_954_088_949, 1 << 40])
def test_range_float_pass_beyond_int32_exponent_shifts(dD: int) -> None:
    """Score ranges whose exponent shifts leave int32 (review of exact LabelBoost, E1: the shift
    wrapped, the float pass overflowed or put the mass on a group of probability ~2^-(4e9)).
    V = (dD, 0, 0), sizes (1, 1, 2): group 0 on top (mA_0 = mD), the others at the bottom
    (mB = mD), so omega = (2^-mD, 3 2^-2mD, 2 2^-mD, 2^-mD) and the cumulative law is
    (1/4, 1/4 + ~2^-mD, 3/4, 1). Too wide for exact rationals, so checked in floats (relative 1e-12)."""
    sizes, V = np.array([1, 1, 2]), np.array([dD, 0, 0])
    from everlast.engine.learner.exponents import exponents

    mA, mB = exponents(1.0, V - V.min()), exponents(1.0, V.max() - V)
    mD = int(exponents(1.0, np.array([dD]))[0])
    c, _, _, _ = exact_em._float_pass(sizes, mA, mB, mD)
    assert np.all(np.isfinite(c))
    assert np.allclose(c / c[-1], [0.25, 0.25, 0.75, 1.0], rtol=1e-12, atol=0)
    rng = np.random.default_rng(5)
    draws = [exact_em.sample_range(sizes, V, exact_em.bits_of(rng)) for _ in range(40)]
    assert all(d is None or d.a > 0 for d in draws)  # group 0 has probability ~2^-mD
    assert {None, (2, 2)} <= {None if d is None else (d.a, d.b) for d in draws}


def test_samplers_refuse_a_score_range_beyond_lemma_x3() -> None:
    big = exact_em.MAX_SCORE_RANGE + 1
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="Lemma X3"):
        exact_em.sample_range(np.array([1, 1]), np.array([0, big]), exact_em.bits_of(rng))
    with pytest.raises(ValueError, match="Lemma X3"):
        exact_em.sample_group(np.array([1, 1], dtype=np.uint64), np.array([0, big]), exact_em.bits_of(rng))


def test_strict_pair_lists_the_pairs_by_their_larger_element() -> None:
    want = [(i, j) for j in range(1, 40) for i in range(j)]
    assert [exact_em.strict_pair(t) for t in range(len(want))] == want
    for t in (2**100 + 12345, 2**127 - 1):
        i, j = exact_em.strict_pair(t)
        assert 0 <= i < j and j * (j - 1) // 2 + i == t


@kits
def test_labelboost_is_deterministic_given_the_stream(kit: Kit) -> None:
    """Bits are read from the Generator's PCG64 words; the same stream gives the same dichotomy and
    leaves the stream in the same state (what replay needs), and a 32-bit generator is refused."""
    c = kit.concept()
    x_lab, y_lab, x_unlab = scenario(kit, 3, n_lab=6, n_unlab=5)
    g1, g2 = np.random.default_rng(8), np.random.default_rng(8)
    a, b = c.labelboost(x_lab, y_lab, x_unlab, g1), c.labelboost(x_lab, y_lab, x_unlab, g2)
    np.testing.assert_array_equal(a.labels_unlabeled, b.labels_unlabeled)
    assert g1.bit_generator.state == g2.bit_generator.state
    with pytest.raises(TypeError, match="MT19937"):
        c.labelboost(x_lab, y_lab, x_unlab, np.random.Generator(np.random.MT19937(0)))


@kits
@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_labelboost_large_scores_are_stable_and_near_optimal(kit: Kit, noise: float) -> None:
    c = kit.concept()
    g = np.random.default_rng(5)
    n_lab = 20_000
    x_lab = kit.points(g, n_lab) + (g.random(n_lab) if kit.id in ("thresholds", "intervals") else 0)
    if x_lab.ndim == 2:
        x_lab = x_lab + g.random(x_lab.shape)
    x_unlab = kit.points(g, 300)
    grid = kit.grid(kit.points(np.random.default_rng(1), 8))
    target = grid[len(grid) // 2]
    y_lab = kit.apply(target, x_lab)
    flip = g.random(n_lab) < noise
    y_lab = np.where(flip, 1 - y_lab, y_lab).astype(np.int8)
    best_known = n_lab - int(flip.sum())  # the target's own score
    for seed in range(3):
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            r = c.labelboost(x_lab, y_lab, x_unlab, np.random.default_rng(seed))
        # exponential mechanism: P[score <= best - 2 (ln|H| + ln 1e6)] <= 1e-6
        margin = 2 * (np.log(r.n_dichotomies) + np.log(1e6))
        assert r.score >= best_known - margin
        assert r.score == int((r.labels_labeled == y_lab).sum())


def test_stumps_labelboost_counts_repeated_dichotomies_once() -> None:
    """Coordinates that order the points alike (x1 = 2 x0 + 1) or reversed (x2 = -x0) add no
    dichotomies: on l distinct values all stumps give the l + 1 suffixes and l + 1 prefixes,
    which share the empty and full sets, so 2l in all."""
    x0 = np.array([0.0, 1.0, 1.0, 2.0, 3.0, 5.0])
    x = np.stack([x0, 2 * x0 + 1, -x0], axis=1)
    c = from_spec({"name": "stumps", "d": 3})
    r = c.labelboost(x[:3], np.array([1, 0, 1], dtype=np.int8), x[3:], np.random.default_rng(0))
    assert r.n_dichotomies == 2 * 5 == len(brute_dichotomies(STUMPS3, np.unique(x, axis=0)))


def test_intervals_labelboost_counts_all_ranges() -> None:
    c = INTERVALS.concept()
    x = np.array([3.0, 1.0, 2.0, 2.0, 5.0])
    r = c.labelboost(x[:2], np.array([1, 0], dtype=np.int8), x[2:], np.random.default_rng(0))
    assert r.n_dichotomies == 4 * 5 // 2 + 1


# --- ERM ------------------------------------------------------------------------------------


def erm_cases(kit: Kit, source: str, T: int, lam: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    gen = kit.extreme if source == "extreme" else kit.points
    assert gen is not None
    x = np.stack([gen(g, lam) for _ in range(T)])
    if source == "realizable":
        y = np.stack([kit.apply(kit.grid(xc)[g.integers(len(kit.grid(xc)))], xc) for xc in x])
    else:
        y = g.integers(0, 2, (T, lam)).astype(np.int8)
    return x, y


ERM_SOURCES = [(k, s) for k in KITS for s in ("random", "realizable", "extreme") if s != "extreme" or k.extreme]


@pytest.mark.parametrize("kit,source", ERM_SOURCES, ids=[f"{k.id}-{s}" for k, s in ERM_SOURCES])
def test_fit_is_erm_and_votes_count_classifiers(kit: Kit, source: str) -> None:
    c = kit.concept()
    x, y = erm_cases(kit, source, T=30, lam=7, seed=3)
    ens = c.fit(x, y)
    assert ens.size == x.shape[0]
    params = []
    for xc, yc in zip(x, y, strict=True):
        p = kit.single(c.fit(xc[None], yc[None]).to_arrays())
        np.testing.assert_array_equal(c.label(p, xc), kit.apply(p, xc))
        err = int((kit.apply(p, xc) != yc).sum())
        best = min(int((kit.apply(q, xc) != yc).sum()) for q in kit.grid(xc))
        assert err == best
        if source == "realizable":
            assert err == 0
        params.append(p)
    q = queries(kit, x, params)
    expected = sum(kit.apply(p, q).astype(np.int64) for p in params)
    np.testing.assert_array_equal(ens.votes(c.validate_points(q)), expected)
    roundtrip(c, ens, q)


def queries(kit: Kit, x: np.ndarray, params: list[Params]) -> np.ndarray:
    """Random points, the training points, points exactly on every finite threshold/endpoint,
    and +-1e300."""
    g = np.random.default_rng(9)
    if kit.id == "finite":
        return np.arange(N_DOMAIN, dtype=float)
    if x.ndim == 3:
        d = x.shape[2]
        rows = [kit.points(g, 40), x.reshape(-1, d), np.full((1, d), 1e300), np.full((1, d), -1e300)]
        for p in params:
            if np.isfinite(p["t"]):
                r = kit.points(g, 1)
                r[0, p["j"]] = p["s"] * p["t"]
                rows.append(r)
        return np.concatenate(rows)
    ends = np.array([v for p in params for v in p.values()], dtype=float)
    return np.concatenate([g.uniform(-1, 7, 40), x.ravel(), ends[np.isfinite(ends)], [-1e300, 1e300]])


def roundtrip(c: ConceptClass, ens: Ensemble, q: np.ndarray) -> None:
    v = ens.votes(c.validate_points(q))
    arrays = ens.to_arrays()
    for a in (arrays, {k: np.asarray(val).tolist() for k, val in arrays.items()}):
        e2 = c.ensemble_from_arrays(dict(a))
        assert e2.size == ens.size
        np.testing.assert_array_equal(e2.votes(c.validate_points(q)), v)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 1)), min_size=1, max_size=9
    )
)
def test_intervals_erm_with_ties_property(pairs: list[tuple[int, int]]) -> None:
    c = INTERVALS.concept()
    x = np.array([[float(v) for v, _ in pairs]])
    y = np.array([[lab for _, lab in pairs]], dtype=np.int8)
    p = INTERVALS.single(c.fit(x, y).to_arrays())
    err = int((INTERVALS.apply(p, x[0]) != y[0]).sum())
    assert err == min(int((INTERVALS.apply(q, x[0]) != y[0]).sum()) for q in INTERVALS.grid(x[0]))
    assert p["a"] <= p["b"]


# --- VC dimension ------------------------------------------------------------------------------


def test_stumps_vc_bound_small_d() -> None:
    assert [stumps_vc_upper_bound(d) for d in (1, 2, 3, 4)] == [2, 3, 4, 4]
    assert all(stumps_vc_upper_bound(d) <= stumps_vc_upper_bound(d + 1) for d in range(1, 200))


@pytest.mark.parametrize(
    "pts",
    [
        [[0.0], [1.0]],
        [[0.0, 1.0], [1.0, 0.0], [2.0, 2.0]],
        # three coordinates whose orders are 1234, 3142, 1423: every subset is cut out, so
        # floor(log2 3) + 2 = 3 would understate the VC dimension
        [[0.0, 1.0, 0.0], [1.0, 3.0, 2.0], [2.0, 0.0, 3.0], [3.0, 2.0, 1.0]],
    ],
)
def test_stumps_shatter_vc_bound_many_points(pts: list[list[float]]) -> None:
    x = np.array(pts)
    m, d = x.shape
    kit = _stump_kit(d)
    c = kit.concept()
    assert len(brute_dichotomies(kit, x)) == 2**m
    r = c.labelboost(x, np.zeros(m, dtype=np.int8), x[:0], np.random.default_rng(0))
    assert r.n_dichotomies == 2**m
    assert c.vc_dim == stumps_vc_upper_bound(d) == m


def test_finite_vc_dimension() -> None:
    thresholds = np.array([[int(v >= t) for v in range(5)] for t in range(6)])
    intervals = np.array(
        [[0] * 5] + [[int(a <= v <= b) for v in range(5)] for a in range(5) for b in range(a, 5)]
    )
    power_set = np.array([[(s >> i) & 1 for i in range(3)] for s in range(8)])
    assert vc_dimension(thresholds.astype(bool)) == 1
    assert vc_dimension(intervals.astype(bool)) == 2
    assert vc_dimension(power_set.astype(bool)) == 3
    assert vc_dimension(np.ones((1, 4), dtype=bool)) == 0


# --- specs and validation -----------------------------------------------------------------------


@kits
def test_spec_roundtrip(kit: Kit) -> None:
    c = kit.concept()
    spec = json.loads(json.dumps(c.to_spec()))
    c2 = from_spec(spec)
    assert type(c2) is type(c)
    assert c2.to_spec() == c.to_spec()
    assert c2.vc_dim == c.vc_dim and c2.point_dim == c.point_dim


SECRET = 123456.789


@kits
def test_validate_points_rejects_bad_input_without_echoing_values(kit: Kit) -> None:
    c = kit.concept()
    d = c.point_dim
    good = kit.points(np.random.default_rng(0), 4)
    for bad_value in (np.nan, np.inf, -np.inf):
        x = good.copy()
        x[2] = bad_value
        with pytest.raises(InvalidInput, match="position 2") as e:
            c.validate_points(x)
        assert "123456" not in str(e.value)
    wrong = np.full((3, d + 1), SECRET)
    with pytest.raises(InvalidInput) as e:
        c.validate_points(wrong)
    assert "123456" not in str(e.value)
    with pytest.raises(InvalidInput):
        c.validate_points("not a number")


@pytest.mark.parametrize("bad", [2.5, -1.0, float(N_DOMAIN), 987654.0])
def test_finite_rejects_non_indices(bad: float) -> None:
    c = FINITE.concept()
    with pytest.raises(InvalidInput, match="position 1") as e:
        c.validate_points([0.0, bad, 1.0])
    assert "987654" not in str(e.value) and "2.5" not in str(e.value)
    np.testing.assert_array_equal(c.validate_points([0, 3.0]), [0.0, 3.0])


@pytest.mark.parametrize(
    "spec",
    [
        {"name": "finite", "matrix": [[0, 2], [1, 0]]},
        {"name": "finite", "matrix": [1, 0]},
        {"name": "finite", "matrix": []},
        {"name": "stumps", "d": 0},
        {"name": "nope"},
    ],
)
def test_bad_specs(spec: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        from_spec(spec)


# --- the round transition ------------------------------------------------------------------------


def transition_case(kit: Kit, seed: int, n: int, n_lab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    g = np.random.default_rng(seed)
    x_unlab = kit.points(g, n) if seed % 3 else (kit.extreme or kit.points)(g, n)
    if seed % 2 and kit.id != "finite":  # continuous points: no ties at all
        x_unlab = x_unlab + g.random(x_unlab.shape)
    if kit.id != "finite":  # -0.0 beside +0.0 (equal values; the sign must come out as the definition's)
        x_unlab = np.where((x_unlab == 0) & (g.random(x_unlab.shape) < 0.5), -0.0, x_unlab)
    x_lab = np.concatenate([kit.points(g, n_lab), x_unlab[:2]])  # labeled points repeated in D-hat
    y_lab = g.integers(0, 2, x_lab.shape[0]).astype(np.int8)
    if seed % 4 == 1:
        y_lab[:] = seed % 8 == 1  # all one label: favours one-sided (all-ones / all-zeros) chunks
    return x_lab, y_lab, x_unlab


def same_bits(a: Any, b: Any) -> None:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


TRANSITION_SIZES = [(1, 1, 0), (3, 1, 2), (1, 5, 5), (40, 10, 30), (7, 13, 20), (7_000, 10, 1000)]


@kits
@pytest.mark.parametrize("T,lam,m_S", TRANSITION_SIZES)
def test_next_round_equals_its_definition(kit: Kit, T: int, lam: int, m_S: int) -> None:
    """Each class's ``next_round`` returns what ``ConceptClass.next_round`` (the definition:
    LabelBoost, S_{i+1} from ``random_order``, one ERM per chunk, S-hat) returns from the same
    draws, and leaves the stream in the same state."""
    c = kit.concept()
    for seed in range(6):
        n = T * lam + (seed % 3) * 7 + (70_000 if T * lam > 1000 and seed < 2 else 0)  # > SMALL: packed orders
        x_lab, y_lab, x_unlab = transition_case(kit, seed, n, n_lab=9)
        g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
        o1, o2 = np.random.default_rng(seed + 100), np.random.default_rng(seed + 100)
        before = [a.copy() for a in (x_lab, y_lab, x_unlab)]
        fast = c.next_round(x_lab, y_lab, x_unlab, T, lam, m_S, g1, o1)
        for a, b in zip(before, (x_lab, y_lab, x_unlab), strict=True):
            np.testing.assert_array_equal(a, b)  # inputs untouched (the predictor's reservoir)
        ref = ConceptClass.next_round(c, x_lab, y_lab, x_unlab, T, lam, m_S, g2, o2)
        assert g1.bit_generator.state == g2.bit_generator.state
        assert o1.bit_generator.state == o2.bit_generator.state
        assert fast.ensemble.size == T
        a, b = fast.ensemble.to_arrays(), ref.ensemble.to_arrays()
        assert a.keys() == b.keys()
        for key in a:
            same_bits(a[key], b[key])  # bit for bit: -0.0 and +0.0 differ here (review F7)
        same_bits(fast.s_hat_x, ref.s_hat_x)
        np.testing.assert_array_equal(fast.s_hat_y, ref.s_hat_y)
        assert fast.s_hat_y.dtype == np.int8 and fast.s_hat_x.shape[0] == m_S


@pytest.mark.parametrize("kit", [THRESHOLDS, INTERVALS], ids=["thresholds", "intervals"])
def test_next_round_runs_a_subclass_labelboost(kit: Kit) -> None:
    """A subclass that replaces LabelBoost (the audit's ``majority-relabel`` variant) gets its own
    LabelBoost in the transition, not the class's fast path."""
    base = type(kit.concept())
    calls = []

    class AllZero(base):  # type: ignore[valid-type,misc]
        def labelboost(self, x_lab: Any, y_lab: Any, x_unlab: Any, rng: Any) -> Any:
            calls.append(1)
            r = super().labelboost(x_lab, y_lab, x_unlab, rng)
            return type(r)(r.labels_labeled * 0, r.labels_unlabeled * 0, r.n_dichotomies, 0)

    x_lab, y_lab, x_unlab = transition_case(kit, 2, 400, n_lab=9)
    start = AllZero().next_round(x_lab, y_lab, x_unlab, 20, 10, 30, np.random.default_rng(0),
                                 np.random.default_rng(1))
    assert calls and not start.s_hat_y.any()
    assert np.isinf(next(iter(start.ensemble.to_arrays().values()))).all()  # all-zero chunks: +inf / empty


# --- stumps: exact deduplication --------------------------------------------------------------------


def dedup_reference(pts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, ok, keep) by definition: the candidate sets as Python sets of point ids; keep the
    first valid column of each row whose set no earlier valid column of the row has."""
    n, d = pts.shape
    order = np.argsort(pts, axis=0)
    vs = np.take_along_axis(pts, order, axis=0)
    valid = np.ones((n + 1, d), dtype=bool)
    valid[1:n] = vs[1:] > vs[:-1]
    ok = np.empty((n + 1, 2 * d), dtype=bool)
    ok[:, 0::2] = valid[::-1]
    ok[:, 1::2] = valid
    keep = np.zeros_like(ok)
    for m in range(n + 1):
        seen: list[frozenset[int]] = []
        for col in range(2 * d):
            if not ok[m, col]:
                continue
            o = order[:, col // 2]
            s = frozenset((o[n - m :] if col % 2 == 0 else o[:m]).tolist())
            keep[m, col] = s not in seen
            seen.append(s)
    return order, ok, keep


@pytest.mark.parametrize("d", [1, 2, 3, 5, 20])
def test_stumps_dedup_is_exact(d: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both ways of finding the pairs of coordinates to compare (all pairs; hash-picked, with
    honest keys and with keys that make every set collide) keep exactly one candidate per set.
    Coordinates repeat (x2 = 2 x0 + 1), reverse (x3 = -x1) and tie heavily."""
    from everlast.engine.concepts import stumps

    g = np.random.default_rng(d)
    for trial in range(12):
        n = int(g.integers(1, 14))
        pts = g.integers(0, [2, 4, 9][trial % 3], (n, d)).astype(float)
        if d >= 3:
            pts[:, 2] = 2 * pts[:, 0] + 1
        if d >= 4:
            pts[:, 3] = -pts[:, 1]
        order, ok, want = dedup_reference(pts)
        for max_d, keys in [(16, None), (0, None), (0, np.zeros(n, dtype=np.uint64))]:
            monkeypatch.setattr(stumps, "EXACT_PAIRS_MAX_D", max_d)
            np.testing.assert_array_equal(stumps._first_of_each_set(order, ok, keys), want)


def _splitmix(i: int) -> int:
    from everlast.engine.concepts.stumps import _splitmix64

    return int(_splitmix64(np.array([i], dtype=np.uint64))[0])


def _xor_zero_subset(vectors: list[int], n_bits: int) -> list[int]:
    """An even-size set of indices whose vectors XOR to 0 (Gaussian elimination over GF(2), with a
    parity bit appended so the set has even size): the review's construction."""
    basis: dict[int, tuple[int, int]] = {}
    for t, vec0 in enumerate(vectors):
        vec, comb = vec0 | (1 << n_bits), 1 << t
        while vec:
            p = vec.bit_length() - 1
            if p not in basis:
                basis[p] = (vec, comb)
                break
            bv, bc = basis[p]
            vec, comb = vec ^ bv, comb ^ bc
        else:
            return [i for i in range(len(vectors)) if (comb >> i) & 1]
    raise AssertionError("no dependency found")


@pytest.mark.parametrize("d", [2, 17])
def test_stumps_labelboost_keeps_dichotomies_whose_hashes_collide(d: int) -> None:
    """The review's attack (docs/notes review F1): with m_D = R a querier knows each query's index
    in S-hat o D-hat, so it can pick an even set Z whose fixed per-index keys XOR to 0 and put one
    half at the top of x_0, the other at the top of x_1: two distinct dichotomies of equal size and
    equal hash. The previous code dropped one (436 vs 434 distinct dichotomies). d = 2 now compares
    sets without hashing; d = 17 hashes (64-bit keys of the index; the same construction makes them
    collide), finds the collision when checking it exactly, and compares every pair instead."""
    m_S, n_adv = 3, 140
    n = m_S + n_adv
    if d == 2:  # the review's keys: splitmix64(2i), splitmix64(2i + 1), 128 bits
        vecs = [_splitmix(2 * i) | (_splitmix(2 * i + 1) << 64) for i in range(m_S, n)]
        Z = [m_S + t for t in _xor_zero_subset(vecs, 128)]
    else:  # this module's filter keys: splitmix64(i)
        Z = [m_S + t for t in _xor_zero_subset([_splitmix(i) for i in range(m_S, n)], 64)]
        acc = 0
        for i in Z:
            acc ^= _splitmix(i)
        assert acc == 0
    Z1, Z2 = Z[: len(Z) // 2], Z[len(Z) // 2 :]
    g = np.random.default_rng(3)
    x_lab = g.uniform(-1, 1, (m_S, d))
    y_lab = np.zeros(m_S, dtype=np.int8)
    x_unlab = g.uniform(-1, 1, (n_adv, d))
    for r, i in enumerate(Z1):
        x_unlab[i - m_S, :2] = (100.0 + r, -100.0 - r)
    for r, i in enumerate(Z2):
        x_unlab[i - m_S, :2] = (-100.0 - r, 100.0 + r)
    c = from_spec({"name": "stumps", "d": d})
    kit = _stump_kit(d)
    distinct, _ = kit.distinct(np.concatenate([x_lab, x_unlab]))
    support = brute_dichotomies(kit, distinct)
    res = c.labelboost(x_lab, y_lab, x_unlab, np.random.default_rng(0))
    assert res.n_dichotomies == len(support)
    if d > 2:
        from everlast.engine.concepts import stumps

        pts = np.concatenate([x_lab, x_unlab]) + 0.0
        order, ok, _ = dedup_reference(pts)
        pos = np.empty_like(order)
        np.put_along_axis(pos, order, np.arange(n)[:, None], axis=0)
        keys = stumps._splitmix64(np.arange(n, dtype=np.uint64))
        assert len(stumps._hashed_pairs(order, ok, pos, keys)) == d * (d - 1) // 2  # the fallback ran


def test_stumps_labelboost_keeps_colliding_dichotomies_in_its_law(monkeypatch: pytest.MonkeyPatch) -> None:
    """The law itself on a small collision-prone configuration: identical, reversed and tied
    coordinates, with keys that make every set collide in the hash path."""
    from everlast.engine.concepts import stumps

    monkeypatch.setattr(stumps, "EXACT_PAIRS_MAX_D", 0)
    monkeypatch.setattr(stumps, "_splitmix64", lambda x: np.zeros_like(x))
    g = np.random.default_rng(5)
    x = g.integers(0, 4, (9, 3)).astype(float)
    x[:, 1] = -x[:, 0]
    x_lab, y_lab, x_unlab = x[:4], np.array([1, 0, 0, 1], dtype=np.int8), x[4:]
    support = brute_support(STUMPS3, x_lab, y_lab, x_unlab)
    law, n_dich = exact_law(STUMPS3, x_lab, y_lab, x_unlab, monkeypatch)
    check_law(support, law)
    assert n_dich == len(support)


def _threshold_em_via_labeled_ranks(x_lab: np.ndarray, y_lab: np.ndarray, values: np.ndarray,
                                    bits: Any) -> tuple[float, int, int]:
    """``threshold_em`` as first written, through ``line.LabeledRanks`` (np.unique of the labeled
    points): the reference its leaner form must match draw for draw (same groups, same order)."""
    from everlast.engine.concepts.line import LabeledRanks

    lr = LabeledRanks.of(x_lab, y_lab, values)
    bounds = lr.bounds()
    size = np.diff(bounds)
    zeros_below = np.concatenate([[0], np.cumsum(lr.zeros)])
    score = zeros_below + int(lr.ones.sum()) - np.concatenate([[0], np.cumsum(lr.ones)])
    a, r = exact_em.sample_group(size.astype(np.uint64), score.astype(np.int64), bits)
    return lr.value(int(bounds[a]) + 1 + r), lr.ell + 1, int(score[a])


def test_threshold_em_matches_the_labeled_ranks_form_draw_for_draw() -> None:
    """Repeated labeled values (with conflicting labels), values shared with D-hat, +-0, an empty
    D-hat: the same cut, dichotomy count and score from the same stream, so the state format holds."""
    from everlast.engine.concepts.thresholds import threshold_em

    rng = np.random.default_rng(12)
    for trial in range(600):
        q, nv = int(rng.integers(1, 60)), int(rng.integers(0, 80))
        grid = float(rng.integers(1, 40)) if trial % 2 else 1e9
        x_lab = np.round(rng.random(q) * grid) / grid
        values = np.unique(np.round(rng.random(nv) * grid) / grid)
        if trial % 3 == 0 and nv:
            x_lab[: q // 2] = rng.choice(values, q // 2)
        if trial % 7 == 0:
            x_lab[:1] = -0.0
            values = np.unique(np.concatenate([values, [0.0]]))
        y_lab = (x_lab >= 0.5).astype(np.int8)
        y_lab[rng.random(q) < 0.2] ^= 1
        seed = int(rng.integers(1 << 30))
        got = threshold_em(x_lab, y_lab, values, exact_em.bits_of(np.random.default_rng(seed)))
        want = _threshold_em_via_labeled_ranks(x_lab, y_lab, values, exact_em.bits_of(np.random.default_rng(seed)))
        assert (got.t, got.n_dichotomies, got.score) == want, trial
