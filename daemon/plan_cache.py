"""The planner's searched schedules on disk (``engine.planner.solve_store``), shared by ``everlast plan``,
``everlast serve`` and every command that plans.

A search takes seconds; what the planner claims about its result is re-derived each time, so keeping
the result is safe and a second plan of the same targets (a restart, ``plan`` then ``serve``) costs
the certification alone. Where: ``$EVERLAST_PLAN_CACHE`` (a directory, or ``off``), else
``$XDG_CACHE_HOME/everlast/plans``, else ``~/.cache/everlast/plans``. An entry is a small JSON file of
public values (a schedule is a function of the public targets: no training or query data). The
directory must be the service user's own and writable by it alone (created 0700): one that another
user could write is not used. A directory that cannot be used costs the cache (said once in the log),
never the start.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import platform
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path

from everlast.engine.planner import solve_store

ENV = "EVERLAST_PLAN_CACHE"
MAX_ENTRIES = 512
"""Entries kept (a few kB each); the least recently used go beyond this."""
ENTRY = re.compile(r"^[0-9a-f]{64}\.json$")
"""An entry's file name (sha256 of namespace and key): the only files the cache reads, touches or removes."""

log = logging.getLogger("everlast.plan_cache")


def directory() -> Path | None:
    """The cache directory, or None when ``$EVERLAST_PLAN_CACHE`` is ``off`` (or no home directory is known)."""
    env = os.environ.get(ENV, "").strip()
    if env.lower() == "off":
        return None
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg:
        return Path(xdg) / "everlast" / "plans"
    try:
        return Path.home() / ".cache" / "everlast" / "plans"
    except RuntimeError:  # no HOME and no passwd entry (an arbitrary-uid container): no cache
        return None


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def namespace(root: Path | None = None) -> str:
    """Which code computes a solve: a digest of the engine's sources (under ``root``, default the engine
    package) and the numerical libraries' versions."""
    if root is None:
        import everlast.engine as engine

        root = Path(engine.__file__).parent
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    for name in ("numpy", "scipy", "mpmath"):
        h.update(f"{name}={_version(name)}\0".encode())
    h.update(f"{platform.python_version()} {platform.machine()}".encode())
    return h.hexdigest()


@cache
def loaded_namespace() -> str:
    """``namespace()`` of the engine this process loaded, computed once (at the first plan, right after
    the engine's import): an edit or upgrade on disk while it runs does not relabel its results."""
    return namespace()


class DirStore:
    """One file per entry, written atomically (a temporary file renamed into place)."""

    def __init__(self, root: Path, ns: str | None = None) -> None:
        self.root = root
        self.namespace = ns if ns is not None else loaded_namespace()
        self._warned = False
        self.usable = self._check()

    def _warn(self, why: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("plan cache %s not used (%s): plans are searched afresh", self.root, why)

    def _check(self) -> bool:
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = self.root.stat()
        except OSError as exc:
            self._warn(type(exc).__name__)
            return False
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            self._warn("not a directory of this user's that only it can write")
            return False
        return True

    def _path(self, key: str) -> Path:
        name = hashlib.sha256(f"{self.namespace}\n{key}".encode()).hexdigest()
        return self.root / f"{name}.json"

    def get(self, key: str) -> str | None:
        if not self.usable:
            return None
        p = self._path(key)
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        with contextlib.suppress(OSError):
            os.utime(p)  # recently used: kept longest
        return text

    def put(self, key: str, text: str) -> None:
        if not self.usable:
            return
        tmp: str | None = None
        try:
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self._path(key))
            tmp = None
        except OSError as exc:
            self._warn(type(exc).__name__)
            return
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self._trim()

    def _trim(self) -> None:
        aged = []
        for p in self.root.iterdir():
            if ENTRY.match(p.name):
                with contextlib.suppress(OSError):  # removed meanwhile by another process
                    aged.append((p.stat().st_mtime, p))
        aged.sort()
        for _, p in aged[:max(0, len(aged) - MAX_ENTRIES)]:
            with contextlib.suppress(OSError):
                p.unlink()


@dataclass
class Cache:
    """The cache of one planning block: its directory (None: off) and what it answered."""

    root: Path | None
    tally: solve_store.Tally

    def report(self) -> dict[str, object]:
        """What ``everlast plan --json`` says under ``plan_cache``: where, solves answered, solves searched."""
        return {"dir": None if self.root is None else str(self.root), "hits": self.tally.hits,
                "misses": self.tally.misses}

    def note(self) -> str:
        """The same for a log line."""
        if self.root is None:
            return "plan cache off"
        return f"plan cache {self.root}: {self.tally.hits} searches reused, {self.tally.misses} run"


@contextlib.contextmanager
def active() -> Iterator[Cache]:
    """The on-disk store for the planner inside the block (none when ``$EVERLAST_PLAN_CACHE`` is ``off``)."""
    root = directory()
    store = DirStore(root) if root is not None else None
    if store is not None and not store.usable:
        store, root = None, None
    with solve_store.using(store) as tally:
        yield Cache(root, tally)
