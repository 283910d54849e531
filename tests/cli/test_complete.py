"""``everlast complete``: a hand-written schedule gets the default design's tests and a certificate;
a schedule that names no design cannot run without them; bad input is a clear error."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import main
from engine.errors import InvalidSchedule
from engine.schedule import Schedule

ROUND = {"T": 3000, "lam": 20, "R": 80_000, "c": 2000, "eps_bt": 0.5, "delta_bt": 1e-8, "alpha": 0.1,
         "m_S": 1000, "m_D": 60_000}


def _write(tmp_path: Path, doc: object) -> Path:
    p = tmp_path / "schedule.json"
    p.write_text(json.dumps(doc))
    return p


def test_a_schedule_naming_no_design_runs_the_default_and_needs_its_tests() -> None:
    with pytest.raises(InvalidSchedule, match=r"default design.*everlast complete"):
        Schedule.from_dict({"rounds": [ROUND]})


def test_complete_fills_the_tests_and_certifies_both_chains(tmp_path: Path) -> None:
    out = tmp_path / "done.json"
    res = CliRunner().invoke(main, ["complete", str(_write(tmp_path, {"rounds": [ROUND]})), "--out", str(out),
                                    "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert set(doc) >= {"schedule", "certificate", "guarantee"}
    sched = Schedule.from_dict(json.loads(out.read_text()))  # the written file runs as it is
    assert (sched.halting, sched.restarts) == ("noisy", "private")
    r = sched.rounds[0]
    assert r.halt_threshold is not None and r.halt_threshold < r.c  # the halting test fires below the cap
    assert r.restart_threshold is not None and r.restart_threshold > r.c  # one block per round
    assert r.block_cap == r.c + 1
    cert = doc["certificate"]
    assert cert["query_private"] and math.isfinite(cert["epsilon_queries"]) and math.isfinite(cert["epsilon_training"])


def test_complete_keeps_a_named_design_and_given_fields(tmp_path: Path) -> None:
    given = {**ROUND, "halt_eps": 0.2, "halt_threshold": 1500.0}
    res = CliRunner().invoke(main, ["complete", str(_write(tmp_path, {"rounds": [given], "restarts": "stateless"}))])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["restarts"] == "stateless" and doc["rounds"][0]["halt_eps"] == 0.2
    assert doc["rounds"][0]["restart_threshold"] is None


@pytest.mark.parametrize(("doc", "message"), [
    ({"rounds": [{**ROUND, "c": 20}]}, "too small for noisy halting"),
    ({"rounds": []}, "non-empty list"),
    ({"rounds": [ROUND], "halting": "sometimes"}, "unknown halting policy"),
    ([1, 2], "one JSON object"),
])
def test_bad_schedules_are_clear_errors(tmp_path: Path, doc: object, message: str) -> None:
    res = CliRunner().invoke(main, ["complete", str(_write(tmp_path, doc))])
    assert res.exit_code == 2 and message in res.output
