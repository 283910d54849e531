"""``everlast simulate --epsilon 1 --rounds 1 --json`` runs round 1 of the epsilon-1 plan at its real
size (7.3e7 training points, 4.7e8 queries) and the first queries of round 2. Heavy (minutes of CPU,
about 6 GB): in the huge set (`bash scripts/test.sh -m huge`), not in the default run. Targets: not
halted, round 1 complete, round 2 answering, the
answered labels' error within alpha = 0.1 in each, peak RSS within 8 GiB."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.huge]

GIB = 1 << 30


def test_simulate_runs_round_1_of_the_epsilon_1_plan_and_answers_round_2() -> None:
    r = subprocess.run([sys.executable, "-m", "everlast.cli", "simulate", "--epsilon", "1", "--rounds", "1", "--json"],
                       capture_output=True, text=True, timeout=3600, check=False)
    assert r.returncode == 0, r.stderr[-4000:]
    out = json.loads(r.stdout)
    assert out["halted"] is False
    rounds = {x["round"]: x for x in out["rounds"]}
    assert rounds[1]["queries"] == out["schedule"]["rounds"][0]["R"] and rounds[1]["refused"] == 0
    assert rounds[2]["answered"] > 0
    for x in rounds.values():
        assert x["error_answers"] is not None and x["error_answers"] <= 0.1
    assert 0 < out["peak_rss_bytes"] <= 8 * GIB
