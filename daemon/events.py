"""What an operator reads in the log about a partition's models: the kinds of event the processor
reports (``daemon/partition.py``) and, in one table, how each is logged.

An ``Event`` names its kind by ``EventKind`` (a ``StrEnum``: a misspelt kind is an ``AttributeError``
at import, not a silent no-op); ``log_events`` looks the kind up in ``LOG_LINES`` (level and
template), so that adding a kind means adding one row here."""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from everlast.daemon.logs import UNLIMITED

log = logging.getLogger("everlast.daemon")


class EventKind(enum.StrEnum):
    HALTED = "halted"
    """A checkpoint from before paused rounds, in its halted phase: it refuses for good."""
    PAUSED = "paused"
    """A round's halting test fired: the rest of the round is refused (round-paused); the next one answers."""
    EXHAUSTED = "exhausted"
    SUSPENDED = "suspended"
    LOG_REPLACED = "log_replaced"
    LOG_DELETED = "log_deleted"
    JOURNAL = "journal"
    ROUND = "round"
    QUOTA = "quota"
    """A client's quota test fired: ``detail`` names the client and where (a released fact)."""
    QUOTA_MANY = "quota_many"
    """More than ``QUOTA_LOG_LINES`` quota lines in a round: the rest are counted, not logged."""


@dataclass(frozen=True, slots=True)
class Event:
    """Something an operator should read in the log (``log_events`` logs it)."""

    kind: EventKind
    model: str | None = None
    round: int = 0
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Line:
    level: int
    template: str
    """``%``-style fields: ``model``, ``round``, ``detail``, ``part`` (the template stays the record's
    ``msg``, so the rate limit counts each kind apart)."""
    unlimited: bool = False
    """Never rate-limited (bounded at its source)."""
    client: bool = False
    """``detail`` names a client: attach it as the record's ``everlast_client`` field."""


LOG_LINES: dict[EventKind, Line] = {
    EventKind.HALTED: Line(logging.ERROR, "model %(model)s halted in round %(round)s: its halt budget is spent; it "
                           "refuses every query from now on (docs/OPERATIONS.md, 'A model halted')"),
    EventKind.PAUSED: Line(logging.WARNING, "model %(model)s: round %(round)s paused: its halt budget is spent; every "
                           "query is refused (round-paused) until the round's queries are in, then the next round "
                           "answers again (docs/OPERATIONS.md, 'A round paused')"),
    EventKind.EXHAUSTED: Line(logging.WARNING, "model %(model)s: the schedule has ended (round %(round)s); it refuses "
                              "every query"),
    EventKind.SUSPENDED: Line(logging.ERROR, "model %(model)s suspended (%(detail)s): it refuses every query until an "
                              "operator acts (docs/OPERATIONS.md)"),
    EventKind.LOG_REPLACED: Line(logging.ERROR, "partition %(part)s: the log was replaced (%(detail)s): the "
                                 "broker lost data; re-reading it from the start"),
    EventKind.LOG_DELETED: Line(logging.WARNING, "partition %(part)s: the broker deleted records before this daemon "
                                "read them (%(detail)s, retention?): their queries get no label"),
    EventKind.JOURNAL: Line(logging.INFO, "partition %(part)s: replayed the journal (%(detail)s): the models are where "
                            "their published answers left them, and those labels are published again"),
    EventKind.ROUND: Line(logging.INFO, "model %(model)s entered round %(round)s (%(detail)s)"),
    # a released fact (Theorem Q+, remark 4): the client, never a query
    EventKind.QUOTA: Line(logging.WARNING, "model %(model)s: client %(detail)s spent its share of round "
                          "%(round)s's halt budget (its quota test fired): its queries are refused (client-quota) "
                          "until the round ends; every other client is answered (docs/OPERATIONS.md, 'A client's "
                          "quota fired')",
                          unlimited=True, client=True),
    EventKind.QUOTA_MANY: Line(logging.WARNING, "model %(model)s: more than %(detail)s clients' quotas fired in round "
                               "%(round)s; further ones are counted (everlast_client_quota_fired_total), not logged: "
                               "many ids spend the budget together (Sybils? docs/OPERATIONS.md, 'A client's quota "
                               "fired')", unlimited=True),
}

EMBEDDED_LOG = Line(logging.INFO, "partition %(part)s: the embedded broker starts empty (it keeps nothing across "
                    "restarts); reading its new log from offset 0 (%(detail)s)")
"""``LOG_REPLACED`` on the daemon's own broker: expected at every start, not an error."""


def log_events(part: int, events: Iterable[Event], embedded: bool = False) -> None:
    for e in events:
        line = EMBEDDED_LOG if embedded and e.kind is EventKind.LOG_REPLACED else LOG_LINES[e.kind]
        extra: dict[str, object] = {}
        if line.unlimited:
            extra[UNLIMITED] = True
        if line.client:
            extra["everlast_client"] = e.detail
        fields = {"model": e.model, "round": e.round, "detail": e.detail, "part": part}
        log.log(line.level, line.template, fields, extra=extra or None)
