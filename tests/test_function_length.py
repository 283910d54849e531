"""No function of the product is longer than a screen: at most 80 lines (its docstring not counted) in
engine/, cli/ and daemon/. A longer one is split where its parts have names (a table section, a plot, an
output mode), which is where a reader looks for them."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 80
FOLDERS = ("engine", "cli", "daemon")
NOT_YET: set[str] = set()
"""Files exempt while being reshaped (none now)."""


def _length(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    lines = (node.end_lineno or node.lineno) - node.lineno + 1
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines -= (first.end_lineno or first.lineno) - first.lineno + 1
    return lines


def long_functions(root: Path = ROOT) -> list[str]:
    out = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")) if (root / folder).is_dir() else []:
            rel = path.relative_to(root).as_posix()
            if rel in NOT_YET:
                continue
            for node in ast.walk(ast.parse(path.read_text(), rel)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _length(node) > LIMIT:
                    out.append(f"{rel}:{node.lineno} {node.name}: {_length(node)} lines")
    return out


def test_no_function_is_longer_than_80_lines() -> None:
    too_long = long_functions()
    assert not too_long, f"functions over {LIMIT} lines (docstring aside): split them\n" + "\n".join(too_long)


def test_the_count_sees_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / "m.py").write_text(f'def f():\n    """doc\n    more"""\n{body}\n')
    assert long_functions(tmp_path) == [f"engine/m.py:1 f: {LIMIT + 1} lines"]
    (tmp_path / "engine" / "m.py").write_text(f'def f():\n    """doc\n    more"""\n{body[: body.rindex(chr(10))]}\n')
    assert long_functions(tmp_path) == []
