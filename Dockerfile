# syntax=docker/dockerfile:1
# everlast: `everlast serve`, the Kafka service for private everlasting prediction.
#
#   docker build -t everlast .
#   docker run --rm -v "$PWD/everlast.toml:/etc/everlast/everlast.toml:ro" \
#     -e EVERLAST_BROKER__BOOTSTRAP_SERVERS=kafka:9092 -p 9464:9464 everlast
#
# Configuration: the TOML file at /etc/everlast/everlast.toml, overridden by environment variables
# EVERLAST_<SECTION>__<KEY> (e.g. EVERLAST_BROKER__BOOTSTRAP_SERVERS), overridden by flags.
# The checkpoint encryption key comes from EVERLAST_CHECKPOINT_KEY (64 hex characters).
# The same image runs the clients' HTTP API: `everlast gateway --config ...` (docs/GATEWAY.md; its
# health check is the orchestrator's: this file's probes the daemon's port).
# deploy/compose runs this image next to Apache Kafka, Prometheus and Grafana; docs/OPERATIONS.md
# is the runbook. For production, pin the base image by digest (python:3.11-slim-bookworm@sha256:...).
#
# tests/deploy/test_dockerfile.py lints this file and replays the build stage's RUN steps in a fresh
# venv (no Docker needed), so keep every RUN of the build stage a plain shell command.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a virtual environment with everlast and its runtime dependencies only ---------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VENV=/opt/everlast
WORKDIR /src
# Every package pyproject.toml ships (tool.setuptools.packages: the `everlast` namespace, whose
# subpackages pyproject's package-dir maps to the repository's top-level folders) is copied here; a
# test checks it.
COPY pyproject.toml README.md ./
COPY everlast/ everlast/
COPY engine/ engine/
COPY daemon/ daemon/
COPY adversary_sim/ adversary_sim/
COPY cli/ cli/
COPY peers/ peers/
# `pip install .`: runtime dependencies only (no test/dev extras). All of them ship wheels for
# linux x86_64 and aarch64; no compiler is needed.
RUN python -m venv "$VENV" \
    && "$VENV/bin/pip" install --no-cache-dir . \
    && "$VENV/bin/everlast" --help > /dev/null

# --- runtime: the venv on a clean slim image, as an unprivileged user ----------------------------
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="everlast" \
      org.opencontainers.image.description="Private everlasting prediction as a Kafka service" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 everlast \
    && useradd --system --uid 10001 --gid everlast --home-dir /var/lib/everlast --no-create-home \
       --shell /usr/sbin/nologin everlast \
    && mkdir -p /etc/everlast /var/lib/everlast/checkpoints /var/lib/everlast/plans \
    && chown -R everlast:everlast /var/lib/everlast \
    && chmod 0700 /var/lib/everlast/checkpoints
COPY --from=build /opt/everlast /opt/everlast
# Environment beats the config file: these two hold inside the container whatever the file says
# (metrics must listen beyond loopback to be scraped; checkpoints belong in the volume). The planner
# keeps its searched schedules (public values) in /var/lib/everlast/plans: a restart re-plans in
# a fraction of a second (docs/OPERATIONS.md, "Planning").
ENV PATH=/opt/everlast/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    EVERLAST_METRICS__HOST=0.0.0.0 \
    EVERLAST_CHECKPOINT__DIR=/var/lib/everlast/checkpoints \
    EVERLAST_PLAN_CACHE=/var/lib/everlast/plans
WORKDIR /var/lib/everlast
# Checkpoints hold the engine state (training-derived data and RNG state): treat the volume as a
# secret, and set EVERLAST_CHECKPOINT_KEY to encrypt it at rest.
VOLUME ["/var/lib/everlast/checkpoints"]
USER 10001:10001
# /metrics, /healthz, /readyz (metrics.port; keep EVERLAST_METRICS__PORT in sync if you change it)
EXPOSE 9464
# Slim images have no curl: probe /healthz with the venv's Python. /healthz fails when the run
# loop has stalled; it is served once every model is planned, hence the start period.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('EVERLAST_METRICS__PORT', '9464'), timeout=4)"]
# SIGTERM drains: finish the batch, checkpoint, commit, exit 0 (within shutdown_timeout_s).
STOPSIGNAL SIGTERM
ENTRYPOINT ["everlast"]
CMD ["serve", "--config", "/etc/everlast/everlast.toml"]
