#!/usr/bin/env bash
# The test suite: pure, statistical, slow and broker tests (the broker is started by the suite).
# Extra arguments go to pytest (e.g. -m "not statistical and not slow" for the seconds-fast subset;
# -n 0 for one process). The suite runs on every core (pytest-xdist): each worker starts its own broker.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest -n auto "$@"
