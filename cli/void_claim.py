"""``everlast void-claim``: the operator's procedure for a model claimed but never created."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import click

from everlast.daemon.config import load
from everlast.daemon.errors import DaemonError


@click.command()
@click.argument("model")
@click.option("--config", "config_path", type=click.Path(path_type=Path), default=None,
              help="The daemon's TOML configuration (its checkpoint store and broker).")
@click.option("--bootstrap-servers", default=None, help="Kafka bootstrap servers (the Kafka checkpoint store).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def void_claim_cmd(model: str, config_path: Path | None, bootstrap_servers: str | None, yes: bool) -> None:
    """Void the claim on MODEL whose state never reached the checkpoint store, so that the next start
    creates it afresh.

    The daemon refuses such a model (the replica that claimed it died while creating it, or the store
    lost its state) and never creates it again on its own. Creating it again draws fresh randomness from
    the same training set: if the lost creation was ever answered from, that is a second release of the
    training set, which no certificate charges (docs/OPERATIONS.md, "A claim without its state").
    Stop every replica of the model first. Refused when the model's state is in the store; an error
    (after voiding) when its state appeared while the claim was voided."""
    overrides: dict[str, Any] = {}
    if bootstrap_servers:
        overrides.setdefault("broker", {})["bootstrap_servers"] = bootstrap_servers
    if not yes:
        click.confirm(f"Void the claim on {model}? Stop every replica of this model first (a replica still "
                      "creating it would race the void). If its lost creation was ever answered from, creating it "
                      "again is a second release of its training set", abort=True)
    try:
        cfg = load(config_path, overrides)
        from everlast.daemon.checkpoint.void import void_claim

        n = asyncio.run(void_claim(cfg, model))
    except DaemonError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"model {model}: {n} claim(s) voided; the next start creates it" if n else
               f"model {model}: no claim to void")
