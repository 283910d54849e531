"""IEEE-754 ordinals: order, adjacency, extremes, the two zeros, and domains built on them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from everlast.engine.errors import InvalidInput
from everlast.engine.learner.domain import Domain
from everlast.engine.learner.ordinals import FLOAT64_POINTS, MAX_ORDINAL, from_ordinal, ordinal, to_ordinal, value

MAX = float(np.finfo(np.float64).max)
TINY = float(np.finfo(np.float64).tiny)  # smallest normal
SUB = 5e-324  # smallest subnormal
EXTREMES = [-MAX, -1.0, -TINY, -np.nextafter(TINY, 0.0), -SUB, -0.0, 0.0, SUB, np.nextafter(TINY, 0.0), TINY, 1.0, MAX]


def test_extremes_round_trip_and_order() -> None:
    x = np.array(EXTREMES)
    o = to_ordinal(x)
    back = from_ordinal(o)
    assert np.array_equal(back, x + 0.0)  # -0.0 comes back as +0.0, everything else bit-exact
    assert not np.signbit(back[6]) and not np.signbit(from_ordinal(np.array([0]))[0])
    assert (np.diff(o)[np.arange(len(x) - 1) != 5] > 0).all()
    assert o[5] == o[6] == 0
    assert ordinal(MAX) == MAX_ORDINAL and ordinal(-MAX) == -MAX_ORDINAL
    assert ordinal(SUB) == 1 and ordinal(-SUB) == -1
    assert FLOAT64_POINTS == 2**64 - 2**53 - 1 == MAX_ORDINAL * 2 + 1


def test_adjacent_doubles_have_adjacent_ordinals() -> None:
    for x in [-MAX, -1.0, -SUB, 0.0, SUB, TINY, 1.0, 2.0**52, np.nextafter(MAX, 0.0)]:
        up = np.nextafter(x, np.inf)
        assert ordinal(up) == ordinal(x) + 1
    assert ordinal(np.nextafter(-0.0, -np.inf)) == -1


def test_count_of_doubles_in_a_range_is_an_ordinal_difference() -> None:
    # the doubles in [-3 SUB, 3 SUB] with the two zeros as one: -3, -2, -1, 0, 1, 2, 3 subnormal steps
    assert ordinal(3 * SUB) - ordinal(-3 * SUB) + 1 == 7
    # [1, 2): 2^52 doubles; [0, 1]: 1023 binades of 2^52 plus 0 and the subnormals, exactly
    assert ordinal(2.0) - ordinal(1.0) == 2**52
    assert ordinal(1.0) - ordinal(0.0) == 1023 * 2**52
    assert Domain.float64().size == 2**64 - 2**53 - 1 > 2**53


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_ordinals_are_strictly_monotone(a: float, b: float) -> None:
    oa, ob = ordinal(a), ordinal(b)
    assert (oa < ob) == (a < b) and (oa == ob) == (a == b)
    assert value(oa) == a and value(ob) == b


def test_domains() -> None:
    r = Domain.range(-1.0, 1.0)
    assert r.size == 2 * ordinal(1.0) + 1
    assert Domain.range(-0.0, 0.0).size == 1
    g = Domain.grid([-0.0, 1.0, 3.0])
    assert g.size == 3 and g.lo_pos == 0 and g.hi_pos == 2
    assert g.positions(np.array([0.0, -0.0, 3.0])).tolist() == [0, 0, 2]
    for d in (Domain.float64(), r, g):
        assert Domain.from_spec(d.to_spec()) == d
    assert Domain.from_spec(None) == Domain.float64() == Domain.from_spec("float64")
    assert r.value(r.hi_pos + 1) == float("inf") and r.value(r.lo_pos) == -1.0


@pytest.mark.parametrize("spec", [
    {"kind": "grid", "points": [1.0, 1.0]}, {"kind": "grid", "points": [0.0, -0.0]}, {"kind": "grid", "points": []},
    {"kind": "grid", "points": [0.0, float("nan")]}, {"kind": "range", "lo": 2.0, "hi": 1.0},
    {"kind": "range", "lo": 0.0, "hi": float("inf")}, {"kind": "range", "lo": 0.0}, {"kind": "cube"}, 7,
])
def test_bad_domains_are_refused(spec: object) -> None:
    with pytest.raises(InvalidInput):
        Domain.from_spec(spec)


def test_points_outside_a_domain_are_named_by_position_never_value() -> None:
    g = Domain.grid([0.0, 0.25, 0.5])
    with pytest.raises(InvalidInput, match="position 2") as e:
        g.positions(np.array([0.0, 0.5, 0.3125]))
    assert "0.3125" not in str(e.value)
    r = Domain.range(0.0, 1.0)
    with pytest.raises(InvalidInput, match="position 1") as e:
        r.positions(np.array([0.5, 1.0000000000000002]))
    assert "1.0000000000000002" not in str(e.value)
    with pytest.raises(InvalidInput, match="position 1"):
        r.positions(np.array([[0.5, 0.5], [0.5, -0.5]]))
