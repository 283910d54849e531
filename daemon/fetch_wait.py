"""A consumer's fetch wait, raised while the broker answers empty with records waiting.

The embedded broker (Tansu 0.6, memory engine) walks a partition's record batches for every fetch
and answers empty once that walk outlasts the fetch's max wait; the walk grows with the batches the
partition holds (``python -m bench.hop --history``). A consumer whose wait is shorter than the walk
then reads nothing, for good: the gateway's labels reader (5 ms) stopped at about 16,000 batches a
partition (one per request of 100 queries; at 8,000 a hop already took seconds), and a 5 ms reader
never read a planned round's 5·10^6 labels.
The empty answers still carry the partition's high watermark, so the stall is visible: a poll that
returned nothing while a partition's position is below it. Apache Kafka answers from its offset
index and never stalls so; there the wait stays as configured.

``FetchWait.after`` counts such polls; ``STRIKES`` in a row double the wait, up to ``cap_ms``. It is
never lowered: the walk only grows with the log. The wait is aiokafka's fetcher attribute
``_fetch_max_wait_ms``, read for each fetch request it builds (checked on aiokafka 0.14; ``set_wait``
raises if it is gone, and tests/daemon/test_fetch_wait.py runs against the installed aiokafka).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

log = logging.getLogger("everlast.daemon")

STRIKES = 3
"""Empty polls in a row, with records waiting, before the wait is doubled."""
CAP_MS = 500
"""Kafka's own default fetch wait: the most a stall can add to an idle hop."""


def set_wait(consumer: Any, ms: int) -> None:
    """Set a started aiokafka consumer's fetch max wait (read for each fetch request it builds)."""
    fetcher = getattr(consumer, "_fetcher", None)
    if fetcher is None or not hasattr(fetcher, "_fetch_max_wait_ms"):
        raise RuntimeError("this aiokafka's consumer has no fetcher._fetch_max_wait_ms to raise")
    fetcher._fetch_max_wait_ms = int(ms)


class FetchWait:
    """The fetch wait of one consumer: ``after`` each poll; raises it while the broker stalls."""

    def __init__(self, wait_ms: int, what: str, cap_ms: int = CAP_MS) -> None:
        self.ms, self.what, self.cap_ms = int(wait_ms), what, max(int(cap_ms), int(wait_ms))
        self.strikes = 0

    async def after(self, consumer: Any, got: bool, partitions: Iterable[Any]) -> int | None:
        """After a poll (``got``: it returned records) over ``partitions``: the new wait when this
        poll raised it, else None."""
        if got or self.ms >= self.cap_ms:
            self.strikes = 0
            return None
        if not await _behind(consumer, partitions):
            self.strikes = 0
            return None
        self.strikes += 1
        if self.strikes < STRIKES:
            return None
        self.strikes = 0
        self.ms = min(self.cap_ms, max(1, self.ms) * 2)
        set_wait(consumer, self.ms)
        log.warning("%s: the broker answers empty fetches while records wait (a broker that walks its "
                    "log per fetch, as the embedded one does); fetch wait raised to %d ms", self.what, self.ms)
        return self.ms


async def _behind(consumer: Any, partitions: Iterable[Any]) -> bool:
    """Whether some partition's position is below the high watermark its last fetch reported."""
    for tp in partitions:
        hw = consumer.highwater(tp)
        if hw is None:
            continue
        try:
            pos = await consumer.position(tp)
        except Exception:  # not assigned any more, or no position yet: not a stall
            continue
        if pos < hw:
            return True
    return False
