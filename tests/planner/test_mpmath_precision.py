"""The planner's figures never depend on mpmath's global precision.

mpmath's working precision is process-wide state: a test (or a library) that sets ``mp.dps`` moved
the in-round delta of the plan's known answers by one ulp on the worker that ran it later. Every
mpmath evaluation in the engine therefore runs under its own ``mpmath.workdps``; this checks that
statically (every call into mpmath lies inside such a block) and on the function that escaped it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import mpmath
import pytest

from everlast.engine.planner import above_threshold as at

ENGINE = Path(__file__).resolve().parents[2] / "engine"
_FREE = {"workdps", "workprec", "mpf"}
"""Calls that need no precision of their own: the context managers, and mpf(x) of a float (exact)."""


def _unguarded(tree: ast.AST) -> list[int]:
    """Lines of calls ``mpmath.f(...)`` (f not in _FREE) outside every ``with mpmath.workdps(..)``."""
    out: list[int] = []

    def walk(node: ast.AST, guarded: bool) -> None:
        if isinstance(node, ast.With):
            guarded = guarded or any(
                isinstance(i.context_expr, ast.Call) and isinstance(i.context_expr.func, ast.Attribute)
                and i.context_expr.func.attr in {"workdps", "workprec"} for i in node.items)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "mpmath"
                and node.func.attr not in _FREE and not guarded):
            out.append(node.lineno)
        for child in ast.iter_child_nodes(node):
            walk(child, guarded)

    walk(tree, False)
    return out


def test_every_mpmath_evaluation_in_the_engine_sets_its_own_precision() -> None:
    bad = {}
    for path in sorted(ENGINE.rglob("*.py")):
        lines = _unguarded(ast.parse(path.read_text()))
        if lines:
            bad[str(path.relative_to(ENGINE))] = lines
    assert not bad, f"mpmath called at the global precision: {bad}"


def test_the_check_finds_an_unguarded_call() -> None:
    """The mutant: cap_charge as it was (mpmath.exp at the global precision) is caught."""
    src = "import mpmath\ndef cap(e, d):\n    return (1 + mpmath.exp(e)) * mpmath.mpf(d)\n"
    assert _unguarded(ast.parse(src)) == [3]
    ok = "import mpmath\ndef cap(e, d):\n    with mpmath.workdps(60):\n        return mpmath.exp(e)\n"
    assert _unguarded(ast.parse(ok)) == []


@pytest.mark.parametrize("dps", [15, 50, 100])
def test_cap_charge_is_the_same_at_any_global_precision(dps: int) -> None:
    want = at.cap_charge(0.15000000000000002, 4.0e-10)
    with mpmath.workdps(dps):
        assert at.cap_charge(0.15000000000000002, 4.0e-10) == want
