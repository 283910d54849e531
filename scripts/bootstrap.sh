#!/usr/bin/env bash
# Create .venv (once) and install everlast into it, editable.
#   bash scripts/bootstrap.sh          everlast with every extra (tests, lint, benchmarks, plots): what
#                                      scripts/test.sh and CI need
#   bash scripts/bootstrap.sh core     everlast alone: what the daemon and `everlast demo` import
#   bash scripts/bootstrap.sh EXTRAS   those extras (e.g. test,compare; pyproject.toml lists them)
# A stamp per pyproject.toml and extras skips the install the next time; a dev install covers all.
set -euo pipefail
cd "$(dirname "$0")/.."
extras=${1:-dev}
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
hash=$(sha256sum pyproject.toml | cut -c1-16)
if [ -f ".venv/.installed-$hash-dev" ] || [ -f ".venv/.installed-$hash-$extras" ]; then
  exit 0
fi
spec=".[$extras]"
[ "$extras" = core ] && spec="."
echo "installing everlast${extras:+ ($extras)} into .venv (once) ..." >&2
.venv/bin/python -m pip install -q --upgrade pip >&2
.venv/bin/python -m pip install -q -e "$spec" >&2
rm -f .venv/.installed-* && touch ".venv/.installed-$hash-$extras"
