"""The gateway through a real broker, a real daemon and real HTTP (httpx): predicts, each client's own
labels, replayed ids, spoofed client names, bad input, limits and readiness."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

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


# -- bad input: a 4xx naming the field, nothing produced ----------------------------------------------

BAD = [
    ("dimension", {"queries": [{"id": 1, "x": 0.5}, {"id": 2, "x": [0.1, 0.2]}]}, 422, "queries[1].x"),
    ("nan", '{"queries": [{"id": 1, "x": 0.5}, {"id": 2, "x": NaN}]}', 422, "queries[1].x"),
    ("infinite", '{"id": "q", "x": [1e999]}', 422, "x"),
    ("oversized", b'{"queries": [' + b",".join([b'{"id": 1, "x": 0.5}'] * 60_000) + b"]}", 413, "body"),
    ("ten_thousand", {"queries": [{"id": i, "x": 0.5} for i in range(10_000)]}, 413, "queries"),
    ("unknown_model", {"id": 1, "x": 0.5}, 404, "model"),
    ("content_type", "id=1&x=0.5", 415, "content-type"),
    ("not_json", b"{not json", 400, "body"),
    ("unknown_field", {"queries": [{"id": 1, "x": 0.5, "secret-field-name": 3}]}, 422, "queries[0]"),
    ("bad_id", {"queries": [{"id": True, "x": 0.5}]}, 422, "queries[0].id"),
    ("long_id", {"id": "y" * 300, "x": 0.5}, 422, "id"),
    ("duplicate_id", {"queries": [{"id": 7, "x": 0.5}, {"id": 7, "x": 0.6}]}, 422, "queries[1].id"),
    ("empty", {"queries": []}, 422, "queries"),
    ("no_x", {"queries": [{"id": 1}]}, 422, "queries[0].x"),
    ("string_x", {"queries": [{"id": "SECRETVALUE", "x": "SECRETVALUE"}]}, 422, "queries[0].x"),
]


@pytest.mark.parametrize(("case", "body", "code", "field"), BAD, ids=[b[0] for b in BAD])
async def test_bad_input_is_a_4xx_naming_the_field_and_nothing_is_produced(
        stack: Stack, case: str, body: Any, code: int, field: str) -> None:
    t = stack.cfg.topics
    before = await end_offsets(stack.bootstrap, t.queries), await daemon_counters(stack.daemon_metrics)
    kw: dict[str, Any] = {}
    if case == "content_type":
        kw["headers"] = {"Content-Type": "application/x-www-form-urlencoded"}
        async with httpx.AsyncClient(base_url=stack.url) as h:
            r = await h.post("/v1/models/sample/predict", content=body,
                             headers={**stack.auth("alice"), **kw["headers"]})
    else:
        r = await post(stack, "alice", body, model="no-such-model" if case == "unknown_model" else "sample")
    assert r.status_code == code, r.text
    err = r.json()["error"]
    assert err["field"] == field and err["code"] and err["message"]
    assert "SECRET" not in r.text and "secret" not in r.text  # no value and no client-chosen name echoed
    await asyncio.sleep(0.3)
    after = await end_offsets(stack.bootstrap, t.queries), await daemon_counters(stack.daemon_metrics)
    assert after == before


@pytest.mark.parametrize("credential", ["none", "wrong", "revoked", "malformed"])
async def test_no_wrong_or_revoked_credential_is_401_and_nothing_is_produced(stack: Stack, credential: str) -> None:
    headers = {"none": {}, "wrong": {"Authorization": "Bearer evk_" + "A" * 43},
               "revoked": {"Authorization": f"Bearer {stack.keys['revoked']}"},
               "malformed": {"Authorization": "Basic YWxpY2U6YWxpY2U="}}[credential]
    before = await end_offsets(stack.bootstrap, stack.cfg.topics.queries)
    async with httpx.AsyncClient(base_url=stack.url) as h:
        r = await h.post("/v1/models/sample/predict", json={"id": 1, "x": 0.5},
                         headers={**headers, "everlast-client": "alice"})
    assert r.status_code == 401 and r.headers["WWW-Authenticate"] == "Bearer"
    assert r.json()["error"]["field"] == "credential"
    assert await end_offsets(stack.bootstrap, stack.cfg.topics.queries) == before


# -- limits, readiness, timeouts ---------------------------------------------------------------------


async def test_rate_and_in_flight_limits_answer_429_with_retry_after(stack: Stack) -> None:
    cfg = gateway_config(stack.cfg, stack.keys, client_qps=1.0, client_burst=10, max_queries=10)
    gw = await start_gateway(cfg, stack.bootstrap)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.port}", timeout=60) as h:
            body = {"queries": [{"id": f"rate-{i}", "x": 0.5} for i in range(10)]}
            r = await h.post("/v1/models/sample/predict", json=body, headers=stack.auth("alice"))
            assert r.status_code == 200, r.text
            body = {"queries": [{"id": f"rate-more-{i}", "x": 0.5} for i in range(10)]}
            r = await h.post("/v1/models/sample/predict", json=body, headers=stack.auth("alice"))
            assert r.status_code == 429 and int(r.headers["Retry-After"]) >= 1
            assert r.json()["error"]["code"] == "rate"
            r = await h.post("/v1/models/sample/predict", json=body, headers=stack.auth("bob"))
            assert r.status_code == 200  # another client's bucket
    finally:
        await gw.stop()
    cfg = gateway_config(stack.cfg, stack.keys, client_inflight=1)
    gw = await start_gateway(cfg, stack.bootstrap)
    try:
        gw.limits.enter("alice")  # one request of alice's in progress
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.port}", timeout=60) as h:
            r = await h.post("/v1/models/sample/predict", json={"id": "fl", "x": 0.5}, headers=stack.auth("alice"))
            assert r.status_code == 429 and r.headers["Retry-After"] == "1" and r.json()["error"]["code"] == "inflight"
            r = await h.post("/v1/models/sample/predict", json={"id": "fl", "x": 0.5}, headers=stack.auth("bob"))
            assert r.status_code == 200
    finally:
        await gw.stop()


async def test_503_while_the_daemon_or_the_broker_is_unreachable(stack: Stack) -> None:
    from everlast.daemon.broker import free_port

    before = await end_offsets(stack.bootstrap, stack.cfg.topics.queries)
    dead = f"http://127.0.0.1:{free_port()}/readyz"
    for cfg, bootstrap in ((gateway_config(stack.cfg, stack.keys, daemon_readyz=[dead]), stack.bootstrap),
                           (gateway_config(stack.cfg, stack.keys), f"127.0.0.1:{free_port()}")):
        gw = await start_gateway(cfg, bootstrap, ready=False)
        try:
            await asyncio.sleep(1.0)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.port}", timeout=60) as h:
                assert (await h.get("/readyz")).status_code == 503
                assert (await h.get("/healthz")).status_code == 200
                r = await h.post("/v1/models/sample/predict", json={"id": "down", "x": 0.5},
                                 headers=stack.auth("alice"))
                assert r.status_code == 503 and r.headers["Retry-After"] == "1", r.text
        finally:
            await gw.stop()
    assert await end_offsets(stack.bootstrap, stack.cfg.topics.queries) == before


async def test_a_timed_out_query_stays_accepted_and_a_retry_returns_its_one_label(stack: Stack) -> None:
    """A gateway on topics no daemon reads: the request times out (504, the query accepted); the label a
    daemon later publishes is what the retry returns, and the retry produces nothing."""
    from aiokafka import AIOKafkaProducer

    from everlast.daemon.config import TopicsConfig

    tag = "orphan"
    topics = TopicsConfig(queries=f"{tag}.queries", labels=f"{tag}.labels", dead_letters=f"{tag}.dl", partitions=1)

    p = AIOKafkaProducer(bootstrap_servers=stack.bootstrap)
    await p.start()
    try:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic

        a = AIOKafkaAdminClient(bootstrap_servers=stack.bootstrap)
        await a.start()
        await a.create_topics([NewTopic(topics.queries, 1, 1), NewTopic(topics.labels, 1, 1)])
        await a.close()
        cfg = gateway_config(stack.cfg.model_copy(update={"topics": topics}), stack.keys, timeout_s=1.0)
        gw = await start_gateway(cfg, stack.bootstrap)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.port}", timeout=60) as h:
                r = await h.post("/v1/models/sample/predict", json={"queries": [{"id": 5, "x": 0.5}]},
                                 headers=stack.auth("alice"))
                assert r.status_code == 504 and r.json()["pending"] == [5] and r.json()["error"]["code"] == "timeout"
                import msgpack

                rid = record_id("alice", 5)
                await p.send_and_wait(topics.labels, msgpack.packb({"id": rid, "label": 1, "status": "ok", "round": 3}),
                                      key=b"sample")
                await p.send_and_wait(topics.labels, msgpack.packb({"id": rid, "label": 0, "status": "ok", "round": 3}),
                                      key=b"sample")  # a second label for the same id is never returned
                for _ in range(100):
                    if ("sample", rid) in gw.relay.index:
                        break
                    await asyncio.sleep(0.05)
                r = await h.post("/v1/models/sample/predict", json={"queries": [{"id": 5, "x": 0.9}]},
                                 headers=stack.auth("alice"))
                assert r.status_code == 200
                assert r.json()["labels"] == [{"id": 5, "label": 1, "status": "ok", "round": 3}]
                r = await h.post("/v1/models/sample/predict", json={"queries": [{"id": 5, "x": 0.9}]},
                                 headers=stack.auth("bob"))
                assert r.status_code == 504  # bob's id 5 is bob's own query, not alice's
        finally:
            await gw.stop()
        qs = [value(r) for r in await records(stack.bootstrap, topics.queries)]
        assert [q["id"] for q in qs] == [record_id("alice", 5), record_id("bob", 5)]  # the retry produced nothing
        # a restarted gateway rebuilds its index from the labels topic: the replay finds the first label
        gw = await start_gateway(cfg, stack.bootstrap)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.port}", timeout=60) as h:
                r = await h.post("/v1/models/sample/predict", json={"id": 5, "x": 0.1}, headers=stack.auth("alice"))
                assert r.status_code == 200 and r.json() == {"id": 5, "label": 1, "status": "ok", "round": 3}
        finally:
            await gw.stop()
        assert len(await records(stack.bootstrap, topics.queries)) == 2
    finally:
        await p.stop()


# -- operations ----------------------------------------------------------------------------------------


async def test_health_readiness_openapi_and_metrics(stack: Stack) -> None:
    assert (await post(stack, "alice", {"id": "metrics-1", "x": 0.5})).status_code == 200
    async with httpx.AsyncClient(base_url=stack.url) as h:
        assert (await h.get("/healthz")).status_code == 200
        assert (await h.get("/readyz")).status_code == 200
        doc = (await h.get("/openapi.json")).json()
        assert doc["openapi"].startswith("3.") and "/v1/models/{model}/predict" in doc["paths"]
        r = await h.get("/no/such/path")
        assert r.status_code == 404 and r.json()["error"]["field"] == "path"
    async with httpx.AsyncClient() as h:
        text = (await h.get(f"http://127.0.0.1:{stack.gateway.metrics_port}/metrics")).text
    assert 'everlast_gateway_requests_total{code="200",route="predict"}' in text
    assert "everlast_gateway_request_seconds_bucket" in text and "everlast_gateway_ready 1.0" in text
    for c in ("alice", "bob", "prober", "honest"):
        assert c not in text  # no per-client series
    assert json.dumps(doc)  # serialisable


async def test_a_client_certificate_names_the_client(stack: Stack, tmp_path: Any) -> None:
    import ssl

    from tests.gateway.certs import CA

    ca = CA(tmp_path)
    server = ca.issue("server", "gateway", server=True)
    carol = ca.issue("carol", " Carol ")  # normalised: "carol"
    bad = ca.issue("bad", "not a client id!")
    tls = {"certfile": str(server[0]), "keyfile": str(server[1]), "client_ca": str(ca.path)}
    gw = await start_gateway(gateway_config(stack.cfg, stack.keys, tls=tls), stack.bootstrap)
    url = f"https://127.0.0.1:{gw.port}"
    body = {"id": "cert-1", "x": 0.8}

    def client(cert: tuple[Any, Any] | None) -> httpx.AsyncClient:
        ctx = ssl.create_default_context(cafile=str(ca.path))
        if cert is not None:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        return httpx.AsyncClient(base_url=url, verify=ctx, timeout=60)

    try:
        async with client(carol) as h:
            r = await h.post("/v1/models/sample/predict", json=body, headers={"everlast-client": "alice"})
            assert r.status_code == 200 and r.json()["status"] == "ok", r.text
        async with client(bad) as h:
            r = await h.post("/v1/models/sample/predict", json=body)
            assert r.status_code == 401 and r.json()["error"]["field"] == "credential"
        async with client(None) as h:
            assert (await h.post("/v1/models/sample/predict", json=body)).status_code == 401
            r = await h.post("/v1/models/sample/predict", json={"id": "cert-2", "x": 0.8}, headers=stack.auth("bob"))
            assert r.status_code == 200  # an API key works over TLS too
    finally:
        await gw.stop()
    recs = {value(r)["id"]: r for r in await records(stack.bootstrap, stack.cfg.topics.queries)}
    assert list(recs[record_id("carol", "cert-1")].headers) == [("everlast-client", b"carol")]
    assert record_id("bob", "cert-2") in recs


async def test_twenty_credentials_of_one_prober_are_twenty_clients(stack: Stack) -> None:
    """What a Sybil costs behind the gateway: one credential per client id, each issued by the operator
    (docs/GATEWAY.md, "Threat model", works out what 20 of them can spend)."""
    from everlast.daemon.gateway.auth import new_key

    keys = {f"sybil-{i:02d}": new_key() for i in range(20)}
    gw = await start_gateway(gateway_config(stack.cfg, keys), stack.bootstrap)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gw.port}", timeout=60) as h:
            for c, k in keys.items():
                r = await h.post("/v1/models/sample/predict", json={"id": "s", "x": 0.5},
                                 headers={"Authorization": f"Bearer {k}", "everlast-client": "sybil-00"})
                assert r.status_code == 200, (c, r.text)
    finally:
        await gw.stop()
    stamped = {dict(r.headers)["everlast-client"] for r in await records(stack.bootstrap, stack.cfg.topics.queries)
               if value(r)["id"].startswith("sybil-")}
    assert stamped == {c.encode() for c in keys}


# -- the Open Inference Protocol's v2 REST shape ------------------------------------------------------


async def test_v2_infer_answers_rows_and_a_replayed_request_id_returns_the_first_labels(stack: Stack) -> None:
    t = stack.cfg.topics
    body = {"id": "v2-req", "inputs": [{"name": "x", "shape": [3], "datatype": "FP64", "data": [0.1, 0.5, 0.9]}]}
    async with httpx.AsyncClient(base_url=stack.url, timeout=60) as h:
        meta = await h.get("/v2/models/sample", headers=stack.auth("alice"))
        assert meta.status_code == 200 and meta.json()["inputs"][0]["shape"] == [-1]
        assert (await h.get("/v2/models/sample")).status_code == 401
        assert (await h.get("/v2/health/ready")).status_code == 200
        r = await h.post("/v2/models/sample/infer", json=body, headers=stack.auth("alice"))
        assert r.status_code == 200, r.text
        out = {o["name"]: o for o in r.json()["outputs"]}
        assert r.json()["id"] == "v2-req" and r.json()["model_name"] == "sample"
        assert out["status"]["data"] == ["ok"] * 3 and set(out["label"]["data"]) <= {0, 1}
        assert out["label"]["shape"] == [3] and out["label"]["datatype"] == "INT8"
        before = await end_offsets(stack.bootstrap, t.queries)
        body["inputs"][0]["data"] = [0.9, 0.9, 0.9]
        again = await h.post("/v2/models/sample/infer", json=body, headers=stack.auth("alice"))
        assert again.json()["outputs"] == r.json()["outputs"]  # the first labels, nothing produced
        assert await end_offsets(stack.bootstrap, t.queries) == before
        for bad, field in (({"inputs": body["inputs"]}, "id"),
                           ({"id": "v", "inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP64",
                                                    "data": [1, 2, 3, 4]}]}, "inputs[0].shape"),
                           ({"id": "v", "inputs": [{"name": "x", "shape": [2], "datatype": "FP64",
                                                    "data": [1]}]}, "inputs[0].data")):
            r = await h.post("/v2/models/sample/infer", json=bad, headers=stack.auth("alice"))
            assert r.status_code == 422 and r.json()["field"] == field and isinstance(r.json()["error"], str)
        r = await h.post("/v2/models/sample/infer", content='{"id": "v", "inputs": [{"name": "x", "shape": [1], '
                         '"datatype": "FP64", "data": [NaN]}]}', headers={**stack.auth("alice"),
                                                                          "Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["code"] == "non_finite"
        assert await end_offsets(stack.bootstrap, t.queries) == before


# -- the documented quick start ------------------------------------------------------------------------


def _quick_start_curls() -> list[tuple[str, str]]:
    """(curl command, the output docs/GATEWAY.md shows for it) of the quick start's block."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "GATEWAY.md").read_text()
    block = next(b for b in re.findall(r"```bash\n(.*?)```", text, re.S) if "curl -s" in b)
    out: list[tuple[str, str]] = []
    last = ""
    for line in block.replace("\\\n", " ").splitlines():
        if line.startswith("curl "):
            last = line
        elif line.startswith("#   {") and last:
            out.append((last, line[4:].strip()))
            last = ""
    return out


async def test_the_documented_curl_quick_start_works_as_shown(stack: Stack) -> None:
    import os
    import shutil
    import subprocess

    from everlast.daemon.gateway.auth import new_key

    if shutil.which("curl") is None:
        pytest.skip("curl is not installed")
    key = new_key()
    gw = await start_gateway(gateway_config(stack.cfg, {"quickstart": key}), stack.bootstrap)
    try:
        cmds = _quick_start_curls()
        assert len(cmds) == 2
        for cmd, shown in cmds:
            cmd = cmd.replace("127.0.0.1:8080", f"127.0.0.1:{gw.port}")
            p = await asyncio.create_subprocess_exec("bash", "-c", cmd, env={**os.environ, "KEY": key},
                                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            out, err = await asyncio.wait_for(p.communicate(), 60)
            assert p.returncode == 0, err
            assert json.loads(out) == json.loads(shown), cmd
    finally:
        await gw.stop()
