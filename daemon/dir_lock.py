"""One daemon per state: an exclusive lock on ``checkpoint.dir`` for the daemon's lifetime.

``<checkpoint.dir>/daemon.lock`` holds the owner's pid; the owner keeps an exclusive ``flock`` on it
while it runs, and the kernel drops the lock when the owner dies, however it dies (as the embedded
broker's port lock does, ``daemon/broker_lock.py``). A second daemon on the same directory would
restore the first one's live state and serve it: one random stream consumed by two processes, a
journal written by two. So a start whose lock is held refuses, naming the holder's pid. (The Kafka
checkpoint store keeps its claim rules for several replicas; each replica has its own directory.)
Without ``fcntl`` (Windows) there is no lock."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from everlast.daemon.errors import ConfigError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

FILENAME = "daemon.lock"


@dataclass
class DirLock:
    path: Path
    fd: int | None = None

    @classmethod
    def acquire(cls, root: Path) -> DirLock:
        """Lock ``root`` (created 0700 if missing); ``ConfigError`` naming the holder if it is held."""
        path = root / FILENAME
        if fcntl is None:
            return cls(path)
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except OSError as exc:
            raise ConfigError(f"checkpoint.dir {root}: cannot create its lock file: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise ConfigError(
                f"checkpoint.dir {root} is in use by another everlast daemon (pid {holder}): two daemons on one "
                "state would serve one model twice. Stop that daemon first, or give this one its own checkpoint.dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(path, fd)

    def release(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)  # the file stays: unlinking it would let a waiting daemon lock another inode
            self.fd = None
