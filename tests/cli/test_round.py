"""``everlast round`` and ``everlast complete`` on a round that gives only its sizes: a
runnable round for a given n, concept and stream, the values chosen and why, its certificate; a
failing check names the value to use, not a formula."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from everlast.cli.complete import complete
from everlast.cli.hand_round import round_cmd
from everlast.engine.planner.fill import hand_round, sample_eps0
from everlast.engine.schedule import Schedule


def test_round_builds_a_runnable_round_and_says_why(tmp_path: Path) -> None:
    out = tmp_path / "schedule.json"
    res = CliRunner().invoke(round_cmd, ["--n", "100000", "--queries", "80000", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    sched = Schedule.from_dict(json.loads(out.read_text()))  # the written file runs as it is
    r = sched.rounds[0]
    assert r.R == 80_000 and r.lam * r.T <= 100_000 and r.m_D == min(r.lam * r.T, r.R)
    assert r.eps_bt >= sample_eps0(r.T, r.band, r.alpha)  # the accuracy floor, rounded up
    assert r == hand_round(T=r.T, lam=r.lam, R=r.R, alpha=r.alpha, m_S=r.m_S, m_D=r.m_D)  # hand_round's round
    assert set(doc["choices"]) >= {"lam", "T", "R", "m_D", "m_S", "eps_bt", "c", "halt_eps", "halt_threshold"}
    assert doc["failing_checks"] == [] and doc["certificate"]["runnable"]
    assert doc["certificate"]["epsilon_training"] < 10 and doc["certificate"]["query_private"]
    text = CliRunner().invoke(round_cmd, ["--n", "100000", "--queries", "80000"]).output
    assert "why" in text and "certified at n = 100,000" in text and "every check holds" in text


def test_a_tiny_round_holds_its_checks_and_says_accuracy_is_unproven() -> None:
    """eps_bt is sized by the flip rule, so even n = 100 holds every check; Theorem A then proves
    nothing at lambda = 2, and the command says so and where to measure accuracy instead."""
    res = CliRunner().invoke(round_cmd, ["--n", "100", "--queries", "1000"])
    assert res.exit_code == 0, res.output
    assert "every check holds" in res.output and "(weak" in res.output
    assert "proven accuracy: none" in res.output and "everlast simulate" in res.output
    assert ">= (" not in res.output  # values, not formulas


def test_complete_fills_a_round_given_only_its_sizes(tmp_path: Path) -> None:
    p = tmp_path / "hand.json"
    p.write_text(json.dumps({"rounds": [{"T": 16_000, "lam": 5, "R": 80_000, "alpha": 0.1}]}))
    res = CliRunner().invoke(complete, [str(p), "--n", "100000", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    r = Schedule.from_dict(doc["schedule"]).rounds[0]
    assert (r.m_D, r.eps_bt) == (80_000, hand_round(T=16_000, lam=5, R=80_000, alpha=0.1, m_S=1, m_D=1).eps_bt)
    assert set(doc["filled"]["1"]) == {"c", "eps_bt", "m_S", "m_D"} and doc["failing_checks"] == []
    p.write_text(json.dumps({"rounds": [{"T": 300, "lam": 5, "R": 80_000, "alpha": 0.1, "c": 2000, "eps_bt": 0.01,
                                         "m_S": 100, "m_D": 1500}]}))
    res = CliRunner().invoke(complete, [str(p), "--n", "100000"])
    assert res.exit_code == 0, res.output
    assert re.search(r"warning: round 1: T = 300 is too small for eps_bt = 0\.01: use T >= [\d,]+, or eps_bt >= "
                     r"[\d.]+", res.output), res.output


def test_round_says_plainly_what_theorem_a_proves() -> None:
    """n = 100,000: no round of this n has Theorem A's bound at alpha = 0.1; the command says so, names the
    best bound any size reaches, and writes a round of lambda >= 10 (lambda = 2 erred 0.217 on the stream
    of tests/cli/test_simulate.py and paused in three of five rounds)."""
    from everlast.cli.hand_round import LAMBDA_FLOOR

    res = CliRunner().invoke(round_cmd, ["--n", "100000", "--queries", "80000", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    acc = doc["accuracy"]
    assert acc["alpha"] == 0.1 and acc["proven_round_1"] is False and acc["round_1_bound"] > 0.1
    assert "none at alpha = 0.1" in acc["statement"] and "best bound any round" in acc["statement"]
    assert doc["schedule"]["rounds"][0]["lam"] >= LAMBDA_FLOOR


@pytest.mark.slow
def test_round_writes_a_proven_round_when_n_allows_it() -> None:
    """n = 3,000,000: the round written has Theorem A's bound <= alpha for round 1 (recomputed here from
    the schedule), and the command says that later rounds of the repeated round are not covered."""
    from everlast.engine.design import DEFAULT
    from everlast.engine.planner.accuracy import round_accuracy

    res = CliRunner().invoke(round_cmd, ["--n", "3000000", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    r = Schedule.from_dict(doc["schedule"]).rounds[0]
    assert doc["accuracy"]["proven_round_1"] and round_accuracy(r, DEFAULT, 1, 0.0, 1).bound <= 0.1
    assert "rounds >= 2 of the repeated round: not proven" in doc["accuracy"]["statement"]
