"""One retry policy for every wait on the outside world (produce, fetch, checkpoint writes): the
error's type says whether to retry (``DaemonError.retriable``), backoff doubles up to a cap, and a
shutdown request always wins, whether it arrives during an attempt or during the backoff."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from everlast.daemon.errors import DaemonError, Stopped, as_daemon_error

T = TypeVar("T")
log = logging.getLogger("everlast.daemon")


async def until_stopped(aw: Awaitable[T], stop: asyncio.Event) -> T:
    """Await ``aw``; if ``stop`` is set first, cancel it and raise ``Stopped``."""
    task = asyncio.ensure_future(aw)
    if stop.is_set():
        task.cancel()
        raise Stopped("shutdown requested")
    waiter = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        task.cancel()
        raise
    finally:
        waiter.cancel()
    if task.done():
        return task.result()
    task.cancel()
    raise Stopped("shutdown requested")


async def retrying(
    op: Callable[[], Awaitable[T]],
    stop: asyncio.Event,
    *,
    what: str,
    max_backoff_s: float = 30.0,
    first_backoff_s: float = 0.1,
    on_error: Callable[[DaemonError], None] | None = None,
    interruptible: bool = True,
) -> T:
    """Run ``op()`` until it succeeds. A retriable error (``DaemonError.retriable``, Kafka client
    errors mapped by ``as_daemon_error``) is reported to ``on_error``, logged, and retried after a
    backoff; any other error is raised as is. Raises ``Stopped`` as soon as ``stop`` is set, also
    during an attempt unless ``interruptible`` is False (for an attempt that must not be abandoned
    half-done, e.g. a checkpoint whose file writes run in threads; it must bound itself)."""
    backoff = first_backoff_s
    while True:
        if stop.is_set():
            raise Stopped("shutdown requested")
        try:
            return await (until_stopped(op(), stop) if interruptible else op())
        except Stopped:
            raise
        except Exception as exc:
            err = as_daemon_error(exc)
            if err is None or not err.retriable:
                raise
            if on_error is not None:
                on_error(err)
            log.warning("%s failed (%s); retrying in %.1fs", what, type(exc).__name__, backoff)
        try:
            await asyncio.wait_for(stop.wait(), backoff)
        except TimeoutError:
            pass
        else:
            raise Stopped("shutdown requested")
        backoff = min(backoff * 2, max_backoff_s)
