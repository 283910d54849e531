"""The embedded broker's life is the daemon's : kill -9 of a real daemon leaves no
broker behind and the restart gets the port; a broker left by a dead owner is found and stopped; a
second owner and a foreign program on the port are refused with what to do."""

from __future__ import annotations

import logging
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from everlast.daemon.broker import EmbeddedBroker, free_port
from everlast.daemon.errors import BrokerError
from tests.daemon.daemon_process import ROOT, Daemon, gone, port_open

pytestmark = pytest.mark.broker


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "run"
    monkeypatch.setenv("EVERLAST_RUN_DIR", str(d))
    return d


def wait_until(cond: object, timeout: float = 10.0) -> bool:
    assert callable(cond)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


def test_kill_9_of_the_daemon_leaves_no_broker_and_the_restart_gets_the_port(tmp_path: Path) -> None:
    d = Daemon.configure(tmp_path)
    d.start()
    pids: list[int] = []
    try:
        pids = d.broker_pids()
        assert len(pids) == 2  # Tansu and the compat proxy
        assert d.proc is not None
        assert d.lock()["owner_pid"] == d.proc.pid
        d.proc.send_signal(signal.SIGKILL)
        d.proc.wait(10)
        assert wait_until(lambda: all(gone(p) for p in pids)), [p for p in pids if not gone(p)]
        assert wait_until(lambda: not port_open(d.port))
        d.start()  # same config, same port: no "port is taken"
        assert sorted(d.broker_pids()) != sorted(pids)
        new = d.broker_pids()
        assert d.stop() == 0
        assert all(gone(p) for p in new)
        assert not (d.run_dir / f"broker-{d.port}.json").exists()
        assert "stopped cleanly" in d.log()
    finally:
        d.stop()
        for p in pids:  # a failed run leaves nothing behind either
            if not gone(p):
                os.kill(p, signal.SIGKILL)


ORPHAN = """
import os, sys
import everlast.daemon.broker as b
b.die_with_parent = lambda: None  # a daemon without the kernel tie (macOS, or an old version)
br = b.EmbeddedBroker(port=int(sys.argv[1]), compat=True).start()
print(" ".join(map(str, br.pids)), flush=True)
os._exit(0)  # dies without stopping it
"""


def test_a_broker_left_by_a_dead_owner_is_stopped_at_start(run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    out = subprocess.run(
        [sys.executable, "-c", ORPHAN, str(port)],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True,
    )  # fmt: skip
    orphans = [int(p) for p in out.stdout.split()]
    try:
        assert len(orphans) == 2 and not any(gone(p) for p in orphans)
        assert port_open(port)  # the orphan holds the port, as in the issue
        with caplog.at_level(logging.WARNING, logger="everlast.daemon"), EmbeddedBroker(port, compat=True) as b:
            assert all(gone(p) for p in orphans)
            assert port_open(port) and not set(b.pids) & set(orphans)
        assert "left running by a daemon that died" in caplog.text
        assert "clients must resend them" in caplog.text
    finally:
        for p in orphans:
            if not gone(p):
                os.kill(p, signal.SIGKILL)


def test_a_second_owner_of_the_port_is_refused_with_the_owners_pid(run_dir: Path) -> None:
    with EmbeddedBroker() as b, pytest.raises(BrokerError, match=rf"running everlast daemon \(pid {os.getpid()}\)"):
        EmbeddedBroker(b.port).start()


def test_a_foreign_program_on_the_port_is_refused(run_dir: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(BrokerError, match="taken by another program"):
            EmbeddedBroker(port).start()
    with EmbeddedBroker(port):  # the failed start left no lock behind
        pass


def test_stop_and_start_again_on_the_same_port(run_dir: Path) -> None:
    b = EmbeddedBroker(compat=True).start()
    first = b.pids
    b.stop()
    assert all(gone(p) for p in first) and not port_open(b.port)
    b.start()
    try:
        assert port_open(b.port)
    finally:
        b.stop()


def api_versions_v3(port: int) -> bytes:
    """An ApiVersions v3 request as librdkafka sends it; the response body after the correlation id."""
    body = b"\x0blibrdkafka\x062.0.2\x00"
    req = struct.pack(">hhih", 18, 3, 7, 7) + b"rdkafka" + b"\x00" + body
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(req)) + req)
        size = struct.unpack(">i", s.recv(4, socket.MSG_WAITALL))[0]
        resp = s.recv(size, socket.MSG_WAITALL)
    assert struct.unpack(">i", resp[:4])[0] == 7
    return resp[4:]


@pytest.fixture
def compat_broker(run_dir: Path) -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(compat=True) as b:
        yield b


def test_the_proxy_drops_only_the_default_tags_of_tansus_api_versions(compat_broker: EmbeddedBroker) -> None:
    direct = api_versions_v3(compat_broker.internal_port)
    proxied = api_versions_v3(compat_broker.port)
    assert direct.endswith(b"\x04\x00\x01\x01\x01\x08" + b"\xff" * 8 + b"\x02\x01\x01\x03\x01\x00")
    assert proxied == direct[:-20] + b"\x00"


def test_a_port_still_closing_after_a_stale_broker_was_stopped_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The race CI met: the stale broker's command line was gone (so it counted as stopped) while its
    listening socket still accepted for a moment, and the start refused the port as another program's.
    The start now waits for the port to close after a reap; the mutant without the wait refuses it."""
    import everlast.daemon.broker as b

    class Reaped:
        def __init__(self) -> None:
            self.reaped = [1]

        def release(self) -> None:
            pass

    def start(wait: bool) -> list[float]:
        answers = iter([True, True, True])  # open for three looks, then closed
        monkeypatch.setattr(b, "_accepts", lambda port: next(answers, False))
        monkeypatch.setattr(b.BrokerLock, "acquire", classmethod(lambda cls, port: Reaped()))
        if not wait:
            monkeypatch.setattr(b, "_wait_closed", lambda port, timeout: None)
        spawned: list[float] = []
        monkeypatch.setattr(b.EmbeddedBroker, "_spawn", lambda self, timeout: spawned.append(timeout))
        b.EmbeddedBroker(12345).start()
        return spawned

    assert start(wait=True) == [10.0]
    with pytest.raises(BrokerError, match="taken by another program"):
        start(wait=False)
