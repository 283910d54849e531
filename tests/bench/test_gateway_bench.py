"""bench.gateway cannot rot: its quick run completes on the real broker, daemon and gateway and prints
the JSON its figures come from. Nothing here asserts a speed (benchmarks measure; tests check that
they run)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.broker]


def test_the_quick_gateway_benchmark_runs_and_prints_its_figures() -> None:
    r = subprocess.run([sys.executable, "-m", "bench.gateway", "--quick", "--watchdog", "300"],
                       capture_output=True, text=True, timeout=420)
    assert r.returncode == 0, r.stderr[-6000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for k in ("gateway_qps", "direct_qps", "ratio", "p50_ms", "p99_ms", "echo_p50_ms", "echo_p99_ms"):
        assert k in out, k
    assert out["gateway_qps"] > 0 and out["direct_qps"] > 0
    assert out["ratio"] == pytest.approx(out["gateway_qps"] / out["direct_qps"])
    assert 0 <= out["p50_ms"] <= out["p99_ms"] and out["latency_samples"] > 0
    assert out["queries_per_request"] == 100
    assert 0 <= out["echo_p50_ms"] <= out["echo_p99_ms"]  # the path's floor: a bare echo behind a gateway
