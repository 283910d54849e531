"""A real `everlast serve` process on its embedded broker (for tests of process lifetimes and of
stock clients): the README's minimal config, on free ports, with its own lock-file directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from everlast.daemon.broker import free_port
from everlast.daemon.broker_lock import command_line
from tests.daemon.kafka_helpers import write_model_files

ROOT = Path(__file__).resolve().parents[2]


def gone(pid: int) -> bool:
    """Exited (a zombie waiting for its new parent to reap it counts as exited)."""
    return command_line(pid) is None


def port_open(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@dataclass
class Daemon:
    root: Path
    port: int
    metrics_port: int
    run_dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def configure(cls, root: Path, models: tuple[str, ...] = ("m1",)) -> Daemon:
        root.mkdir(parents=True, exist_ok=True)
        d = cls(root, free_port(), free_port(), root / "run")
        text = (
            f"[broker]\nembedded_port = {d.port}\n"
            "[consumer]\nsession_timeout_ms = 2000\nheartbeat_interval_ms = 200\n"
            f'[checkpoint]\ndir = "{root / "checkpoints"}"\n'
            f"[metrics]\nport = {d.metrics_port}\n"
        )
        for i, m in enumerate(models):
            data, sched = write_model_files(root, m, seed=i)
            text += f'[[models]]\nid = "{m}"\ndata = "{data}"\nschedule = "{sched}"\n'
        (root / "everlast.toml").write_text(text)
        return d

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {**os.environ, "EVERLAST_RUN_DIR": str(self.run_dir), "PYTHONPATH": str(ROOT)}

    def start(self, timeout: float = 90.0) -> None:
        log = (self.root / "serve.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "everlast.cli", "serve", "--config", str(self.root / "everlast.toml")],
            cwd=self.root, env=self.env(), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited at start: {self.log()[-2000:]}")
            if self.ready():
                return
            time.sleep(0.1)
        raise AssertionError(f"the daemon was not ready in {timeout} s: {self.log()[-2000:]}")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/readyz", timeout=1) as r:
                return int(r.status) == 200
        except (urllib.error.URLError, OSError):
            return False

    def log(self) -> str:
        return (self.root / "serve.log").read_text(errors="replace")

    def lock(self) -> dict[str, Any]:
        data = json.loads((self.run_dir / f"broker-{self.port}.json").read_text())
        assert isinstance(data, dict)
        return data

    def broker_pids(self) -> list[int]:
        return [int(p["pid"]) for p in self.lock()["processes"]]

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc = None
        return code
