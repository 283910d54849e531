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


# -- who is asking, and whose labels come back ------------------------------------------------------


async def exchange(s: Stack, url: str, tag: str) -> list[Any]:
    """alice and bob use the same query ids; bob claims to be alice (header and body fields); then
    each replays its ids with other points. Returns what each received (as ``guard.Sent``)."""
    from tests.gateway.guard import Sent

    out = []
    ids = [f"{tag}-{i}" for i in range(5)] + [hash(tag) % 10**9 + i for i in range(3)]
    points = {"alice": [0.05 + 0.1 * i for i in range(len(ids))], "bob": [0.95 - 0.1 * i for i in range(len(ids))]}
    async with httpx.AsyncClient(base_url=url, timeout=60) as h:
        for client in ("alice", "bob"):
            body: dict[str, Any] = {"queries": [{"id": q, "x": x, "client": "alice"}
                                                for q, x in zip(ids, points[client], strict=True)], "client": "alice"}
            r = await h.post("/v1/models/sample/predict", json=body,
                             headers={**s.auth(client), "everlast-client": "alice", "Everlast-Client": "alice"})
            assert r.status_code == 200, r.text
            out += [Sent(client, q, x, got) for q, x, got in zip(ids, points[client], r.json()["labels"], strict=True)]
        for client in ("alice", "bob"):  # replays, other points: the first labels
            r = await h.post("/v1/models/sample/predict", json={"queries": [{"id": q, "x": 0.5} for q in ids]},
                             headers=s.auth(client))
            assert r.status_code == 200, r.text
            out += [Sent(client, q, x, got) for q, x, got in zip(ids, points[client], r.json()["labels"], strict=True)]
    return out


async def test_no_client_spoofs_another_or_reads_its_labels(stack: Stack) -> None:
    from tests.gateway.guard import violations

    before = await end_offsets(stack.bootstrap, stack.cfg.topics.queries)
    sent = await exchange(stack, stack.url, "guard")
    t = stack.cfg.topics
    assert await violations(stack.bootstrap, t.queries, t.labels, stack.cfg.consumer.client_header, sent) == []
    # the replays produced nothing: 2 clients x 8 ids, once each
    after = await end_offsets(stack.bootstrap, t.queries)
    assert sum(after.values()) - sum(before.values()) == 16
    recs = [value(r) for r in await records(stack.bootstrap, t.queries)]
    rids = {v["id"] for v in recs}
    assert record_id("bob", "guard-0") in rids and record_id("alice", "guard-0") in rids
    # each replay returned exactly the first answer it got
    first = {(x.client, x.qid): x.got for x in sent[:16]}
    assert all(first[(x.client, x.qid)] == x.got for x in sent[16:])


@pytest.mark.parametrize("broken", ["TrustingGateway", "SharedIdGateway"])
async def test_the_guard_catches_a_gateway_that_trusts_the_header_or_shares_ids(stack: Stack, broken: str) -> None:
    from tests.gateway import guard

    cls = getattr(guard, broken)
    gw = await start_gateway(stack.cfg, stack.bootstrap, cls)
    try:
        sent = await exchange(stack, f"http://127.0.0.1:{gw.port}", f"mutant-{broken}")
    finally:
        await gw.stop()
    t = stack.cfg.topics
    found = await guard.violations(stack.bootstrap, t.queries, t.labels, stack.cfg.consumer.client_header, sent)
    assert found, f"the guard passed the broken {broken}"
    assert any("bob's query" in v for v in found)  # bob received what was not his
