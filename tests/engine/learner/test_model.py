"""The private learner as a served mechanism: the Servable contract, determinism, checkpoints
through engine.codec, and bad input refused without side effects."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from everlast.engine import codec
from everlast.engine.errors import CorruptState, InvalidInput, InvalidState
from everlast.engine.learner import FORMAT, Domain, PrivateLearner
from everlast.engine.learner.ordinals import ordinal
from everlast.engine.phases import Phase
from everlast.engine.restore import restore
from everlast.engine.serving import Servable

MAX = float(np.finfo(np.float64).max)


def _data(n: int = 400, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(seed).uniform(-1.0, 1.0, n)
    return x, (x >= 0.25).astype(np.int8)


def _fit(concept: Any = "thresholds", seed: int = 1, **kw: Any) -> PrivateLearner:
    if concept in ("stumps", "trees") or (isinstance(concept, dict) and concept.get("name") == "stumps"):
        x = np.random.default_rng(2).uniform(-1.0, 1.0, (400, 3))
        y = (x[:, 1] < 0.1).astype(np.int8)
        name = concept if isinstance(concept, str) else "stumps"
        return PrivateLearner.fit({"name": name, "d": 3}, x, y, epsilon=1.0, seed=seed, **kw)
    x, y = _data()
    if concept == "intervals":
        y = ((x >= -0.2) & (x < 0.5)).astype(np.int8)
    return PrivateLearner.fit(concept, x, y, epsilon=1.0, seed=seed, **kw)


def _queries(m: PrivateLearner, n: int = 1000, seed: int = 5) -> np.ndarray:
    g = np.random.default_rng(seed)
    return g.uniform(-1.5, 1.5, (n, m.point_dim)) if m.point_dim > 1 else g.uniform(-1.5, 1.5, n)


@pytest.mark.parametrize("concept", ["thresholds", "intervals", "stumps", "trees"])
def test_servable_contract(concept: str) -> None:
    m = _fit(concept)
    assert isinstance(m, Servable)
    assert m.mechanism == "private-learner" and m.has_rounds is False
    assert m.phase is Phase.ANSWERING and m.round == 0 and m.capacity is None and m.round_info() is None
    assert m.reservoir_filled == 0 and m.reservoir_points(0, 0).shape[0] == 0
    q = _queries(m)
    res = m.answer(q)
    assert res.consumed == len(q) and res.round == 0 and not res.refused.any()
    assert set(np.unique(res.labels)) <= {0, 1} and (res.refusals == 0).all()
    assert m.answered == len(q) and m.live_part()["answered"] == len(q)
    with pytest.raises(InvalidState):
        m.transition()
    assert m.round_part()["format"] == FORMAT
    cert = m.certificate()
    assert cert["epsilon_training"] == 1.0 and cert["epsilon_queries"] == 0.0 and cert["delta_training"] == 0.0


def test_learns_and_labels_by_value() -> None:
    m = _fit()
    h = m.hypothesis
    q = np.array([-1.0, 0.0, -0.0, 0.2, 0.3, 1.0, MAX, -MAX, 5e-324])
    pos = np.array([ordinal(float(v)) for v in q])
    want = (pos >= h.lo) if h.sign > 0 else (pos < h.lo)
    assert m.answer(q).labels.tolist() == want.astype(int).tolist()
    assert m.answer(np.array([-0.0])).labels[0] == m.answer(np.array([0.0])).labels[0]
    acc = (m.answer(np.linspace(-1, 1, 2001)).labels == (np.linspace(-1, 1, 2001) >= 0.25)).mean()
    assert acc > 0.9


def test_answers_are_independent_of_batching() -> None:
    m = _fit("intervals")
    q = _queries(m, 500)
    whole = m.answer(q).labels
    parts = np.concatenate([m.answer(q[i:i + 37]).labels for i in range(0, 500, 37)])
    assert np.array_equal(whole, parts)
    assert m.answer(q[:0]).consumed == 0


@pytest.mark.parametrize("concept", ["thresholds", "intervals", "stumps", "trees"])
def test_deterministic_given_the_seed(concept: str) -> None:
    assert _fit(concept, seed=9).hypothesis == _fit(concept, seed=9).hypothesis
    assert len({_fit(concept, seed=s).hypothesis for s in range(6)}) > 1


@pytest.mark.parametrize("concept", ["thresholds", "intervals", "stumps", "trees"])
@pytest.mark.parametrize("domain", [None, {"kind": "range", "lo": -2.0, "hi": 2.0}])
def test_save_restore_gives_identical_future_answers(concept: str, domain: Any) -> None:
    m = _fit(concept, domain=domain)
    m.answer(_queries(m, 100, seed=1))
    m2 = codec.loads(codec.dumps(m))
    assert isinstance(m2, PrivateLearner) and m2.answered == 100 and m2.domain == m.domain
    q = _queries(m, 3000, seed=2)
    assert np.array_equal(m.answer(q).labels, m2.answer(q).labels)
    m3 = restore(m.round_part(), m.live_part(), None)
    assert np.array_equal(m3.answer(q).labels, m.answer(q).labels)


def test_grid_domain() -> None:
    grid = np.linspace(0.0, 1.0, 101)
    y = (grid >= 0.5).astype(np.int8)
    m = PrivateLearner.fit("thresholds", grid, y, epsilon=2.0, domain={"kind": "grid", "points": grid}, seed=3)
    assert 0 <= m.hypothesis.lo <= 101
    m2 = codec.loads(codec.dumps(m))
    assert np.array_equal(m2.answer(grid).labels, m.answer(grid).labels)
    with pytest.raises(InvalidInput, match="outside"):
        m.answer(np.array([0.505]))


BAD_QUERIES = [
    (np.array([0.1, np.nan]), "position 1"),
    (np.array([np.inf]), "position 0"),
    (np.array([[0.1, 0.2]]), "scalars|dimension"),
    (["a"], "real numbers|numeric"),
]


@pytest.mark.parametrize(("q", "msg"), BAD_QUERIES)
def test_bad_queries_are_refused_without_side_effects(q: Any, msg: str) -> None:
    m = _fit()
    before = (m.answered, m.hypothesis)
    with pytest.raises(InvalidInput, match=msg):
        m.answer(q)
    assert (m.answered, m.hypothesis) == before


def test_queries_outside_a_declared_range_are_refused() -> None:
    m = _fit(domain={"kind": "range", "lo": -1.0, "hi": 1.0})
    with pytest.raises(InvalidInput, match="position 2") as e:
        m.answer(np.array([0.0, 1.0, 1.7]))
    assert "1.7" not in str(e.value) and m.answered == 0


def test_outside_domain_marks_exactly_the_points_answer_refuses() -> None:
    grid = np.linspace(0.0, 1.0, 11)
    cases = [
        (_fit(domain={"kind": "range", "lo": -1.0, "hi": 1.0}), np.array([0.0, 1.0, 1.7, -1.0, -1.0000001, -0.0])),
        (PrivateLearner.fit("thresholds", grid, (grid >= 0.5).astype(np.int8), epsilon=1.0,
                            domain={"kind": "grid", "points": grid}, seed=3), np.array([0.1, 0.15, -0.0, 1.0, 2.0])),
        (_fit("stumps", domain={"kind": "range", "lo": -1.0, "hi": 1.0}),
         np.array([[0.0, 0.0, 0.0], [0.0, 3.0, 0.0], [-1.0, 1.0, 0.5]])),
    ]
    for m, q in cases:
        bad = m.outside_domain(q)
        assert bad.shape == (q.shape[0],)
        for i in range(q.shape[0]):
            if bad[i]:
                with pytest.raises(InvalidInput, match="outside"):
                    m.answer(q[i : i + 1])
            else:
                m.answer(q[i : i + 1])
        assert bad.any() and not bad.all()
    assert not _fit().outside_domain(np.array([-MAX, MAX, 0.0])).any()
    with pytest.raises(InvalidInput, match="position 1"):
        _fit().outside_domain(np.array([0.0, np.nan]))


def test_stump_queries_need_the_right_dimension() -> None:
    m = _fit("stumps")
    with pytest.raises(InvalidInput, match="dimension 3"):
        m.answer(np.zeros((4, 2)))
    with pytest.raises(InvalidInput, match="position 1"):
        m.answer(np.array([[0.0, 0.0, 0.0], [0.0, np.nan, 0.0]]))
    assert m.answered == 0


@pytest.mark.parametrize(("kw", "msg"), [
    ({"x": np.array([0.1, np.nan]), "y": [0, 1]}, "training point at position 1"),
    ({"x": np.array([0.1, 0.2]), "y": [0, 2]}, "labels must be 0 or 1"),
    ({"x": np.array([0.1, 0.2]), "y": [0]}, "one label per point"),
    ({"x": np.zeros(0), "y": np.zeros(0)}, "empty"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"epsilon": float("inf")}, "epsilon"),
    ({"epsilon": 1e13}, "epsilon \\* n"),
    ({"concept": "finite"}, "supports the classes"),
    ({"concept": {"name": "stumps"}}, "dimension d"),
    ({"domain": {"kind": "range", "lo": 0.0, "hi": 0.15}}, "training point at position 1 lies outside"),
])
def test_bad_training_calls_are_refused(kw: dict[str, Any], msg: str) -> None:
    args: dict[str, Any] = {"concept": "thresholds", "x": np.array([0.1, 0.2]), "y": [0, 1], "epsilon": 1.0}
    args.update(kw)
    with pytest.raises(InvalidInput, match=msg) as e:
        PrivateLearner.fit(args.pop("concept"), args.pop("x"), args.pop("y"), **args)
    assert "0.2" not in str(e.value).replace("0.2)", "")


def test_extreme_training_values() -> None:
    x = np.array([-MAX, -5e-324, -0.0, 0.0, 5e-324, MAX])
    y = np.array([0, 0, 1, 1, 1, 1], np.int8)
    m = PrivateLearner.fit("thresholds", x, y, epsilon=1.0, seed=0)
    assert m.answer(x).labels.shape == (6,)


@pytest.mark.parametrize("mutate", [
    lambda r, lv: r.update(format="everlast-learner/0"),
    lambda r, lv: r.update(hypothesis={"concept": "thresholds"}),
    lambda r, lv: r["hypothesis"].update(lo=2**63 - 1, hi=2**63 - 1),
    lambda r, lv: r["hypothesis"].update(concept="intervals"),
    lambda r, lv: r.update(epsilon=-1.0),
    lambda r, lv: r.update(domain={"kind": "cube"}),
    lambda r, lv: lv.update(answered=-3),
    lambda r, lv: lv.pop("answered"),
])
def test_corrupt_checkpoints_are_refused(mutate: Any) -> None:
    m = _fit()
    r, lv = m.round_part(), m.live_part()
    mutate(r, lv)
    with pytest.raises(CorruptState):
        restore(r, lv, None)


def test_domain_object_and_spec_fit_alike() -> None:
    a = _fit(domain=Domain.range(-1.0, 1.0), seed=4)
    b = _fit(domain={"kind": "range", "lo": -1.0, "hi": 1.0}, seed=4)
    assert a.hypothesis == b.hypothesis
