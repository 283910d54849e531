"""The retry policy: the error's type decides, and shutdown always wins (no broker needed)."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka.errors import KafkaConnectionError, KafkaTimeoutError, RecordTooLargeError

from everlast.daemon.errors import (
    BrokerError,
    CheckpointError,
    CorruptCheckpoint,
    DaemonError,
    Stopped,
    as_daemon_error,
)
from everlast.daemon.retry import retrying


def test_kafka_errors_map_to_broker_errors_with_a_retry_policy() -> None:
    for exc, retriable in [(KafkaConnectionError(), True), (KafkaTimeoutError(), True),
                           (RecordTooLargeError(), False), (TimeoutError(), True)]:
        err = as_daemon_error(exc)
        assert isinstance(err, BrokerError) and err.retriable is retriable, exc
    assert as_daemon_error(CheckpointError("x")).retriable  # type: ignore[union-attr]
    assert not as_daemon_error(CorruptCheckpoint("x")).retriable  # type: ignore[union-attr]
    assert as_daemon_error(ValueError("a bug")) is None


async def _run(op: object, stop: asyncio.Event, **kw: object) -> object:
    return await asyncio.wait_for(retrying(op, stop, what="test", first_backoff_s=0.01, **kw), 10)  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_retriable_errors_are_retried_and_reported() -> None:
    calls, seen = [], []

    async def op() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise KafkaConnectionError()
        return "done"

    assert await _run(op, asyncio.Event(), on_error=seen.append) == "done"
    assert len(calls) == 3 and all(isinstance(e, BrokerError) for e in seen) and len(seen) == 2


@pytest.mark.asyncio
async def test_final_errors_and_bugs_are_raised_at_once() -> None:
    for exc in (CorruptCheckpoint("bad"), RecordTooLargeError(), ValueError("bug")):
        calls: list[int] = []

        async def op(exc: BaseException = exc, calls: list[int] = calls) -> None:
            calls.append(1)
            raise exc

        with pytest.raises(type(exc)):
            await _run(op, asyncio.Event())
        assert calls == [1]


@pytest.mark.asyncio
async def test_shutdown_interrupts_the_backoff() -> None:
    stop = asyncio.Event()

    async def op() -> None:
        raise KafkaConnectionError()

    task = asyncio.create_task(retrying(op, stop, what="test", first_backoff_s=60.0))
    await asyncio.sleep(0.05)
    stop.set()
    with pytest.raises(Stopped):
        await asyncio.wait_for(task, 5)


@pytest.mark.asyncio
async def test_shutdown_interrupts_an_attempt_that_hangs() -> None:
    """The old hang: a send after a transition waited on an event nobody set while the broker was
    down, so SIGTERM did nothing."""
    stop = asyncio.Event()
    cancelled = asyncio.Event()

    async def op() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.create_task(retrying(op, stop, what="test"))
    await asyncio.sleep(0.05)
    stop.set()
    with pytest.raises(Stopped):
        await asyncio.wait_for(task, 5)
    await asyncio.wait_for(cancelled.wait(), 5)
    with pytest.raises(Stopped):  # already stopped: no attempt at all
        await _run(op, stop)
    assert issubclass(Stopped, DaemonError)
