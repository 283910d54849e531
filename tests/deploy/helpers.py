"""Shared helpers of the deployment tests: repository paths, tools, the daemon's metric families,
PromQL metric references, configuration checks from environment variables, Compose and Dockerfile
parsing."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE_DIR = DEPLOY / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
COMPOSE_TOML = COMPOSE_DIR / "everlast.toml"
K8S_DIR = DEPLOY / "k8s"
PROM_DIR = DEPLOY / "prometheus"
ALERTS = PROM_DIR / "alerts.yml"
PROM_CONFIG = PROM_DIR / "prometheus.yml"
GRAFANA_DIR = DEPLOY / "grafana"
DASHBOARD = GRAFANA_DIR / "dashboards" / "everlast.json"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
OPERATIONS = ROOT / "docs" / "OPERATIONS.md"


# -- tools ---------------------------------------------------------------------------------------


def tool(name: str) -> str | None:
    """A command on PATH or next to this interpreter (tools pip-installed into the venv)."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def require_tool(name: str, how: str) -> str:
    path = tool(name)
    if path is None:
        pytest.skip(f"{name} is not installed ({how}; scripts/ci-deps.sh installs it)")
    return path


PROMETHEUS_HOW = "Debian package `prometheus`: apt-get install -y prometheus"


# -- the daemon's exposition ---------------------------------------------------------------------


def exposition_labels() -> dict[str, set[str]]:
    """Sample name -> label names, for every series the daemon can export: ``daemon.metrics.Metrics``
    with one child of every labelled metric (labelled families export nothing until touched)."""
    from prometheus_client.metrics import MetricWrapperBase

    from everlast.daemon.metrics import Metrics

    m = Metrics()
    m.build.info({"version": "test"})
    for collector in vars(m).values():
        if not isinstance(collector, MetricWrapperBase):
            continue
        names = collector._labelnames
        child = collector.labels(*(["x"] * len(names))) if names else collector
        if hasattr(child, "inc"):
            child.inc(0)
        elif hasattr(child, "observe"):
            child.observe(0.0)
        elif hasattr(child, "set"):
            child.set(0)
    out: dict[str, set[str]] = {}
    for fam in m.registry.collect():
        for s in fam.samples:
            out.setdefault(s.name, set()).update(s.labels)
    return out


PROMETHEUS_SERIES = {"up": {"job", "instance"}}
"""Series Prometheus itself adds for every target."""

_METRIC_RE = re.compile(r"\b(everlast_[A-Za-z0-9_:]+|up)\b(\s*\{([^}]*)\})?")
_MATCHER_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def metric_refs(expr: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names matched in its selector) for every everlast_* or ``up`` reference."""
    refs = []
    for m in _METRIC_RE.finditer(expr):
        if m.group(1) == "up" and not m.group(2):
            continue  # the word "up" outside a selector is not a metric here
        labels = set(_MATCHER_RE.findall(m.group(3) or ""))
        refs.append((m.group(1), labels))
    return refs


def alert_exprs() -> dict[str, str]:
    doc = yaml.safe_load(ALERTS.read_text())
    return {r["alert"]: r["expr"] for g in doc["groups"] for r in g["rules"]}


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())  # type: ignore[no-any-return]


def dashboard_exprs() -> dict[str, str]:
    out = {}
    for p in dashboard()["panels"]:
        for t in p.get("targets", []):
            out[f"{p['title']} / {t['refId']}"] = t["expr"]
    return out


GRAFANA_VARS = {"$__rate_interval": "1m", "$__interval": "1m", "$__range": "1h", "$model": ".*"}


def grafana_to_promql(expr: str) -> str:
    for k, v in GRAFANA_VARS.items():
        expr = expr.replace(k, v)
    return expr


# -- configuration from the environment ----------------------------------------------------------


def setting_path(env_name: str) -> list[str] | None:
    """``EVERLAST_<SECTION>__<KEY>`` -> ["section", "key"] if that is a setting of daemon.config,
    else None (pydantic-settings silently ignores an unknown top-level name)."""
    from everlast.daemon.config import Config

    if not env_name.startswith("EVERLAST_"):
        return None
    parts = env_name[len("EVERLAST_") :].lower().split("__")
    model: type[BaseModel] = Config
    for i, part in enumerate(parts):
        f = model.model_fields.get(part)
        if f is None:
            return None
        ann = f.annotation
        last = i == len(parts) - 1
        is_model = isinstance(ann, type) and issubclass(ann, BaseModel)
        if last:
            return None if is_model else parts
        if not is_model:
            return None
        model = ann  # type: ignore[assignment]
    return None


def key_env_name() -> str:
    from everlast.daemon.config import CheckpointConfig

    return str(CheckpointConfig.model_fields["key_env"].default)


def check_env_settings(env: dict[str, str]) -> list[str]:
    """Problems with the EVERLAST_* names in ``env`` (every one must be a setting, the key variable or the
    plan cache's directory, ``daemon.plan_cache.ENV``)."""
    from everlast.daemon.plan_cache import ENV as PLAN_CACHE

    problems = []
    for name in env:
        if not name.startswith("EVERLAST_") or name in (key_env_name(), PLAN_CACHE):
            continue
        if setting_path(name) is None:
            problems.append(f"{name} is not a setting of daemon/config.py")
    return problems


def load_with_env(monkeypatch: pytest.MonkeyPatch, toml: Path, env: dict[str, str]) -> Any:
    """daemon.config.load(toml) with exactly ``env`` as the EVERLAST_* environment."""
    from everlast.daemon.config import load

    for k in list(os.environ):
        if k.startswith("EVERLAST_"):
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return load(toml)


def setting_value(cfg: Any, path: list[str]) -> Any:
    v = cfg
    for p in path:
        v = getattr(v, p)
    return v


def same_setting(value: Any, text: str) -> bool:
    if isinstance(value, bool):
        return str(value).lower() == text.lower()
    if isinstance(value, Path):
        return str(value) == text
    if isinstance(value, int | float):
        return float(value) == float(text)
    return str(value) == text


# -- Compose -------------------------------------------------------------------------------------

_INTERP = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(text: str, env: dict[str, str] | None = None) -> str:
    """Compose variable interpolation: ${VAR}, ${VAR:-default}, ${VAR-default}, $VAR, and $$ -> $."""
    env = env or {}

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(3)
        return env.get(name) or (m.group(2) or "")

    return _INTERP.sub(sub, text)


def interpolate_tree(obj: Any, env: dict[str, str] | None = None) -> Any:
    if isinstance(obj, str):
        return interpolate(obj, env)
    if isinstance(obj, list):
        return [interpolate_tree(v, env) for v in obj]
    if isinstance(obj, dict):
        return {k: interpolate_tree(v, env) for k, v in obj.items()}
    return obj


def compose() -> dict[str, Any]:
    return interpolate_tree(yaml.safe_load(COMPOSE_FILE.read_text()))  # type: ignore[no-any-return]


@dataclass
class Mount:
    source: str
    target: str
    bind: bool
    read_only: bool


def mounts(service: dict[str, Any]) -> list[Mount]:
    out = []
    for v in service.get("volumes", []):
        assert isinstance(v, str), f"use the short volume syntax: {v!r}"
        parts = v.split(":")
        src, dst = parts[0], parts[1]
        ro = len(parts) > 2 and "ro" in parts[2].split(",")
        out.append(Mount(src, dst, src.startswith((".", "/")), ro))
    return out


def host_path(service: dict[str, Any], container_path: str, base: Path = COMPOSE_DIR) -> Path | None:
    """The host file behind ``container_path`` through the service's bind mounts (longest target wins)."""
    cp = PurePosixPath(container_path)
    best: tuple[int, Path] | None = None
    for m in mounts(service):
        if not m.bind:
            continue
        t = PurePosixPath(m.target)
        if cp == t or t in cp.parents:
            rel = cp.relative_to(t)
            cand = (base / m.source / rel).resolve()
            if best is None or len(t.parts) > best[0]:
                best = (len(t.parts), cand)
    return None if best is None else best[1]


def env_of(service: dict[str, Any]) -> dict[str, str]:
    e = service.get("environment", {})
    if isinstance(e, list):
        return dict(item.split("=", 1) for item in e)
    return {k: "" if v is None else str(v) for k, v in e.items()}


# -- Dockerfile ----------------------------------------------------------------------------------


@dataclass
class Instruction:
    cmd: str
    args: str
    line: int

    def json(self) -> list[str] | None:
        try:
            v = json.loads(self.args)
        except json.JSONDecodeError:
            return None
        return v if isinstance(v, list) and all(isinstance(x, str) for x in v) else None


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, cmd: str) -> list[Instruction]:
        return [i for i in self.instructions if i.cmd == cmd]

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for i in self.all("ENV"):
            for k, v in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S+)', i.args):
                out[k] = v.strip('"')
        return out

    def workdir(self) -> str:
        w = self.all("WORKDIR")
        return w[-1].args.strip() if w else "/"


def dockerfile_instructions(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    buf, start = "", 0
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if not buf and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if buf and line.lstrip().startswith("#"):
            continue  # comment lines inside a continuation are dropped
        if not buf:
            start = n
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        cmd, _, args = buf.strip().partition(" ")
        out.append(Instruction(cmd.upper(), args.strip(), start))
        buf = ""
    return out


def dockerfile_stages(text: str | None = None) -> tuple[dict[str, str], list[Stage]]:
    """(global ARG defaults, stages) with ARGs substituted in FROM lines."""
    text = DOCKERFILE.read_text() if text is None else text
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for ins in dockerfile_instructions(text):
        if ins.cmd == "ARG" and not stages:
            k, _, v = ins.args.partition("=")
            args[k.strip()] = v.strip()
            continue
        if ins.cmd == "FROM":
            parts = ins.args.split()
            base = re.sub(r"\$\{?([A-Za-z_]+)\}?", lambda m: args.get(m.group(1), m.group(0)), parts[0])
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base, name))
            continue
        assert stages, f"line {ins.line}: {ins.cmd} before FROM"
        stages[-1].instructions.append(ins)
    return args, stages


# -- .dockerignore -------------------------------------------------------------------------------


def _glob_re(pattern: str) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def dockerignore_patterns() -> list[tuple[bool, re.Pattern[str]]]:
    pats = []
    for raw in DOCKERIGNORE.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        line = line[1:] if neg else line
        pats.append((neg, _glob_re(line.strip("/").removeprefix("./"))))
    return pats


def dockerignored(rel: str, pats: list[tuple[bool, re.Pattern[str]]] | None = None) -> bool:
    """Docker's rule: the last matching pattern decides; a pattern matching a directory excludes
    everything below it."""
    pats = dockerignore_patterns() if pats is None else pats
    parts = PurePosixPath(rel).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    hit = False
    for neg, rx in pats:
        if any(rx.fullmatch(p) for p in prefixes):
            hit = not neg
    return hit


def module(path: Path, name: str) -> types.ModuleType:
    """Import a script that is not in a package (deploy/compose/make_sample.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
