"""Per-client limits: a token bucket of queries per second and a cap on requests in progress.

State is kept per authenticated client only, so it is bounded by the credentials the operator
issued (an unauthenticated request never reaches here). A refusal says how long to wait
(``Retry-After``, whole seconds, at least 1).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float
    inflight: int = 0


class Limits:
    def __init__(self, qps: float, burst: int, inflight: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps, self.burst, self.max_inflight = qps, burst, inflight
        self._clock = clock
        self._b: dict[str, _Bucket] = {}

    def _bucket(self, client: str) -> _Bucket:
        b = self._b.get(client)
        now = self._clock()
        if b is None:
            b = self._b[client] = _Bucket(float(self.burst), now)
        else:
            b.tokens = min(float(self.burst), b.tokens + (now - b.at) * self.qps)
            b.at = now
        return b

    def enter(self, client: str) -> int | None:
        """Start a request: None, or the seconds to wait (too many of the client's requests in progress)."""
        b = self._bucket(client)
        if b.inflight >= self.max_inflight:
            return 1
        b.inflight += 1
        return None

    def leave(self, client: str) -> None:
        b = self._b.get(client)
        if b is not None and b.inflight > 0:
            b.inflight -= 1

    def take(self, client: str, n: int) -> int | None:
        """Spend n queries: None, or the seconds until the bucket holds n."""
        b = self._bucket(client)
        if b.tokens >= n:
            b.tokens -= n
            return None
        return max(1, math.ceil((n - b.tokens) / self.qps))
