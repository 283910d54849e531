"""Bisection: the project's one helper for the boundary of a monotone predicate.

Every search for "the smallest n that suffices" or "the largest epsilon that still holds" in the
planner, the peers, the comparison and the audits goes through here. Each search keeps one
invariant, stated on its function: the bracket end where the predicate holds is only ever replaced
by a point where it was *evaluated* to hold. So the value returned always satisfies the predicate
(it is a certified bound), even if float rounding makes the predicate not exactly monotone near its
boundary; monotonicity only buys tightness (the returned value is the boundary, to the tolerance).

The predicate's value at the given invariant end is a precondition, never evaluated here (callers
know it, and evaluating it again would cost a plan). The other end is never evaluated either.

Integers are bisected with exact integer midpoints ``(lo + hi) // 2``, so brackets beyond 2^53 are
searched exactly. Floats are bisected at ``0.5 * (lo + hi)`` (or ``sqrt(lo * hi)``, ``geometric``);
to bisect in log space, pass the logs and exponentiate inside the predicate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

N = TypeVar("N", int, float)


def smallest_int(pred: Callable[[int], bool], lo: int, hi: int, *, rel_tol: float = 0.0) -> int:
    """The smallest n in (lo, hi] with ``pred(n)``, for ``pred`` false then true on (lo, hi].

    Requires lo < hi and ``pred(hi)``; ``lo`` is treated as false and never evaluated (so the answer
    is at least lo + 1 even if ``pred(lo)`` holds). Invariant: ``pred(hi)`` holds at every step, so
    the result satisfies ``pred``. With ``rel_tol`` > 0 the search stops once hi - lo <=
    max(1, int(hi * rel_tol)): the result is then within that slack above the boundary.
    """
    if not lo < hi:
        raise ValueError(f"empty bracket: need lo < hi, got lo = {lo}, hi = {hi}")
    while hi - lo > (max(1, int(hi * rel_tol)) if rel_tol else 1):
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return hi


def largest_int(pred: Callable[[int], bool], lo: int, hi: int) -> int:
    """The largest n in [lo, hi) with ``pred(n)``, for ``pred`` true then false on [lo, hi).

    Requires lo < hi and ``pred(lo)``; ``hi`` is treated as false and never evaluated. Invariant:
    ``pred(lo)`` holds at every step, so the result satisfies ``pred``.
    """
    if not lo < hi:
        raise ValueError(f"empty bracket: need lo < hi, got lo = {lo}, hi = {hi}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid
    return lo


def smallest_int_from(pred: Callable[[int], bool], lo: int, *, limit: int | None = None) -> int:
    """The smallest n >= lo with ``pred(n)``, for ``pred`` false then true: ``lo`` is evaluated
    first, then hi = max(2 lo, lo + 1) is doubled (moving lo up to each failed hi) until
    ``pred(hi)``, then :func:`smallest_int`. Raises ``ArithmeticError`` once hi would pass
    ``limit`` (None: no limit; the search then ends only if some n satisfies ``pred``)."""
    if pred(lo):
        return lo
    hi = max(2 * lo, lo + 1)
    while not pred(hi):
        lo, hi = hi, 2 * hi
        if limit is not None and hi > limit:
            raise ArithmeticError(f"no feasible n below {_int_text(limit)}")
    return smallest_int(pred, lo, hi)


def largest_int_from(pred: Callable[[int], bool], start: int) -> int:
    """The largest k >= start - 1 with ``pred(k)``, for ``pred`` true then false, given
    ``pred(start - 1)`` (not evaluated): hi = max(start, 1) is doubled (moving lo up to each
    hi that holds) until ``pred(hi)`` fails, then :func:`largest_int`."""
    lo, hi = start - 1, max(start, 1)
    while pred(hi):
        lo, hi = hi, 2 * hi
    return largest_int(pred, lo, hi)


def grow_until(pred: Callable[[N], bool], lo: N, hi: N, *, want: bool = True, factor: int = 2) -> tuple[N, N]:
    """Widen a bracket upwards: while ``pred(hi) != want``, move lo to hi and multiply hi by
    ``factor``. Returns (lo, hi) with ``pred(hi) == want``; lo is the last hi that failed (or the
    given lo). A caller that keeps its own lower end ignores the returned one. ``pred`` must reach
    ``want`` eventually (hi > 0)."""
    while pred(hi) != want:
        lo, hi = hi, hi * factor
    return lo, hi


def smallest_float(pred: Callable[[float], bool], lo: float, hi: float, *, steps: int | None = None,
                   abs_tol: float = 0.0, rel_tol: float = 0.0, geometric: bool = False) -> float:
    """The smallest x in (lo, hi] with ``pred(x)`` (to the tolerance), for ``pred`` false then true.

    Requires ``pred(hi)``; ``lo`` is never evaluated. Invariant: ``pred(hi)`` holds at every step,
    so the result satisfies ``pred``. Each step evaluates the midpoint and replaces one end; the
    search stops after ``steps`` steps (None: no count), once hi - lo <= max(abs_tol, rel_tol * |hi|),
    or when a step changes nothing (adjacent floats: no further step could). lo == hi returns hi.
    """
    return _bisect(pred, lo, hi, True, steps, abs_tol, rel_tol, geometric)


def largest_float(pred: Callable[[float], bool], lo: float, hi: float, *, steps: int | None = None,
                  abs_tol: float = 0.0, rel_tol: float = 0.0, geometric: bool = False) -> float:
    """The largest x in [lo, hi) with ``pred(x)`` (to the tolerance), for ``pred`` true then false.

    Requires ``pred(lo)``; ``hi`` is never evaluated. Invariant: ``pred(lo)`` holds at every step,
    so the result satisfies ``pred``. Stops as :func:`smallest_float` does, with the relative
    tolerance taken of |lo| (the end returned). lo == hi returns lo.
    """
    return _bisect(pred, lo, hi, False, steps, abs_tol, rel_tol, geometric)


def _bisect(pred: Callable[[float], bool], lo: float, hi: float, keep_hi: bool, steps: int | None,
            abs_tol: float, rel_tol: float, geometric: bool) -> float:
    if not lo <= hi:  # also refuses NaN
        raise ValueError(f"empty bracket: need lo <= hi, got lo = {lo}, hi = {hi}")
    if geometric and not lo > 0.0:
        raise ValueError("a geometric bisection needs lo > 0")
    steps_left = -1 if steps is None else steps  # -1: no count (ends by tolerance or no change)
    while steps_left != 0:
        if hi - lo <= max(abs_tol, rel_tol * abs(hi if keep_hi else lo)):
            break
        mid = math.sqrt(lo * hi) if geometric else 0.5 * (lo + hi)
        if not math.isfinite(mid):
            mid = lo * 0.5 + hi * 0.5
        if pred(mid) == keep_hi:
            if hi == mid:
                break
            hi = mid
        else:
            if lo == mid:
                break
            lo = mid
        steps_left -= 1
    return hi if keep_hi else lo


def _int_text(n: int) -> str:
    """2^k for a power of two, else the integer."""
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)
