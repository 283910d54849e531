"""The client-id guard: every label a client received answers a query record the gateway stamped
with that client (its header, the only one) carrying the point that client sent, and is the first
label the daemon published for that record. Run against the real gateway it finds nothing; against
the broken variants below (kept as tests) it finds their leak."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from everlast.daemon.gateway.app import Gateway
from everlast.daemon.gateway.auth import Authenticator, Denied
from everlast.daemon.gateway.relay import Id, Relay
from tests.gateway.kafka_view import records, value


@dataclass(frozen=True)
class Sent:
    client: str
    qid: Id
    x: float
    got: dict[str, Any]
    """The label record the gateway returned for it."""


async def violations(bootstrap: str, queries_topic: str, labels_topic: str, header: str,
                     sent: list[Sent]) -> list[str]:
    qs = await records(bootstrap, queries_topic)
    first: dict[str, dict[str, Any]] = {}
    for r in await records(bootstrap, labels_topic):
        v = value(r)
        if isinstance(v, dict) and isinstance(v.get("id"), str):
            first.setdefault(v["id"], v)
    by_rid: dict[str, list[Any]] = {}
    for r in qs:
        v = value(r)
        by_rid.setdefault(v["id"], []).append((r, v))
    out = []
    for s in sent:
        ok = False
        for rid, recs in by_rid.items():
            for r, v in recs:
                if list(r.headers) != [(header, s.client.encode())] or set(v) != {"id", "x"} or v["x"] != s.x:
                    continue
                lab = first.get(rid)
                if lab is not None and {**lab, "id": s.qid} == s.got:
                    ok = True
        if not ok:
            out.append(f"{s.client}'s query {s.qid!r}: no query record of {s.client} with its point has the label "
                       "it received")
    for rid, recs in by_rid.items():
        for r, _ in recs:
            if sum(1 for k, _ in r.headers if k == header) != 1:
                out.append(f"record {rid}: {header} header not exactly once")
    return out


class _TrustingAuth(Authenticator):
    def authenticate(self, headers: Mapping[str, str], peercert: Any) -> str | Denied:
        got = super().authenticate(headers, peercert)
        claimed = headers.get("everlast-client")
        return claimed if claimed and not isinstance(got, Denied) else got


class TrustingGateway(Gateway):
    """BROKEN on purpose: authenticates, then believes the client's ``everlast-client`` header."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.auth = _TrustingAuth(self.g.keys)


class _SharedIds(Relay):
    @staticmethod
    def record_id(client: str, qid: Id) -> str:
        return f"any:{'i' if isinstance(qid, int) else 's'}{qid}"


class SharedIdGateway(Gateway):
    """BROKEN on purpose: query ids are not namespaced by client (one client's id finds another's label)."""

    def __init__(self, cfg: Any, *, bootstrap: str | None = None) -> None:
        super().__init__(cfg, bootstrap=bootstrap)
        self.relay = _SharedIds(cfg, list(self.specs), bootstrap)
