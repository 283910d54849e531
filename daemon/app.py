"""Start-up and shutdown around the run loop: plan every model (refuse to start when a target
cannot be met), start the embedded broker when none is configured, serve metrics and health,
stop cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
from importlib.metadata import PackageNotFoundError, version

from everlast.daemon.broker import EmbeddedBroker
from everlast.daemon.checkpoint.blobs import key_from_env
from everlast.daemon.config import Config
from everlast.daemon.dir_lock import DirLock
from everlast.daemon.errors import ConfigError
from everlast.daemon.metrics import HealthServer, Metrics
from everlast.daemon.model import ModelRuntime
from everlast.daemon.service import Service
from everlast.daemon.signals import client_tests_line, publish_guarantee

log = logging.getLogger("everlast.daemon")


def prepare_models(cfg: Config) -> dict[str, ModelRuntime]:
    if not cfg.models:
        raise ConfigError("no models configured: add a [[models]] table (id, data, concept, schedule or targets)")
    models = {}
    for mc in cfg.models:
        m = ModelRuntime.prepare(mc)
        g = m.guarantee
        if m.mechanism == "private-learner":
            log.info("model %s: %s", m.id, learner_line(m))
            if m.domain is not None and m.domain.kind == "grid":  # the same line whatever the data
                log.warning("model %s: its domain is a grid of %d points: the certificate holds only if it was "
                            "chosen without looking at the training data (the values the input can take); a grid "
                            "made of training values publishes them through which queries are refused. The "
                            "daemon does not check it against the data: that check would itself be a release "
                            "(docs/privacy/learner.md 1)", m.id, m.domain.size)
            for w in g.warnings[1:]:
                log.warning("model %s: %s", m.id, w)
            if g.weak:
                log.warning("model %s: the training-set guarantee is weak (epsilon %.4g)", m.id, g.epsilon_training)
            models[m.id] = m
            continue
        eps_t = "none" if g.epsilon_training == float("inf") else f"{g.epsilon_training:.4g}"
        eps_q = "none" if g.epsilon_queries == float("inf") else f"{g.epsilon_queries:.4g}"
        log.info(
            "model %s: %s, n=%d, training-set epsilon %s, query epsilon %s (delta %.2g, %s accounting); %s",
            m.id,
            m.concept.name,
            m.n_train,
            eps_t,
            eps_q,
            g.delta,
            g.accounting,
            client_tests_line(g.details),
        )
        if g.query_private and g.details.get("burn") is None:
            log.warning("model %s runs no burn-rate signal: the halt-budget alerts have no data for it (give "
                        "[[models]] burn = { window = .., eps = .. }; docs/OPERATIONS.md, 'The burn-rate signal')",
                        m.id)
        if g.weak:
            log.warning("model %s: the training-set guarantee is weak (epsilon %s); see `everlast plan`", m.id, eps_t)
        if not g.query_private:
            log.warning(
                "model %s: queries are NOT certified private under this design (%s)",
                m.id,
                "; ".join(g.warnings)[:300] or "see docs/PRIVACY.md",
            )
        models[m.id] = m
    return models


def learner_line(m: ModelRuntime) -> str:
    """The private learner's certificate in one line (public numbers only)."""
    g, dt = m.guarantee, m.guarantee.details
    cls = (m.cfg.concept + (f" of depth {m.cfg.depth}" if m.cfg.concept == "trees" else "")
           + (f" on R^{m.cfg.d}" if m.cfg.concept in ("stumps", "trees") else ""))
    p = f"with probability >= {1 - dt['beta']:.3g}"
    real = (f"error <= {dt['alpha_proven']:.3g} {p}" if dt["alpha_proven"] < 1.0 else "no accuracy proven at this n")
    exc = dt["agnostic_excess"]
    agn = f"error <= {dt['agnostic_comparator']} + {exc:.3g} {p}" + (" (vacuous at this n)" if exc >= 1.0 else "")
    hold = (f"; {dt['holdout']} of them held out for the validated certificate (Theorem V: measured on them after "
            f"the fit, reported when the model is created or restored, at confidence "
            f"{1 - dt['validation_beta']:.3g}; no extra epsilon)" if dt.get("holdout") else
            "; no holdout: no validated certificate")
    return (f"private-learner (exponential mechanism) over {cls} on {dt['domain']}, n={m.n_train}{hold}: "
            f"training set ({g.epsilon_training:.4g}, 0)-DP ({dt['claim']}), queries (0, 0)-DP; no rounds, never "
            f"halts; accuracy, realizable ({dt['accuracy_theorem']}; only if {dt['realizable_if']}: the data can "
            f"contradict this): {real}; agnostic ({dt['agnostic_theorem']}, every distribution): {agn}; both "
            f"for a training set of n i.i.d. draws from the distribution the queries come from (the a-priori "
            f"bounds, at the {dt.get('n_fit', m.n_train)} examples fitted on: for planning); alpha is checked "
            f"against the {dt['guarantee']} bound")


def warn_operator(cfg: Config) -> None:
    """Start-up warnings about settings that weaken what the daemon protects."""
    ck = cfg.checkpoint
    if key_from_env(ck.key_env) is None:
        where = f"the topic {cfg.topics.checkpoints}" if ck.store == "kafka" else f"{ck.dir}"
        mechs = {m.mechanism for m in cfg.models}
        held = [what for mech, what in (
            ("generic-bbl", "the training data and random-stream state (GenericBBL)"),
            ("private-learner", "the released model, a secret of a few hundred bytes (the private learner keeps "
                                "no training data)")) if mech in mechs]
        log.warning("checkpoints are NOT encrypted (%s is unset): they hold %s, in %s; set a 64-hex-character "
                    "AES-256 key (docs/OPERATIONS.md, 'Checkpoints and keys')",
                    ck.key_env, " and ".join(held) or "the models' state", where)
    if cfg.metrics.expose_halts_used:
        log.warning("metrics.expose_halts_used is on: everlast_round_halts_used moves with single queries' outcomes "
                    "and is NOT query-private; restrict who reads /metrics (docs/PRIVACY.md)")
    for m in cfg.models:
        if getattr(m, "seed", None) is not None:
            log.warning("model %s has a configured seed: every noise value it draws is reproducible by whoever knows "
                        "the seed, so its guarantee holds only while the seed is a secret with ~128 bits of entropy; "
                        "leave it unset outside tests (OS entropy; docs/privacy/genericbbl.md 8)", m.id)


async def serve(
    cfg: Config,
    stop: asyncio.Event | None = None,
    status: dict[str, object] | None = None,
    *,
    handle_signals: bool = True,
) -> int:
    """Run until ``stop`` is set (or a signal arrives). Returns the process exit code. ``status``, if
    given, receives the bound metrics port and the service object (for tests and tools). The first
    thing done: lock ``checkpoint.dir`` (one daemon per state, ``daemon/dir_lock.py``)."""
    lock = DirLock.acquire(cfg.checkpoint.dir) if uses_dir(cfg) else None
    try:
        return await _serve(cfg, stop, status, handle_signals)
    finally:
        if lock is not None:
            lock.release()


def uses_dir(cfg: Config) -> bool:
    """Whether the daemon keeps state in ``checkpoint.dir`` (the dir store, or the journal)."""
    return cfg.checkpoint.store == "dir" or cfg.checkpoint.journal


def _metrics(cfg: Config, models: dict[str, ModelRuntime]) -> Metrics:
    metrics = Metrics(expose_timings=cfg.metrics.expose_timings)
    metrics.declare(models, without_rounds={m.id for m in models.values() if m.mechanism == "private-learner"},
                    with_burn={m.id for m in models.values() if m.schedule is not None and m.schedule.burn is not None})
    try:
        metrics.build.info({"version": version("everlast")})
    except PackageNotFoundError:
        metrics.build.info({"version": "dev"})
    for m in models.values():
        publish_guarantee(metrics, m)
    return metrics


def _broker(cfg: Config) -> tuple[EmbeddedBroker | None, str]:
    bootstrap = cfg.broker.bootstrap_servers
    if bootstrap is not None:
        return None, bootstrap
    # compat: reachable by librdkafka < 2.2 (Debian 12's kcat) too; dies with this process
    broker = EmbeddedBroker(port=cfg.broker.embedded_port, compat=True).start()
    log.warning("no broker configured: started the embedded Tansu broker at %s (in memory, for development: it "
                "stops with the daemon and what it holds is lost)", broker.bootstrap)
    return broker, broker.bootstrap


async def _health(cfg: Config, metrics: Metrics, svc: Service) -> tuple[HealthServer, int]:
    health = HealthServer(metrics, svc.heartbeat.alive, svc.ready, svc.not_ready)
    try:
        port = await health.start(cfg.metrics.host, cfg.metrics.port)
    except OSError as exc:
        raise ConfigError(f"cannot serve metrics on {cfg.metrics.host}:{cfg.metrics.port}: "
                          f"{exc.strerror or exc} (another process has the port? set metrics.port; 0 = any free port)"
                          ) from None
    log.info("metrics and health on http://%s:%d (/metrics, /healthz, /readyz)", cfg.metrics.host, port)
    return health, port


async def _serve(cfg: Config, stop: asyncio.Event | None, status: dict[str, object] | None,
                 handle_signals: bool) -> int:
    models = prepare_models(cfg)
    warn_operator(cfg)
    metrics = _metrics(cfg, models)
    broker, bootstrap = _broker(cfg)
    try:
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT) if handle_signals else ():
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        svc = Service(cfg, models, metrics, bootstrap)
        # Start-up (planning, imports) leaves millions of long-lived objects; without this every full
        # garbage collection rescans them while the hot path allocates (measured: ~1 us a record).
        gc.collect()
        gc.freeze()
        health, port = await _health(cfg, metrics, svc)
        if status is not None:
            status.update({"metrics_port": port, "service": svc, "bootstrap": bootstrap})
        try:
            await _run(cfg, svc, health, stop)
        finally:
            await health.stop()
    finally:
        if broker is not None:
            broker.stop()
    return _exit_code(svc)


async def _run(cfg: Config, svc: Service, health: HealthServer, stop: asyncio.Event) -> None:
    try:
        await svc.run(stop)
    except Exception as exc:
        if cfg.metrics.exit_linger_s > 0 and not stop.is_set():
            log.error("stopping after %s; /metrics stays up until it is scraped once more (at most %.0fs)",
                      type(exc).__name__, cfg.metrics.exit_linger_s)
            await health.linger(cfg.metrics.exit_linger_s, stop, svc.scrapes_at_failure)
        raise


def _exit_code(svc: Service) -> int:
    if svc.clean is False:
        log.error("stopped, but the hand-over checkpoints do not cover every published answer: %s; the next start "
                  "replays those answers from the journal or the broker's log (byte-identical)",
                  "; ".join(svc.uncovered))
        return 1
    log.info("stopped cleanly: the checkpoints cover every published answer")
    return 0
