"""``everlast gateway``: the authenticated HTTP API in front of the topics; ``everlast gateway-key``:
a new API key and the hash the configuration stores (docs/GATEWAY.md)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import click

from everlast.daemon import logs
from everlast.daemon.config import load
from everlast.daemon.errors import DaemonError


@click.command("gateway")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="TOML configuration file: the daemon's, with a [gateway] section (docs/GATEWAY.md).")
@click.option("--bootstrap-servers", default=None, help="Kafka bootstrap servers (the daemon's broker).")
@click.option("--host", default=None, help="Address of the HTTP API (gateway.host).")
@click.option("--port", type=int, default=None, help="Port of the HTTP API (gateway.port).")
@click.option("--metrics-port", type=int, default=None, help="Port of /metrics (gateway.metrics_port).")
@click.option("--log-format", type=click.Choice(["text", "json"]), default=None)
def gateway_cmd(config_path: Path | None, bootstrap_servers: str | None, host: str | None, port: int | None,
                metrics_port: int | None, log_format: str | None) -> None:
    """Serve the HTTP API clients use instead of Kafka: authenticated predicts, each client's own labels."""
    overrides: dict[str, Any] = {}
    if bootstrap_servers:
        overrides.setdefault("broker", {})["bootstrap_servers"] = bootstrap_servers
    for k, v in (("host", host), ("port", port), ("metrics_port", metrics_port)):
        if v is not None:
            overrides.setdefault("gateway", {})[k] = v
    if log_format is not None:
        overrides.setdefault("log", {})["format"] = log_format
    try:
        cfg = load(config_path, overrides)
        logs.setup(cfg.log.format, cfg.log.level)
        from everlast.daemon.gateway.app import serve

        code = asyncio.run(serve(cfg))
    except DaemonError as exc:
        raise click.ClickException(str(exc)) from None
    raise SystemExit(code)


@click.command("gateway-key")
@click.argument("client")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: client, key, sha256.")
def gateway_key_cmd(client: str, as_json: bool) -> None:
    """Create an API key for CLIENT: print the key (give it to the client) and the entry for gateway.keys."""
    from everlast.daemon.gateway.auth import key_hash, new_key, normalise_client

    c = normalise_client(client)
    if c is None:
        raise click.BadParameter("a client id is 1-64 characters of [a-z0-9._-], starting with a letter or digit",
                                 param_hint="CLIENT")
    key = new_key()
    h = key_hash(key)
    if as_json:
        click.echo(json.dumps({"client": c, "key": key, "sha256": h}))
        return
    click.echo(f"key (give it to {c}; it is shown only now): {key}")
    click.echo("configuration entry (everlast.toml; only the hash is stored):")
    click.echo("[[gateway.keys]]")
    click.echo(f'client = "{c}"')
    click.echo(f'sha256 = "{h}"')
