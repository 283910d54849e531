"""The README's client commands, verbatim (only the port changes), against a real daemon on its
embedded broker: kcat as installed (CI: Debian 12's kcat 1.7.1 on librdkafka 2.0.2, which needs the
compat proxy) and `everlast produce` / `everlast consume`. Then the everlast commands' contract in
detail: the checks before sending, --no-check, msgpack, JSON output, partitions, errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka.partitioner import DefaultPartitioner

from tests.daemon.daemon_process import ROOT, Daemon

pytestmark = pytest.mark.broker
EVERLAST = str(ROOT / ".venv" / "bin" / "everlast")


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon.configure(tmp_path_factory.mktemp("clients"), models=("m1", "m2"))
    d.start()
    try:
        yield d
    finally:
        assert d.stop() == 0, d.log()[-2000:]


def readme_client_commands() -> list[tuple[str, list[str]]]:
    """(command, the output the README shows for it) for each command of the README's client block."""
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    block = next(b for b in blocks if "kcat -P" in b)
    out: list[tuple[str, list[str]]] = []
    for line in block.replace("\\\n", " ").splitlines():
        if line.startswith("# "):
            out[-1][1].append(line[2:])
        elif line.strip():
            out.append((line, []))
    return out


def sh(cmd: str, d: Daemon, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = cmd.replace("127.0.0.1:9092", d.bootstrap)
    if not Path(EVERLAST).exists():  # a checkout without .venv: the same command through this interpreter
        cmd = cmd.replace(".venv/bin/everlast", f"{sys.executable} -m cli")
    env = {**os.environ, "EVERLAST_BROKER__BOOTSTRAP_SERVERS": d.bootstrap, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, input=stdin, capture_output=True, text=True,
                         timeout=60, check=False)  # fmt: skip
    if check:
        assert res.returncode == 0, (cmd, res.stdout, res.stderr)
    return res


def until_output(cmd: str, d: Daemon, want: list[str], timeout: float = 60.0) -> list[str]:
    """Run a reading command until it prints ``want`` (labels take a moment to be produced)."""
    deadline = time.monotonic() + timeout
    while True:
        got = sh(cmd, d).stdout.splitlines()
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def test_the_readme_has_kcat_and_everlast_commands_with_their_output() -> None:
    cmds = readme_client_commands()
    tools = [next(w for w in ("kcat -P", "kcat -C", "everlast produce", "everlast consume") if w in c) for c, _ in cmds]
    assert tools == ["kcat -P", "kcat -C", "everlast produce", "everlast consume"]
    assert "-X topic.partitioner=murmur2_random" in cmds[0][0]  # librdkafka's default partitioner is not Kafka's
    assert all(want for c, want in cmds if "-C" in c.split() or "consume" in c)


def test_the_readmes_client_commands_run_verbatim(daemon: Daemon) -> None:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (scripts/ci-deps.sh installs Debian's: apt-get install kcat)")
    for cmd, want in readme_client_commands():
        if want:
            assert until_output(cmd, daemon, want) == want, cmd
        else:
            sh(cmd, daemon)


def test_everlast_produce_checks_sends_and_reports(daemon: Daemon) -> None:
    ev = ".venv/bin/everlast"
    res = sh(f"""{ev} produce -m m2 --json '{{"id": "a", "x": 0.9}}' '{{"id": "b", "x": [0.1]}}'""", daemon)
    out = json.loads(res.stdout)
    part = DefaultPartitioner()(b"m2", [0, 1, 2, 3], [0, 1, 2, 3])
    assert out["model"] == "m2" and out["topic"] == "everlast.queries"
    assert (out["sent"], out["rejected"], list(out["partitions"])) == (2, 0, [str(part)])
    # stdin through a pipe, msgpack records (their labels come back in msgpack)
    res = sh(f"printf '%s\\n\\n%s\\n' '{{\"id\": \"c1\", \"x\": 0.8}}' '{{\"id\": \"c2\", \"x\": 0.3}}' | "
             f"{ev} produce -m m2 --format msgpack", daemon)  # fmt: skip
    assert res.stdout.startswith("sent 2 queries for model m2 to everlast.queries")
    # a bad query is an error here and is not sent; the good ones are; no value is echoed
    res = sh(f"""{ev} produce -m m2 '{{"id": "bad", "x": "secret-ish"}}' 'not json' '{{"id": "c", "x": 0.5}}'""",
             daemon, check=False)  # fmt: skip
    assert res.returncode == 1 and res.stdout.startswith("sent 1 query for model m2")
    assert "2 queries not sent (see above); the other one was sent" in res.stderr
    assert "argument 1: x must be a number or a non-empty list of numbers" in res.stderr
    assert "argument 2: not valid JSON" in res.stderr and "secret-ish" not in res.stderr
    # --no-check sends it anyway: the daemon answers with an `invalid` label
    sh(f"""{ev} produce -m m2 --no-check '{{"id": "raw", "x": "nope"}}'""", daemon)

    want = {"a": ("ok", 1), "b": ("ok", 0), "c1": ("ok", 1), "c2": ("ok", 0), "c": ("ok", None),
            "raw": ("invalid", None)}  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        recs = [json.loads(line) for line in sh(f"{ev} consume -m m2 --json", daemon).stdout.splitlines()]
        if len(recs) >= len(want) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert all(set(r) == {"model", "partition", "offset", "label"} for r in recs)
    assert {r["model"] for r in recs} == {"m2"} and {r["partition"] for r in recs} == {part}
    assert [r["offset"] for r in recs] == sorted(r["offset"] for r in recs)
    got = {r["label"]["id"]: r["label"] for r in recs}
    assert set(got) == set(want)
    for qid, (status, label) in want.items():
        assert got[qid]["status"] == status
        if label is not None:  # far from the model's threshold (0.5): the label is not in doubt
            assert got[qid]["label"] == label
    assert "reason" in got["raw"]

    assert len(sh(f"{ev} consume -m m2 --max 1", daemon).stdout.splitlines()) == 1
    res = sh(f"{ev} consume --topic everlast.nosuch", daemon, check=False)
    assert res.returncode == 1 and "topic everlast.nosuch does not exist" in res.stderr


def test_everlast_clients_say_clearly_when_no_broker_answers(daemon: Daemon) -> None:
    for cmd in (
        ".venv/bin/everlast consume -b 127.0.0.1:1",
        """.venv/bin/everlast produce -b 127.0.0.1:1 -m m1 '{"id": 1, "x": 1}'""",
    ):
        res = sh(cmd, daemon, check=False)
        assert res.returncode == 1 and "cannot talk to the broker at 127.0.0.1:1" in res.stderr
        assert "Traceback" not in res.stderr


def test_after_a_replay_kcat_still_prints_json_labels(daemon: Daemon) -> None:
    """`everlast replay` sends JSON queries by default, so the labels topic a user reads with
    kcat holds JSON only (msgpack labels would print as binary bytes)."""
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (scripts/ci-deps.sh installs Debian's: apt-get install kcat)")
    part = DefaultPartitioner()(b"m1", [0, 1, 2, 3], [0, 1, 2, 3])
    kcat = f"kcat -C -b 127.0.0.1:9092 -t everlast.labels -p {part} -e"
    # (the earlier tests sent msgpack queries on purpose: read from where this replay's labels begin)
    start = len(sh(f"{kcat} -o beginning -f '%o\\n'", daemon).stdout.splitlines())
    sh(f"{EVERLAST} replay --bootstrap-servers 127.0.0.1:9092 --model m1 --queries 200 --json", daemon)
    lines = sh(f"{kcat} -o {start} -f '%s\\n'", daemon).stdout.splitlines()
    assert len(lines) >= 200
    assert all(json.loads(line)["status"] in ("ok", "refused", "invalid") for line in lines)
