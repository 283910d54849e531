"""The gateway's HTTP service (aiohttp): ``POST /v1/models/{model}/predict``, ``/healthz``,
``/readyz``, ``/openapi.json``; ``/metrics`` on its own port.

A predict request is checked in this order, each failure answered before anything is produced:
credential (401), model (404), content type (415), size (413), schema (400/422, naming the field),
the client's in-flight and rate limits (429 with Retry-After), readiness (503 with Retry-After). Then
``relay.Relay`` answers it (200), or 504 when some labels did not arrive within ``gateway.timeout_s``
(those queries are accepted: a retry with the same ids returns their labels), or 503 when the broker
did not acknowledge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import ssl
import time
from typing import Any

import msgspec
from aiohttp import ClientSession, ClientTimeout, web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from everlast.daemon.config import Config, GatewayConfig, ModelConfig
from everlast.daemon.gateway import schema
from everlast.daemon.gateway.auth import Authenticator, Denied
from everlast.daemon.gateway.limits import Limits
from everlast.daemon.gateway.metrics import GatewayMetrics
from everlast.daemon.gateway.openapi import document
from everlast.daemon.gateway.relay import Label, Relay, Unavailable

log = logging.getLogger("everlast.gateway")
_ENC = msgspec.json.Encoder()


def model_spec(m: ModelConfig) -> schema.ModelSpec:
    """What the gateway checks of a model's queries, from its configuration alone."""
    dim = m.d if m.concept in ("stumps", "trees") else 1
    domain = None
    if m.mechanism == "private-learner" and m.learner is not None:
        from everlast.engine.learner.domain import Domain

        d = Domain.from_spec(m.learner.domain_spec())
        domain = None if d.kind == "float64" else d
    return schema.ModelSpec(m.id, dim, domain)


def _json(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=_ENC.encode(obj), status=status, content_type="application/json", headers=headers)


def _problem(p: schema.Problem, headers: dict[str, str] | None = None, v2: bool = False) -> web.Response:
    if v2:  # the Open Inference Protocol's error body: {"error": "<message>"} (the field and code beside it)
        return _json({"error": f"{p.field}: {p.message}", "code": p.code, "field": p.field}, p.status, headers)
    return _json(p.to_json(), p.status, headers)


def _record(qid: schema.Id, lab: Label) -> dict[str, Any]:
    out: dict[str, Any] = {"id": qid, "label": lab[0], "status": lab[1], "round": lab[2]}
    if lab[3] is not None:
        out["reason"] = lab[3]
    return out


class Gateway:
    def __init__(self, cfg: Config, *, bootstrap: str | None = None) -> None:
        self.cfg = cfg
        g: GatewayConfig = cfg.gateway
        self.g = g
        self.specs = {m.id: model_spec(m) for m in cfg.models}
        certs = g.tls is not None and g.tls.client_ca is not None
        self.auth = Authenticator(g.keys, certificates=certs)
        self.limits = Limits(g.client_qps, g.client_burst, g.client_inflight)
        self.relay = Relay(cfg, list(self.specs), bootstrap)
        self.metrics = GatewayMetrics()
        self.metrics.clients.set(len(self.auth.clients))
        self.daemon_up = not g.daemon_readyz
        self.inflight = 0
        self._openapi = _ENC.encode(document(g.max_queries, g.max_body_bytes, g.timeout_s))
        self._health: asyncio.Task[None] | None = None
        self._runners: list[web.AppRunner] = []
        self.port = 0
        self.metrics_port = 0

    # -- readiness ----------------------------------------------------------------------------------

    def not_ready(self) -> str | None:
        if not self.relay.broker_up:
            return "the broker is unreachable"
        if not self.relay.caught_up:
            return "building the labels index from the labels topic"
        if not self.daemon_up:
            return "no daemon answers its /readyz"
        return None

    async def _health_loop(self) -> None:
        g = self.g
        async with ClientSession(timeout=ClientTimeout(total=max(0.5, g.health_interval_s * 2))) as http:
            while True:
                await self.relay.probe(max(0.5, g.health_interval_s * 2))
                if g.daemon_readyz:
                    self.daemon_up = any(await asyncio.gather(*(self._ok(http, u) for u in g.daemon_readyz)))
                m = self.metrics
                m.broker_up.set(self.relay.broker_up)
                m.daemon_up.set(self.daemon_up)
                m.ready.set(self.not_ready() is None)
                m.index.set(len(self.relay.index))
                await asyncio.sleep(g.health_interval_s)

    @staticmethod
    async def _ok(http: ClientSession, url: str) -> bool:
        try:
            async with http.get(url) as r:
                return r.status == 200
        except Exception:  # unreachable, refused, timed out: not ready
            return False

    # -- routes ---------------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.g.max_body_bytes, middlewares=[self._observe])
        app.router.add_post("/v1/models/{model}/predict", self.predict, name="predict")
        app.router.add_post("/v2/models/{model}/infer", self.infer, name="infer")
        app.router.add_get("/v2/models/{model}", self.v2_metadata, name="infer-metadata")
        app.router.add_get("/healthz", self.healthz, name="healthz")
        app.router.add_get("/readyz", self.readyz, name="readyz")
        app.router.add_get("/v2/health/live", self.healthz, name="healthz-v2")
        app.router.add_get("/v2/health/ready", self.readyz, name="readyz-v2")
        app.router.add_get("/openapi.json", self.openapi, name="openapi")
        return app

    @web.middleware
    async def _observe(self, request: web.Request, handler: Any) -> web.StreamResponse:
        t0 = time.perf_counter()
        route = request.match_info.route.name or "other"
        code = 500
        try:
            resp: web.StreamResponse = await handler(request)
            code = resp.status
            return resp
        except web.HTTPException as exc:  # aiohttp's own (404 of an unknown path, 405): JSON, no echo
            code = exc.status
            return _json({"error": {"code": "not_found" if code == 404 else "method", "field": "path",
                                    "message": exc.reason}}, code)
        finally:
            self.metrics.requests.labels(route, str(code)).inc()
            self.metrics.seconds.labels(route).observe(time.perf_counter() - t0)

    async def healthz(self, request: web.Request) -> web.Response:
        if self.relay.alive():
            return web.Response(text="ok\n")
        return web.Response(text="the labels reader stopped\n", status=500)

    async def readyz(self, request: web.Request) -> web.Response:
        why = self.not_ready()
        return web.Response(text="ready\n") if why is None else web.Response(text=why + "\n", status=503)

    async def v2_metadata(self, request: web.Request) -> web.Response:
        """The Open Inference Protocol's model metadata (a credential is needed, as for predicts)."""
        peer = request.transport.get_extra_info("peercert") if request.transport is not None else None
        client = self.auth.authenticate(request.headers, peer)
        if isinstance(client, Denied):
            return self._reject("unauthenticated", schema.Problem(401, "unauthenticated", "credential",
                                                                  client.message), {"WWW-Authenticate": "Bearer"}, True)
        spec = self.specs.get(request.match_info["model"])
        if spec is None:
            return self._reject("unknown_model", schema.Problem(404, "unknown_model", "model",
                                                                "no model with this id is served"), None, True)
        shape = [-1] if spec.dim == 1 else [-1, spec.dim]
        return _json({"name": spec.id, "platform": "everlast", "versions": [],
                      "inputs": [{"name": "x", "datatype": "FP64", "shape": shape}],
                      "outputs": [{"name": "label", "datatype": "INT8", "shape": [-1]},
                                  {"name": "status", "datatype": "BYTES", "shape": [-1]},
                                  {"name": "round", "datatype": "INT64", "shape": [-1]},
                                  {"name": "reason", "datatype": "BYTES", "shape": [-1]}]})

    async def openapi(self, request: web.Request) -> web.Response:
        return web.Response(body=self._openapi, content_type="application/json")

    def _reject(self, reason: str, p: schema.Problem, headers: dict[str, str] | None = None,
                v2: bool = False) -> web.Response:
        self.metrics.rejected.labels(reason).inc()
        return _problem(p, headers, v2)

    async def predict(self, request: web.Request) -> web.Response:
        """``POST /v1/models/{model}/predict``."""
        return await self._guarded(request, v2=False)

    async def infer(self, request: web.Request) -> web.Response:
        """``POST /v2/models/{model}/infer`` (the Open Inference Protocol's REST shape)."""
        return await self._guarded(request, v2=True)

    async def _guarded(self, request: web.Request, v2: bool) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport is not None else None
        client = self.auth.authenticate(request.headers, peer)
        if isinstance(client, Denied):
            return self._reject("unauthenticated", schema.Problem(401, "unauthenticated", "credential",
                                                                  client.message), {"WWW-Authenticate": "Bearer"}, v2)
        spec = self.specs.get(request.match_info["model"])
        if spec is None:
            return self._reject("unknown_model", schema.Problem(404, "unknown_model", "model",
                                                                "no model with this id is served"), None, v2)
        if request.content_type != "application/json":
            return self._reject("content_type", schema.Problem(415, "content_type", "content-type",
                                                               "the body must be application/json"), None, v2)
        if request.content_length is not None and request.content_length > self.g.max_body_bytes:
            return self._too_large(v2)
        wait = self.limits.enter(client)
        if wait is not None:
            return self._reject("inflight", schema.Problem(
                429, "inflight", "credential", f"this client has {self.g.client_inflight} requests in progress "
                                               "(gateway.client_inflight)"), {"Retry-After": str(wait)}, v2)
        try:
            if self.inflight >= self.g.inflight:
                return self._reject("unavailable", schema.Problem(503, "busy", "gateway", "too many requests in "
                                                                  "progress"), {"Retry-After": "1"}, v2)
            self.inflight += 1
            self.metrics.inflight.set(self.inflight)
            try:
                return await self._predict(request, client, spec, v2)
            finally:
                self.inflight -= 1
                self.metrics.inflight.set(self.inflight)
        finally:
            self.limits.leave(client)

    def _too_large(self, v2: bool = False) -> web.Response:
        return self._reject("too_large", schema.Problem(413, "too_large", "body", f"the body exceeds "
                                                        f"{self.g.max_body_bytes} bytes (gateway.max_body_bytes)"),
                            None, v2)

    async def _predict(self, request: web.Request, client: str, spec: schema.ModelSpec, v2: bool) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return self._too_large(v2)
        request_id = ""
        if v2:
            got = schema.parse_v2(body, spec, self.g.max_queries)
            if isinstance(got, schema.Problem):
                return self._reject("too_large" if got.status == 413 else "bad_request", got, None, True)
            request_id, parsed = got
        else:
            p1 = schema.parse(body, spec, self.g.max_queries)
            if isinstance(p1, schema.Problem):
                return self._reject("too_large" if p1.status == 413 else "bad_request", p1)
            parsed = p1
        n = len(parsed.ids)
        wait = self.limits.take(client, n)
        if wait is not None:
            return self._reject("rate", schema.Problem(
                429, "rate", "queries", f"this client's rate limit ({self.g.client_qps:g} queries/s, bursts of "
                                        f"{self.g.client_burst}) is spent"), {"Retry-After": str(wait)}, v2)
        why = self.not_ready()
        if why is not None:
            return self._reject("unavailable", schema.Problem(503, "unavailable", "gateway", why),
                                {"Retry-After": "1"}, v2)
        try:
            out = await self.relay.predict(spec.id, client, parsed.ids, parsed.x, self.g.timeout_s)
        except Unavailable:
            return self._reject("unavailable", schema.Problem(
                503, "unavailable", "gateway", "the broker did not acknowledge the queries in time: retry with "
                                               "the same ids (a query that was written is answered once)"),
                {"Retry-After": "1"}, v2)
        m = self.metrics
        m.produced.inc(out.produced)
        m.replayed.inc(out.replayed)
        recs, pending = [], []
        counts: dict[str, int] = {}
        for qid, lab in zip(parsed.ids, out.labels, strict=True):
            if lab is None:
                pending.append(qid)
                continue
            recs.append(_record(qid, lab))
            counts[lab[1]] = counts.get(lab[1], 0) + 1
        for s, k in counts.items():
            m.queries.labels(s if s in ("ok", "refused", "invalid") else "invalid").inc(k)
        if v2:
            return self._v2_response(spec.id, request_id, out.labels)
        if pending:
            m.queries.labels("pending").inc(len(pending))
            return _json({"error": {"code": "timeout", "field": "queries", "message": (
                f"{len(pending)} of {n} labels did not arrive within {self.g.timeout_s:g} s; the queries are "
                "accepted: retry with the same ids to receive their labels")},
                "model": spec.id, "labels": recs, "pending": pending}, 504, {"Retry-After": "1"})
        if parsed.single:
            return _json(recs[0])
        return _json({"model": spec.id, "labels": recs})

    def _v2_response(self, model: str, request_id: str, labels: list[Label | None]) -> web.Response:
        """Output tensors ``label`` (INT8: 0, 1, or -1 when there is no label), ``status`` (BYTES: ok,
        refused, invalid, pending), ``round`` (INT64) and ``reason`` (BYTES, empty when ok)."""
        n = len(labels)
        lab = [-1 if x is None or x[0] is None else int(x[0]) for x in labels]
        st = ["pending" if x is None else x[1] for x in labels]
        rnd = [-1 if x is None else x[2] for x in labels]
        why = ["" if x is None or x[3] is None else x[3] for x in labels]
        out = {"model_name": model, "id": request_id, "outputs": [
            {"name": "label", "datatype": "INT8", "shape": [n], "data": lab},
            {"name": "status", "datatype": "BYTES", "shape": [n], "data": st},
            {"name": "round", "datatype": "INT64", "shape": [n], "data": rnd},
            {"name": "reason", "datatype": "BYTES", "shape": [n], "data": why}]}
        pending = st.count("pending")
        if pending:
            self.metrics.queries.labels("pending").inc(pending)
            out["error"] = (f"{pending} of {n} labels did not arrive within {self.g.timeout_s:g} s; the rows are "
                            "accepted: repeat the request with the same id to receive their labels")
            return _json(out, 504, {"Retry-After": "1"})
        return _json(out)

    async def metrics_handler(self, request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    # -- life -------------------------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext | None:
        t = self.g.tls
        if t is None:
            return None
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(t.certfile), str(t.keyfile))
        if t.client_ca is not None:
            ctx.load_verify_locations(cafile=str(t.client_ca))
            ctx.verify_mode = ssl.CERT_REQUIRED if t.require_client_cert else ssl.CERT_OPTIONAL
        return ctx

    async def start(self) -> None:
        await self.relay.start()
        self._health = asyncio.create_task(self._health_loop(), name="gateway-health")
        runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=self.g.timeout_s + 1)
        await runner.setup()
        site = web.TCPSite(runner, self.g.host, self.g.port, ssl_context=self.ssl_context(), backlog=1024)
        await site.start()
        self._runners.append(runner)
        self.port = _bound_port(site)
        mapp = web.Application()
        mapp.router.add_get("/metrics", self.metrics_handler)
        mrunner = web.AppRunner(mapp, access_log=None)
        await mrunner.setup()
        msite = web.TCPSite(mrunner, self.g.metrics_host, self.g.metrics_port)
        await msite.start()
        self._runners.append(mrunner)
        self.metrics_port = _bound_port(msite)
        scheme = "https" if self.g.tls is not None else "http"
        log.info("gateway on %s://%s:%d (/v1/models/{model}/predict, /healthz, /readyz, /openapi.json); "
                 "metrics on http://%s:%d/metrics; %d client(s) with API keys", scheme, self.g.host, self.port,
                 self.g.metrics_host, self.metrics_port, len(self.auth.clients))

    async def stop(self) -> None:
        for r in self._runners:  # stop accepting; requests in progress finish (up to the timeout)
            with contextlib.suppress(Exception):
                await r.cleanup()
        self._runners.clear()
        if self._health is not None:
            self._health.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._health
        await self.relay.stop()

    async def wait_ready(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.not_ready() is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the gateway was not ready within {timeout_s:g}s: {self.not_ready()}")
            await asyncio.sleep(0.05)


def _bound_port(site: web.TCPSite) -> int:
    server = site._server
    assert server is not None
    return int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]


async def serve(cfg: Config, stop: asyncio.Event | None = None, status: dict[str, Any] | None = None,
                *, handle_signals: bool = True) -> int:
    """Run the gateway until ``stop`` is set or SIGTERM/SIGINT arrives."""
    if cfg.broker.bootstrap_servers is None:
        from everlast.daemon.errors import ConfigError

        raise ConfigError("the gateway needs broker.bootstrap_servers (the daemon's broker): it starts no broker")
    if not cfg.gateway.keys and (cfg.gateway.tls is None or cfg.gateway.tls.client_ca is None):
        log.warning("no gateway.keys and no client certificates: every predict request is refused (401); create a "
                    "key with `everlast gateway-key CLIENT`")
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT) if handle_signals else ():
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    gw = Gateway(cfg)
    await gw.start()
    if status is not None:
        status.update({"gateway": gw, "port": gw.port, "metrics_port": gw.metrics_port})
    try:
        await stop.wait()
    finally:
        await gw.stop()
    return 0
