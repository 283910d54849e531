"""Prometheus metrics and the health endpoints.

Every metric but two groups is public information (counts of queries and records, rounds, schedule
parameters, the planner's guarantee) or a function of what the mechanism releases (labels, refusals
and their reasons, pauses (where a round's halting test fired: its refusals release it), halts, after
which query a client's quota fired, the burn-rate releases). Nothing
is computed from votes, training data or query values, and no label holds a client id (label values
come from fixed sets: model ids, statuses, reason codes, partitions).

The two exceptions (docs/privacy/genericbbl.md 8):

* the count of tops used in the current round moves with each query's outcome, so it is *not*
  exported unless ``metrics.expose_halts_used`` is set;
* timings and CPU (batch, transition and checkpoint seconds, ``process_*``) and the consumer lag
  are functions of the data (a round transition's exact samplers run a data-dependent number of
  steps, and a partition's lag grows for as long as its transition pauses it: one scrape reads the
  pause's duration times the arrival rate): operator-only, for readers who own the data;
  ``metrics.expose_timings = false`` registers none of them.

The other series' *values* are public counts or functions of released outputs, but their *time
course* still shows when rounds change (and how long a partition stood still) at scrape
resolution: a deployment that must hide transition timing keeps ``/metrics`` private
(docs/privacy/genericbbl.md 8).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, ProcessCollector, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from everlast.daemon.wire import CODES

PREFIX = "everlast"


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None, expose_timings: bool = True) -> None:
        r = self.registry = registry or CollectorRegistry()
        timed = r if expose_timings else CollectorRegistry()  # not exported: observed and dropped
        self._records(r)
        self._rounds(r)
        self._guarantees(r)
        self._timings(timed)
        self._operations(r)
        self._clients(r)
        ProcessCollector(registry=timed)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
        self.scrapes = 0
        """/metrics requests served (the exit path waits for one after a failure)."""

    def _records(self, r: CollectorRegistry) -> None:
        """Query records: outcomes, malformed records, dead letters."""
        self.build = Info(f"{PREFIX}_build", "Build information", registry=r)
        self.queries = Counter(f"{PREFIX}_queries_total", "Query records by outcome", ["model", "status"], registry=r)
        self.invalid = Counter(
            f"{PREFIX}_invalid_records_total", "Malformed query records by reason", ["reason"], registry=r
        )
        self.dead_letters = Counter(
            f"{PREFIX}_dead_letters_total", "Records sent to the dead-letter topic", ["reason"], registry=r
        )

    def _rounds(self, r: CollectorRegistry) -> None:
        """A model's round, its counters and its state (halted, suspended)."""
        self.rounds_completed = Counter(
            f"{PREFIX}_rounds_completed_total", "Round transitions completed", ["model"], registry=r
        )
        self.round = Gauge(f"{PREFIX}_round", "Current round of the model", ["model"], registry=r)
        self.round_answered = Gauge(
            f"{PREFIX}_round_queries_answered", "Queries answered in the current round", ["model"], registry=r
        )
        self.round_allowed = Gauge(
            f"{PREFIX}_round_queries_allowed", "Queries the current round answers (R_i)", ["model"], registry=r
        )
        self.halts_allowed = Gauge(
            f"{PREFIX}_round_halts_allowed", "Top outcomes the current round allows (c_i)", ["model"], registry=r
        )
        self.halts_used = Gauge(
            f"{PREFIX}_round_halts_used",
            "Top outcomes used in the current round (only if expose_halts_used)",
            ["model"],
            registry=r,
        )
        self.halted = Gauge(
            f"{PREFIX}_model_halted", "1 if the model has failed and refuses every query", ["model"], registry=r
        )
        self.paused = Gauge(
            f"{PREFIX}_round_paused",
            "1 while the current round is paused: its halt budget is spent, every query is refused (round-paused) "
            "until the round's R_i queries are in, then the next round answers again (a round that pauses and "
            "ends within one batch is never seen paused here: everlast_rounds_paused_total counts every pause)",
            ["model"],
            registry=r,
        )
        self.rounds_paused = Counter(
            f"{PREFIX}_rounds_paused_total",
            "Rounds that paused: their halting test fired before their last position, so their "
            "remaining queries were refused (round-paused); counted also when the round ended in "
            "the same batch",
            ["model"], registry=r,
        )
        self.paused_refusals = Counter(
            f"{PREFIX}_round_paused_refusals_total",
            "Queries refused because their round was paused (round-paused); they still enter the round's D-hat",
            ["model"],
            registry=r,
        )
        self.suspended = Gauge(
            f"{PREFIX}_model_suspended",
            "1 if the model is suspended (its state may lag published answers, or its engine failed): it refuses "
            "every query until an operator acts",
            ["model"],
            registry=r,
        )

    def _guarantees(self, r: CollectorRegistry) -> None:
        """The certificate each model runs under."""
        self.eps = Gauge(
            f"{PREFIX}_guarantee_epsilon",
            "Epsilon the running configuration guarantees (planner; +Inf: none)",
            ["model", "protects"],
            registry=r,
        )
        self.delta = Gauge(
            f"{PREFIX}_guarantee_delta", "Delta of the guarantee (planner)", ["model", "protects"], registry=r
        )

    def _timings(self, timed: CollectorRegistry) -> None:
        """Timing series (a function of the data: exported only with expose_timings)."""
        self.transition_seconds = Histogram(
            f"{PREFIX}_round_transition_seconds",
            "Duration of a round transition (a function of the data: operator-only)",
            ["model"],
            buckets=(0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 1800),
            registry=timed,
        )
        self.batch_seconds = Histogram(
            f"{PREFIX}_batch_seconds",
            "Fetch-to-ack latency of a processed batch (operator-only: transitions on other partitions share the CPU)",
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10),
            registry=timed,
        )
        self.lag = Gauge(  # a timing series: it grows for as long as a transition pauses the partition
            f"{PREFIX}_consumer_lag_records",
            "High watermark minus processed offset (operator-only: it grows while a transition pauses the partition)",
            ["partition"],
            registry=timed,
        )
        self.checkpoint_seconds = Histogram(
            f"{PREFIX}_checkpoint_seconds", "Duration of a checkpoint write (operator-only)", registry=timed
        )

    def _operations(self, r: CollectorRegistry) -> None:
        """The replica: checkpoints, broker, models and their public description."""
        self.checkpoint_failures = Counter(
            f"{PREFIX}_checkpoint_failures_total", "Checkpoint writes (or reads) that failed", registry=r
        )
        self.broker_up = Gauge(f"{PREFIX}_broker_up", "1 while the broker answers", registry=r)
        self.log_resets = Counter(
            f"{PREFIX}_log_resets_total", "Partitions whose log went backwards (broker lost data)", registry=r
        )
        self.models_active = Gauge(f"{PREFIX}_models_active", "Models served by this replica", registry=r)
        self.model = Info(
            f"{PREFIX}_model",
            "Each configured model's mechanism and whether it has rounds and can halt (public configuration)",
            ["model"],
            registry=r,
        )
        self.training_examples = Gauge(
            f"{PREFIX}_training_examples", "Size n of the model's training set (public)", ["model"], registry=r
        )
        self.accuracy = Gauge(
            f"{PREFIX}_guarantee_accuracy",
            "Private learner: alpha = the error the realizable bound proves at n (only if the labels are those of a "
            "hypothesis of the class; for trees, of one stump), agnostic_excess = the agnostic bound's excess over "
            "its comparator (the best hypothesis of the class; for trees, the greedy completion of the released "
            "tree), beta = their failure probability; validated = the released model's error bound measured on the "
            "held-out share (Theorem V), validated_beta = its failure probability; all bounds assume the "
            "training set is n i.i.d. draws from the distribution the queries come from",
            ["model", "quantity"],
            registry=r,
        )

    def _clients(self, r: CollectorRegistry) -> None:
        """Per-client quotas, the burn-rate signal and the halting threshold."""
        self.quota_refusals = Counter(
            f"{PREFIX}_client_quota_refusals_total",
            "Queries refused because their client spent its share of the round's halt budget (client-quota)",
            ["model"],
            registry=r,
        )
        self.quota_fired = Counter(
            f"{PREFIX}_client_quota_fired_total",
            "Clients cut off for the rest of a round by their quota test (the log names each one)",
            ["model"],
            registry=r,
        )
        self.burn_noisy_tops = Gauge(
            f"{PREFIX}_round_burn_noisy_tops",
            "The round's burn-rate releases summed: a differentially private estimate of the tops spent in "
            "the windows released so far (Theorem Q+)",
            ["model"],
            registry=r,
        )
        self.burn_queries = Gauge(
            f"{PREFIX}_round_burn_queries",
            "Queries of the round covered by its released burn-rate windows (windows x W)",
            ["model"],
            registry=r,
        )
        self.halt_threshold = Gauge(
            f"{PREFIX}_round_halt_threshold",
            "The halting test's threshold c0 of the current round: the model halts near this many tops (schedule)",
            ["model"],
            registry=r,
        )

    def declare(self, models: Iterable[str], without_rounds: Collection[str] = (),
                with_burn: Collection[str] = ()) -> None:
        """Create every labelled series at zero, so that ``rate()`` and ``increase()`` see the first
        refusal, dead letter or transition instead of a series that appears with it. A model of a
        mechanism without rounds (``without_rounds``: the private learner) gets no round or halt
        series at all: it never transitions or halts (``everlast_model_info`` says so); a model
        without the burn-rate signal (not in ``with_burn``) gets no burn series (the alerts on them
        have no data for it)."""
        for m in models:
            for status in ("ok", "refused", "invalid"):
                self.queries.labels(model=m, status=status)
            self.suspended.labels(model=m).set(0)
            if m in without_rounds:
                continue
            self.rounds_completed.labels(model=m)
            self.transition_seconds.labels(model=m)
            self.halted.labels(model=m).set(0)
            self.paused.labels(model=m).set(0)
            self.rounds_paused.labels(model=m)
            self.paused_refusals.labels(model=m)
            self.quota_refusals.labels(model=m)
            self.quota_fired.labels(model=m)
            if m in with_burn:
                self.burn_noisy_tops.labels(model=m).set(0)
                self.burn_queries.labels(model=m).set(0)
        for code in CODES:
            self.invalid.labels(reason=code)
            self.dead_letters.labels(reason=code)

    def describe(self, model: str, mechanism: str, concept: str, n_train: int, details: Mapping[str, Any]) -> None:
        """The model's public description: ``everlast_model_info`` (mechanism, rounds, halts, class,
        domain, per-client quotas and the burn-rate signal on or off), its n, and for the private
        learner the accuracy its certificate proves."""
        learner = mechanism == "private-learner"
        self.model.labels(model=model).info({
            "mechanism": mechanism, "concept": concept,
            "rounds": "none" if learner else "yes", "halts": "never" if learner else "possible",
            "domain": str(details.get("domain_kind", "")),  # float64 | range | grid: a fixed set
            "quotas": "on" if details.get("quotas") else "off",
            "burn": "on" if details.get("burn") else "off",
        })
        self.training_examples.labels(model=model).set(n_train)
        if learner:
            self.accuracy.labels(model=model, quantity="alpha").set(float(details["alpha_proven"]))
            self.accuracy.labels(model=model, quantity="beta").set(float(details["beta"]))
            self.accuracy.labels(model=model, quantity="agnostic_excess").set(float(details["agnostic_excess"]))
            v = details.get("validated")
            if isinstance(v, dict):  # Theorem V: the released model's error bound, w.p. 1 - validated_beta
                self.accuracy.labels(model=model, quantity="validated").set(float(v["bound"]))
                self.accuracy.labels(model=model, quantity="validated_beta").set(float(v["beta"]))


class HealthServer:
    """GET /metrics, /healthz (the loop is alive) and /readyz (serving: broker up, models restored)."""

    def __init__(self, metrics: Metrics, live: Callable[[], bool], ready: Callable[[], bool],
                 not_ready: Callable[[], str | None] | None = None) -> None:
        self.metrics, self.live, self.ready = metrics, live, ready
        self.not_ready = not_ready
        self.server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        self.server = await asyncio.start_server(self._handle, host, port)
        return int(self.server.sockets[0].getsockname()[1])

    async def linger(self, timeout_s: float, stop: asyncio.Event, seen: int | None = None) -> None:
        """After a failure: keep serving until a scrape of /metrics after the failure (``seen``:
        the scrape count when it happened, default now) has read the final counters, ``timeout_s``
        has passed, or ``stop`` is set."""
        seen = self.metrics.scrapes if seen is None else seen
        deadline = time.monotonic() + timeout_s
        while self.metrics.scrapes == seen and time.monotonic() < deadline and not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)

    async def stop(self) -> None:
        if self.server is not None:
            self.server.close()
            with contextlib.suppress(Exception):
                await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode("latin-1").split()
            path = parts[1].split("?")[0] if len(parts) >= 2 else ""
            if path == "/metrics":
                status, ctype, body = "200 OK", CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)
                self.metrics.scrapes += 1
            elif path == "/healthz":
                ok = self.live()
                status, ctype, body = (
                    ("200 OK" if ok else "503 Service Unavailable"),
                    "text/plain",
                    (b"ok\n" if ok else b"stalled\n"),
                )
            elif path == "/readyz":
                ok = self.ready()
                why = self.not_ready() if self.not_ready is not None and not ok else None
                status, ctype, body = (
                    ("200 OK" if ok else "503 Service Unavailable"),
                    "text/plain",
                    (b"ready\n" if ok else f"not ready: {why}\n".encode() if why else b"not ready\n"),
                )
            else:
                status, ctype, body = "404 Not Found", "text/plain", b"not found\n"
            head = f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
            writer.write((head + "Connection: close\r\n\r\n").encode() + body)
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


class Heartbeat:
    """The run loop beats once per iteration; /healthz fails if it has not beaten for ``stall_s``,
    unless work it waits for is running on a worker thread (``busy``: a new model's fit or first
    round, whose duration depends on the data and may exceed ``stall_s``)."""

    def __init__(self, stall_s: float = 60.0) -> None:
        self.stall_s = stall_s
        self.last = time.monotonic()
        self.working = 0

    def beat(self) -> None:
        self.last = time.monotonic()

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """The loop is alive while this runs (it awaits a worker thread); it beats again on exit."""
        self.working += 1
        try:
            yield
        finally:
            self.working -= 1
            self.beat()

    def alive(self) -> bool:
        return self.working > 0 or time.monotonic() - self.last < self.stall_s
