"""Helpers shared by subcommands: JSON output that is always valid, progress bars on stderr."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click
from tqdm import tqdm


def _finite(obj: Any) -> Any:
    """JSON has no inf/NaN: they become null (callers add a reason field where it matters)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def emit_json(obj: dict[str, Any]) -> None:
    """Exactly one JSON object on stdout."""
    click.echo(json.dumps(_finite(obj), allow_nan=False))


def progress(total: int, desc: str, unit: str = "q") -> tqdm:
    """A progress bar on stderr, shown only when stderr is a terminal."""
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, file=sys.stderr,
                disable=not sys.stderr.isatty(), leave=False)
