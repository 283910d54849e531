"""What ``everlast produce`` and ``everlast consume`` share: the broker options, a clear error when
the broker is not there, and label decoding."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import click
import msgpack
from aiokafka.errors import KafkaError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def bootstrap_option(f: F) -> F:
    return click.option(
        "--bootstrap-servers",
        "-b",
        default=DEFAULT_BOOTSTRAP,
        show_default=True,
        envvar="EVERLAST_BROKER__BOOTSTRAP_SERVERS",
        help="Kafka bootstrap servers (default: the embedded broker of `everlast serve`; env "
        "EVERLAST_BROKER__BOOTSTRAP_SERVERS).",
    )(f)


def timeout_option(default: float, what: str) -> Callable[[F], F]:
    return click.option(
        "--timeout",
        type=click.FloatRange(min=0.1),
        default=default,
        show_default=True,
        help=f"Seconds to wait {what}.",
    )


def run(coro: Awaitable[T], bootstrap: str) -> T:
    """Run a client coroutine; a broker that cannot be reached is a clear error, not a traceback."""

    async def main() -> T:
        return await coro

    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)  # its retries are noise here: the error below says it
    try:
        return asyncio.run(main())
    except (KafkaError, OSError) as exc:
        raise click.ClickException(
            f"cannot talk to the broker at {bootstrap} ({exc}); is the daemon running? "
            "(`everlast serve` without [broker] bootstrap_servers starts the embedded broker on 127.0.0.1:9092)"
        ) from None


def decode_value(value: bytes | None, headers: Any) -> Any:
    """A label record's value as a Python object, by its content-type header (JSON or msgpack)."""
    if value is None:
        return None
    for k, v in headers or ():
        if k.lower() == "content-type" and v.split(b";")[0].strip().lower() == b"application/json":
            return json.loads(value)
    return msgpack.unpackb(value, raw=False)
