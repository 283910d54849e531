"""Plan = serve: ``everlast plan`` and a daemon model with the same targets use the same defaults (the
burn-rate signal included) and agree on n; the daemon serves on n_required examples."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from everlast.cli.plan import plan_cmd
from everlast.daemon.config import load
from everlast.daemon.privacy import plan_model
from everlast.engine.burn import Burn, default_eps, default_window
from everlast.engine.concepts import Thresholds

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "deploy" / "compose" / "sample"

pytestmark = pytest.mark.slow


def _model(tmp: Path, epsilon: float) -> object:
    p = tmp / "t.toml"
    p.write_text(f'[[models]]\nid = "t"\ndata = "{SAMPLE / "train.csv"}"\n'
                 f"[models.targets]\nepsilon = {epsilon}\ndelta = 1e-6\nalpha = 0.1\n")
    return load(p).models[0]


def test_plan_and_serve_agree_on_n_and_the_burn_signal_and_serve_on_n_required(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    eps = 8.0
    res = CliRunner().invoke(plan_cmd, ["--epsilon", str(eps), "--json", "--no-ablation", "--no-designs"],
                             catch_exceptions=False)
    d = json.loads(res.output)
    n = d["n_required"]
    burn = d["design"]["burn"]
    r1 = d["schedule"][0]["R"]
    assert burn == {"window": default_window(r1), "eps": default_eps(eps)}  # the daemon's default
    with caplog.at_level(logging.INFO, logger="everlast.daemon"):
        schedule, guarantee = plan_model(_model(tmp_path, eps), Thresholds(), n)  # type: ignore[arg-type]
    assert schedule.burn == Burn(burn["window"], burn["eps"])
    assert [r.R for r in schedule.rounds] == [r["R"] for r in d["schedule"]]
    assert guarantee.epsilon_queries == pytest.approx(d["epsilon_queries"])
    logged = caplog.text
    assert "planning a schedule for epsilon = 8" in logged and "burn-rate signal eps_b = 0.4" in logged
    assert "planned in" in logged


def test_plan_without_the_burn_signal_is_cheaper_and_says_so() -> None:
    def n_of(*extra: str) -> int:
        res = CliRunner().invoke(plan_cmd, ["--epsilon", "8", "--json", "--no-ablation", "--no-designs", *extra],
                                 catch_exceptions=False)
        return int(json.loads(res.output)["n_required"])

    assert n_of("--burn", "off") < n_of()


def test_a_refusal_names_every_charged_component_and_offers_no_stronger_epsilon(tmp_path: Path) -> None:
    from everlast.daemon.errors import ConfigError

    eps, alpha = 40.0, 0.45
    p = tmp_path / "r.toml"
    p.write_text(f'[[models]]\nid = "r"\ndata = "{SAMPLE / "train.csv"}"\n'
                 f"[models.targets]\nepsilon = {eps}\ndelta = 1e-6\nalpha = {alpha}\n")
    cfg = load(p).models[0]
    res = CliRunner().invoke(plan_cmd, ["--epsilon", str(eps), "--alpha", str(alpha), "--json", "--no-ablation",
                                        "--no-designs"], catch_exceptions=False)
    need = int(json.loads(res.output)["n_required"])
    with pytest.raises(ConfigError) as info:
        plan_model(cfg, Thresholds(), need // 2)
    msg = str(info.value)
    assert f"needs {need:,} training examples" in msg
    assert "the halting test eps_h = " in msg and "the burn-rate signal eps_b = 0.5 (the default" in msg
    offered = re.search(r"the strongest epsilon n = [\d,]+ certifies is ([\d.e+]+)", msg)
    assert offered is None or float(offered.group(1)) > eps, msg


def _forget_plans() -> None:
    from everlast.engine.planner import api

    api.forget_plans()


def test_serve_plans_from_the_search_plan_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """``everlast plan`` then ``everlast serve`` (or a restart) with the same targets: the daemon reuses
    every search the plan command kept on disk, and serves the same schedule."""
    monkeypatch.setenv("EVERLAST_PLAN_CACHE", str(tmp_path / "plans"))
    _forget_plans()
    res = CliRunner().invoke(plan_cmd, ["--epsilon", "8", "--json", "--no-ablation", "--no-designs"],
                             catch_exceptions=False)
    d = json.loads(res.output)
    assert d["plan_cache"]["misses"] > 0
    _forget_plans()  # a new process
    with caplog.at_level(logging.INFO, logger="everlast.daemon"):
        schedule, _ = plan_model(_model(tmp_path, 8.0), Thresholds(), d["n_required"])  # type: ignore[arg-type]
    assert [r.T for r in schedule.rounds] == [r["T"] for r in d["schedule"]]
    m = re.search(r"plan cache (\S+): (\d+) searches reused, (\d+) run", caplog.text)
    assert m is not None, caplog.text
    assert m.group(1) == str(tmp_path / "plans") and int(m.group(2)) > 0 and m.group(3) == "0"
