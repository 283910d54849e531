"""Conformance suite for the concept classes (engine/concepts).

Every class is checked against brute force written here, independently of its own code:
LabelBoost's exponential mechanism (paper, Appendix C.1, step 4; Lemmas C.1/C.2) against an
enumeration of all dichotomies on a fine parameter grid, ERM against per-chunk exhaustive
search, ensemble votes against summing individual classifiers, plus serialization and input
validation.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from engine.concepts import from_spec
from engine.concepts.base import ConceptClass, Ensemble
from engine.concepts.finite import vc_dimension
from engine.concepts.stumps import stumps_vc_upper_bound
from engine.errors import InvalidInput

Params = dict[str, Any]
INF = float("inf")

_M = np.random.default_rng(7).integers(0, 2, size=(10, 7))
FINITE_MATRIX = np.vstack([_M, _M[:2], np.zeros((1, 7), dtype=np.int64)])  # duplicate rows on purpose
N_DOMAIN = FINITE_MATRIX.shape[1]

EXTREMES = np.array(
    [-np.finfo(float).max, -1e308, -1.0, np.nextafter(0.0, -1.0), 0.0, 5e-324, 1e-323,
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


def draws_used(fn: Callable[[np.random.Generator], object], seed: int) -> int:
    g = np.random.default_rng(seed)
    fn(g)
    ref = np.random.default_rng(seed)
    for k in range(6):
        if ref.bit_generator.state == g.bit_generator.state:
            return k
        ref.random()
    raise AssertionError("more than 5 draws")


# --- LabelBoost: exact exponential mechanism ---------------------------------------------------

# one-draw classes also get the exact quadrature test below, so one Monte-Carlo case each suffices
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


class FixedUniform:
    """Stands in for the Generator: ``random()`` returns a chosen u (one-draw samplers only)."""

    def __init__(self, u: float) -> None:
        self.u = u

    def random(self) -> float:
        return self.u


QUAD_K = 10_000
ONE_DRAW = [k for k in KITS if k.id != "intervals"]


@pytest.mark.parametrize("kit", ONE_DRAW, ids=[k.id for k in ONE_DRAW])
def test_labelboost_exact_by_quadrature(kit: Kit) -> None:
    """A one-draw sampler is a map u -> dichotomy; its distribution is the push-forward of
    U[0, 1). Evaluating it on the K midpoints (i + 1/2) / K measures each outcome within 2/K
    (an inverse-CDF map makes each outcome one interval): exact up to 1e-4, no Monte-Carlo."""
    c = kit.concept()
    x_lab, y_lab, x_unlab = scenario(kit, 21, n_lab=8, n_unlab=4)
    assert draws_used(lambda g: c.labelboost(x_lab, y_lab, x_unlab, g), 0) == 1
    distinct, inv = kit.distinct(np.concatenate([x_lab, x_unlab]))
    inv_lab = inv[: x_lab.shape[0]]
    support = sorted(brute_dichotomies(kit, distinct))
    score = np.array([agreements(np.array(z), inv_lab, y_lab) for z in support])
    p = np.exp(score / 2 - score.max() / 2)
    p /= p.sum()
    counts: Counter[tuple[int, ...]] = Counter()
    for i in range(QUAD_K):
        r = c.labelboost(x_lab, y_lab, x_unlab, FixedUniform((i + 0.5) / QUAD_K))  # type: ignore[arg-type]
        z = np.zeros(distinct.shape[0], dtype=np.int8)
        z[inv] = np.concatenate([r.labels_labeled, r.labels_unlabeled])
        counts[tuple(z.tolist())] += 1
    assert set(counts) <= set(support)
    freq = np.array([counts[z] for z in support]) / QUAD_K
    np.testing.assert_allclose(freq, p, rtol=0, atol=2 / QUAD_K + 1e-12)


class Uniforms:
    """Stands in for the Generator: ``random()`` returns the given values in turn."""

    def __init__(self, *u: float) -> None:
        self.u = list(u)

    def random(self) -> float:
        return self.u.pop(0)


def test_intervals_labelboost_exact_by_quadrature() -> None:
    """Intervals draw twice: the first uniform picks the right end (or the empty labeling), the
    second the left end given the right end (the factorization in ``Intervals.labelboost``).
    Quadrature over each stage measures the right-end marginal and each conditional exactly up
    to 2/K, against the brute-force distribution."""
    c = INTERVALS.concept()
    x_lab, y_lab, x_unlab = scenario(INTERVALS, 21, n_lab=8, n_unlab=4)
    distinct, inv = INTERVALS.distinct(np.concatenate([x_lab, x_unlab]))
    inv_lab = inv[: x_lab.shape[0]]
    support = sorted(brute_dichotomies(INTERVALS, distinct))
    score = np.array([agreements(np.array(z), inv_lab, y_lab) for z in support])
    p = np.exp(score / 2 - score.max() / 2)
    p /= p.sum()
    prob = dict(zip(support, p, strict=True))

    def right_end(z: tuple[int, ...]) -> int:  # -1: the empty labeling
        return max((k for k, v in enumerate(z) if v), default=-1)

    def run(u1: float, u2: float) -> tuple[int, ...]:
        r = c.labelboost(x_lab, y_lab, x_unlab, Uniforms(u1, u2))  # type: ignore[arg-type]
        z = np.zeros(distinct.shape[0], dtype=np.int8)
        z[inv] = np.concatenate([r.labels_labeled, r.labels_unlabeled])
        return tuple(z.tolist())

    k1, k2 = 10_000, 2_000
    first = [run((i + 0.5) / k1, 0.5) for i in range(k1)]
    ends = np.array([right_end(z) for z in first])
    for j in sorted(set(ends.tolist()) | {right_end(z) for z in support}):
        p_j = sum(pz for z, pz in prob.items() if right_end(z) == j)
        assert abs(np.mean(ends == j) - p_j) <= 2 / k1 + 1e-12
        hits = np.flatnonzero(ends == j)
        if hits.size == 0:
            assert p_j < 2 / k1
            continue
        u1 = (hits[hits.size // 2] + 0.5) / k1
        given = Counter(run(u1, (i + 0.5) / k2) for i in range(k2))
        assert all(right_end(z) == j and z in prob for z in given)
        for z in (z for z in support if right_end(z) == j):
            assert abs(given[z] / k2 - prob[z] / p_j) <= 2 / k2 + 1e-12


@kits
def test_labelboost_consumes_a_fixed_number_of_draws(kit: Kit) -> None:
    c = kit.concept()
    used = set()
    any_ones = set()
    for seed in range(40):
        x_lab, y_lab, x_unlab = scenario(kit, seed, n_lab=3, n_unlab=3)
        if seed % 2:
            y_lab = np.zeros_like(y_lab)  # favours the all-zero labeling (its own branch)

        def call(g: np.random.Generator, xl: Any = x_lab, yl: Any = y_lab, xu: Any = x_unlab) -> None:
            r = c.labelboost(xl, yl, xu, g)
            any_ones.add(bool(r.labels_labeled.any() or r.labels_unlabeled.any()))

        used.add(draws_used(call, seed))
    assert any_ones == {True, False}  # both branches were exercised
    assert used == ({2} if kit.id == "intervals" else {1})


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
    x_lab = np.concatenate([kit.points(g, n_lab), x_unlab[:2]])  # labeled points repeated in D-hat
    y_lab = g.integers(0, 2, x_lab.shape[0]).astype(np.int8)
    if seed % 4 == 1:
        y_lab[:] = seed % 8 == 1  # all one label: favours one-sided (all-ones / all-zeros) chunks
    return x_lab, y_lab, x_unlab


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
        before = [a.copy() for a in (x_lab, y_lab, x_unlab)]
        fast = c.next_round(x_lab, y_lab, x_unlab, T, lam, m_S, g1)
        for a, b in zip(before, (x_lab, y_lab, x_unlab), strict=True):
            np.testing.assert_array_equal(a, b)  # inputs untouched (the predictor's reservoir)
        ref = ConceptClass.next_round(c, x_lab, y_lab, x_unlab, T, lam, m_S, g2)
        assert g1.bit_generator.state == g2.bit_generator.state
        assert fast.ensemble.size == T
        a, b = fast.ensemble.to_arrays(), ref.ensemble.to_arrays()
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
        np.testing.assert_array_equal(fast.s_hat_x, ref.s_hat_x)
        np.testing.assert_array_equal(fast.s_hat_y, ref.s_hat_y)
        assert fast.s_hat_y.dtype == np.int8 and fast.s_hat_x.shape[0] == m_S


def test_thresholds_labelboost_exact_with_large_groups() -> None:
    """Few labeled points among many unlabeled ones: LabelBoost's cuts come in groups of equal
    score (``threshold_em``) and one uniform places the cut inside its group. Quadrature (as
    above) against the brute-force law over all 1 + l cuts."""
    c = THRESHOLDS.concept()
    g = np.random.default_rng(4)
    x_unlab = np.concatenate([g.random(120), [0.25, 0.25, 0.75]])  # repeats count once
    x_lab = np.array([0.25, 0.5, 0.5, 0.9])  # shares 0.25 with D-hat; 0.5 twice, labeled both ways
    y_lab = np.array([1, 0, 1, 0], dtype=np.int8)
    distinct, inv = THRESHOLDS.distinct(np.concatenate([x_lab, x_unlab]))
    inv_lab = inv[: x_lab.size]
    ell = distinct.size
    score = np.array([agreements((np.arange(ell) >= k).astype(np.int8), inv_lab, y_lab) for k in range(ell + 1)])
    p = np.exp(score / 2 - score.max() / 2)
    p /= p.sum()
    K = 10_000
    cuts = np.zeros(ell + 1)
    for i in range(K):
        r = c.labelboost(x_lab, y_lab, x_unlab, FixedUniform((i + 0.5) / K))  # type: ignore[arg-type]
        z = np.zeros(ell, dtype=np.int8)
        z[inv] = np.concatenate([r.labels_labeled, r.labels_unlabeled])
        k = ell - int(z.sum())
        assert (z == (np.arange(ell) >= k)).all() and r.n_dichotomies == ell + 1
        cuts[k] += 1
    np.testing.assert_allclose(cuts / K, p, rtol=0, atol=2 / K + 1e-12)


def test_intervals_labelboost_exact_with_large_groups() -> None:
    """As the quadrature test above, with few labeled points among many unlabeled ones: right
    ends inside a group of equal prefix score have weights constant + linear (``interval_em``)."""
    c = INTERVALS.concept()
    g = np.random.default_rng(8)
    x_unlab = np.concatenate([g.random(60), [0.25, 0.25]])
    x_lab = np.array([0.25, 0.4, 0.4, 0.7, 0.9])
    y_lab = np.array([1, 1, 0, 1, 0], dtype=np.int8)
    distinct, inv = INTERVALS.distinct(np.concatenate([x_lab, x_unlab]))
    inv_lab = inv[: x_lab.size]
    ell = distinct.size
    ranges = [(-1, -1)] + [(i, j) for j in range(1, ell + 1) for i in range(j)]  # ranks [i, j)
    ranks = np.arange(ell)
    z_of = {r: ((ranks >= r[0]) & (ranks < r[1])).astype(np.int8) for r in ranges}  # (-1, -1): all 0
    score = np.array([agreements(z_of[r], inv_lab, y_lab) for r in ranges])
    p = np.exp(score / 2 - score.max() / 2)
    p /= p.sum()
    prob = dict(zip(ranges, p, strict=True))

    def run(u1: float, u2: float) -> tuple[int, int]:
        r = c.labelboost(x_lab, y_lab, x_unlab, Uniforms(u1, u2))  # type: ignore[arg-type]
        z = np.zeros(ell, dtype=np.int8)
        z[inv] = np.concatenate([r.labels_labeled, r.labels_unlabeled])
        if not z.any():
            return (-1, -1)
        ones = np.flatnonzero(z)
        assert ones[-1] - ones[0] + 1 == ones.size  # a contiguous range of ranks
        assert r.n_dichotomies == len(ranges) and r.score == agreements(z, inv_lab, y_lab)
        return (int(ones[0]), int(ones[-1]) + 1)

    k1, k2 = 8_000, 1_000
    ends = np.array([run((i + 0.5) / k1, 0.5)[1] for i in range(k1)])
    for j in range(-1, ell + 1):
        p_j = sum(pz for r, pz in prob.items() if r[1] == j)
        assert abs(np.mean(ends == j) - p_j) <= 2 / k1 + 1e-12, j
    for j in (1, 20, 40, ell):  # left ends given the right end
        hits = np.flatnonzero(ends == j)
        u1 = (hits[hits.size // 2] + 0.5) / k1
        given = Counter(run(u1, (i + 0.5) / k2) for i in range(k2))
        p_j = sum(pz for r, pz in prob.items() if r[1] == j)
        for i in range(j):
            assert abs(given[(i, j)] / k2 - prob[(i, j)] / p_j) <= 2 / k2 + 1e-12, (i, j)


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
    start = AllZero().next_round(x_lab, y_lab, x_unlab, 20, 10, 30, np.random.default_rng(0))
    assert calls and not start.s_hat_y.any()
    assert np.isinf(next(iter(start.ensemble.to_arrays().values()))).all()  # all-zero chunks: +inf / empty


def test_stumps_set_dedup_paths_agree() -> None:
    """Both ways of keeping the first column of each set in a row (pairwise, per-row sort)."""
    from engine.concepts.stumps import _first_of_each_set

    g = np.random.default_rng(0)
    rows, G = 500, 20
    h1 = g.integers(0, 4, (rows, G)).astype(np.uint64)  # few values: many equal sets
    h2 = (h1 * np.uint64(3)) ^ g.integers(0, 2, (rows, G)).astype(np.uint64)
    ok = g.random((rows, G)) < 0.7
    a = _first_of_each_set(h1, h2, ok, pairwise_upto=G)
    b = _first_of_each_set(h1, h2, ok, pairwise_upto=0)
    np.testing.assert_array_equal(a, b)
    for r in range(rows):  # against the definition
        seen = set()
        for c in range(G):
            key = (int(h1[r, c]), int(h2[r, c]))
            assert a[r, c] == (bool(ok[r, c]) and key not in seen)
            if ok[r, c]:
                seen.add(key)
