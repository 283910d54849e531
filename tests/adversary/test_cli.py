"""``everlast audit`` prints one JSON object with the contract keys; ``everlast report`` draws records;
``python -m everlast.adversary_sim`` runs the streams in-process. The subcommands are invoked as the click
commands ``everlast`` registers (cli.main), so these tests do not depend on the other subcommands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from everlast.cli.audit import audit as audit_cmd
from everlast.cli.report import report as report_cmd
from everlast.engine.design import RETIRED

CONTRACT = {"game", "variant", "claimed_epsilon", "epsilon_lower_bound", "confidence", "trials"}


@pytest.mark.parametrize("args", [
    ["--game", "training", "--trials", "40", "--attack", "flip", "--queries", "200"],
    ["--game", "query", "--trials", "20", "--attack", "halting"],
    ["--game", "query", "--trials", "20", "--variant", "no-noise", "--queries", "100", "--design", "paper"],
    ["--game", "query", "--trials", "20", "--attack", "halting", "--halting", "paper"],
])
def test_audit_prints_one_json_object(args: list[str]) -> None:
    res = CliRunner().invoke(audit_cmd, [*args, "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.stdout.splitlines() if ln.strip()]
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert set(out) >= CONTRACT
    assert out["game"] == args[1] and out["trials"] == int(args[3])
    assert isinstance(out["claimed_epsilon"], float) and isinstance(out["epsilon_lower_bound"], float)
    assert out["confidence"] == 0.95
    paper = "paper" in args
    assert out["design"] == ("paper" if paper else "target-charged")  # no design flag: the default design
    assert (out["halting"], out["restarts"]) == (("paper", "per-top") if paper else ("noisy", "none"))
    if out["game"] == "query" and paper:
        assert out["claimed_kind"] == "conditional" and out["claimed_epsilon_proven"] is None  # +inf in JSON
        assert any("NOT PROVEN" in w for w in out["warnings"])
    else:
        assert out["claimed_kind"].startswith("proven")


def test_audit_human_output_and_errors() -> None:
    r = CliRunner().invoke(audit_cmd, ["--game", "training", "--trials", "20", "--attack", "relabel"])
    assert r.exit_code == 0 and "relabel" in r.output and "claimed" in r.output and "target-charged" in r.output
    rs = CliRunner().invoke(audit_cmd, ["--game", "query", "--attack", "restart", "--trials", "20",
                                        "--restarts", "per-top", "--wait-run", "10", "--probe-offset", "0",
                                        "--theta", "3"])
    assert rs.exit_code == 0 and "restart" in rs.output and "paper" in rs.output
    for flag, value in (("--halting", "never"), ("--restarts", "private"), ("--restarts", "stateless")):
        retired = CliRunner().invoke(audit_cmd, ["--game", "query", "--attack", "halting", "--trials", "20",
                                                 flag, value])
        assert retired.exit_code == 2 and RETIRED[value][:40] in retired.output
    for bad in (["--game", "training", "--attack", "chain"],
                ["--game", "query", "--halting", "noisy", "--restarts", "per-top"],
                ["--game", "query", "--design", "paper", "--variant", "charged-c"],
                ["--game", "query", "--variant", "charged-c"]):
        assert CliRunner().invoke(audit_cmd, [*bad, "--trials", "20"]).exit_code == 2


def test_stream_runner_and_report(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from everlast.adversary_sim.run import main as streams

    runner = CliRunner()
    rec = runner.invoke(streams, ["prober", "--queries", "20000", "--json"])
    assert rec.exit_code == 0, rec.output
    run = json.loads(rec.stdout)
    assert not run["halted"] and run["paused_rounds"][:1] == [1] and run["queries_to_pause"] < 5000
    (tmp_path / "prober.json").write_text(rec.stdout)
    audit = runner.invoke(audit_cmd, ["--game", "training", "--trials", "20", "--queries", "100", "--json"])
    (tmp_path / "audit.json").write_text(audit.stdout)
    replay = {"sent": 10, "answered": 10, "missing": 0, "statuses": {"ok": 10}, "rounds": {"1": 10},
              "accuracy": 0.9, "throughput_qps": 100.0, "seconds": 0.1,
              "latency_ms": {"p50": 1.0, "p90": 2.0, "p99": 3.0, "max": 4.0}}
    (tmp_path / "replay.json").write_text(json.dumps(replay))
    (tmp_path / "queries.jsonl").write_text("".join(
        json.dumps({"id": f"a-{i}", "x": i / 10, "true_label": int(i >= 5), "label": int(i >= 4), "status": "ok",
                    "round": 1 + i // 5}) + "\n" for i in range(10)))
    out = tmp_path / "report"
    for name in ("prober.json", "audit.json", "replay.json", "queries.jsonl"):
        r = runner.invoke(report_cmd, [str(tmp_path / name), "--out", str(out)])
        assert r.exit_code == 0, r.output
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert {"prober-accuracy.png", "prober-halts.png", "audit-bounds.png", "audit-scores.png",
            "replay-latency.png", "replay-rounds.png", "queries-accuracy.png"} <= set(pngs)
    md = (out / "audit.md").read_text()
    assert "privacy audit" in md and "claimed epsilon" in md
    assert "paused" in (out / "prober.md").read_text()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"what": 1}))
    assert runner.invoke(report_cmd, [str(bad), "--out", str(out)]).exit_code != 0
