"""``everlast complete``: a hand-written schedule gets its design's halting test (target-charged,
the default) and a certificate; the paper's design needs none; bad input is a clear error."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from everlast.cli.complete import complete
from everlast.engine.design import RETIRED
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import above_threshold as at
from everlast.engine.planner.fill import CAP_SHARE, EPS_H_GRID
from everlast.engine.schedule import Schedule

ROUND = {"T": 3000, "lam": 20, "R": 80_000, "c": 2000, "eps_bt": 0.5, "delta_bt": None, "alpha": 0.1,
         "m_S": 1000, "m_D": 60_000}


def _write(tmp_path: Path, doc: object) -> Path:
    p = tmp_path / "schedule.json"
    p.write_text(json.dumps(doc))
    return p


def test_a_schedule_naming_no_design_runs_the_default_and_needs_its_test() -> None:
    with pytest.raises(InvalidSchedule, match=r"target-charged design \(the default\).*everlast complete"):
        Schedule.from_dict({"rounds": [ROUND]})


def test_complete_fills_the_halting_test_and_certifies_both_chains(tmp_path: Path) -> None:
    out = tmp_path / "done.json"
    res = CliRunner().invoke(complete, [str(_write(tmp_path, {"rounds": [ROUND]})), "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc) >= {"schedule", "certificate", "guarantee"}
    sched = Schedule.from_dict(json.loads(out.read_text()))  # the written file runs as it is
    assert sched.design.name == "target-charged" and doc["schedule"]["design"] == "target-charged"
    r = sched.rounds[0]
    assert r.halt_eps in EPS_H_GRID and r.halt_threshold is not None and r.halt_threshold < r.c
    # the hard-cap margin c - c0 is the smallest whose cap probability meets the delta share
    tq, tr = at.scales(r.halt_eps)
    target = CAP_SHARE * 1e-6 / at.cap_charge(r.halt_eps, 1.0)
    assert at.at_tail(r.c - r.halt_threshold, tq, tr) <= target < at.at_tail(r.c - r.halt_threshold - 1, tq, tr)
    cert = doc["certificate"]
    assert cert["design"] == "target-charged" and cert["query_private"]
    assert math.isfinite(cert["epsilon_queries"]) and math.isfinite(cert["epsilon_training"])
    assert cert["delta_training"] <= 1e-6 and cert["delta_queries"] <= 1e-6
    assert "queries: (" in doc["guarantee"] and "weak" in doc["guarantee"]  # eps0 = 0.5 per query


def test_complete_keeps_given_fields_and_the_papers_design(tmp_path: Path) -> None:
    given = {**ROUND, "halt_eps": 0.2, "halt_threshold": 1500.0}
    res = CliRunner().invoke(complete, [str(_write(tmp_path, {"rounds": [given]}))])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["rounds"][0]["halt_eps"] == 0.2 and doc["rounds"][0]["halt_threshold"] == 1500
    paper = {**ROUND, "delta_bt": 1e-12, "eps_bt": 0.9}
    res = CliRunner().invoke(complete, [str(_write(tmp_path, {"rounds": [paper], "design": "paper"})), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schedule"]["design"] == "paper" and doc["schedule"]["rounds"][0]["halt_eps"] is None
    assert doc["certificate"]["query_private"] is False and "NOT certified" in doc["guarantee"]


@pytest.mark.parametrize(("doc", "message"), [
    ({"rounds": [{**ROUND, "c": 20}]}, "too small for noisy halting"),
    ({"rounds": []}, "non-empty list"),
    ({"rounds": [ROUND], "halting": "sometimes"}, "unknown design"),
    ({"rounds": [ROUND], "restarts": "private"}, RETIRED["private"][:40]),
    ({"rounds": [{**ROUND, "restart_eps": 0.1}]}, "retired"),
    ([1, 2], "one JSON object"),
])
def test_bad_schedules_are_clear_errors(tmp_path: Path, doc: object, message: str) -> None:
    res = CliRunner().invoke(complete, [str(_write(tmp_path, doc))])
    assert res.exit_code == 2 and message in " ".join(res.output.split())
