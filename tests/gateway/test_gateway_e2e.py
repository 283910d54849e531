"""The gateway through a real broker, a real daemon and real HTTP (httpx): predicts, each client's own
labels, replayed ids, spoofed client names, bad input, limits and readiness."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from everlast.daemon.gateway.app import Gateway
from everlast.daemon.gateway.relay import record_id
from tests.gateway.conftest import Stack, gateway_config, start_gateway
from tests.gateway.kafka_view import daemon_counters, end_offsets, records, value

pytestmark = [pytest.mark.broker, pytest.mark.asyncio(loop_scope="module")]


async def post(s: Stack, client: str | None, body: Any, model: str = "sample", **kw: Any) -> httpx.Response:
    headers = {**(s.auth(client) if client else {}), **kw.pop("headers", {})}
    async with httpx.AsyncClient(base_url=s.url, timeout=60) as h:
        if isinstance(body, bytes | str):
            return await h.post(f"/v1/models/{model}/predict", content=body,
                                headers={"Content-Type": "application/json", **headers}, **kw)
        return await h.post(f"/v1/models/{model}/predict", json=body, headers=headers, **kw)


async def test_one_query_and_a_batch_get_their_label_records(stack: Stack) -> None:
    r = await post(stack, "alice", {"id": "one", "x": 0.9})
    assert r.status_code == 200, r.text
    rec = r.json()
    assert rec["id"] == "one" and rec["status"] == "ok" and rec["label"] in (0, 1) and rec["round"] == 1
    r = await post(stack, "alice", {"queries": [{"id": i, "x": i / 10} for i in range(10)]})
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["model"] == "sample" and [x["id"] for x in out["labels"]] == list(range(10))
    assert all(x["status"] == "ok" for x in out["labels"])
