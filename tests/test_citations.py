"""The repository stands alone: every Markdown document that code or docs cite is in the repository,
no text names a path of a development machine, and nothing cites an issue number (there is no
tracker behind one: a citation names what it means, e.g. "the halting channel").

Scans every tracked or new text file (``git ls-files``), so a citation added anywhere is checked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXT = (".py", ".md", ".sh", ".toml", ".yml", ".yaml", ".txt", ".cfg", ".ini")
SEARCH = (ROOT, ROOT / "docs", ROOT / "docs" / "privacy", ROOT / "docs" / "notes")
"""Where a cited document may live: repository-relative, beside the citing file, or the short form
the docs use for their siblings (``genericbbl.md 5``, ``reviews.md``)."""
WRITTEN = {"DIR/COMPARISON.md", "NAME.md", "audit.md", "prober.md"}
"""Files the commands write (``everlast compare --docs DIR``, ``everlast simulate``'s reports), named
as outputs, not cited."""
MD = re.compile(r"[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b")
MACHINE = re.compile(r"/(?:work|home|root|Users)/[A-Za-z0-9_.-]")
ISSUE = re.compile(r"\bissues?\s+#?\d+|\bissue\s+#\d+|\bissues?\s+\d+\s*(?:,|and)\s*\d+", re.I)


def text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    paths = [ROOT / f for f in out if f.endswith(TEXT) or f == "Dockerfile"]
    return [p for p in paths if p.is_file() and p.resolve() != Path(__file__).resolve()]


def _resolves(ref: str, citing: Path) -> bool:
    rel = ref.removeprefix("./")
    return any((base / rel).is_file() for base in (*SEARCH, citing.parent))


def test_every_cited_document_is_in_the_repository() -> None:
    missing = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in text_files() for m in MD.finditer(p.read_text())
               if m.group(0) not in WRITTEN and not _resolves(m.group(0), p)]
    assert not missing, "cited documents that are not in the repository (bring the derivation into docs/):\n" + \
        "\n".join(missing)


def test_the_research_notes_are_cited_by_their_path_in_the_repository() -> None:
    """The three research notes (calibration, query privacy, target charging) are cited by their path,
    docs/notes/<name>.md (or by a relative link that leads there); a bare name sends a reader elsewhere."""
    notes = re.compile(r"[A-Za-z0-9_./-]*\b(calibration|query_privacy|target_charging)\.md")
    wrong = []
    for p in text_files():
        for m in notes.finditer(p.read_text()):
            target = (ROOT / "docs" / "notes" / f"{m.group(1)}.md").resolve()
            ref = m.group(0)
            ok = (ref.startswith("docs/notes/") and (ROOT / ref).resolve() == target) or (
                "/" in ref and (p.parent / ref).resolve() == target)
            if not ok:
                wrong.append(f"{p.relative_to(ROOT)}: {ref}")
    assert not wrong, "cite the notes as docs/notes/<name>.md:\n" + "\n".join(wrong)


def test_no_machine_paths() -> None:
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in text_files() for m in MACHINE.finditer(p.read_text())]
    assert not hits, "absolute paths of a development machine:\n" + "\n".join(hits)


def test_no_issue_numbers() -> None:
    hits = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p in text_files() for m in ISSUE.finditer(p.read_text())]
    assert not hits, "cite what an issue named, not its number:\n" + "\n".join(hits)


def test_the_patterns_catch_what_they_should() -> None:
    issue = "iss" + "ue"  # spelled apart so that this file does not cite what it forbids
    assert ISSUE.search(f"the halting channel ({issue} 8)") and ISSUE.search(f"{issue.title()}s 12 and 13")
    assert ISSUE.search(f"see {issue} #26") and not ISSUE.search(f"test_{issue}_13_epsilon_1")
    assert MACHINE.search("(`/" + "work/" + "shared/" + "research/x.md`)") and not MACHINE.search("docs/notes/x.md")
    assert not _resolves("nowhere_note.md", ROOT / "README.md")
    assert _resolves("genericbbl.md", ROOT / "docs" / "PRIVACY.md")
