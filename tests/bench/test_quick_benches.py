"""The other benchmarks' quick forms run and print one JSON object (CI keeps them from rotting).
No timing is asserted: only that each runs and that its numbers are finite and positive."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def _run(module: str) -> Any:
    out = subprocess.run([sys.executable, "-m", module, "--quick"], capture_output=True, text=True,
                         timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout)


def test_bench_learner_quick() -> None:
    data = _run("bench.learner")
    rows = data["rows"] if isinstance(data, dict) and "rows" in data else data
    assert rows
    flat = json.dumps(rows)
    assert "NaN" not in flat and "Infinity" not in flat


def test_bench_compare_quick() -> None:
    data = _run("bench.compare")
    assert isinstance(data, dict) and data.get("methods")
    for m in data["methods"]:
        ns = [x for x in m.get("n_required", []) if x is not None]
        assert all(isinstance(x, int | float) and math.isfinite(x) and x > 0 for x in ns)


def test_bench_search_quick() -> None:
    from everlast.engine.concepts.thresholds import SORTED_SEARCH_MIN_BATCH, SORTED_SEARCH_MIN_T

    rows = _run("bench.search")["search"]
    assert {(r["table"], r["T"], r["batch"]) for r in rows} == {
        (table, T, B) for table in ("trained", "random") for T in (10, 300, 10**4) for B in (64, 4096)}
    for r in rows:
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("plain_ns", "engine_ns", "ratio"))
        assert r["sorted"] == (r["T"] >= SORTED_SEARCH_MIN_T and r["batch"] >= SORTED_SEARCH_MIN_BATCH)


def test_bench_fitcost_quick() -> None:
    rows = _run("bench.fitcost")["fitcost"]
    assert [r["method"] for r in rows] == ["stumps", "trees"]
    for r in rows:
        assert math.isfinite(r["seconds"]) and r["seconds"] > 0 and r["traced_peak"] > 0


def test_bench_accuracy_quick() -> None:
    """One JSON object per line and (data set, method, epsilon), with the contract's keys."""
    out = subprocess.run([sys.executable, "-m", "bench.accuracy", "--quick", "--json"], capture_output=True,
                         text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr[-4000:]
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert all(set(r) == {"dataset", "method", "epsilon", "mean", "std", "fits", "bound", "covered", "served",
                          "constant", "holdout_points", "test_points"} for r in rows)
    mine = [r for r in rows if r["method"].startswith("everlast-")]
    assert mine and all(0.0 <= r[k] <= 1.0 for r in mine for k in ("bound", "covered", "served", "constant"))
    assert all(r[k] is None for r in rows if not r["method"].startswith("everlast-")
               for k in ("bound", "covered", "served", "constant"))
    methods = {r["method"] for r in rows}
    assert {"everlast-stumps", "everlast-trees-3", "majority", "best-stump", "tree-3", "logreg"} <= methods
    assert all(r["dataset"] == "bananas" and 0.0 <= r["mean"] <= 1.0 for r in rows)
    # every method, the deterministic baselines too, is fitted once on each of the --quick run's 3 splits
    assert all((r["epsilon"] is None) == (not r["method"].startswith(("everlast", "diffpriv"))) for r in rows)
    assert all(r["fits"] == 3 and r["test_points"] == 1590 for r in rows)
    assert all(r["holdout_points"] == (927 if r["method"].startswith("everlast-") else None) for r in rows)
    assert any(r["std"] > 0 for r in rows if r["epsilon"] is None)  # the splits differ (a baseline's accuracy moves)


def test_bench_capacity_quick() -> None:
    """Every row has a finite peak and ratio; no ratio is asserted (the peak moves with the second
    core's timing), only that the model is the right order of magnitude."""
    rows = _run("bench.capacity")["capacity"]
    assert {r["concept"] for r in rows} == {"thresholds", "intervals", "stumps"}
    for r in rows:
        assert r["peak_bytes"] > 0 and math.isfinite(r["ratio"]) and 0.2 < r["ratio"] < 5.0


@pytest.mark.broker
def test_bench_hop_quick() -> None:
    rows = _run("bench.hop")["hop"]
    assert [r["fetch_max_wait_ms"] for r in rows] == [5, 20]
    for r in rows:
        assert r["records"] == 50
        for k in ("ack", "end_to_end"):
            assert 0 <= r[k]["p50_ms"] <= r[k]["p99_ms"] <= r[k]["max_ms"] < math.inf
