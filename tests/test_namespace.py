"""One import namespace: every module is imported as ``everlast.<package>``, never by the bare folder
name, so the same file is never loaded twice under two names and nothing collides with another
distribution's top-level modules (python-daemon's ``daemon``, for one)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import everlast

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "daemon", "cli", "peers", "adversary_sim")


def test_no_source_imports_a_folder_by_its_bare_name() -> None:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    bare = re.compile(r"^\s*(from|import) (" + "|".join(FOLDERS) + r")(\.|\s|$)", re.M)
    hits = [f for f in files if bare.search((ROOT / f).read_text())]
    assert not hits, f"import everlast.<package> instead: {hits}"


def test_importing_every_module_loads_no_bare_folder_name() -> None:
    skip = ("__main__",)
    for info in pkgutil.walk_packages(everlast.__path__, "everlast."):
        if not info.name.endswith(skip):
            importlib.import_module(info.name)
    assert not [m for m in sys.modules if m.split(".")[0] in FOLDERS]


def test_the_namespace_links_to_the_top_level_folders() -> None:
    for name in FOLDERS:
        link = ROOT / "everlast" / name
        assert link.is_symlink() and link.resolve() == ROOT / name, name
    assert (ROOT / "everlast" / "py.typed").is_file()
