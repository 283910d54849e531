"""Known-answer vectors: tests/data/kat-<design>.json, made by scripts/make_kat.py.

Every replay test compares the code with itself; these compare it with answers recorded once. A
failure means the engine now answers the recorded (seed, schedule, queries) differently, so a
restored checkpoint would be replayed with different answers.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from everlast.engine.predictor import FORMAT, FORMAT_CLIENTS

ROOT = Path(__file__).resolve().parents[2]
BUMP = ("a change to these vectors must bump engine.predictor.FORMAT and regenerate them "
        "(.venv/bin/python scripts/make_kat.py; see its docstring)")


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_kat", ROOT / "scripts" / "make_kat.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


make_kat = _load_generator()
DESIGNS: tuple[str, ...] = make_kat.DESIGNS


def stored(design: str) -> dict[str, Any]:
    path: Path = make_kat.path(design)
    assert path.exists(), f"{path} is missing: {BUMP}"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def first_difference(a: str, b: str) -> str:
    i = next((k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"first difference at query {i} ({a[i:i + 10]!r} recorded, {b[i:i + 10]!r} now)"


@pytest.mark.parametrize("design", DESIGNS)
def test_vectors_were_made_under_this_format(design: str) -> None:
    made = stored(design)["format"]
    assert made == FORMAT, (f"kat-{design}.json was made under {made} but engine.predictor.FORMAT is "
                            f"{FORMAT}: regenerate the vectors (.venv/bin/python scripts/make_kat.py)")


@pytest.mark.parametrize("design", DESIGNS)
@pytest.mark.parametrize("batch", [1000, 7, 4000])
def test_the_engine_gives_the_recorded_answers(design: str, batch: int) -> None:
    """Recomputed in several batchings: each must give the recorded answers."""
    want = stored(design)
    got = make_kat.vectors(design, batch=batch)
    for key in ("design", "seed", "schedule", "concept", "training", "queries"):
        assert got[key] == want[key], f"the vectors' input {key!r} differs from scripts/make_kat.py: {BUMP}"
    assert len(want["labels"]) == want["queries"]["n"] >= 3000 and len(want["round_starts"]) >= 3
    for key in ("labels", "outcomes"):
        assert got[key] == want[key], (f"the engine's {key} changed under {FORMAT}, "
                                       f"{first_difference(want[key], got[key])}: {BUMP}")
    assert got["round_starts"] == want["round_starts"], f"rounds change at other queries: {BUMP}"
    assert got["label_record"] == want["label_record"], (
        f"the daemon's label record bytes changed (daemon.wire.encode_label): they are a wire contract; {BUMP}")


@pytest.mark.parametrize("design", DESIGNS)
def test_the_record_holds_the_recorded_label(design: str) -> None:
    """The pinned records decode to the label the vectors hold (the bytes are not stale)."""
    import msgpack

    want = stored(design)
    rec = want["label_record"]
    label = {"0": 0, "1": 1}[want["labels"][rec["query"]]]
    body = {"id": rec["id"], "label": label, "status": "ok", "round": rec["round"]}
    assert msgpack.unpackb(bytes.fromhex(rec["msgpack_hex"])) == body
    assert json.loads(bytes.fromhex(rec["json_hex"])) == body


def test_the_vectors_exercise_every_outcome() -> None:
    for design in DESIGNS:
        out = stored(design)["outcomes"]
        assert {c: out.count(c) > 0 for c in "012"} == {"0": True, "1": True, "2": True}, design


# -- with per-client quotas and the burn-rate signal on (format FORMAT_CLIENTS) ---------------------------


def test_client_vectors_were_made_under_this_format() -> None:
    made = stored(make_kat.CLIENTS_KAT)["format"]
    assert made == FORMAT_CLIENTS, (f"kat-{make_kat.CLIENTS_KAT}.json was made under {made} but "
                                    f"engine.predictor.FORMAT_CLIENTS is {FORMAT_CLIENTS}: regenerate the vectors")


@pytest.mark.parametrize("batch", [1000, 7, 4000])
def test_the_engine_gives_the_recorded_answers_with_quotas_and_burn(batch: int) -> None:
    want = stored(make_kat.CLIENTS_KAT)
    got = make_kat.client_vectors(batch=batch)
    for key in ("design", "seed", "schedule", "concept", "training", "queries"):
        assert got[key] == want[key], f"the vectors' input {key!r} differs from scripts/make_kat.py: {BUMP}"
    for key in ("labels", "outcomes", "refusals"):
        assert got[key] == want[key], (f"the engine's {key} changed under {FORMAT_CLIENTS}, "
                                       f"{first_difference(want[key], got[key])}: {BUMP}")
    for key in ("round_starts", "quota_fired", "burn"):
        assert got[key] == want[key], f"the engine's {key} changed under {FORMAT_CLIENTS}: {BUMP}"


def test_the_client_vectors_exercise_quotas_and_burn() -> None:
    want = stored(make_kat.CLIENTS_KAT)
    assert "3" in want["refusals"] and len(want["quota_fired"]) >= 2 and len(want["burn"]) >= 12
    assert {c: want["outcomes"].count(c) > 0 for c in "012x"} == dict.fromkeys("012x", True)
