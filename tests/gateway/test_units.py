"""The gateway's pure parts: credentials, client-id normalisation, the request schema, the limits."""

from __future__ import annotations

import json

import numpy as np
import pytest

from everlast.daemon.config import ApiKeyConfig, ConfigError, load
from everlast.daemon.gateway import schema
from everlast.daemon.gateway.auth import (
    BAD_CERT_NAME,
    BAD_CREDENTIAL,
    NO_CREDENTIAL,
    Authenticator,
    client_of_certificate,
    key_hash,
    new_key,
    normalise_client,
)
from everlast.daemon.gateway.limits import Limits
from everlast.daemon.gateway.relay import record_id

SPEC = schema.ModelSpec("m", 1)


def test_a_key_authenticates_its_client_only_while_it_is_not_revoked() -> None:
    k1, k2, k3 = new_key(), new_key(), new_key()
    assert k1.startswith("evk_") and len(k1) == 47 and k1 != k2
    a = Authenticator([ApiKeyConfig(client="alice", sha256=key_hash(k1)),
                       ApiKeyConfig(client="alice", sha256=key_hash(k2)),  # rotation: one client, two keys
                       ApiKeyConfig(client="bob", sha256=key_hash(k3), revoked=True)])
    assert a.authenticate({"Authorization": f"Bearer {k1}"}, None) == "alice"
    assert a.authenticate({"Authorization": f"bearer  {k2}"}, None) == "alice"
    assert a.authenticate({"Authorization": f"Bearer {k3}"}, None) is BAD_CREDENTIAL
    assert a.authenticate({"Authorization": f"Bearer {k1}x"}, None) is BAD_CREDENTIAL
    assert a.authenticate({"Authorization": k1}, None) is BAD_CREDENTIAL
    assert a.authenticate({}, None) is NO_CREDENTIAL
    assert a.authenticate({"everlast-client": "alice"}, None) is NO_CREDENTIAL
    assert a.clients == {"alice"}
    for d in (BAD_CREDENTIAL, NO_CREDENTIAL):
        assert k1 not in d.message


def test_client_ids_are_normalised_and_bounded() -> None:
    assert normalise_client("Alice") == normalise_client(" alice ") == normalise_client("ＡＬＩＣＥ") == "alice"
    for bad in ("", "a:b", "a b", "-a", "x" * 65, "ä", "a/b"):
        assert normalise_client(bad) is None, bad
    assert normalise_client("x" * 64) == "x" * 64
    assert client_of_certificate({"subject": ((("commonName", "Carol"),),)}) == "carol"
    assert client_of_certificate({"subject": ((("commonName", "a"),), (("commonName", "b"),))}) is BAD_CERT_NAME
    assert client_of_certificate({"subject": ()}) is BAD_CERT_NAME
    # record ids: no client id has a ':', so the prefix names the client
    assert record_id("a", "b:c") != record_id("a:b", "c") and record_id("a", 1) != record_id("a", "1")


def test_the_config_takes_key_hashes_only_in_normal_form(tmp_path: object) -> None:
    h = key_hash(new_key())
    assert load(None, {"gateway": {"keys": [{"client": "alice", "sha256": h}]}}).gateway.keys[0].client == "alice"
    for bad in ({"client": "Alice", "sha256": h}, {"client": "alice", "sha256": "evk_notahash"},
                {"client": "a:b", "sha256": h}):
        with pytest.raises(ConfigError, match=r"gateway\.keys"):
            load(None, {"gateway": {"keys": [bad]}})
    with pytest.raises(ConfigError, match="twice"):
        load(None, {"gateway": {"keys": [{"client": "a", "sha256": h}, {"client": "b", "sha256": h}]}})
    with pytest.raises(ConfigError, match="client_burst"):
        load(None, {"gateway": {"max_queries": 100, "client_burst": 10}})


def _p(body: object, spec: schema.ModelSpec = SPEC, max_queries: int = 10) -> schema.Parsed | schema.Problem:
    return schema.parse(body if isinstance(body, bytes) else json.dumps(body).encode(), spec, max_queries)


def test_the_schema_accepts_one_query_or_a_batch() -> None:
    one = _p({"id": "a", "x": 0.5, "client": "ignored"})
    assert isinstance(one, schema.Parsed) and one.single and one.ids == ["a"] and one.x.tolist() == [0.5]
    b = _p({"queries": [{"id": 1, "x": [0.25]}, {"id": "1", "x": 3}], "client": "x"})
    assert isinstance(b, schema.Parsed) and not b.single and b.ids == [1, "1"] and b.x.tolist() == [0.25, 3.0]
    two = _p({"queries": [{"id": 1, "x": [1, 2]}]}, schema.ModelSpec("m", 2))
    assert isinstance(two, schema.Parsed) and two.x.shape == (1, 2)


@pytest.mark.parametrize(("body", "status", "field", "code"), [
    (b"[1, 2", 400, "body", "undecodable"),
    ([1, 2], 422, "body", "schema"),
    ({"queries": {"id": 1}}, 422, "queries", "schema"),
    ({"queries": [{"id": 1, "x": 0.5}] * 11}, 413, "queries", "too_many_queries"),
    ({"queries": [{"id": 1, "x": 0.5}, {"id": 2, "x": [0.5, 1]}]}, 422, "queries[1].x", "dimension"),
    (b'{"queries": [{"id": 1, "x": Infinity}]}', 422, "queries[0].x", "non_finite"),
    ({"id": 1, "x": 10**400}, 422, "x", "non_finite"),
    ({"id": 2**63, "x": 0.5}, 422, "id", "schema"),
    ({"id": None, "x": 0.5}, 422, "id", "schema"),
    ({"id": 1, "x": []}, 422, "x", "schema"),
    ({"id": 1, "x": [True]}, 422, "x", "schema"),
    ({"queries": [{"id": 1, "x": 0.5}], "extra": 1}, 422, "body", "schema"),
])
def test_the_schema_names_the_field(body: object, status: int, field: str, code: str) -> None:
    p = _p(body)
    assert isinstance(p, schema.Problem) and (p.status, p.field, p.code) == (status, field, code), p


def test_a_learner_domain_is_checked_at_the_gateway() -> None:
    from everlast.engine.learner.domain import Domain

    spec = schema.ModelSpec("m", 1, Domain.from_spec({"kind": "range", "lo": 0.0, "hi": 1.0}))
    assert isinstance(_p({"queries": [{"id": 1, "x": 0.5}]}, spec), schema.Parsed)
    p = _p({"queries": [{"id": 1, "x": 0.5}, {"id": 2, "x": 1.5}]}, spec)
    assert isinstance(p, schema.Problem) and (p.field, p.code) == ("queries[1].x", "domain")


def test_limits_refill_and_bound_in_flight() -> None:
    t = [0.0]
    lim = Limits(qps=10.0, burst=20, inflight=2, clock=lambda: t[0])
    assert lim.take("a", 20) is None and lim.take("a", 1) == 1
    assert lim.take("b", 20) is None  # per client
    t[0] = 1.0
    assert lim.take("a", 20) == 1 and lim.take("a", 10) is None
    assert lim.enter("a") is None and lim.enter("a") is None and lim.enter("a") == 1
    lim.leave("a")
    assert lim.enter("a") is None
    assert np.isfinite(lim.qps)
