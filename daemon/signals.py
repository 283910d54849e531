"""What the daemon tells its operator through metrics about a model: its certificate (at start),
and its live state (round, halt, suspension, round progress, burn-rate releases) after every step
that changed it. (Log lines are ``daemon/events.py``'s.)"""

from __future__ import annotations

from prometheus_client import Gauge

from everlast.daemon.metrics import PREFIX, Metrics
from everlast.daemon.model import ModelRuntime
from everlast.daemon.partition import Served
from everlast.engine.phases import Phase

LOST = ("journal", "marks", "checkpoint", "configuration", "broker", "engine")
"""What a suspension says was lost (``everlast_model_suspended_lost``'s ``lost`` label: a fixed set)."""


def lost_of(reason: str) -> str:
    """The kind of a suspension's reason (its own words name what was lost, first match wins)."""
    if "engine failed" in reason:
        return "engine"
    if "marks file" in reason:
        return "marks"
    if "journal" in reason:
        return "journal"
    if "bound to other data" in reason or "other settings" in reason or "mechanism" in reason or (
            "partitions" in reason and "written" in reason):
        return "configuration"
    if "checkpoint" in reason and "broker lost" not in reason and "broker deleted" not in reason:
        return "checkpoint"
    return "broker"


def _lost_gauge(g: Metrics) -> Gauge:
    gauge = getattr(g, "_suspended_lost", None)
    if gauge is None:
        gauge = Gauge(f"{PREFIX}_model_suspended_lost", "1 for a suspended model, by what its reason says was lost "
                      "(journal, marks, checkpoint, configuration, broker, engine)", ["model", "lost"],
                      registry=g.registry)
        g._suspended_lost = gauge  # type: ignore[attr-defined]
    return gauge


def publish(g: Metrics, m: Served, runtime: ModelRuntime | None, expose_halts_used: bool) -> None:
    """A served model's gauges (``runtime``: its configuration, for the schedule's public fields)."""
    g.suspended.labels(model=m.id).set(0 if m.suspension is None else 1)
    if m.suspension is not None:
        lost = lost_of(m.suspension.reason)
        for kind in LOST:
            _lost_gauge(g).labels(model=m.id, lost=kind).set(1 if kind == lost else 0)
    if not m.engine.has_rounds:  # no round, halt or round-progress series (everlast_model_info says so)
        return
    g.round.labels(model=m.id).set(m.round)
    g.halted.labels(model=m.id).set(1 if m.phase is Phase.HALTED else 0)
    g.paused.labels(model=m.id).set(1 if m.phase is Phase.PAUSED else 0)
    if m.broken:
        return
    info = m.engine.round_info()
    if info is None:
        return
    g.round_answered.labels(model=m.id).set(info.answered)
    g.round_allowed.labels(model=m.id).set(info.allowed)
    g.halts_allowed.labels(model=m.id).set(info.halt_cap)
    sched = runtime.schedule if runtime is not None else None
    spec = sched.spec(m.round) if sched is not None else None
    if spec is not None and spec.halt_threshold is not None:
        g.halt_threshold.labels(model=m.id).set(spec.halt_threshold)
    if sched is not None and sched.burn is not None:
        windows, noisy = m.burn.of_round(m.round)
        g.burn_noisy_tops.labels(model=m.id).set(noisy)
        g.burn_queries.labels(model=m.id).set(windows * sched.burn.window)
    if expose_halts_used:
        g.halts_used.labels(model=m.id).set(info.tops)


def publish_guarantee(metrics: Metrics, m: ModelRuntime) -> None:
    """The model's certificate and public description as metrics (at start, and again when a restored
    checkpoint runs another schedule than the configuration's)."""
    g = m.guarantee
    metrics.eps.labels(model=m.id, protects="training").set(g.epsilon_training)
    metrics.eps.labels(model=m.id, protects="queries").set(g.epsilon_queries)
    metrics.delta.labels(model=m.id, protects="training").set(g.delta)
    metrics.delta.labels(model=m.id, protects="queries").set(g.delta)
    metrics.describe(m.id, m.mechanism, m.cfg.concept, m.n_train, g.details)


def client_tests_line(details: dict[str, object]) -> str:
    """The per-client quotas and burn-rate signal a GenericBBL model runs (charged in its query epsilon
    by Theorem Q+, docs/privacy/genericbbl.md 5.5), in words."""
    q, b = details.get("quotas"), details.get("burn")
    parts = []
    if isinstance(q, dict):
        parts.append(f"per-client quotas on (share {q['share']:g} of the halting threshold, eps_q {q['eps']:g})")
    else:
        parts.append("per-client quotas off")
    if isinstance(b, dict):
        parts.append(f"burn-rate signal on (a noisy top count per {b['window']:,} queries, eps_b {b['eps']:g})")
    else:
        parts.append("burn-rate signal off")
    charged = " (both charged in the query epsilon, Theorem Q+)" if isinstance(q, dict) and isinstance(b, dict) \
        else " (charged in the query epsilon, Theorem Q+)" if isinstance(q, dict) or isinstance(b, dict) else ""
    return ", ".join(parts) + charged
