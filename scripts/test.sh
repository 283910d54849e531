#!/usr/bin/env bash
# The test suite: pure, statistical, slow and broker tests (the broker is started by the suite).
# Extra arguments go to pytest (e.g. -m "not statistical and not slow and not broker" for the in-process
# subset; -n 0 for one process). The suite runs on every core (pytest-xdist): each worker starts its own
# broker. Every test has 900 s (pytest-timeout: a hung test fails alone, naming itself), and the 30
# slowest are listed at the end (--durations), so a test that grows shows up in CI's log. The `huge` tests
# (the epsilon-1 plan served at its real size: minutes and ~6 GB each) run only when asked for:
# `bash scripts/test.sh -m huge` (a later -m replaces the default one).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/python -m pytest -n auto --timeout=900 --durations=30 -m "not huge" "$@"
