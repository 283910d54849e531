"""Beside the run loop, so that it reports while the loop waits (for a transition, the checkpoint
store or the broker): is the broker there (``everlast_broker_up``), and how far behind is each
owned partition (``everlast_consumer_lag``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from aiokafka.errors import KafkaError

from everlast.daemon.errors import Stopped
from everlast.daemon.retry import until_stopped

if TYPE_CHECKING:
    from everlast.daemon.service import Service

log = logging.getLogger("everlast.daemon")


async def watch(svc: Service, stop: asyncio.Event, every_s: float = 5.0) -> None:
    while not stop.is_set():
        with contextlib.suppress(Stopped):
            await probe_broker(svc, every_s)
            await refresh_ends(svc, every_s)
        update_lag(svc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), every_s)


async def probe_broker(svc: Service, timeout_s: float) -> None:
    """A metadata round trip: the health signal while no traffic flows (aiokafka retries quietly,
    so an idle consumer alone would never notice the broker is gone)."""
    try:
        ok = await until_stopped(asyncio.wait_for(svc.producer.client.force_metadata_update(), timeout_s), svc.stop)
    except (TimeoutError, KafkaError):
        ok = False
    if not ok:
        log.warning("the broker does not answer; retrying")
    svc.broker(bool(ok))


async def refresh_ends(svc: Service, timeout_s: float) -> None:
    """The partitions' log-end offsets, for the lag gauge only: a paused partition, or a loop that
    waits, gets no fetch responses, and its lag would freeze. (Tansu answers with a lower bound, the
    start of its last batch; never used to judge the log itself.)"""
    tps = [svc.tp(p) for p in svc.owned]
    if not tps:
        return
    try:
        ends = await until_stopped(asyncio.wait_for(svc.consumer.end_offsets(tps), timeout_s), svc.stop)
    except (TimeoutError, KafkaError):
        return
    for tp, end in ends.items():
        o = svc.owned.get(tp.partition)
        if o is not None:
            o.log_end = int(end)


def update_lag(svc: Service) -> None:
    for part, o in list(svc.owned.items()):
        hw = max(svc.consumer.highwater(svc.tp(part)) or 0, o.log_end)
        svc.metrics.lag.labels(partition=str(part)).set(max(0, hw - o.proc.next_offset))
