"""bench.e2e cannot rot: its quick run completes on the real broker and prints the JSON the README's
figures come from. Nothing here asserts a speed (benchmarks measure; tests check that they run)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def test_the_quick_e2e_benchmark_runs_and_prints_its_figures() -> None:
    r = subprocess.run([sys.executable, "-m", "bench.e2e", "--quick", "--watchdog", "300"],
                       capture_output=True, text=True, timeout=420)
    assert r.returncode == 0, r.stderr[-6000:]
    out = json.loads(r.stdout)
    assert out["queries"] == 50_000 and out["repeats"] == 1 and len(out["runs"]) == 1
    assert out["daemon_qps"] > 0 and out["passthrough_qps"] > 0
    assert out["ratio"] == pytest.approx(out["daemon_qps"] / out["passthrough_qps"])
    assert 0 <= out["p50_ms"] <= out["p99_ms"] and out["latency_samples"] > 0
    assert out["daemon_cpu_us_per_record"] > 0 and out["passthrough_cpu_us_per_record"] > 0
