"""One import namespace: every module is imported as ``everlast.<package>``, never by the bare folder
name, so the same file is never loaded twice under two names and nothing collides with another
distribution's top-level modules (python-daemon's ``daemon``, for one)."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "daemon", "cli", "peers", "adversary_sim")


def test_no_source_imports_a_folder_by_its_bare_name() -> None:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    bare = re.compile(r"^\s*(from|import) (" + "|".join(FOLDERS) + r")(\.|\s|$)", re.M)
    hits = [f for f in files if bare.search((ROOT / f).read_text())]
    assert not hits, f"import everlast.<package> instead: {hits}"


def _subpackages() -> list[str]:
    return sorted("everlast." + str(p.parent.relative_to(ROOT)).replace("/", ".")
                  for name in FOLDERS for p in (ROOT / name).rglob("__init__.py"))


def test_importing_every_module_loads_no_bare_folder_name() -> None:
    skip = ("__main__",)
    for pkg in ("everlast", *(f"everlast.{n}" for n in FOLDERS)):
        mod = importlib.import_module(pkg)
        for info in pkgutil.walk_packages(mod.__path__, pkg + "."):
            if not info.name.endswith(skip):
                importlib.import_module(info.name)
    assert not [m for m in sys.modules if m.split(".")[0] in FOLDERS]


def test_the_repository_holds_no_symbolic_link() -> None:
    links = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert not [line for line in links if line.startswith("120000")]


def test_pyproject_maps_every_folder_to_its_installed_name() -> None:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert conf["package-dir"] == {"everlast": "everlast", **{f"everlast.{n}": n for n in FOLDERS}}
    assert sorted(conf["packages"]) == sorted(["everlast", *_subpackages()])
    for name in FOLDERS:  # the installed module is the folder's file, under one name
        assert Path(importlib.import_module(f"everlast.{name}").__file__).parent == ROOT / name
    assert (ROOT / "everlast" / "py.typed").is_file()


@pytest.mark.slow
def test_a_checkout_without_symlinks_builds_a_working_wheel(tmp_path: Path) -> None:
    src = tmp_path / "src"
    subprocess.run(["git", "clone", "-q", "-c", "core.symlinks=false", str(ROOT), str(src)], check=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
                   check=True, capture_output=True, timeout=600)
    (wheel,) = (tmp_path / "dist").glob("everlast-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for f in ("everlast/engine/predictor.py", "everlast/daemon/service.py", "everlast/cli/main.py",
              "everlast/engine/planner/chain.py", "everlast/daemon/checkpoint/blobs.py", "everlast/py.typed"):
        assert f in names, f
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True,
                   timeout=900)
    out = subprocess.run([str(venv / "bin" / "everlast"), "--version"], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)
    assert out.returncode == 0 and "everlast" in out.stdout, out.stderr
    bare = subprocess.run([str(venv / "bin" / "python"), "-c", "import daemon"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert bare.returncode != 0 and "No module named 'daemon'" in bare.stderr
