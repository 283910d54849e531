#!/usr/bin/env bash
# The main job: an end-to-end in-process run of the predictor on synthetic data (several rounds).
# Extra arguments go to `everlast simulate` (try --json, --concept intervals, --queries 10000000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/everlast simulate --seed 1 "$@"
