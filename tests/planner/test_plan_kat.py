"""Known answers of ``everlast plan --json`` (tests/data/kat-plan.json, made by scripts/make_plan_kat.py),
and a guard on the planner's CPU time.

A change to the planner's speed (caching, search, vectorising) must leave every schedule, n and
certificate of the pinned commands unchanged. A change to its mathematics changes them on purpose:
regenerate with ``.venv/bin/python scripts/make_plan_kat.py`` and say why in the commit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import make_plan_kat  # noqa: E402

pytestmark = pytest.mark.slow

CPU_BOUND_S = 20.0
"""Generous: the headline plan takes a few seconds of CPU; a minute (as once) fails."""


@pytest.mark.parametrize("name", list(make_plan_kat.CASES))
def test_plan_known_answers(name: str) -> None:
    pinned = json.loads(make_plan_kat.KAT.read_text())
    assert pinned[name]["args"] == list(make_plan_kat.CASES[name])
    made = make_plan_kat.run(make_plan_kat.CASES[name])
    want = pinned[name]["json"]
    for key in sorted(set(want) | set(made)):  # the first differing key, not a 40 kB diff
        assert made.get(key) == want.get(key), f"{name}: key {key!r} differs from kat-plan.json"


def test_headline_plan_cpu_time_is_bounded() -> None:
    """``everlast plan --epsilon 1 ... --json`` (no ablation, no design table) in a fresh process:
    its own CPU time (process_time, not wall clock) stays far below a minute."""
    out = subprocess.run([sys.executable, "-c", _CHILD, "--epsilon", "1", "--delta", "1e-6", "--alpha", "0.1",
                          "--halts", "split-votes", "--json", "--no-ablation", "--no-designs"],
                         capture_output=True, text=True, timeout=900, check=False, env=_COLD)
    assert out.returncode == 0, out.stderr[-2000:]
    cpu = float(out.stdout.strip().splitlines()[-1])
    assert cpu < CPU_BOUND_S, f"planning took {cpu:.1f} s of CPU"


ABLATION_CPU_BOUND_S = 30.0
"""Generous: the headline plan with its ablation and design table (the CLI's defaults) took ~15 s of
CPU when this guard was added (planning is meant to take a few seconds); once it took a minute."""


def test_headline_plan_with_ablation_cpu_time_is_bounded() -> None:
    """``everlast plan --epsilon 1 ... --json`` as the README runs it (the ablation's five levers and the
    design table on) in a fresh process: its own CPU time stays far below a minute."""
    out = subprocess.run([sys.executable, "-c", _CHILD, *make_plan_kat.CASES["eps1"]],
                         capture_output=True, text=True, timeout=900, check=False, env=_COLD)
    assert out.returncode == 0, out.stderr[-2000:]
    cpu = float(out.stdout.strip().splitlines()[-1])
    assert cpu < ABLATION_CPU_BOUND_S, f"planning with the ablation took {cpu:.1f} s of CPU"


_COLD = {**os.environ, "EVERLAST_PLAN_CACHE": "off"}
"""The guards time the search itself: no plan cache."""

WARM_CPU_BOUND_S = 10.0
"""Generous: the same plan from the plan cache (every search kept, every claim re-derived) took 1.1-2 s
of CPU when this guard was added."""


def test_headline_plan_from_the_plan_cache_cpu_time_is_bounded(tmp_path: Path) -> None:
    """The README's plan, run twice on one plan cache: the second run searches nothing (every solve is
    a hit), prints the same plan, and its CPU time is a few seconds."""
    env = {**os.environ, "EVERLAST_PLAN_CACHE": str(tmp_path)}
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", _CHILD_JSON, *make_plan_kat.CASES["eps1"]],
                             capture_output=True, text=True, timeout=900, check=False, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        cpu, text = out.stdout.split("\n", 1)
        runs.append((float(cpu), json.loads(text)))
    (_, cold), (cpu, warm) = runs
    assert cold["plan_cache"]["hits"] == 0 and cold["plan_cache"]["misses"] > 0
    assert warm["plan_cache"] == {"dir": str(tmp_path), "hits": cold["plan_cache"]["misses"], "misses": 0}
    cold.pop("plan_cache")
    warm.pop("plan_cache")
    assert warm == cold
    assert cpu < WARM_CPU_BOUND_S, f"planning from the cache took {cpu:.1f} s of CPU"


_CHILD_JSON = """
import sys, time
from click.testing import CliRunner
from everlast.cli.plan import plan_cmd
t0 = time.process_time()
res = CliRunner().invoke(plan_cmd, sys.argv[1:], catch_exceptions=False)
assert res.exit_code == 0, res.output
print(time.process_time() - t0)
print(res.output)
"""

_CHILD = """
import sys, time
from click.testing import CliRunner
from everlast.cli.plan import plan_cmd
t0 = time.process_time()
res = CliRunner().invoke(plan_cmd, sys.argv[1:], catch_exceptions=False)
assert res.exit_code == 0, res.output
print(time.process_time() - t0)
"""
