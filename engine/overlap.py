"""Run one independent computation beside the caller's own, on a second core when there is one.

S_{i+1}'s uniform order (one sort of n packed random keys) needs nothing from D-hat: the predictor
begins it while the round's last eighth is answered (``PreparedOrder``), and a transition without it
(after a restore) draws it while it sorts D-hat and runs LabelBoost. The predictor also opens the
next round's noise streams beside the transition (interpreter work that fits inside the D-hat
sort, which releases the GIL). Each job draws only from its own streams (``engine.design.Purpose``)
and reads nothing the caller writes, so a threaded run and an inline run return the same bytes
(``tests/engine/test_overlap.py``); threads change when the work happens, never what it computes.
Still pure: no I/O, no clocks.

Below ``MIN_WORK`` elements, or in a process allowed one CPU (``os.sched_getaffinity``: taskset,
cgroup cpusets), the work runs inline in ``result()``, because handing it to a thread costs tens of
microseconds. numpy releases the GIL in its sorts and bulk copies, which is where the time goes.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

R = TypeVar("R")

MIN_WORK = 1 << 15
"""Elements below which overlapping does not pay for the thread hand-off (~30-60 us)."""

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_enabled = True


class Pending(Generic[R]):
    """A computation started by ``begin``; ``result()`` returns its value or raises its exception.

    Use it as a context manager around the caller's own work: if that work raises, ``__exit__``
    waits for a threaded job (or cancels it if it has not started), so no orphaned job keeps a core
    and its scratch memory into the caller's retry."""

    __slots__ = ("_args", "_fn", "_future")

    def __init__(self, fn: Callable[..., R], args: tuple[object, ...], future: Future[R] | None) -> None:
        self._fn, self._args, self._future = fn, args, future

    @property
    def threaded(self) -> bool:
        return self._future is not None

    def result(self) -> R:
        if self._future is None:
            return self._fn(*self._args)
        return self._future.result()

    def cancel(self, wait_running: bool = True) -> None:
        """Drop a job whose result is no longer wanted: a threaded one that has not started never
        runs; one already running is waited for unless ``wait_running`` is False (no orphan keeps
        a core and its scratch memory into the caller's retry); its result or exception is
        discarded."""
        if self._future is not None and not self._future.cancel() and wait_running:
            wait([self._future])

    def __enter__(self) -> Pending[R]:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is not None and self._future is not None and not self._future.cancel():
            wait([self._future])  # its own outcome is moot: the caller's exception propagates


def begin(fn: Callable[..., R], *args: object, work: int) -> Pending[R]:
    """Start ``fn(*args)`` on a worker thread when ``work`` (its size in elements) is worth it and
    the process may use two CPUs; otherwise defer it to ``result()``. ``fn`` must not share
    mutable state with the caller (its own generator, its own arrays). A pool that refuses the job
    (interpreter exit has shut it down; no thread can be started) means inline, never a failure."""
    if work < MIN_WORK or not parallel():
        return Pending(fn, args, None)
    try:
        future = _executor().submit(fn, *args)
    except RuntimeError:  # "cannot schedule new futures after shutdown", "can't start new thread"
        return Pending(fn, args, None)
    return Pending(fn, args, future)


def parallel() -> bool:
    """Whether ``begin`` may use a thread: enabled and at least two CPUs allowed."""
    return _enabled and _cpus() >= 2


def set_enabled(on: bool) -> bool:
    """Allow or forbid threads (tests compare both paths); returns the previous setting."""
    global _enabled
    before, _enabled = _enabled, bool(on)
    return before


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def _forget_pool_after_fork() -> None:
    """A forked child inherits the pool object but not its threads: a job submitted there would
    wait forever. The child starts its own pool when it first needs one."""
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:  # one worker per allowed CPU: concurrent transitions (partitions) each get one
            _pool = ThreadPoolExecutor(max_workers=max(1, _cpus()), thread_name_prefix="everlast-overlap")
        return _pool
