"""The halt-budget alerts stay quiet on honest traffic of the planned epsilon-8 model.

The model is what ``everlast plan --epsilon 8`` plans (and ``everlast serve`` runs): round 1's R_1,
hard cap c_1 and band, and the default burn-rate signal (four windows per round, eps_b = 5% of
epsilon; ``engine.burn``). Honest traffic makes tops at the round's top rate (the rate its halt
budget is sized on: ``round_solvers._exact_rate``, the engine's integer band and DLap noise), so
after w of the round's W windows the released sum has mean w/W R_1 p_top and, from the windows'
DLap(1/eps_b) noise alone, standard deviation ``release_noise_sd(burn, w)``. At five standard
deviations above its mean the noisy count stays below EverlastHaltBudgetHot's 50% of c_1 at every
release, and promtool evaluates the rules from deploy/prometheus/alerts.yml on exactly that series:
no alert. The previous default (eps_b = 0.01, a hundred windows per round) fails the same check.
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from everlast.cli.plan import plan_cmd
from everlast.engine.burn import Burn, release_noise_sd
from everlast.engine.planner.round_solvers import _exact_rate
from tests.deploy.helpers import ALERTS, PROMETHEUS_HOW, require_tool

pytestmark = pytest.mark.slow

SIGMAS = 5.0
HOT = 0.5
"""EverlastHaltBudgetHot's threshold (the lower of the two HaltBudget rules), checked in the rule."""


@pytest.fixture(scope="module")
def eps8() -> dict[str, float]:
    res = CliRunner().invoke(plan_cmd, ["--epsilon", "8", "--json", "--no-ablation", "--no-designs"],
                             catch_exceptions=False)
    d = json.loads(res.output)
    r = d["schedule"][0]
    rate = _exact_rate(r["T"], r["gamma"], r["eps_bt"], r["lambda"], 1)
    return {"R": r["R"], "c": r["c"], "mean": r["R"] * rate, **{f"burn_{k}": v for k, v in d["design"]["burn"].items()}}


def _worst(m: dict[str, float], burn: Burn) -> list[float]:
    """Per release w = 1..W: the released sum at SIGMAS standard deviations above its honest mean."""
    W = int(m["R"]) // burn.window
    return [m["mean"] * w / W + SIGMAS * release_noise_sd(burn, w) for w in range(1, W + 1)]


def test_the_default_signal_is_quiet_on_honest_traffic_and_the_old_default_was_not(eps8: dict[str, float]) -> None:
    rules = {r["alert"]: r["expr"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]
             if "alert" in r}
    assert f"> {HOT}" in rules["EverlastHaltBudgetHot"]
    burn = Burn(int(eps8["burn_window"]), eps8["burn_eps"])
    assert max(_worst(eps8, burn)) < HOT * eps8["c"]
    old = Burn(int(eps8["R"]) // 100, 0.01)
    assert max(_worst(eps8, old)) > eps8["c"]  # its noise alone exceeds the whole budget


def test_promtool_evaluates_no_halt_budget_alert_on_that_series(eps8: dict[str, float], tmp_path: Path) -> None:
    exe = require_tool("promtool", PROMETHEUS_HOW)
    burn = Burn(int(eps8["burn_window"]), eps8["burn_eps"])
    values = [0, *(math.ceil(v) for v in _worst(eps8, burn))]
    labels = 'job="everlast",instance="a:9464",model="p"'
    tests = {"rule_files": [str(ALERTS)], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [
            {"series": f"everlast_round_halts_allowed{{{labels}}}", "values": f"{int(eps8['c'])}x{len(values) + 15}"},
            {"series": f"everlast_round_burn_noisy_tops{{{labels}}}",
             "values": " ".join(str(v) for v in values) + f" {values[-1]}x15"},
        ],
        "alert_rule_test": [{"eval_time": f"{t}m", "alertname": a, "exp_alerts": []}
                            for t in range(len(values) + 15)
                            for a in ("EverlastHaltBudgetHot", "EverlastHaltBudgetCritical")],
    }]}
    f = tmp_path / "quiet_test.yml"
    f.write_text(yaml.safe_dump(tests))
    r = subprocess.run([exe, "test", "rules", str(f)], capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
