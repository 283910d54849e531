#!/usr/bin/env bash
# mypy over the installed names. mypy follows .pth paths but not setuptools' editable import hook, so it
# cannot see that everlast.engine lives in engine/ (pyproject's package-dir). It reads a throwaway view
# instead: .venv/typecheck/everlast/<folder> pointing at each top-level folder, rebuilt on every run and
# never committed (the repository holds no links).
set -euo pipefail
cd "$(dirname "$0")/.."
view=.venv/typecheck
rm -rf "$view" && mkdir -p "$view/everlast"
for f in everlast/*; do ln -s "$PWD/$f" "$view/everlast/"; done
for d in engine daemon adversary_sim cli peers; do ln -s "$PWD/$d" "$view/everlast/$d"; done
MYPYPATH="$PWD/$view" exec .venv/bin/mypy "$@"
