"""Who owns the embedded broker on a port: a lock file per port, held for the owner's lifetime.

``<run dir>/broker-<port>.json`` records the owner's pid and the exact command lines of the
processes it started (the broker, and the compatibility proxy). The owner holds an exclusive
``flock`` on it while it runs; the kernel drops the lock when the owner dies, however it dies. So at
start:

* lock held by someone else: a live daemon owns that port; refuse and name its pid;
* lock free, file names processes that still run with the recorded command lines: they outlived a
  daemon that died (possible where the broker cannot be tied to the daemon's life, i.e. not Linux,
  or a daemon from before that tie existed); stop them, say so, and start afresh;
* otherwise nothing to clean up.

The run dir is ``$EVERLAST_RUN_DIR``, else ``$XDG_RUNTIME_DIR/everlast``, else
``<tmp>/everlast-<uid>``; it must be a directory of ours that nobody else can write (0700).
Without ``fcntl`` (Windows) there is no lock and no stale-broker detection.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from everlast.daemon.errors import BrokerError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

log = logging.getLogger("everlast.daemon")


def run_dir() -> Path:
    env = os.environ.get("EVERLAST_RUN_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        return Path(xdg) / "everlast"
    return Path(tempfile.gettempdir()) / f"everlast-{os.getuid()}"


def _private_dir(d: Path) -> Path:
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise BrokerError(
            f"{d} (where the embedded broker's lock files live) is not a directory of ours that only we can "
            "write: remove it, or set EVERLAST_RUN_DIR"
        )
    return d


def command_line(pid: int) -> str | None:
    """The command line of a live process (None if gone, a zombie, or unknown)."""
    proc = Path("/proc")
    if proc.is_dir():
        try:
            raw = (proc / str(pid) / "cmdline").read_bytes()
        except OSError:
            return None
        return " ".join(a.decode(errors="replace") for a in raw.rstrip(b"\0").split(b"\0")) if raw else None
    ps = shutil.which("ps")  # macOS, BSD
    if ps is None:
        return None
    out = subprocess.run([ps, "-o", "command=", "-p", str(pid)], capture_output=True, text=True, check=False)
    return out.stdout.strip() or None if out.returncode == 0 else None


def _alive(pid: int, argv: list[str]) -> bool:
    return command_line(pid) == " ".join(argv)


def _stop_stale(pid: int, argv: list[str]) -> None:
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 3.0)):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _alive(pid, argv):
                return
            time.sleep(0.02)
    raise BrokerError(f"could not stop the stale embedded broker process {pid}")


@dataclass
class BrokerLock:
    """The held lock for one port. ``record()`` writes what was started; ``release()`` ends it."""

    port: int
    path: Path | None = None
    fd: int | None = None
    reaped: list[int] = field(default_factory=list)

    @classmethod
    def acquire(cls, port: int) -> BrokerLock:
        if fcntl is None:
            return cls(port)
        path = _private_dir(run_dir()) / f"broker-{port}.json"
        for _ in range(10):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                owner = _read(fd).get("owner_pid", "?")
                os.close(fd)
                raise BrokerError(
                    f"port {port} is the embedded broker of a running everlast daemon (pid {owner}): stop that "
                    "daemon, or point this one at it (broker.bootstrap_servers), or set broker.embedded_port "
                    "(0 = any free port)"
                ) from None
            try:  # the previous owner may have unlinked the file between our open and our lock
                same = os.stat(path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        else:
            raise BrokerError(f"could not lock {path}")
        lock = cls(port, path, fd)
        lock._reap(_read(fd))
        return lock

    def _reap(self, old: dict[str, object]) -> None:
        procs = old.get("processes")
        for p in procs if isinstance(procs, list) else []:
            pid, argv = p.get("pid"), p.get("argv")
            if not (isinstance(pid, int) and isinstance(argv, list) and _alive(pid, argv)):
                continue
            _stop_stale(pid, argv)
            self.reaped.append(pid)
        if self.reaped:
            log.warning(
                "stopped the embedded broker on port %d left running by a daemon that died (pid %s; processes %s): "
                "it kept everything in memory, so the queries it held that were not yet answered, and labels "
                "not yet read, are gone; clients must resend them",
                self.port,
                old.get("owner_pid", "?"),
                ", ".join(map(str, self.reaped)),
            )

    def record(self, processes: list[tuple[int, list[str]]]) -> None:
        if self.fd is None:
            return
        data = {"owner_pid": os.getpid(), "port": self.port, "processes": [{"pid": p, "argv": a} for p, a in processes]}
        raw = json.dumps(data).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, raw, 0)

    def release(self) -> None:
        if self.fd is None:
            return
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()  # while still locked: a waiting acquirer then sees a new inode
        os.close(self.fd)
        self.fd = None


def _read(fd: int) -> dict[str, object]:
    try:
        raw = os.pread(fd, 1 << 16, 0)
        data = json.loads(raw) if raw else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
