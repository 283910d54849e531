"""``everlast produce``: send JSON queries to the daemon, keyed and partitioned as it expects.

Any Kafka client can do this (README: kcat), but needs three things right: the model id as the
record key, Kafka's murmur2 partitioner (librdkafka defaults to another one), and the
content-type header for JSON. This command gets them right, and checks each query against the
daemon's schema before sending it, so a typo is an error here rather than an `invalid` label later.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import click
import msgpack
from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner

from everlast.cli.common import emit_json
from everlast.cli.kafka_client import bootstrap_option, run, timeout_option
from everlast.daemon import wire

BATCH = 1_000


@dataclass
class Sent:
    partitions: dict[int, list[int]] = field(default_factory=dict)
    """partition -> [first offset, last offset] of what was sent."""
    sent: int = 0
    rejected: list[str] = field(default_factory=list)
    """``line N: reason`` per query not sent (the reason names the rule, never the value)."""


async def _inputs(queries: tuple[str, ...]) -> AsyncIterator[tuple[str, str]]:
    """The queries with where each came from. stdin is read without blocking the event loop when it
    is a pipe or a terminal, so each line is on its way while the next one is typed."""
    if queries:
        for i, q in enumerate(queries, 1):
            yield f"argument {i}", q
        return
    i = 0
    async for raw in _stdin_lines():
        i += 1
        if raw.strip():
            yield f"line {i}", raw.decode(errors="replace").strip()


async def _stdin_lines() -> AsyncIterator[bytes]:
    reader = asyncio.StreamReader(limit=1 << 24)
    try:
        if stat.S_ISREG(os.fstat(sys.stdin.fileno()).st_mode):
            raise ValueError("a regular file: epoll cannot watch it (and it ends)")
        await asyncio.get_running_loop().connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (OSError, ValueError, io.UnsupportedOperation):  # a file, /dev/null, or no file descriptor
        for line in sys.stdin.buffer:
            yield line
        return
    async for line in reader:
        yield line


def encode(model: str, text: str, fmt: Literal["json", "msgpack"], check: bool, max_bytes: int) -> bytes | str:
    """The record value for one query, or the reason it is not sent."""
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        if check:
            return "not valid JSON"
        obj = None
    if fmt == "json":
        value = text.encode()
    else:
        if obj is None:
            return "not valid JSON (needed to encode msgpack)"
        value = msgpack.packb(obj, use_bin_type=True)
    if check:
        headers = [("content-type", wire.JSON_CT if fmt == "json" else wire.MSGPACK_CT)]
        res = wire.decode_query(model.encode(), value, headers, max_bytes=max_bytes)
        if isinstance(res, wire.Rejected):
            return res.message
    return value


async def produce(
    bootstrap: str, topic: str, model: str, inputs: AsyncIterator[tuple[str, str]], fmt: Literal["json", "msgpack"],
    check: bool, max_bytes: int, timeout: float,
) -> Sent:  # fmt: skip
    p = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        partitioner=DefaultPartitioner(),  # murmur2 of the key: the daemon's rule (docs/OPERATIONS.md)
        request_timeout_ms=int(timeout * 1000),
    )
    out = Sent()
    headers = [("content-type", wire.JSON_CT if fmt == "json" else wire.MSGPACK_CT)]
    try:
        await p.start()
        pending: list[Any] = []
        async for where, text in inputs:
            value = encode(model, text, fmt, check, max_bytes)
            if isinstance(value, str):
                out.rejected.append(f"{where}: {value}")
                continue
            pending.append(await p.send(topic, value, key=model.encode(), headers=headers))
            if len(pending) >= BATCH:
                await _settle(pending, out)
        await _settle(pending, out)
    finally:
        await p.stop()
    return out


async def _settle(pending: list[Any], out: Sent) -> None:
    for fut in pending:
        md = await fut
        first_last = out.partitions.setdefault(md.partition, [md.offset, md.offset])
        first_last[1] = md.offset
        out.sent += 1
    pending.clear()


@click.command("produce")
@click.argument("queries", nargs=-1)
@click.option("--model", "-m", required=True, help="Model id: the record key (a [[models]] id of the daemon).")
@bootstrap_option
@click.option("--topic", default="everlast.queries", show_default=True, help="The daemon's queries topic.")
@click.option("--format", "fmt", type=click.Choice(["json", "msgpack"]), default="json", show_default=True,
              help="Record encoding (the label comes back in the same one).")  # fmt: skip
@click.option("--check/--no-check", default=True, show_default=True,
              help="Check each query against the daemon's schema first; --no-check sends it as is "
              "(the daemon then answers a bad one with an `invalid` label).")  # fmt: skip
@click.option("--max-bytes", type=click.IntRange(min=64), default=65_536, show_default=True,
              help="Largest query the check accepts (the daemon's consumer.max_record_bytes).")  # fmt: skip
@timeout_option(30.0, "for the broker's acknowledgements")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def produce_cmd(
    queries: tuple[str, ...], model: str, bootstrap_servers: str, topic: str, fmt: Literal["json", "msgpack"],
    check: bool, max_bytes: int, timeout: float, as_json: bool,
) -> None:  # fmt: skip
    """Send queries to the daemon: JSON objects such as '{"id": 1, "x": 0.7}', given as arguments or
    one per line on stdin. Each is keyed by the model id and partitioned with murmur2, as the daemon
    expects. Read the labels with `everlast consume`."""
    res = run(produce(bootstrap_servers, topic, model, _inputs(queries), fmt, check, max_bytes, timeout),
              bootstrap_servers)  # fmt: skip
    for r in res.rejected:
        click.echo(f"not sent: {r}", err=True)
    if as_json:
        emit_json({
            "model": model, "topic": topic, "sent": res.sent, "rejected": len(res.rejected),
            "partitions": {str(p): {"first_offset": f, "last_offset": last} for p, (f, last) in res.partitions.items()},
        })  # fmt: skip
    elif res.sent:
        where = ", ".join(
            f"partition {p}, " + (f"offset {f}" if f == last else f"offsets {f} to {last}")
            for p, (f, last) in res.partitions.items())
        click.echo(f"sent {_queries(res.sent)} for model {model} to {topic} ({where})")
    if res.rejected:
        rest = (f"; the other {_queries(res.sent)} were sent" if res.sent > 1 else
                "; the other one was sent" if res.sent == 1 else "; nothing was sent")
        raise click.ClickException(f"{_queries(len(res.rejected))} not sent (see above){rest}")
    if not res.sent and not as_json:
        click.echo("nothing to send: give queries as arguments or one per line on stdin", err=True)


def _queries(k: int) -> str:
    return f"{k:,} quer{'y' if k == 1 else 'ies'}"
