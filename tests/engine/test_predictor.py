"""GenericBBL as a state machine, under both designs: replay, rounds, halting, refusals, bad input,
corrupt states and the sticky ERROR phase."""

from __future__ import annotations

import dataclasses
import functools
import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

import everlast.engine.predictor
from everlast.engine import codec
from everlast.engine.concepts import Thresholds
from everlast.engine.errors import (
    CorruptState,
    EngineError,
    InvalidInput,
    InvalidSchedule,
    InvalidState,
    TrainingSetTooSmall,
)
from everlast.engine.phases import Phase
from everlast.engine.predictor import FORMAT, Predictor
from everlast.engine.serving import Refusal
from tests.engine.helpers import DESIGNS, answer_in_batches, predictor, schedule, tops_predictor, training_set

QUERIES = np.random.default_rng(5).random(3000)  # five rounds of 600
I8 = NDArray[np.int8]

each = pytest.mark.parametrize("design", DESIGNS)


@functools.cache
def reference(design: str) -> tuple[I8, I8, list[int]]:
    return answer_in_batches(predictor(design), QUERIES, [])


# -- replay ---------------------------------------------------------------------------------------


@each
@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(1, 2999), max_size=25))
def test_any_batching_gives_identical_answers(design: str, cuts: list[int]) -> None:
    got = answer_in_batches(predictor(design), QUERIES, cuts)
    want = reference(design)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[2] == want[2]


@each
@settings(max_examples=25, deadline=None)
@given(stops=st.lists(st.integers(1, 2999), min_size=1, max_size=6),
       cuts=st.lists(st.integers(1, 2999), max_size=10), how=st.sampled_from(["bytes", "parts"]))
def test_save_restore_at_any_point_continues_identically(design: str, stops: list[int], cuts: list[int],
                                                         how: str) -> None:
    p = predictor(design)
    bounds = [0, *sorted(set(stops)), QUERIES.size]
    labels, outcomes = [], []
    for lo, hi in itertools.pairwise(bounds):
        lab, out, _ = answer_in_batches(p, QUERIES[lo:hi], [c - lo for c in cuts if lo < c < hi])
        labels.append(lab)
        outcomes.append(out)
        if how == "bytes":
            p = codec.loads(codec.dumps(p))  # type: ignore[assignment]
        else:  # the daemon's checkpoint: round part, live part, the reservoir appended in two pieces
            k = p.reservoir_filled // 2
            pts = np.concatenate([p.reservoir_points(0, k), p.reservoir_points(k, p.reservoir_filled)])
            p = Predictor.from_parts(codec.unpack(codec.pack(p.round_part())),
                                     codec.unpack(codec.pack(p.live_part())), pts)
    assert np.array_equal(np.concatenate(labels), reference(design)[0])
    assert np.array_equal(np.concatenate(outcomes), reference(design)[1])


@each
def test_restore_does_not_change_the_state_bytes(design: str) -> None:
    p = predictor(design)
    p.answer(QUERIES[:250])
    blob = codec.dumps(p)
    assert codec.dumps(codec.loads(blob)) == blob
    p.answer(QUERIES[250:600])
    blob = codec.dumps(p)
    assert p.phase is Phase.TRANSITION_DUE and codec.dumps(codec.loads(blob)) == blob


@each
def test_answer_all_is_answering_in_batches(design: str) -> None:
    p = predictor(design)
    res = p.answer_all(QUERIES)
    assert np.array_equal(res.labels, reference(design)[0]) and np.array_equal(res.outcomes, reference(design)[1])
    assert res.consumed == 3000 and res.round == 5 and (res.refusals == 0).all()


@each
def test_seeds_matter(design: str) -> None:
    assert not np.array_equal(answer_in_batches(predictor(design, seed=2), QUERIES, [])[1], reference(design)[1])


# -- rounds ---------------------------------------------------------------------------------------


@each
def test_rounds_advance(design: str) -> None:
    p = predictor(design)
    R = p.spec.R
    assert (p.round, p.phase, p.capacity, p.answered_in_round) == (1, Phase.ANSWERING, R, 0)
    ensembles = []
    for r in range(1, 4):
        ensembles.append(p.ensemble.to_arrays()["t"].copy())
        res = p.answer(QUERIES[: R + 50])  # more than the round holds: the rest is left for the caller
        assert (res.consumed, res.round) == (R, r) and set(np.unique(res.labels)) <= {0, 1}
        assert p.phase is Phase.TRANSITION_DUE and p.capacity == 0 and p.answered_in_round == R
        assert p.reservoir_filled == p.spec.m_D  # every kept position has arrived
        info = p.round_info()
        assert (info.answered, info.allowed, info.halt_cap) == (R, R, p.spec.c)
        p.transition()
        assert (p.round, p.phase, p.capacity, p.reservoir_filled) == (r + 1, Phase.ANSWERING, R, 0)
    assert not np.array_equal(ensembles[0], ensembles[1])  # refitted on the relabeled D-hat


@each
def test_the_reservoir_keeps_exactly_its_positions(design: str) -> None:
    p = predictor(design)
    positions = p.round_part()["round_state"]["reservoir_positions"]
    p.answer(QUERIES[:123])
    kept = positions[positions < 123]
    assert p.reservoir_filled == kept.size
    assert np.array_equal(p.reservoir_points(0, p.reservoir_filled), QUERIES[kept])


@each
def test_empty_batch(design: str) -> None:
    p = predictor(design)
    before = codec.dumps(p)
    res = p.answer(np.zeros(0))
    assert res.consumed == 0 and res.labels.size == 0 and codec.dumps(p) == before


@each
def test_points_of_shape_n_by_1_are_scalars(design: str) -> None:
    a, b = predictor(design), predictor(design)
    assert np.array_equal(a.answer(QUERIES[:50, None]).outcomes, b.answer(QUERIES[:50]).outcomes)


# -- halting and refusals --------------------------------------------------------------------------


def halting(design: str) -> Predictor:
    """Every query at 0.5 is a top; the round's test fires (the round pauses) at the 4th."""
    if design == "target-charged":
        return tops_predictor(design, halt_threshold=4, c=10)
    return tops_predictor(design, c=4)


@each
def test_halting_pauses_the_round_until_its_end(design: str) -> None:
    """The test fires at the 4th top: the rest of the round is refused (round-paused), its queries still
    take their positions and fill D-hat, and the round transitions at its R-th position: round 2
    answers again (docs/privacy/genericbbl.md 16)."""
    p = halting(design)
    R = p.spec.R
    res = p.answer(np.full(10, 0.5))
    assert res.labels.tolist() == [1] * 4 + [-1] * 6
    assert res.outcomes.tolist() == [2] * 4 + [-1] * 6
    assert res.refusals.tolist() == [0] * 4 + [Refusal.ROUND_PAUSED] * 6
    assert res.consumed == 10 and p.phase is Phase.PAUSED and p.capacity == R - 10 and p.tops_in_round == 4
    assert res.paused == 1  # the call in which the round paused says so
    assert p.answered_in_round == 10
    q = codec.loads(codec.dumps(p))
    assert q.phase is Phase.PAUSED and q.answer(np.array([0.9])).refusals.tolist() == [Refusal.ROUND_PAUSED]
    later = p.answer(np.r_[QUERIES[: R + 50], 0.5])  # more than the round holds: consumed to its end
    assert later.consumed == R - 10 and (later.labels == -1).all()
    assert (later.refusals == Refusal.ROUND_PAUSED).all() and later.paused == 0  # paused before this call
    assert p.phase is Phase.TRANSITION_DUE and p.capacity == 0 and p.reservoir_filled == p.spec.m_D
    with pytest.raises(InvalidState):
        p.answer(np.array([0.5]))
    p.transition()
    assert p.round == 2 and p.phase is Phase.ANSWERING and p.tops_in_round == 0
    assert (p.answer(QUERIES[:20]).labels >= 0).all()  # round 2 serves again


@each
def test_paused_queries_fill_d_hat_at_its_positions(design: str) -> None:
    """D-hat holds the queries at its positions whether the round paused or not: the same points as
    an unpaused run of the same positions (the rate the query chain charges, m_D / R)."""
    p = halting(design)
    R = p.spec.R
    xs = np.r_[np.full(4, 0.5), QUERIES[: R - 4]]
    res = p.answer(xs)
    assert res.paused == 1  # paused and ended in one call: never seen in phase paused, still reported
    positions = np.asarray(p.round_part()["round_state"]["reservoir_positions"])
    assert p.phase is Phase.TRANSITION_DUE and p.reservoir_filled == positions.size
    assert np.array_equal(p.reservoir_points(0, p.reservoir_filled), xs[positions])


def test_legacy_halted_state_refuses_for_good() -> None:
    """A state written before rounds paused, in phase halted, still refuses every query for good."""
    p = halting("target-charged")
    p.answer(np.full(10, 0.5))
    st = p.state()
    st["live"]["phase"] = "halted"
    st["live"]["answered"] = 4
    positions = np.asarray(st["round_state"]["reservoir_positions"])
    kept = int(np.searchsorted(positions, 4))
    st["live"]["reservoir_filled"] = kept
    st["live"]["reservoir_points"] = st["live"]["reservoir_points"][:kept]
    q = Predictor.from_state(st)
    later = q.answer(QUERIES[:700])
    assert q.phase is Phase.HALTED and q.capacity is None and later.consumed == 700
    assert (later.refusals == Refusal.HALTED).all()
    with pytest.raises(InvalidState):
        q.transition()


@each
def test_halting_at_the_last_query_of_a_batch(design: str) -> None:
    p = halting(design)
    assert p.answer(np.full(4, 0.5)).labels.tolist() == [1] * 4
    assert p.phase is Phase.PAUSED


@each
def test_halting_is_batch_invariant(design: str) -> None:
    """Split vote: every point in [0, 1) is a top, -1 is an L (no votes), 2 an R (all votes)."""
    xs = np.r_[np.full(5, -1.0), np.full(3, 0.5), np.full(4, 2.0), 0.5, 0.5, np.full(11, -1.0)]
    whole = halting(design).answer(xs)
    p = halting(design)
    parts = [p.answer(xs[i : i + 3]) for i in range(0, xs.size, 3)]
    assert np.array_equal(np.concatenate([a.outcomes for a in parts]), whole.outcomes)
    assert whole.outcomes.tolist() == [0] * 5 + [2] * 3 + [1] * 4 + [2] + [-1] * 12


def test_target_charged_runs_no_hard_cap() -> None:
    """The target-charged round pauses on its noisy test alone: c is what the certificate charges, not a
    deterministic stop (docs/privacy/genericbbl.md 16). With a threshold above c the count passes c."""
    p = tops_predictor("target-charged", halt_threshold=6, c=6)
    res = p.answer(np.full(8, 0.5))
    assert res.labels.tolist() == [1] * 6 + [-1] * 2  # the test (c0 = 6) fires at the 6th top
    p = tops_predictor("target-charged", halt_threshold=3, c=3)
    assert p.answer(np.full(2, 0.5)).labels.tolist() == [1] * 2 and p.phase is Phase.ANSWERING


@each
def test_non_repeating_schedule_exhausts(design: str) -> None:
    x, y = training_set()
    p = Predictor.create(Thresholds(), schedule(design, rounds=2, repeat_last=False), x, y, seed=3)
    res = p.answer_all(np.random.default_rng(1).random(1300))
    assert p.phase is Phase.EXHAUSTED and p.capacity is None and p.round == 2
    assert (res.labels[:1200] >= 0).all() and (res.labels[1200:] == -1).all()
    assert (res.refusals[1200:] == Refusal.EXHAUSTED).all()
    assert (p.answer(np.array([0.2])).refusals == Refusal.EXHAUSTED).all()
    with pytest.raises(InvalidState):
        p.transition()
    assert codec.loads(codec.dumps(p)).phase is Phase.EXHAUSTED


@each
def test_answering_while_a_transition_is_due_raises_and_changes_nothing(design: str) -> None:
    p = predictor(design)
    p.answer(QUERIES[:600])
    assert p.phase is Phase.TRANSITION_DUE
    before = codec.dumps(p)
    with pytest.raises(InvalidState, match=r"transition_due \(call transition\(\) first\)"):
        p.answer(QUERIES[600:610])
    assert codec.dumps(p) == before
    with pytest.raises(InvalidState, match="cannot transition in phase answering"):
        predictor(design).transition()


# -- bad input ------------------------------------------------------------------------------------

SECRET = 0.123456789
BAD_QUERIES: list[Any] = [
    np.array([0.1, np.nan, SECRET]),
    np.array([0.1, np.inf]),
    np.array([-np.inf]),
    np.array([[SECRET, 0.2]]),  # rank 2, two columns, for a class of scalars
    np.array([[[SECRET]]]),
    np.array([SECRET + 1j]),
    [SECRET, 1j],
    np.array(["2024-01-01"], dtype="datetime64[D]"),
    np.array([5], dtype="timedelta64[s]"),
    np.array([SECRET, None], dtype=object),
    np.array([b"0.123456789"]),
    ["0.123456789"],
    np.array(["0.123456789"]),
    [[SECRET], [SECRET, SECRET]],  # ragged
    None,
    np.zeros(2, dtype=[("a", "f8")]),  # structured
]


@pytest.mark.parametrize("bad", BAD_QUERIES, ids=lambda b: type(b).__name__ + getattr(getattr(b, "dtype", None),
                                                                                          "str", ""))
@each
def test_bad_queries_raise_and_change_nothing(design: str, bad: Any) -> None:
    p = predictor(design)
    p.answer(QUERIES[:100])
    before = codec.dumps(p)
    with pytest.raises(InvalidInput) as info:
        p.answer(bad)
    msg = str(info.value)
    assert "123456" not in msg and "2024" not in msg and "0.1" not in msg  # never a value
    assert codec.dumps(p) == before
    assert np.array_equal(p.answer(QUERIES[100:200]).outcomes, reference(design)[1][100:200])


@each
def test_refusing_phases_still_validate(design: str) -> None:
    p = halting(design)
    p.answer(np.full(5, 0.5))
    with pytest.raises(InvalidInput):
        p.answer(np.array([np.nan]))


@pytest.mark.parametrize(("x", "y", "err"), [
    (np.zeros(0), np.zeros(0), InvalidInput),
    (np.r_[np.zeros(799), np.nan], np.zeros(800), InvalidInput),
    (np.zeros(800) + 1j, np.zeros(800), InvalidInput),
    (np.zeros(800, dtype="datetime64[D]"), np.zeros(800), InvalidInput),
    (np.zeros((800, 2)), np.zeros(800), InvalidInput),
    (np.zeros(800), np.r_[np.zeros(799), 2], InvalidInput),
    (np.zeros(800), np.r_[np.zeros(799), 0.5], InvalidInput),
    (np.zeros(800), np.r_[np.zeros(799), np.nan], InvalidInput),
    (np.zeros(800), np.array(["0"] * 800), InvalidInput),
    (np.zeros(800), np.zeros(799), InvalidInput),
    (np.zeros(800), np.zeros((800, 1)), InvalidInput),
    (np.zeros(499), np.zeros(499), TrainingSetTooSmall),
])
@each
def test_bad_training_sets_raise(design: str, x: Any, y: Any, err: type[Exception]) -> None:
    with pytest.raises(err):
        Predictor.create(Thresholds(), schedule(design), x, y, seed=0)


@each
def test_too_small_says_how_large_it_must_be(design: str) -> None:
    with pytest.raises(TrainingSetTooSmall, match="at least 500") as info:
        Predictor.create(Thresholds(), schedule(design), np.zeros(10), np.zeros(10), seed=0)
    assert (info.value.required, info.value.given) == (500, 10)


@each
def test_training_errors_never_quote_values(design: str) -> None:
    x = np.full(800, SECRET)
    x[17] = np.nan
    with pytest.raises(InvalidInput, match="position 17") as info:
        Predictor.create(Thresholds(), schedule(design), x, np.zeros(800), seed=0)
    assert "123456" not in str(info.value)


@each
def test_inconsistent_schedule_is_rejected(design: str) -> None:
    with pytest.raises(InvalidSchedule, match="m_D"):
        schedule(design, m_D=400)  # cannot supply the next round's 500 points
    with pytest.raises(InvalidSchedule, match="m_D exceeds R"):
        schedule(design, m_D=700)


# -- corrupt states -------------------------------------------------------------------------------


def _set(path: str, value: Any) -> Any:
    def f(st: dict[str, Any]) -> None:
        *head, last = path.split(".")
        d = st
        for k in head:
            d = d[k]
        d[last] = value
    return f


def _drop(path: str) -> Any:
    def f(st: dict[str, Any]) -> None:
        *head, last = path.split(".")
        d = st
        for k in head:
            d = d[k]
        del d[last]
    return f


CORRUPTIONS = {
    "format /3": _set("format", "everlast-engine/3"),
    "format /4": _set("format", "everlast-engine/4"),
    "no format": _drop("format"),
    "unknown concept": _set("concept", {"name": "circles"}),
    "schedule": _set("schedule", {"rounds": []}),
    "round mismatch": _set("live.round", 2),
    "beyond the schedule": lambda st: (_set("round_state.index", 3)(st), _set("live.round", 3)(st),
                                       _set("schedule.repeat_last", False)(st)),
    "reservoir count": _set("live.reservoir_filled", 3),
    "reservoir beyond positions": lambda st: (_set("live.reservoir_filled", 10**6)(st),
                                              _set("live.reservoir_points", np.zeros(10**6))(st)),
    "tops beyond c": _set("live.tops", 10**9),
    "answered beyond R": _set("live.answered", 601),
    "negative answered": _set("live.answered", -1),
    "phase": _set("live.phase", "dreaming"),
    "entropy": _set("live.entropy", "not hex"),
    "noise scale": lambda st: st["live"]["noise"]["query"].update(scale=[1, 3]),
    "noise missing": _drop("live.noise"),
    "noise stream": _set("live.noise.query.start", {"bit_generator": "MT19937"}),
    "ensemble size": _set("round_state.ensemble", {"t": np.zeros(7)}),
    "no ensemble": _drop("round_state.ensemble"),
    "mu type": _set("live.mu", "x"),
    # consistent with itself, inconsistent with the counters (accepted, then a transition failed)
    "reservoir behind answered": lambda st: (_set("live.reservoir_filled", 0)(st),
                                             _set("live.reservoir_points", np.zeros(0))(st)),
    "answering a full round": lambda st: (_set("live.answered", 600)(st), _set("live.reservoir_filled", 500)(st),
                                          _set("live.reservoir_points", np.zeros(500))(st)),
    "transition due mid-round": _set("live.phase", "transition_due"),
    # the c-th top halts the round: still answering with c tops (the paper's look-ahead read a noise past it)
    "answering with c tops": lambda st: _set("live.tops", int(st["schedule"]["rounds"][0]["c"]))(st),
    "exhausted mid-round": _set("live.phase", "exhausted"),
    "positions unsorted": lambda st: _set("round_state.reservoir_positions",
                                          st["round_state"]["reservoir_positions"][::-1].copy())(st),
    "positions beyond R": lambda st: _set("round_state.reservoir_positions",
                                          st["round_state"]["reservoir_positions"] + 600)(st),
    "positions fewer than m_D": lambda st: _set("round_state.reservoir_positions",
                                                st["round_state"]["reservoir_positions"][1:].copy())(st),
    # data LabelBoost takes as validated
    "NaN in the reservoir": lambda st: _set("live.reservoir_points",
                                            np.where(np.arange(st["live"]["reservoir_points"].size) == 0, np.nan,
                                                     st["live"]["reservoir_points"]))(st),
    "NaN in S-hat": lambda st: _set("round_state.s_hat_x", np.full_like(st["round_state"]["s_hat_x"], np.nan))(st),
    "label 2 in S-hat": lambda st: _set("round_state.s_hat_y", np.full_like(st["round_state"]["s_hat_y"], 2))(st),
}


@pytest.mark.parametrize("name", list(CORRUPTIONS))
@each
def test_corrupt_states_are_refused(design: str, name: str) -> None:
    p = predictor(design)
    p.answer(QUERIES[:100])
    st = codec.unpack(codec.dumps(p))
    Predictor.from_state(st)
    CORRUPTIONS[name](st)
    with pytest.raises(CorruptState):
        Predictor.from_state(st)


@each
def test_corrupt_bytes_are_refused(design: str) -> None:
    blob = codec.dumps(predictor(design))
    for bad in (blob[: len(blob) // 2], b"", b"\xc1", codec.pack([1, 2]), codec.pack({"format": FORMAT}),
                codec.pack({"format": "everlast-engine/999", "live": {}}), codec.pack({"live": {}})):
        with pytest.raises(CorruptState):
            codec.loads(bad)


@each
def test_os_entropy_is_the_default_seed(design: str) -> None:
    x, y = training_set()
    a = Predictor.create(Thresholds(), schedule(design), x, y)
    b = Predictor.create(Thresholds(), schedule(design), x, y)
    assert a.entropy != b.entropy and a.entropy.bit_length() > 64
    assert a.live_part()["entropy"] == format(a.entropy, "x")
    assert not np.array_equal(a.answer(QUERIES).outcomes, b.answer(QUERIES).outcomes)


@each
def test_negative_seeds_are_refused(design: str) -> None:
    x, y = training_set()
    with pytest.raises(ValueError, match="non-negative"):
        Predictor.create(Thresholds(), schedule(design), x, y, seed=-1)


# -- the ERROR phase ------------------------------------------------------------------------------


def assert_fails_fast(p: Predictor) -> None:
    before = codec.dumps(p)
    for call in (lambda: p.answer(QUERIES[:3]), lambda: p.answer(np.array([np.nan])), p.transition,
                 lambda: p.answer_all(QUERIES[:3])):
        with pytest.raises(InvalidState, match="phase error"):
            call()
    assert p.phase is Phase.ERROR and p.capacity == 0 and codec.dumps(p) == before


@each
def test_restoring_a_state_in_phase_error(design: str) -> None:
    p = predictor(design)
    p.answer(QUERIES[:10])
    st = p.state()
    st["live"]["phase"] = "error"
    q = Predictor.from_state(st)
    assert_fails_fast(q)
    assert_fails_fast(codec.loads(codec.dumps(q)))  # type: ignore[arg-type]


@each
def test_a_transition_that_breaks_an_invariant_enters_phase_error(design: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A next round whose live state claims more reservoir points than it keeps: only the commit's
    invariant check sees it, and the predictor enters phase error."""
    p = predictor(design)
    p.answer(QUERIES[:600])
    real = everlast.engine.predictor._start_round

    def broken(*args: Any) -> Any:
        rnd, points, live = real(*args)
        return rnd, points, dataclasses.replace(live, filled=rnd.kept + 1)

    monkeypatch.setattr(everlast.engine.predictor, "_start_round", broken)
    with pytest.raises(InvalidState, match="entered phase error"):
        p.transition()
    monkeypatch.undo()
    assert_fails_fast(p)


@each
def test_error_messages_name_the_field_not_the_value(design: str) -> None:
    p = predictor(design)
    errors: list[EngineError] = []
    for bad in BAD_QUERIES:
        try:
            p.answer(bad)
        except InvalidInput as exc:
            errors.append(exc)
    assert len(errors) == len(BAD_QUERIES)
    assert all("query" in str(e) for e in errors)

