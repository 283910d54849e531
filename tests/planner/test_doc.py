"""docs/PRIVACY.md quotes numbers the planner produces: regenerate them and compare.

To refresh the doc after a deliberate change: EVERLAST_REGEN_DOCS=1 pytest tests/planner/test_doc.py
(slow: the blocks plan the target-charged design at epsilon 1 and 8 under both halt budgets).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from everlast.engine.planner.report import doc_blocks

DOC = Path(__file__).resolve().parents[2] / "docs" / "privacy" / "genericbbl.md"


def _pattern(name: str) -> re.Pattern[str]:
    return re.compile(
        rf"(<!-- BEGIN GENERATED: {re.escape(name)} -->\n)(.*?)(<!-- END GENERATED: {re.escape(name)} -->)",
        re.S,
    )


@pytest.mark.slow
def test_privacy_doc_numbers_match_the_planner() -> None:
    text = DOC.read_text()
    blocks = doc_blocks()
    if os.environ.get("EVERLAST_REGEN_DOCS") == "1":
        for name, body in blocks.items():
            def fill(m: re.Match[str], b: str = body) -> str:
                return m.group(1) + b + "\n" + m.group(3)

            text = _pattern(name).sub(fill, text)
        DOC.write_text(text)
    for name, body in blocks.items():
        m = _pattern(name).search(text)
        assert m is not None, f"the doc lacks the generated block {name!r}"
        assert m.group(2).strip() == body.strip(), (
            f"{DOC.name} block {name!r} is stale; regenerate with EVERLAST_REGEN_DOCS=1"
        )


def test_worked_example_is_the_default_design_meeting_its_targets() -> None:
    from everlast.engine.planner import plan
    from everlast.engine.planner.report import WORKED, worked_example

    text = worked_example()
    p = plan(WORKED)
    assert p.certificate.design == "target-charged" and p.meets_targets
    assert f"n_required = {p.n_required} " in text
    assert "query-private: yes; meets the targets: yes" in text
    assert "Lemma Q (discrete)" in text and "Lemma TC" in text and "Theorem Q" in text
    assert f"T_1 = {p.rounds[0].T} " in text and f"c0 = {p.rounds[0].halt_threshold} " in text
