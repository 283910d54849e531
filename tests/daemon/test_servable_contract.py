"""One contract, run over every ``Servable`` the daemon serves or is tested with: GenericBBL's
``Predictor``, the ``PrivateLearner`` and the ``FakeEngine`` the processor tests use. A fake that only
has the protocol's method names (``isinstance``) could still let a processor test pass on behaviour no
real mechanism has; here each implementation must behave as ``engine/serving.py`` says:

* its public attributes have the declared types, and a mechanism without rounds has round 0, no round
  counters and unbounded capacity;
* ``answer`` consumes at most ``capacity`` queries and at least one, labels each 0/1 or refuses it
  (label -1 exactly where the refusal code is not NONE), in the round it reports;
* malformed input (NaN) raises ``InvalidInput`` and leaves the state exactly as it was;
* a call out of turn raises ``InvalidState`` (answer when a transition is due, transition when none
  is), leaving the state as it was; once the round's capacity is spent a transition makes it positive
  again;
* the checkpoint parts are dicts, the round part tagged with a ``format``, and the reservoir has
  ``reservoir_filled`` points.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from everlast.engine.errors import InvalidInput, InvalidState
from everlast.engine.learner.model import PrivateLearner
from everlast.engine.phases import Phase
from everlast.engine.serving import Answers, Refusal, RoundInfo, Servable
from tests.daemon.fakes import FakeEngine
from tests.engine.helpers import predictor


def _learner() -> PrivateLearner:
    x = np.random.default_rng(5).random(400)
    return PrivateLearner.fit("thresholds", x, (x >= 0.5).astype(np.int8), epsilon=1.0, seed=1)


IMPLEMENTATIONS: dict[str, Callable[[], Servable]] = {
    "predictor": lambda: predictor("target-charged"),
    "learner": _learner,
    "fake": lambda: FakeEngine(R=50),
}


@pytest.fixture(params=list(IMPLEMENTATIONS))
def servable(request: pytest.FixtureRequest) -> Servable:
    s = IMPLEMENTATIONS[request.param]()
    assert isinstance(s, Servable)
    return s


def state(s: Servable) -> Any:
    """What a checkpoint would hold now (round part, live part, reservoir), as plain comparable values."""
    def plain(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [plain(x) for x in v]
        if isinstance(v, np.ndarray):
            return (v.dtype.str, v.shape, v.tobytes())
        return copy.deepcopy(v)
    return plain((s.round_part(), s.live_part(), s.reservoir_points(0, s.reservoir_filled), s.phase, s.capacity))


def points(s: Servable, n: int, seed: int = 0) -> np.ndarray[Any, Any]:
    g = np.random.default_rng(seed)
    return g.random(n) if s.point_dim == 1 else g.random((n, s.point_dim))


def test_the_declared_attributes(servable: Servable) -> None:
    s = servable
    assert isinstance(s.mechanism, str) and s.mechanism
    assert isinstance(s.has_rounds, bool) and isinstance(s.answers_change_state, bool)
    assert isinstance(s.point_dim, int) and s.point_dim >= 1
    assert isinstance(s.phase, Phase) and s.phase is Phase.ANSWERING
    assert isinstance(s.round, int)
    if s.has_rounds:
        info = s.round_info()
        assert isinstance(info, RoundInfo) and s.round >= 1
        assert s.capacity == info.allowed - info.answered and s.capacity > 0
    else:
        assert s.round == 0 and s.round_info() is None and s.capacity is None


def test_answer_labels_every_consumed_query_within_capacity(servable: Servable) -> None:
    s = servable
    for k, n in enumerate((1, 7, 30)):
        cap = s.capacity
        res = s.answer(points(s, n, seed=k))
        assert isinstance(res, Answers)
        assert 1 <= res.consumed <= n and (cap is None or res.consumed <= cap)
        assert res.labels.dtype == np.int8 and res.refusals.dtype == np.int8
        assert res.labels.shape == res.refusals.shape == (res.consumed,)
        assert set(np.unique(res.labels)) <= {-1, 0, 1}
        assert ((res.labels < 0) == (res.refusals != Refusal.NONE)).all()
        assert res.round == s.round
        if s.has_rounds:
            info = s.round_info()
            assert info is not None and s.capacity in (info.allowed - info.answered, 0, None)


def test_malformed_input_raises_and_changes_nothing(servable: Servable) -> None:
    s = servable
    s.answer(points(s, 5))
    before = state(s)
    bad = points(s, 6)
    bad[3] = np.nan
    with pytest.raises(InvalidInput):
        s.answer(bad)
    assert state(s) == before


def test_calls_out_of_turn_raise_and_change_nothing(servable: Servable) -> None:
    s = servable
    before = state(s)
    with pytest.raises(InvalidState):
        s.transition()  # no transition is due in a fresh round
    assert state(s) == before
    if not s.has_rounds:
        return
    while s.capacity:  # spend the round
        s.answer(points(s, min(s.capacity, 97), seed=s.capacity))
    assert s.capacity == 0 and s.phase is Phase.TRANSITION_DUE
    due = state(s)
    with pytest.raises(InvalidState):
        s.answer(points(s, 3))
    assert state(s) == due
    r = s.round
    s.transition()
    assert s.phase is Phase.ANSWERING and s.round == r + 1 and (s.capacity or 0) > 0


def test_checkpoint_parts(servable: Servable) -> None:
    s = servable
    s.answer(points(s, 20))
    assert isinstance(s.round_part(), dict) and isinstance(s.round_part().get("format"), str)
    assert isinstance(s.live_part(), dict)
    assert isinstance(s.reservoir_filled, int) and s.reservoir_filled >= 0
    assert len(s.reservoir_points(0, s.reservoir_filled)) == s.reservoir_filled


def test_a_mechanism_whose_answers_do_not_change_state_answers_alike(servable: Servable) -> None:
    s = servable
    if s.answers_change_state:
        pytest.skip("its answers move its state")
    x = points(s, 50)
    assert (s.answer(x).labels == s.answer(x).labels).all()
