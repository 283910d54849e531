"""CPU time of ``everlast plan``, one fresh process per run: searched (an empty plan cache), then
again from the plan cache the first run filled.

    python -m bench.plan [--quick]

For each command of ``COMMANDS`` (the README's plan table: epsilon 1 and 8, ``--n 1e9``,
``--mechanism all``; ``--quick``: a small target that plans in a second or two), the child's own
CPU time (``time.process_time`` measured inside it, so a loaded machine adds little), its wall
time and its peak RSS, first on an empty plan cache (``cpu_s``: every search run, what a first plan
of new targets costs) and then on the cache that run filled (``warm_cpu_s``: what a restart, or
``serve`` after ``plan``, costs: no search, every claim re-derived; ``warm_ratio`` = cpu_s /
warm_cpu_s; ``same``: the two printed the same plan). CPU time is the figure to compare: on the
shared 2-core machine wall time follows the load. The last line is one JSON object: ``{"plan": [rows]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BASE = ["--delta", "1e-6", "--alpha", "0.1", "--halts", "split-votes", "--json"]
COMMANDS: dict[str, list[str]] = {
    "eps1": ["--epsilon", "1", *BASE],
    "eps8": ["--epsilon", "8", *BASE],
    "eps1_n1e9": ["--epsilon", "1", *BASE, "--n", "1e9"],
    "eps1_all": ["--epsilon", "1", *BASE, "--mechanism", "all"],
}
QUICK: dict[str, list[str]] = {
    "eps8_quick": ["--epsilon", "8", *BASE, "--rounds", "3", "--eps-h", "0.1", "--no-ablation", "--no-designs"],
}
CHILD = """
import hashlib, json, resource, sys, time
from click.testing import CliRunner
from everlast.cli.plan import plan_cmd
t0 = time.process_time()
res = CliRunner().invoke(plan_cmd, sys.argv[1:], catch_exceptions=False)
cpu = time.process_time() - t0
out = json.loads(res.output)
cache = out.pop("plan_cache", None)
print(json.dumps({"cpu_s": cpu, "exit_code": res.exit_code, "n_required": out.get("n_required"),
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "plan_cache": cache, "digest": hashlib.sha256(json.dumps(out, sort_keys=True).encode()).hexdigest()}))
"""
"""The child: plans once and prints its CPU time (after its imports) and peak RSS."""


def measure(args: list[str], cache: str) -> dict[str, object]:
    t0 = time.perf_counter()
    env = {**os.environ, "EVERLAST_PLAN_CACHE": cache}
    out = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(f"everlast plan {' '.join(args)} failed: {out.stderr[-2000:]}")
    row: dict[str, object] = json.loads(out.stdout.splitlines()[-1])
    row["wall_s"] = wall
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one small target (a smoke run, for CI)")
    ns = ap.parse_args(argv)
    rows = []
    for name, args in (QUICK if ns.quick else COMMANDS).items():
        print(f"plan {name} ...", file=sys.stderr)
        with tempfile.TemporaryDirectory(prefix="bench-plan-") as cache:
            cold, warm = measure(args, cache), measure(args, cache)
        same = cold.pop("digest") == warm.pop("digest")
        row = {"name": name, "args": " ".join(args), **cold, "warm_cpu_s": warm["cpu_s"],
               "warm_wall_s": warm["wall_s"], "warm_plan_cache": warm["plan_cache"],
               "warm_ratio": float(cold["cpu_s"]) / float(warm["cpu_s"]),  # type: ignore[arg-type]
               "same": same}
        print(f"  searched: {row['cpu_s']:.2f} s CPU, {row['wall_s']:.2f} s wall; from the plan cache: "
              f"{row['warm_cpu_s']:.2f} s CPU ({row['warm_ratio']:.1f}x less)", file=sys.stderr)
        rows.append(row)
    print(json.dumps({"plan": rows}))


if __name__ == "__main__":
    main()
