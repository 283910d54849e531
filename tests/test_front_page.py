"""README.md is a front page (at most 12,000 bytes) and docs/README.md indexes every page of docs/."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_front_page_is_short() -> None:
    size = len((ROOT / "README.md").read_bytes())
    assert size <= 12_000, f"README.md is {size:,} bytes: move the detail to a page of docs/ (docs/README.md)"


def test_the_front_page_keeps_the_two_commands() -> None:
    text = (ROOT / "README.md").read_text()
    assert "bash scripts/demo.sh" in text and "bash scripts/test.sh" in text
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_index_links_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    linked = set(re.findall(r"\]\(([^)#]+\.md)\)", index))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")} - {"README.md"}
    assert pages <= linked, f"pages docs/README.md does not link: {sorted(pages - linked)}"
    assert all((ROOT / "docs" / p).is_file() for p in linked - {"../README.md"})
