"""CLI start-up: ``everlast --version`` and ``--help`` import no subcommand (their CPU time
is measured with ``resource``, against a generous bound), and the group's one-line helps are the
subcommands' own."""

from __future__ import annotations

import resource
import subprocess
import sys

import click
import pytest

from everlast.cli.main import COMMANDS, main

BOUND_S = 0.5
"""The start-up target; the measured figure is about 0.1 s (Python and click)."""


def cpu_of(*args: str) -> tuple[float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-m", "everlast.cli", *args], capture_output=True, text=True, timeout=60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert r.returncode == 0, r.stderr
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), r.stdout


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help_start_fast(flag: str) -> None:
    cpu, out = cpu_of(flag)
    print(f"everlast {flag}: {cpu:.3f} s CPU")
    assert out and cpu <= BOUND_S


def test_help_imports_no_subcommand() -> None:
    code = ("import sys; from click.testing import CliRunner; from everlast.cli.main import main; "
            "r = CliRunner().invoke(main, ['--help']); assert r.exit_code == 0; "
            "print(sorted(m for m in sys.modules if m.startswith(('everlast.', 'numpy', 'scipy', 'aiokafka'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['everlast.cli', 'everlast.cli.main']"


def test_the_listed_helps_are_the_commands_own() -> None:
    ctx = click.Context(main)
    for name, (_module, _attr, summary) in COMMANDS.items():
        cmd = main.get_command(ctx, name)
        assert cmd is not None and cmd.name == name
        assert cmd.get_short_help_str(10**6) == click.Command(name, help=summary).get_short_help_str(10**6), name
