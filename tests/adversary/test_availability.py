"""The availability scenario, in process: the README's boundary prober (client A, 10,000 queries) and an i.i.d.
client (B, 5,000 queries) at the same time on the compose sample's model (deploy/compose/sample).

Without quotas the prober halts the model for both (as measured against the daemon: every later
query of B is refused). With per-client quotas A is refused with ``client-quota``, B keeps 100% of
its answers, and the model does not halt; the burn-rate releases show the attack while it lasts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from everlast.adversary_sim.availability import Client, run_clients
from everlast.adversary_sim.iid import make_task
from everlast.adversary_sim.prober import BoundaryProber
from everlast.adversary_sim.streams import IIDStream
from everlast.engine.concepts import Thresholds, from_spec
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import Schedule

SAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "compose" / "sample"
QUOTAS = {"share": 0.5, "eps": 0.2}
"""c0_q = ceil(0.5 * 4,384) = 2,192 tops per client and round (xi' ~ DLap(20), rho' ~ DLap(10)):
above the ~510 tops B's 5,000 i.i.d. queries spend, and with A's share plus B's well below the
round's own threshold c0 = 4,384."""
BURN = {"window": 1000, "eps": 0.1}


def sample_predictor(quotas: dict[str, Any] | None, burn: dict[str, Any] | None) -> Predictor:
    d = json.loads((SAMPLE / "schedule.json").read_text())
    if quotas is not None:
        d["quotas"] = quotas
    if burn is not None:
        d["burn"] = burn
    data = np.loadtxt(SAMPLE / "train.csv", delimiter=",", skiprows=1)
    return Predictor.create(Thresholds(), Schedule.from_dict(d), data[:, 0], data[:, 1].astype(np.int8), seed=7)


def scenario(p: Predictor) -> dict[str, Any]:
    task = make_task(from_spec({"name": "thresholds"}), "uniform", seed=0)
    return run_clients(p, [Client("A", BoundaryProber(task, 0), 100, 10_000),
                           Client("B", IIDStream(task, 1), 50, 5_000)])


def test_without_quotas_the_prober_pauses_the_round_for_everyone() -> None:
    """No quotas: the prober spends the round's budget and the round pauses for every client until its
    end (the model is not switched off: the next round answers again, docs/privacy/genericbbl.md 16)."""
    out = scenario(sample_predictor(None, None))
    assert out["paused"] and not out["halted"] and out["clients"]["B"]["refused"] > 0
    assert set(out["clients"]["B"]["reasons"]) == {"round-paused"} and out["burn"] == []


def test_with_quotas_the_prober_is_refused_and_the_iid_client_is_answered() -> None:
    out = scenario(sample_predictor(QUOTAS, BURN))
    a, b = out["clients"]["A"], out["clients"]["B"]
    assert b == {"sent": 5_000, "ok": 5_000, "refused": 0, "reasons": {}}
    assert a["sent"] == 10_000 and a["refused"] > 0 and set(a["reasons"]) == {"client-quota"}
    assert not out["halted"] and not out["paused"] and out["round"] == 1
    # the burn-rate signal: 15 windows of 1,000 queries; the prober's are far above the i.i.d. ones
    noisy = np.array([t for _, _, t in out["burn"]])
    assert noisy.size == 15
    assert noisy[:3].min() > 5 * np.median(noisy[-5:])
