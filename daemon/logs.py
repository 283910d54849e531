"""Structured logs: text or one JSON object per line. Log call sites pass counts, model ids,
partitions and offsets only; never a query, an id chosen by a client, or a training value. One
exception, by design: the line that says a client's quota test fired names the client -- the id the
operator's gateway set in the record's client header, a released fact (docs/privacy/genericbbl.md 5.5,
remark 4), quoted and escaped.
Repeated client and retry warnings (a broker outage makes aiokafka log every reconnect attempt) are
rate-limited: one line per message every few seconds, then a count of what was suppressed. Records
marked ``UNLIMITED`` (the quota lines, bounded at their source: at most a hundred per model and
round) are never dropped: each names another client."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable

UNLIMITED = "everlast_unlimited"
"""``extra={UNLIMITED: True}``: a record the rate limit must pass (bounded where it is logged)."""


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info and record.exc_info[0] is not None:
            out["error"] = record.exc_info[0].__name__  # the type only: messages may quote inputs
        return json.dumps(out)


class RateLimit(logging.Filter):
    """At most one record per (logger, message template) every ``every_s`` seconds, for the
    Kafka client's records and for warnings; errors of the daemon itself always pass. The first
    record after a quiet spell says how many similar ones were dropped."""

    def __init__(self, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every_s, self.clock = every_s, clock
        self.last: dict[tuple[str, str], float] = {}
        self.dropped: dict[tuple[str, str], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, UNLIMITED, False):
            return True
        if record.levelno >= logging.ERROR and not record.name.startswith("aiokafka"):
            return True
        if record.levelno < logging.WARNING and not record.name.startswith("aiokafka"):
            return True
        key = (record.name, str(record.msg))
        now = self.clock()
        if now - self.last.get(key, -1e18) < self.every_s:
            self.dropped[key] = self.dropped.get(key, 0) + 1
            return False
        if len(self.last) > 1000:  # templates are few; bound it anyway
            self.last.clear()
        self.last[key] = now
        n = self.dropped.pop(key, 0)
        if n:
            record.msg = f"{record.getMessage()} ({n} similar messages suppressed)"
            record.args = ()
        return True


def setup(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RateLimit())
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, logging.getLevelName(level)))
