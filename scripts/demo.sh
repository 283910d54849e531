#!/usr/bin/env bash
# The main job, end to end: the daemon on the embedded Kafka-protocol broker serving a sample model,
# a stream of queries replayed through Kafka, and a summary of answers, rounds and the guarantee.
# Extra arguments go to `everlast demo` (try --json or --queries 1000000).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh core   # what the daemon imports, no test, lint or benchmark tools
exec .venv/bin/everlast demo "$@"
