"""The planner's cache on disk (everlast.daemon.plan_cache): where it lives, whose it must be, atomic
entries named for their code, a bound on their number, and a directory that cannot be used costs
nothing but the cache."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from everlast.daemon import plan_cache
from everlast.engine.planner import solve_store


def test_the_directory_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(plan_cache.ENV, "off")
    assert plan_cache.directory() is None
    monkeypatch.setenv(plan_cache.ENV, " OFF ")
    assert plan_cache.directory() is None
    monkeypatch.setenv(plan_cache.ENV, str(tmp_path / "p"))
    assert plan_cache.directory() == tmp_path / "p"
    monkeypatch.delenv(plan_cache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert plan_cache.directory() == tmp_path / "xdg" / "everlast" / "plans"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert plan_cache.directory() == tmp_path / "home" / ".cache" / "everlast" / "plans"


def test_no_home_directory_means_no_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(plan_cache.ENV, raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert plan_cache.directory() is None
    with plan_cache.active() as cache:
        assert cache.root is None and cache.note() == "plan cache off"


def test_off_means_no_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plan_cache.ENV, "off")
    with plan_cache.active() as cache:
        assert solve_store.estimate_through(lambda *a: 2.0, (1,)) == 2.0
        assert cache.report() == {"dir": None, "hits": 0, "misses": 0}


def test_the_cache_counts_what_it_answered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(plan_cache.ENV, str(tmp_path))
    for want in ({"hits": 0, "misses": 1}, {"hits": 1, "misses": 0}):
        with plan_cache.active() as cache:
            assert solve_store.estimate_through(lambda *a: 2.0, ("counted",)) == 2.0
        assert cache.report() == {"dir": str(tmp_path), **want}


def test_entries_round_trip_are_private_and_leave_no_temporary_file(tmp_path: Path) -> None:
    store = plan_cache.DirStore(tmp_path / "plans", "ns")
    assert store.usable and (tmp_path / "plans").stat().st_mode & 0o777 == 0o700
    assert store.get("k") is None
    store.put("k", "text")
    store.put("k", "text 2")
    assert store.get("k") == "text 2"
    (entry,) = (tmp_path / "plans").iterdir()
    assert plan_cache.ENTRY.match(entry.name)


def test_an_entry_is_named_for_its_code(tmp_path: Path) -> None:
    a, b = plan_cache.DirStore(tmp_path, "code-a"), plan_cache.DirStore(tmp_path, "code-b")
    a.put("k", "a")
    b.put("k", "b")
    assert (a.get("k"), b.get("k")) == ("a", "b")  # two versions sharing a directory do not overwrite


def test_a_directory_others_can_write_is_not_used(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="everlast.plan_cache"):
        store = plan_cache.DirStore(d, "ns")
        store.put("k", "x")
    assert not store.usable and store.get("k") is None and list(d.iterdir()) == []
    assert "only it can write" in caplog.text


def test_the_least_recently_used_entries_go_beyond_the_bound(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_cache, "MAX_ENTRIES", 3)
    store = plan_cache.DirStore(tmp_path, "ns")
    (tmp_path / "notes.json").write_text("not an entry")  # never touched
    for i in range(3):
        store.put(f"k{i}", "x")
        os.utime(store._path(f"k{i}"), (1000 + i, 1000 + i))  # distinct ages on a coarse clock
    store.get("k0")  # used: now the newest
    store.put("k3", "x")
    assert [store._path(f"k{i}").exists() for i in range(4)] == [True, False, True, True]
    assert (tmp_path / "notes.json").exists()


def test_a_directory_that_cannot_be_written_is_a_cache_that_keeps_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with caplog.at_level(logging.WARNING, logger="everlast.plan_cache"):
        store = plan_cache.DirStore(blocker / "plans", "ns")  # mkdir fails even for root
        store.put("a", "x")
        store.put("b", "x")
    assert not store.usable and store.get("a") is None
    assert len([r for r in caplog.records if "not used" in r.getMessage()]) == 1


def test_the_namespace_names_the_code_and_the_numerical_libraries(monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    import everlast.engine as engine

    loaded = plan_cache.loaded_namespace()
    src = tmp_path / "engine"
    shutil.copytree(Path(engine.__file__).parent, src, ignore=shutil.ignore_patterns("__pycache__"))
    a = plan_cache.namespace(src)
    assert a == plan_cache.namespace(src) == plan_cache.namespace()
    (src / "planner" / "tight.py").write_text((src / "planner" / "tight.py").read_text() + "\n# edited\n")
    assert plan_cache.namespace(src) != a
    monkeypatch.setattr(plan_cache, "_version", lambda name: "0" if name == "scipy" else "1")
    assert plan_cache.namespace() != a
    assert plan_cache.loaded_namespace() == loaded == a  # computed once: the code this process loaded


def test_a_directory_of_its_own_inside_a_shared_one_is_used(tmp_path: Path) -> None:
    """The k8s layout (deploy/k8s/statefulset.yaml): an emptyDir is world-writable (0777), so the cache
    lives in a directory of its own inside it, which it creates 0700."""
    shared = tmp_path / "plans"
    shared.mkdir()
    shared.chmod(0o777)
    assert not plan_cache.DirStore(shared, "ns").usable
    store = plan_cache.DirStore(shared / "cache", "ns")
    assert store.usable and (shared / "cache").stat().st_mode & 0o777 == 0o700
    store.put("k", "x")
    assert store.get("k") == "x"


def test_the_k8s_daemon_keeps_its_plan_cache_in_its_own_directory_of_the_plans_volume() -> None:
    import yaml

    root = Path(__file__).resolve().parents[2]
    sts = yaml.safe_load((root / "deploy" / "k8s" / "statefulset.yaml").read_text())
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    mount = next(m["mountPath"] for m in c["volumeMounts"] if m["name"] == "plans")
    assert Path(env[plan_cache.ENV]).parent == Path(mount)
    assert any(v["name"] == "plans" and "emptyDir" in v for v in pod["volumes"])
