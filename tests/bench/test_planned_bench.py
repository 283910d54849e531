"""bench.planned and bench.plan cannot rot: their quick runs complete (bench.planned on the real
broker: a planned model served through Kafka, every label compared with the in-process predictor)
and print the JSON the figures come from. No speed is asserted; the labels' identity is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow]

KEYS = {"ready_s", "peak_rss_bytes", "daemon_qps", "passthrough_qps", "ratio", "transition_s", "p50_ms", "p99_ms",
        "identical"}


@pytest.mark.broker
def test_the_quick_planned_benchmark_serves_round_1_through_kafka_with_identical_labels() -> None:
    r = subprocess.run([sys.executable, "-m", "bench.planned", "--quick", "--watchdog", "1500"],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-6000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(out) >= KEYS
    assert out["identical"] is True and out["labels_identical"] == out["labels_compared"]
    assert out["round1_labels"] == out["R_1"] and out["round2_labels"] > 0  # round 1 complete, round 2 answering
    assert out["ready_s"] > 0 and out["peak_rss_bytes"] > 0 and out["transition_s"] >= 0
    assert out["ratio"] == pytest.approx(out["daemon_qps"] / out["passthrough_qps"])
    assert 0 <= out["p50_ms"] <= out["p99_ms"]


def test_the_quick_plan_benchmark_prints_cpu_times() -> None:
    r = subprocess.run([sys.executable, "-m", "bench.plan", "--quick"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    rows = json.loads(r.stdout.strip().splitlines()[-1])["plan"]
    assert [row["name"] for row in rows] == ["eps8_quick"]
    assert all(row["cpu_s"] > 0 and row["n_required"] > 0 and row["exit_code"] == 0 for row in rows)
    for row in rows:  # the second run plans from the cache the first filled, and prints the same plan
        assert row["same"] is True and row["warm_cpu_s"] > 0
        assert row["plan_cache"]["hits"] == 0 and row["warm_plan_cache"]["misses"] == 0
        assert row["warm_plan_cache"]["hits"] == row["plan_cache"]["misses"] > 0
