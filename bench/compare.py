"""everlast against its peers: the computation of ``everlast compare``, as a benchmark.

    python -m bench.compare [--quick] [--epsilon E] [--delta D] [--alpha A] [--seed S]

Prints exactly one JSON object on stdout, the same object as ``everlast compare --json``
(``peers.comparison.compute``): n required per method and horizon (computed, small cases run), the
crossover horizons, runs at several n, and the domain-size effect. ``--quick`` runs small n and few
queries (seconds instead of about half a minute). Progress goes to stderr only.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from everlast.cli.common import emit_json
from everlast.cli.compare import run_progress
from everlast.peers.comparison.compute import compute
from everlast.peers.comparison.settings import Settings


def quick(s: Settings) -> Settings:
    """Small n, few queries and the short horizons: the same computation in seconds (a horizon whose
    Dwork-Feldman n certifies an epsilon costs a best-epsilon search of minutes)."""
    return dataclasses.replace(s, n_values=(20_000, 100_000), queries=2_000, max_run_n=300_000,
                               domain_sizes=(2**8, 2**32, None), horizons=(10**3, 10**4))


def main(argv: list[str] | None = None) -> None:
    """Parse the options, compute, print one JSON object."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small n and few queries")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--delta", type=float, default=1e-6)
    ap.add_argument("--alpha", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    s = Settings(epsilon=args.epsilon, delta=args.delta, alpha=args.alpha, seed=args.seed)
    if args.quick:
        s = quick(s)
    print("compare: computing and running ...", file=sys.stderr)
    emit_json(compute(s, progress=run_progress))


if __name__ == "__main__":
    main()
