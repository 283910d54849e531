"""A round one engine cannot hold: the start-up line says which rounds one engine holds and the
accuracy horizon (from the plan's capacity numbers), and a transition whose memory cannot be
allocated suspends that model alone with the reason (no crash, so no crash loop on restart)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from everlast.daemon.partition import PartitionProcessor
from everlast.daemon.privacy import capacity_summary
from everlast.daemon.service import Service
from everlast.engine.concepts import from_spec
from everlast.engine.schedule import RoundSpec, Schedule
from tests.daemon.fakes import FakeEngine, feed, labels_of, queries, served

KAT = Path(__file__).resolve().parents[1] / "data" / "kat-plan.json"


class _NoMemory(FakeEngine):
    def transition(self) -> None:
        raise MemoryError  # what numpy raises for an allocation the machine refuses


def _metrics() -> Any:
    hist = SimpleNamespace(labels=lambda **_: SimpleNamespace(observe=lambda _x: None, inc=lambda: None))
    return SimpleNamespace(transition_seconds=hist, rounds_completed=hist)


def test_a_transition_that_cannot_allocate_suspends_that_model_alone() -> None:
    big, other = _NoMemory(R=2), FakeEngine(R=100)
    p = PartitionProcessor(0, [served("big", big), served("other", other)], {"big", "other"}, 0)
    step = feed(p, queries("big", [0.9] * 3, 0))
    assert step.transitions == ["big"]
    failures = asyncio.run(Service.transition(SimpleNamespace(metrics=_metrics()), p, step.transitions))  # type: ignore[arg-type]
    assert isinstance(failures["big"], MemoryError)
    events = p.transition_done(failures)
    assert [e.kind for e in events] == ["suspended"]
    labs = labels_of(p.resume())
    assert labs[0]["status"] == "refused" and "could not allocate the next round's memory" in labs[0]["reason"]
    after = labels_of(feed(p, queries("other", [0.2, 0.7], 3)))
    assert [x["status"] for x in after] == ["ok", "ok"]


def test_the_start_up_line_states_the_plans_capacity_and_horizon(monkeypatch: Any) -> None:
    j = json.loads(KAT.read_text())["eps1"]["json"]  # everlast plan --epsilon 1 ... --json, pinned
    names = {f.name for f in dataclasses.fields(RoundSpec)}
    rows = [{**{k: v for k, v in r.items() if k in names}, "lam": r["lambda"]} for r in j["schedule"]]
    schedule = Schedule.from_dict({"rounds": rows, "repeat_last": j["repeat_last"], "design": "target-charged"})
    cfg = SimpleNamespace(d=1, targets=SimpleNamespace(alpha=0.1, beta=0.05))
    line = capacity_summary(cfg, from_spec({"name": "thresholds", "d": 1}), schedule)  # type: ignore[arg-type]
    k = j["one_engine_rounds"]
    assert f"holds rounds 1-{k} ({j['one_engine_queries']:.3g} queries)" in line
    assert f"round {k + 1} needs" in line and "suspend the model" in line
    assert f"{j['accuracy']['horizon_queries']:.3g} queries" in line
    without = capacity_summary(SimpleNamespace(d=1, targets=None), from_spec({"name": "thresholds", "d": 1}),  # type: ignore[arg-type]
                               schedule)
    assert "not computed" in without
    monkeypatch.setattr("everlast.engine.planner.capacity.ENGINE_MEMORY", 2**20)  # 1 MiB: no round fits
    assert "holds no round: round 1 needs" in capacity_summary(cfg, from_spec({"name": "thresholds", "d": 1}),  # type: ignore[arg-type]
                                                                 schedule)
