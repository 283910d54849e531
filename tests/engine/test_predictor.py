"""GenericBBL as a state machine: replayability, halting, refusals, bad input."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import codec
from engine.concepts import Thresholds
from engine.errors import (
    CorruptState,
    InvalidInput,
    InvalidSchedule,
    InvalidState,
    TrainingSetTooSmall,
)
from engine.phases import Phase
from engine.predictor import Predictor
from engine.schedule import RoundSpec, Schedule
from tests.engine.helpers import run_in_batches, tiny_predictor, tiny_schedule

QUERIES = np.random.default_rng(5).random(3000)  # five rounds of 600


def reference() -> np.ndarray:
    return run_in_batches(tiny_predictor(), QUERIES, [])


REF = reference()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=2999), max_size=25))
def test_any_batching_gives_identical_answers(cuts: list[int]) -> None:
    assert np.array_equal(run_in_batches(tiny_predictor(), QUERIES, cuts), REF)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=2999), min_size=1, max_size=6))
def test_save_restore_at_any_point_continues_identically(stops: list[int]) -> None:
    p = tiny_predictor()
    bounds = [0, *sorted(set(stops)), QUERIES.size]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        out.append(run_in_batches(p, QUERIES[lo:hi], []))
        p = codec.loads(codec.dumps(p))  # restore mid-round or just before a transition
    assert np.array_equal(np.concatenate(out), REF)


def test_rounds_advance_and_answers_are_labels() -> None:
    p = tiny_predictor()
    labels = run_in_batches(p, QUERIES, [])
    assert p.round == 5 and p.phase is Phase.TRANSITION_DUE
    assert set(np.unique(labels)) <= {0, 1}


def predictor_with_split_vote(c: int) -> Predictor:
    """Half the classifiers below 0.5, half above: the vote at 0.5 is exactly 1/2."""
    p = tiny_predictor(eps_bt=50.0, c=c)  # noise scales ~1e-3 against a band of 0.1
    st_ = p.state()
    T = p.spec.T
    st_["round_state"]["ensemble"] = {"t": np.r_[np.zeros(T // 2), np.ones(T - T // 2)]}
    return Predictor.from_state(st_)


def test_predictor_fails_at_the_c_th_top_and_then_refuses() -> None:
    p = predictor_with_split_vote(c=4)
    res = p.answer(np.full(10, 0.5))
    assert list(res.labels) == [1, 1, 1, 1, -1, -1, -1, -1, -1, -1]
    assert res.consumed == 10 and p.phase is Phase.HALTED
    later = p.answer(np.array([0.0, 1.0]))
    assert list(later.labels) == [-1, -1]  # never answered from data again
    with pytest.raises(InvalidState):
        p.transition()


def test_halted_state_survives_restore() -> None:
    p = predictor_with_split_vote(c=2)
    p.answer(np.full(3, 0.5))
    q = codec.loads(codec.dumps(p))
    assert q.phase is Phase.HALTED and list(q.answer(np.array([0.9])).labels) == [-1]


def test_non_repeating_schedule_refuses_after_its_last_round() -> None:
    spec = tiny_schedule().rounds[0]
    sched = Schedule((spec, spec), repeat_last=False, halting="paper", restarts="per-top")
    x = np.random.default_rng(0).random(600)
    p = Predictor.create(Thresholds(), sched, x, (x > 0.5).astype(int), seed=3)
    labels = run_in_batches(p, np.random.default_rng(1).random(1300), [])
    assert p.phase is Phase.EXHAUSTED
    assert (labels[:1200] >= 0).all() and (labels[1200:] == -1).all()
    assert (p.answer(np.array([0.2])).labels == -1).all()


def test_answering_while_a_transition_is_due_raises_and_changes_nothing() -> None:
    p = tiny_predictor()
    p.answer(QUERIES[:600])
    assert p.phase is Phase.TRANSITION_DUE
    before = codec.dumps(p)
    with pytest.raises(InvalidState, match="transition"):
        p.answer(QUERIES[600:610])
    assert codec.dumps(p) == before


@pytest.mark.parametrize(
    "bad",
    [
        np.array([0.1, np.nan, 0.3]),
        np.array([0.1, np.inf]),
        np.array([[0.1, 0.2]]),
        np.array([[[0.1]]]),
        ["a", "b"],
    ],
)
def test_bad_queries_raise_and_change_nothing(bad: object) -> None:
    p = tiny_predictor()
    p.answer(QUERIES[:100])
    before = codec.dumps(p)
    with pytest.raises(InvalidInput) as info:
        p.answer(bad)
    assert "nan" not in str(info.value).lower() or "NaN or infinite" in str(info.value)
    assert codec.dumps(p) == before
    assert np.array_equal(p.answer(QUERIES[100:200]).labels, REF[100:200])


def test_error_messages_never_quote_values() -> None:
    p = tiny_predictor()
    secret = 0.123456789
    with pytest.raises(InvalidInput) as info:
        p.answer(np.array([[secret, secret]]))
    assert "0.123" not in str(info.value)


@pytest.mark.parametrize(
    ("x", "y", "err"),
    [
        (np.zeros(0), np.zeros(0), InvalidInput),
        (np.r_[np.zeros(799), np.nan], np.zeros(800), InvalidInput),
        (np.zeros(800), np.r_[np.zeros(799), 2], InvalidInput),
        (np.zeros(800), np.r_[np.zeros(799), 0.5], InvalidInput),
        (np.zeros(800), np.zeros(799), InvalidInput),
        (np.zeros(499), np.zeros(499), TrainingSetTooSmall),
    ],
)
def test_bad_training_sets_raise(x: np.ndarray, y: np.ndarray, err: type[Exception]) -> None:
    with pytest.raises(err):
        Predictor.create(Thresholds(), tiny_schedule(), x, y, seed=0)


def test_too_small_says_how_large_it_must_be() -> None:
    with pytest.raises(TrainingSetTooSmall, match="at least 500") as info:
        Predictor.create(Thresholds(), tiny_schedule(), np.zeros(10), np.zeros(10), seed=0)
    assert info.value.required == 500


def test_inconsistent_schedule_is_rejected() -> None:
    with pytest.raises(InvalidSchedule, match="m_D"):
        Schedule((RoundSpec(T=50, lam=10, R=600, c=5, eps_bt=0.5, delta_bt=1e-6, alpha=0.1, m_S=50, m_D=400),),
                 halting="paper", restarts="per-top")
    with pytest.raises(InvalidSchedule, match="m_D exceeds R"):
        Schedule((RoundSpec(T=5, lam=10, R=40, c=5, eps_bt=0.5, delta_bt=1e-6, alpha=0.1, m_S=5, m_D=50),),
                 halting="paper", restarts="per-top")


def test_corrupt_state_is_rejected() -> None:
    blob = codec.dumps(tiny_predictor())
    with pytest.raises(CorruptState):
        codec.loads(blob[: len(blob) // 2])
    with pytest.raises(CorruptState):
        codec.loads(codec.pack({"format": "everlast-engine/999"}))
    st_ = tiny_predictor().state()
    st_["live"]["tops"] = 10**9
    with pytest.raises(CorruptState):
        Predictor.from_state(st_)


def test_os_entropy_is_the_default_seed() -> None:
    g = np.random.default_rng(0)
    x = g.random(800)
    p1 = Predictor.create(Thresholds(), tiny_schedule(), x, (x > 0.5).astype(int))
    p2 = Predictor.create(Thresholds(), tiny_schedule(), x, (x > 0.5).astype(int))
    assert p1.streams.state() != p2.streams.state()
