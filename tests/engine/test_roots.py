"""engine.roots at its edges: empty brackets, the predicate true at the unevaluated end, integers
beyond 2^53, and the invariant side (the value returned satisfies the predicate even when the
predicate is not monotone)."""

from __future__ import annotations

import math

import pytest

from everlast.engine import roots


class Counted:
    """A predicate that records where it was evaluated."""

    def __init__(self, f: object) -> None:
        self.f = f
        self.calls: list[float] = []

    def __call__(self, x: float) -> bool:
        self.calls.append(x)
        return bool(self.f(x))  # type: ignore[operator]


# -- integers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("lo, hi", [(5, 5), (6, 5)])
def test_int_empty_bracket_raises(lo: int, hi: int) -> None:
    with pytest.raises(ValueError, match="empty bracket"):
        roots.smallest_int(lambda n: True, lo, hi)
    with pytest.raises(ValueError, match="empty bracket"):
        roots.largest_int(lambda n: True, lo, hi)


def test_int_adjacent_bracket_evaluates_nothing() -> None:
    p = Counted(lambda n: True)
    assert roots.smallest_int(p, 4, 5) == 5
    assert roots.largest_int(p, 4, 5) == 4
    assert p.calls == []


def test_int_true_at_lo_is_never_seen() -> None:
    """lo is the false end by contract: the answer lies in (lo, hi], so lo + 1 when pred holds
    everywhere, and lo itself is never evaluated."""
    p = Counted(lambda n: True)
    assert roots.smallest_int(p, 10, 1000) == 11
    assert 10 not in p.calls
    q = Counted(lambda n: False)
    assert roots.largest_int(q, 10, 1000) == 10
    assert 1000 not in q.calls


@pytest.mark.parametrize("boundary", [1, 2, 3, 2**53 - 1, 2**53, 2**53 + 1, 2**70 + 12345, 3**90])
def test_int_exact_beyond_2_53(boundary: int) -> None:
    hi = 4 * boundary + 7
    assert roots.smallest_int(lambda n: n >= boundary, 0, hi) == boundary
    assert roots.largest_int(lambda n: n <= boundary, 0, hi) == boundary
    assert roots.smallest_int_from(lambda n: n >= boundary, 1) == boundary
    assert roots.largest_int_from(lambda n: n <= boundary, 1) == boundary


def test_int_relative_slack() -> None:
    """With rel_tol the result is within max(1, int(hi * rel_tol)) above the boundary, and still
    satisfies the predicate."""
    b = 10**12 + 3
    r = roots.smallest_int(lambda n: n >= b, 1, 10**13, rel_tol=1e-7)
    assert b <= r <= b + int(r * 1e-7) + 1


def test_int_invariant_side_with_non_monotone_predicate() -> None:
    """A predicate that flickers: the result is always a point where it was evaluated true (or the
    given true end), never a point where it is false."""
    def flicker(n: int) -> bool:
        return n >= 700 or n % 7 == 3

    for lo, hi in [(0, 1000), (1, 999), (5, 701)]:
        r = roots.smallest_int(flicker, lo, hi)
        assert flicker(r)
        s = roots.largest_int(lambda n: not flicker(n) or n < 3, lo if lo < 3 else 0, hi)
        assert not flicker(s) or s < 3


def test_int_from_helpers() -> None:
    assert roots.smallest_int_from(lambda n: n >= 3, 3) == 3
    assert roots.smallest_int_from(lambda n: n >= 1, 0) == 1
    assert roots.smallest_int_from(lambda n: n >= 1000, 7) == 1000
    with pytest.raises(ArithmeticError, match="2\\^80"):
        roots.smallest_int_from(lambda n: False, 1, limit=1 << 80)
    assert roots.largest_int_from(lambda n: n <= 0, 1) == 0
    assert roots.largest_int_from(lambda n: n <= 37, 1) == 37


def test_grow_until() -> None:
    assert roots.grow_until(lambda n: n >= 100, 1, 2) == (64, 128)
    assert roots.grow_until(lambda x: x < 10.0, 1.0, 2.0, want=False) == (8.0, 16.0)
    assert roots.grow_until(lambda n: True, 3, 5) == (3, 5)


# -- floats -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("lo, hi", [(1.0, 0.5), (math.nan, 1.0), (0.0, math.nan)])
def test_float_empty_bracket_raises(lo: float, hi: float) -> None:
    with pytest.raises(ValueError, match="empty bracket"):
        roots.smallest_float(lambda x: True, lo, hi, steps=10)
    with pytest.raises(ValueError, match="empty bracket"):
        roots.largest_float(lambda x: True, lo, hi, steps=10)


def test_float_zero_width_returns_the_invariant_end() -> None:
    p = Counted(lambda x: True)
    assert roots.smallest_float(p, 2.0, 2.0) == 2.0
    assert roots.largest_float(p, 2.0, 2.0) == 2.0
    assert p.calls == []


def test_float_true_at_lo_converges_to_lo_without_evaluating_it() -> None:
    p = Counted(lambda x: True)
    r = roots.smallest_float(p, 1.0, 2.0, abs_tol=1e-6)
    assert 1.0 < r <= 1.0 + 1e-6
    assert 1.0 not in p.calls and 2.0 not in p.calls


@pytest.mark.parametrize("b", [0.3, 1e-7, 123.456, 1e200])
def test_float_tolerances(b: float) -> None:
    hi = 4.0 * b
    r = roots.smallest_float(lambda x: x >= b, 0.0, hi, rel_tol=1e-9)
    assert b <= r <= b * (1 + 2e-9)
    s = roots.largest_float(lambda x: x <= b, b / 4.0, hi, rel_tol=1e-9)
    assert b * (1 - 2e-9) <= s <= b
    t = roots.smallest_float(lambda x: x >= b, 0.0, hi, abs_tol=1e-3 * b)
    assert b <= t <= b + 1e-3 * b


def test_float_full_precision_and_fixed_steps() -> None:
    """No tolerance: ends at adjacent floats (a step that changes nothing); steps: exactly that
    many evaluations."""
    r = roots.smallest_float(lambda x: x * x >= 2.0, 1.0, 2.0)
    assert r * r >= 2.0 and math.nextafter(r, 0.0) ** 2 < 2.0
    p = Counted(lambda x: x >= 0.1)
    roots.smallest_float(p, 0.0, 1.0, steps=17)
    assert len(p.calls) == 17


def test_float_geometric_and_log_space() -> None:
    r = roots.largest_float(lambda x: x <= 1e-30, 1e-300, 1.0, steps=200, geometric=True)
    assert r <= 1e-30 and r == pytest.approx(1e-30, rel=1e-12)
    with pytest.raises(ValueError, match="geometric"):
        roots.largest_float(lambda x: True, 0.0, 1.0, steps=3, geometric=True)
    x = roots.smallest_float(lambda a: math.exp(a) >= 5.0, math.log(1e-2), math.log(64.0), abs_tol=5e-3)
    assert math.exp(x) >= 5.0 and x - math.log(5.0) <= 5e-3


def test_float_huge_bracket_does_not_overflow() -> None:
    r = roots.smallest_float(lambda x: x >= 1.5e308, 1e308, 1.7e308, rel_tol=1e-12)
    assert math.isfinite(r) and r >= 1.5e308


def test_float_invariant_side_with_non_monotone_predicate() -> None:
    def flicker(x: float) -> bool:
        return x >= 0.7 or math.sin(1e4 * x) > 0.9

    r = roots.smallest_float(flicker, 0.0, 1.0, steps=60)
    assert flicker(r)
    s = roots.largest_float(lambda x: not flicker(x), 0.0, 1.0, steps=60)
    assert not flicker(s)


# -- every bisection goes through engine.roots ------------------------------------------------------


def test_no_hand_written_bisection_outside_roots() -> None:
    """A loop that halves a bracket by hand is the helper written again: call engine.roots instead."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    halving = re.compile(r"^\s*mid\w*\s*=\s*(\(\s*\w+\s*\+\s*\w+\s*\)\s*//\s*2|0\.5\s*\*\s*\(\s*\w+\s*\+\s*\w+\s*\)"
                         r"|\(\s*\w+\s*\+\s*\w+\s*\)\s*/\s*2(\.0)?|math\.sqrt\(\s*\w+\s*\*\s*\w+\s*\))\s*$", re.M)
    hits = [f"{p.relative_to(root)}: {m.group(0).strip()}"
            for folder in ("engine", "peers", "cli", "adversary_sim", "daemon", "bench", "scripts")
            for p in sorted((root / folder).rglob("*.py")) if p.name != "roots.py"
            for m in halving.finditer(p.read_text())]
    assert not hits, "hand-written bisection (use everlast.engine.roots):\n" + "\n".join(hits)
