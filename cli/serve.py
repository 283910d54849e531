"""``everlast serve``: the Kafka service."""

from __future__ import annotations

import asyncio
import faulthandler
import signal
from pathlib import Path
from typing import Any

import click

from everlast.daemon import logs
from everlast.daemon.config import load
from everlast.daemon.errors import DaemonError


@click.command()
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path),
    default=None,
    help="TOML configuration file (see deploy/ and docs/OPERATIONS.md).",
)
@click.option("--bootstrap-servers", default=None, help="Kafka bootstrap servers (default: start the embedded broker).")
@click.option("--metrics-port", type=int, default=None, help="Port for /metrics, /healthz, /readyz.")
@click.option("--checkpoint-dir", type=click.Path(path_type=Path), default=None, help="Checkpoint directory.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default=None)
def serve(
    config_path: Path | None,
    bootstrap_servers: str | None,
    metrics_port: int | None,
    checkpoint_dir: Path | None,
    log_format: str | None,
) -> None:
    """Serve the configured models: queries in from Kafka, labels out, metrics on HTTP."""
    overrides: dict[str, Any] = {}
    if bootstrap_servers:
        overrides.setdefault("broker", {})["bootstrap_servers"] = bootstrap_servers
    if metrics_port is not None:
        overrides.setdefault("metrics", {})["port"] = metrics_port
    if checkpoint_dir is not None:
        overrides.setdefault("checkpoint", {})["dir"] = checkpoint_dir
    if log_format is not None:
        overrides.setdefault("log", {})["format"] = log_format
    try:
        cfg = load(config_path, overrides)
        logs.setup(cfg.log.format, cfg.log.level)
        from everlast.daemon.app import serve as run

        if hasattr(signal, "SIGUSR1"):  # `kill -USR1 <pid>`: every thread's stack on stderr (a stall's diagnosis)
            faulthandler.register(signal.SIGUSR1, all_threads=True)
        code = asyncio.run(run(cfg))
    except DaemonError as exc:
        raise click.ClickException(str(exc)) from None
    raise SystemExit(code)
