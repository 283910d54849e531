"""cli/ holds thin commands and their renderers: no file over 400 lines (the computation lives in the
packages, e.g. ``everlast.peers.comparison`` for ``everlast compare``)."""

from __future__ import annotations

from pathlib import Path

CLI = Path(__file__).resolve().parents[2] / "cli"
MAX_LINES = 400


def test_no_cli_file_over_400_lines() -> None:
    long = {p.name: n for p in sorted(CLI.glob("*.py")) if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these cli/ files (computation out of cli/, rendering beside the command): {long}"
