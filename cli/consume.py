"""``everlast consume``: print the daemon's label records (or any of its topics), from the beginning.

It reads without a consumer group (nothing is committed; any number can read at once). Without
``--follow`` it stops at the end of the log; "the end" is the high watermark that fetches report
(the embedded broker's ListOffsets answer can be short of it)."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import click
import msgpack
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.partitioner import DefaultPartitioner

from everlast.cli.kafka_client import bootstrap_option, decode_value, run, timeout_option


def _line(rec: Any, as_json: bool) -> str:
    key = rec.key.decode(errors="replace") if rec.key is not None else None
    error: str | None = None
    try:
        value = decode_value(rec.value, rec.headers)
    except (ValueError, msgpack.UnpackException):
        value = None
        error = "value is neither JSON nor msgpack"
    if as_json:
        out = {"model": key, "partition": rec.partition, "offset": rec.offset, "label": value}
        if error:
            out["error"] = error
        return json.dumps(out, separators=(",", ":"))
    body = json.dumps(value, separators=(",", ":")) if error is None else f"<{error}>"
    return f"{key} {body}"


async def consume(
    bootstrap: str, topic: str, model: str | None, follow: bool, limit: int | None, timeout: float, as_json: bool
) -> int:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100,
                         request_timeout_ms=int(timeout * 1000) + 5_000)  # fmt: skip
    shown = 0
    try:
        await c.start()
        if topic not in await c.topics():  # listing topics creates none (a describe would, on Tansu)
            raise click.ClickException(
                f"topic {topic} does not exist on {bootstrap} (the daemon creates its topics at start)"
            )
        parts = sorted(c.partitions_for_topic(topic) or [])
        if model is not None:  # labels are keyed by the model id, partitioned like its queries
            parts = [DefaultPartitioner()(model.encode(), parts, parts)]
        tps = [TopicPartition(topic, p) for p in parts]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        # the timeout bounds a wait without records, not the whole read: a log of millions of labels
        # takes minutes to print, and every batch that arrives moves the deadline on
        deadline = time.monotonic() + timeout
        while limit is None or shown < limit:
            batch = await c.getmany(*tps, timeout_ms=200)
            got = 0
            for recs in batch.values():
                got += len(recs)
                for rec in recs:
                    if model is not None and rec.key != model.encode():
                        continue
                    click.echo(_line(rec, as_json))
                    shown += 1
                    if limit is not None and shown >= limit:
                        return shown
            if got:
                deadline = time.monotonic() + timeout
            if follow:
                continue
            if not got and await _at_end(c, tps):  # an empty fetch at the high watermark: the end
                break
            if time.monotonic() > deadline:
                raise click.ClickException(f"no record of {topic} and no end of it seen in {timeout:g} s "
                                           "(is the broker answering?)")
    finally:
        await c.stop()
    return shown


async def _at_end(c: AIOKafkaConsumer, tps: list[TopicPartition]) -> bool:
    for tp in tps:
        hw = c.highwater(tp)  # known once a fetch answered for this partition
        if hw is None or await c.position(tp) < hw:
            return False
    return True


@click.command("consume")
@bootstrap_option
@click.option("--topic", default="everlast.labels", show_default=True,
              help="Topic to read: the daemon's labels (or its dead letters, e.g. everlast.dead-letters).")  # fmt: skip
@click.option("--model", "-m", default=None, help="Only this model's records (read from its partition only).")
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new records (stop with Ctrl-C).")
@click.option("--max", "limit", type=click.IntRange(min=1), default=None, help="Stop after this many records.")
@timeout_option(30.0, "without a new record for the end of the log (without --follow)")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON object per record (JSON Lines): model, partition, offset, label.")  # fmt: skip
def consume_cmd(
    bootstrap_servers: str, topic: str, model: str | None, follow: bool, limit: int | None, timeout: float,
    as_json: bool,
) -> None:  # fmt: skip
    """Print label records, one per line: the model id and the label as JSON, e.g.
    `m1 {"id":1,"label":1,"status":"ok","round":1}` (the same as the README's kcat command)."""
    with contextlib.suppress(KeyboardInterrupt):
        run(consume(bootstrap_servers, topic, model, follow, limit, timeout, as_json), bootstrap_servers)
