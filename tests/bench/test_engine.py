"""``python -m bench.engine --quick`` runs and prints its JSON (CI keeps the benchmark from rotting).

No timing is asserted (speed is what the benchmark reports, not what tests decide): only that it
runs, that every row has its keys, and that the numbers are finite and positive.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_quick_bench_prints_its_json() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "bench.engine", "--quick"], capture_output=True, text=True, timeout=300, check=True
    )
    data = json.loads(out.stdout)
    assert set(data) == {"engine", "transition", "memory", "constant_work"}
    assert data["engine"] and data["transition"]
    for r in data["engine"]:
        assert {"design", "T"} <= set(r)
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("engine_qps", "floor_qps", "ratio"))
    small = [r["variant"] for r in data["engine"] if r.get("batch") == 1000]
    assert small == ["off", "quotas", "burn", "quotas+burn"]
    (cw,) = data["constant_work"]
    assert cw["batch"] == 1000 and all(math.isfinite(cw[k]) and cw[k] > 0 for k in ("far_us", "near_us", "ratio"))
    assert [(r["concept"], r["points"]) for r in data["transition"]] == [("thresholds", 10**5), ("thresholds", 10**6)]
    for r in data["transition"]:
        numbers = ("seconds", "sort_seconds", "sort_seconds_hot", "ratio", "ratio_median", "cpu_ratio",
                   "seconds_unprepared", "ratio_unprepared", "ratio_unprepared_median", "cpu_ratio_unprepared")
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in numbers)
        assert r["repeats"] >= 2
        assert isinstance(r["overlap"], bool)
    (mem,) = data["memory"]
    assert all(math.isfinite(mem[k]) and mem[k] > 0 for k in ("fresh_ms_per_mb", "recycled_ms_per_mb"))
