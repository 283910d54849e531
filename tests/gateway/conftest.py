"""A real broker, a real daemon (the compose sample's model, with its quotas) and a real gateway in
front of it, shared by a module's tests; clients are httpx over real HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.config import Config, load
from everlast.daemon.gateway.app import Gateway
from everlast.daemon.gateway.auth import key_hash, new_key

CLIENTS = ("alice", "bob", "prober", "honest")


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


@dataclass
class Stack:
    cfg: Config
    bootstrap: str
    daemon_metrics: int
    service: Any
    gateway: Gateway
    keys: dict[str, str] = field(default_factory=dict)
    """client (or ``revoked``) -> its API key."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.gateway.port}"

    def auth(self, client: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[client]}"}


def gateway_config(base: Config, keys: dict[str, str], **gateway: Any) -> Config:
    entries = [{"client": c, "sha256": key_hash(k)} for c, k in keys.items() if c != "revoked"]
    if "revoked" in keys:
        entries.append({"client": "alice", "sha256": key_hash(keys["revoked"]), "revoked": True})
    g = {"host": "127.0.0.1", "port": 0, "metrics_port": 0, "health_interval_s": 0.2, "timeout_s": 30.0,
         "client_qps": 1e6, "client_burst": 10**6, "keys": entries, **gateway}
    return base.model_copy(update={"gateway": type(base.gateway).model_validate(g)})


async def start_gateway(cfg: Config, bootstrap: str, cls: type[Gateway] = Gateway, ready: bool = True) -> Gateway:
    gw = cls(cfg, bootstrap=bootstrap)
    await gw.start()
    if ready:
        await gw.wait_ready(120)
    return gw


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(broker: EmbeddedBroker) -> AsyncIterator[Stack]:
    from everlast.adversary_sim.availability_kafka import _ready, sample_model, write_config
    from everlast.daemon.app import serve

    with tempfile.TemporaryDirectory(prefix="everlast-gateway-") as tmp:
        base = load(write_config(Path(tmp), [sample_model(True)], broker.bootstrap, seed=0))
        stop = asyncio.Event()
        status: dict[str, Any] = {}
        daemon = asyncio.create_task(serve(base, stop, status, handle_signals=False))
        try:
            svc = await _ready(daemon, status)
            keys = {c: new_key() for c in CLIENTS} | {"revoked": new_key()}
            cfg = gateway_config(base, keys, daemon_readyz=[f"http://127.0.0.1:{status['metrics_port']}/readyz"])
            gw = await start_gateway(cfg, broker.bootstrap)
            try:
                yield Stack(cfg, broker.bootstrap, int(status["metrics_port"]), svc, gw, keys)
            finally:
                await gw.stop()
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(daemon, 60)
