"""Broker-free stand-ins: consumer records, and a Servable whose behaviour a test chooses (rounds of
R queries, halting, an engine error, a domain). Labels are x >= 0.5: the fake's own rule, so tests
pin the daemon's decisions, never the real engine's labels."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np
from numpy.typing import NDArray

from everlast.daemon import batch
from everlast.daemon.partition import PartitionProcessor, Served, Step
from everlast.engine.errors import InvalidInput, InvalidState
from everlast.engine.phases import Phase
from everlast.engine.serving import Answers, Refusal, RoundInfo

JSON_H = [("content-type", b"application/json")]


@dataclass
class Rec:
    """The fields of aiokafka's ConsumerRecord the daemon reads."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    timestamp: int = 1_700_000_000_000
    topic: str = "q"
    partition: int = 0


def queries(model: str, xs: list[float], start: int, id0: int | None = None, json_: bool = False) -> list[Rec]:
    id0 = start if id0 is None else id0
    out = []
    for k, x in enumerate(xs):
        body = {"id": id0 + k, "x": x}
        v = json.dumps(body).encode() if json_ else msgpack.packb(body)
        out.append(Rec(start + k, model.encode(), v, JSON_H if json_ else [], timestamp=1_700_000_000_000 + start + k))
    return out


def decode(recs: list[Rec], max_bytes: int = 65_536) -> batch.Batch:
    return batch.decode(recs, max_bytes)


def labels_of(step: Step) -> list[dict[str, Any]]:
    out = []
    for _key, value, headers in step.label_records():
        js = dict(headers).get("content-type") == b"application/json"
        out.append(json.loads(value) if js else msgpack.unpackb(value))
    return out


def feed(proc: PartitionProcessor, recs: list[Rec], hw: int | None = None) -> Step:
    hw = hw if hw is not None else (recs[-1].offset + 1 if recs else None)
    return proc.feed(decode(recs) if recs else None, hw)


class FakeEngine:
    """Rounds of ``R`` queries (then a transition is due); halts after ``halt_after`` answers;
    raises ``InvalidState`` once ``fail`` is set; rejects x < 0 as outside its domain. It keeps the
    ``Servable`` contract the real mechanisms keep (tests/daemon/test_servable_contract.py)."""

    mechanism = "fake"
    has_rounds = True
    answers_change_state = True
    point_dim = 1

    def __init__(self, R: int = 10, halt_after: int | None = None, rounds: int = 100) -> None:
        self.R, self.halt_after, self.rounds = R, halt_after, rounds
        self.answered = 0
        self.total = 0
        self.round = 1
        self.phase = Phase.ANSWERING
        self.fail = False
        self.fail_transition = False
        self.calls: list[int] = []

    @property
    def capacity(self) -> int | None:
        if self.phase is Phase.TRANSITION_DUE:
            return 0
        if self.phase in (Phase.HALTED, Phase.EXHAUSTED):
            return None
        return self.R - self.answered

    def round_info(self) -> RoundInfo:
        return RoundInfo(self.answered, self.R, 5, 0)

    def answer(self, x: Any, clients: Any = None) -> Answers:
        if self.fail:
            raise InvalidState("cannot answer in phase error")
        x = np.asarray(x, dtype=np.float64)
        self.calls.append(int(x.shape[0]))
        if self.phase is Phase.TRANSITION_DUE:
            raise InvalidState("cannot answer in phase transition_due")
        if not np.isfinite(x).all():  # as the real mechanisms' validate_points: nothing consumed
            raise InvalidInput(f"query point at position {int(np.argmax(~np.isfinite(x)))} is NaN or infinite")
        if (x < 0).any():
            raise InvalidInput(f"query point at position {int(np.argmax(x < 0))} is not in the domain")
        n_in = int(x.shape[0])
        if self.phase is Phase.HALTED:
            return self._refuse(n_in, Refusal.HALTED)
        n = n_in if self.halt_after is None else min(n_in, self.halt_after - self.total)
        n = min(n, self.R - self.answered)
        labels = (x[:n] >= 0.5).astype(np.int8)
        self.answered += n
        self.total += n
        if self.halt_after is not None and self.total >= self.halt_after:
            self.phase = Phase.HALTED
            rest = n_in - n
            refusals = np.zeros(n_in, np.int8)
            refusals[n:] = Refusal.HALTED
            return Answers(np.concatenate([labels, np.full(rest, -1, np.int8)]), np.zeros(n_in, np.int8),
                           self.round, n_in, refusals)
        if self.answered == self.R:
            self.phase = Phase.TRANSITION_DUE
        return Answers(labels, labels.copy(), self.round, n, np.zeros(n, np.int8))

    def _refuse(self, n: int, code: Refusal) -> Answers:
        return Answers(np.full(n, -1, np.int8), np.full(n, -1, np.int8), self.round, n, np.full(n, code, np.int8))

    def transition(self) -> None:
        if self.fail_transition:
            raise InvalidState("cannot transition in phase error")
        if self.phase is not Phase.TRANSITION_DUE:  # as engine.phases.check: a call out of turn raises
            raise InvalidState(f"cannot transition in phase {self.phase.value}")
        if self.round >= self.rounds:
            self.phase = Phase.EXHAUSTED
            return
        self.round += 1
        self.answered = 0
        self.phase = Phase.ANSWERING

    def round_part(self) -> dict[str, Any]:
        return {"format": "fake/1", "round": self.round}

    def live_part(self) -> dict[str, Any]:
        return {"answered": self.answered, "total": self.total}

    @property
    def reservoir_filled(self) -> int:
        return 0

    def reservoir_points(self, start: int, end: int) -> NDArray[np.float64]:
        return np.zeros(0)


def served(model: str, engine: Any, offset: int = 0, **kw: Any) -> Served:
    return Served(model, engine, offset, **kw)
