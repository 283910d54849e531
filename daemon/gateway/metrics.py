"""The gateway's Prometheus series. No label carries a client id, a query id or a value: the label
sets are fixed (routes, HTTP status codes, label statuses, rejection reasons), so the exposition is
bounded whatever the clients send."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

PREFIX = "everlast_gateway"
ROUTES = ("predict", "infer", "infer-metadata", "healthz", "healthz-v2", "readyz-v2", "readyz", "openapi", "other")
STATUSES = ("ok", "refused", "invalid", "pending")
REJECTIONS = ("unauthenticated", "rate", "inflight", "too_large", "bad_request", "unknown_model",
              "content_type", "unavailable")


class GatewayMetrics:
    def __init__(self) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(f"{PREFIX}_requests_total", "HTTP requests by route and status code",
                                ["route", "code"], registry=r)
        self.seconds = Histogram(f"{PREFIX}_request_seconds", "Time from a request's arrival to its response",
                                 ["route"], registry=r,
                                 buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.queries = Counter(f"{PREFIX}_queries_total", "Queries answered, by the label's status (pending: "
                               "no label before the timeout)", ["status"], registry=r)
        self.produced = Counter(f"{PREFIX}_queries_produced_total", "Query records produced to the queries topic",
                                registry=r)
        self.replayed = Counter(f"{PREFIX}_queries_replayed_total", "Queries answered from the index (an id "
                                "already answered)", registry=r)
        self.rejected = Counter(f"{PREFIX}_rejected_total", "Requests refused before anything was produced, by "
                                "reason", ["reason"], registry=r)
        self.inflight = Gauge(f"{PREFIX}_inflight_requests", "Requests in progress", registry=r)
        self.ready = Gauge(f"{PREFIX}_ready", "1 while the gateway accepts queries", registry=r)
        self.broker_up = Gauge(f"{PREFIX}_broker_up", "1 while the broker answers", registry=r)
        self.daemon_up = Gauge(f"{PREFIX}_daemon_up", "1 while a daemon's /readyz answers 200 (or none is "
                               "configured)", registry=r)
        self.index = Gauge(f"{PREFIX}_index_labels", "Labels held for replayed ids", registry=r)
        self.clients = Gauge(f"{PREFIX}_clients", "Client ids with a valid credential", registry=r)
        for route in ROUTES:
            self.seconds.labels(route)
        for s in STATUSES:
            self.queries.labels(s)
        for reason in REJECTIONS:
            self.rejected.labels(reason)
