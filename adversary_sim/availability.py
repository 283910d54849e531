"""Several clients on one predictor, in process: can one of them switch the model off for the others?

``run_clients`` interleaves named streams (``adversary_sim.streams.Stream``: the boundary prober, i.i.d.
traffic, ...) batch by batch on one ``engine.predictor.Predictor``, each query carrying its stream's
name as its client id (``Predictor.answer(x, clients)``), and counts per client what was sent, answered
(``ok``) and refused, with the refusal reasons (``Refusal.code``: ``client-quota``, ``round-paused``, ...).
Adaptive streams see their own answers only. The result has the shape of the availability audit's
JSON: ``{"clients": {NAME: {"sent", "ok", "refused", "reasons"}}, "paused": bool, "halted": bool, ...}``;
a broker-based run of the same scenario is the daemon's business, this is the engine's.

The burn-rate releases of the run (``Answers.burn``, when the schedule has them) come back as well:
they are what an operator's alert would see.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from everlast.adversary_sim.streams import Stream
from everlast.engine.phases import Phase
from everlast.engine.predictor import Predictor
from everlast.engine.serving import Refusal


@dataclass(frozen=True, slots=True)
class Client:
    """A named stream, the queries it sends per step and in all."""

    name: str
    stream: Stream
    batch: int
    queries: int


@dataclass(slots=True)
class Tally:
    sent: int = 0
    ok: int = 0
    refused: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"sent": self.sent, "ok": self.ok, "refused": self.refused, "reasons": dict(self.reasons)}


def run_clients(p: Predictor, clients: list[Client]) -> dict[str, Any]:
    """Each step, every client with queries left sends its next batch; the batches of a step are
    answered together, in client order, as one call per round (transitions run as rounds end)."""
    stats = {c.name: Tally() for c in clients}
    burn: list[list[int]] = []
    paused_at: int | None = None
    sent = 0
    while True:
        step = [(c, min(c.batch, c.queries - stats[c.name].sent)) for c in clients]
        step = [(c, n) for c, n in step if n > 0]
        if not step:
            break
        xs = [np.asarray(c.stream.next_batch(n)[0], dtype=np.float64).reshape(n, -1) for c, n in step]
        x = np.concatenate(xs)
        if x.shape[1] == 1:
            x = x[:, 0]
        who = [c.name for c, n in step for _ in range(n)]
        res = p.answer_all(x, who)
        burn += res.burn.tolist()
        paused = np.flatnonzero(res.refusals == Refusal.ROUND_PAUSED)
        if paused_at is None and paused.size:  # the queries sent before the first one refused round-paused
            paused_at = sent + int(paused[0])
        sent += x.shape[0]
        pos = 0
        for c, n in step:
            lab, ref = res.labels[pos : pos + n], res.refusals[pos : pos + n]
            s = stats[c.name]
            s.sent += n
            s.ok += int((lab >= 0).sum())
            s.refused += int((lab < 0).sum())
            for code, k in zip(*np.unique(ref[lab < 0], return_counts=True), strict=True):
                name = Refusal(int(code)).code
                s.reasons[name] = s.reasons.get(name, 0) + int(k)
            if c.stream.adaptive:
                c.stream.observe(lab)
            pos += n
    return {"clients": {k: v.to_json() for k, v in stats.items()}, "halted": p.phase is Phase.HALTED,
            "paused": paused_at is not None, "paused_after_queries": paused_at,
            "round": p.round, "burn": burn}
