"""Regenerate the planner's known-answer file, ``tests/data/kat-plan.json``.

Run by hand, from the repository root, and only on purpose::

    .venv/bin/python scripts/make_plan_kat.py            # rewrite the file
    .venv/bin/python scripts/make_plan_kat.py --check    # compare only; exit 1 on a difference

The file pins what ``everlast plan --json`` prints for the commands in ``CASES`` (the headline
targets of the README's plan table): every schedule, n_required, the certificate's steps and
epsilons, the design comparison, the ablation and, with ``--n``, the best epsilon. A change in the
planner's *speed* must leave it unchanged; a change in its *mathematics* (a new budget split, a new
lemma) changes it on purpose: run this script and say in the commit why the numbers moved.
``tests/planner/test_plan_kat.py`` recomputes every case and compares.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository's packages importable
    sys.path.insert(0, str(ROOT))

from click.testing import CliRunner  # noqa: E402

from everlast.cli.plan import plan_cmd  # noqa: E402

KAT = ROOT / "tests" / "data" / "kat-plan.json"
BASE = ("--epsilon", "1", "--delta", "1e-6", "--alpha", "0.1", "--halts", "split-votes", "--json")
CASES: dict[str, tuple[str, ...]] = {
    "eps1": BASE,
    "eps8": ("--epsilon", "8", *BASE[2:]),
    "eps1_n1e9": (*BASE, "--n", "1e9"),
    "eps1_all": (*BASE, "--mechanism", "all"),
}
"""Name -> the arguments of ``everlast plan``."""


def run(args: tuple[str, ...]) -> dict[str, Any]:
    """``everlast plan ARGS`` in-process, searched afresh (the plan cache off): its one JSON object
    without ``plan_cache`` (where the cache is and what it answered: not part of the plan)."""
    res = CliRunner(env={"EVERLAST_PLAN_CACHE": "off"}).invoke(plan_cmd, list(args), catch_exceptions=False)
    if res.exit_code != 0:
        raise SystemExit(f"everlast plan {' '.join(args)} exited {res.exit_code}: {res.output[-400:]}")
    out: dict[str, Any] = json.loads(res.output)
    out.pop("plan_cache", None)
    return out


def vectors(names: list[str] | None = None) -> dict[str, Any]:
    return {name: {"args": list(CASES[name]), "json": run(CASES[name])}
            for name in (names if names is not None else list(CASES))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the file; exit 1 on a difference")
    ns = ap.parse_args()
    made = vectors()
    if ns.check:
        pinned = json.loads(KAT.read_text())
        bad = [k for k in CASES if pinned.get(k) != made[k]]
        for k in bad:
            print(f"{k}: differs from {KAT.name}", file=sys.stderr)
        return 1 if bad else 0
    KAT.write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")
    print(f"wrote {KAT.relative_to(ROOT)} ({', '.join(CASES)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
