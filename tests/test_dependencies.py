"""docs/DEPENDENCIES.md matches pyproject.toml, and the daemon never imports an extra.

Every runtime dependency is named in the page's first table; every extra has its row naming exactly its
packages. The daemon's and the command's modules import no extra at import time (an extra's import is
lazy, inside the one function that needs it, which says which extra to install)."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "DEPENDENCIES.md"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(f"## {title}")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def _first_cells(section: str) -> list[str]:
    return [ln.split("|")[1].strip() for ln in section.splitlines() if ln.startswith("| ") and "---" not in ln]


def test_every_runtime_dependency_is_explained() -> None:
    runtime = {_name(r) for r in PYPROJECT["dependencies"]}
    named: set[str] = set()
    for cell in _first_cells(_section("Installed with everlast"))[1:]:
        named |= {w.strip().lower() for w in re.sub(r"\(.*?\)", "", cell).split(",")}
    named.discard("sqlite3")  # the standard library's, explained beside the packages
    assert named == runtime, f"runtime dependencies not explained: {runtime - named}; explained, not installed: " \
        f"{named - runtime}"


def test_every_extra_has_its_row_with_its_packages() -> None:
    extras = PYPROJECT["optional-dependencies"]
    rows = {}
    for ln in _section("Extras").splitlines():
        cells = [c.strip() for c in ln.split("|")[1:-1]]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1]
    assert set(rows) == set(extras)
    for extra, reqs in extras.items():
        own = {_name(r) for r in reqs if not r.startswith("everlast")}
        if extra == "dev":
            assert reqs == [f"everlast[{','.join(e for e in extras if e != 'dev')}]"] or \
                {e for r in reqs if r.startswith("everlast[") for e in r[9:-1].split(",")} == set(extras) - {"dev"}
            continue
        listed = {re.split(r"[ <>=]", w.strip(), maxsplit=1)[0].lower() for w in rows[extra].split(",")}
        assert listed == own, (extra, listed, own)


EXTRA_MODULES = ("dp_accounting", "matplotlib", "sklearn", "diffprivlib", "river", "pyarrow", "pytest",
                 "hypothesis", "yaml")
"""The top-level modules of every extra's packages."""
FOLDERS = ("engine", "daemon", "adversary_sim", "cli", "peers")


def test_no_module_of_everlast_imports_an_extra() -> None:
    """Import every module of the installed namespace in a fresh interpreter: none of an extra's modules
    is loaded (the daemon, the planner and every command's module import only runtime dependencies)."""
    code = (
        "import importlib, pkgutil, sys\n"
        "n = 0\n"
        f"for p in {FOLDERS!r}:\n"
        "    pkg = importlib.import_module('everlast.' + p)\n"
        "    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "        if not m.name.endswith('__main__'): importlib.import_module(m.name); n += 1\n"
        f"print(n, sorted({{k.split('.')[0] for k in sys.modules}} & set({EXTRA_MODULES!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    n, loaded = out.stdout.strip().split(" ", 1)
    assert int(n) > 100 and loaded == "[]", out.stdout
