"""docs/privacy/learner.md section 4 quotes the private learner's sample sizes: regenerate and compare.

To refresh after a deliberate change: EVERLAST_REGEN_DOCS=1 pytest tests/planner/test_learner_doc.py
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from everlast.engine.planner.learner import sizes_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "privacy" / "learner.md"
BLOCK = re.compile(r"(<!-- BEGIN GENERATED: learner-sizes -->\n)(.*?)(<!-- END GENERATED: learner-sizes -->)", re.S)


def test_learner_sizes_in_the_doc_match_the_planner() -> None:
    text = DOC.read_text()
    body = sizes_table()
    if os.environ.get("EVERLAST_REGEN_DOCS") == "1":
        text = BLOCK.sub(lambda m: m.group(1) + body + "\n" + m.group(3), text)
        DOC.write_text(text)
    m = BLOCK.search(text)
    assert m is not None, "the doc lacks the generated block 'learner-sizes'"
    assert m.group(2).strip() == body.strip(), "block 'learner-sizes' is stale; regenerate with EVERLAST_REGEN_DOCS=1"

