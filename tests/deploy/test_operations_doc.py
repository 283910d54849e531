"""docs/OPERATIONS.md: its key-rotation procedure works on a real checkpoint, and what it states
about the deployment matches the files."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.deploy.helpers import OPERATIONS, ROOT

KEY_OLD = "11" * 32
KEY_NEW = "22" * 32


def _rekey_script() -> str:
    text = OPERATIONS.read_text()
    m = re.search(r"<!-- rekey:[^>]*-->\s*```python\n(.*?)```", text, re.S)
    assert m, "the re-encryption snippet is marked <!-- rekey: ... --> in docs/OPERATIONS.md"
    return m.group(1)


def _predictor():  # type: ignore[no-untyped-def]
    from everlast.engine.concepts import Thresholds
    from everlast.engine.planner.fill import fill_tests
    from everlast.engine.predictor import Predictor
    from everlast.engine.schedule import RoundSpec, Schedule

    spec = {"T": 200, "lam": 20, "R": 20_000, "c": 5_000, "eps_bt": 0.5, "delta_bt": 1e-8, "alpha": 0.1,
            "m_S": 400, "m_D": 10_000}
    x = np.random.default_rng(0).random(4_000)
    schedule = Schedule((fill_tests(RoundSpec.from_dict(spec)),))  # the default design
    return Predictor.create(Thresholds(), schedule, x, (x >= 0.5).astype(int), seed=7)


def _load(root: Path, key: str | None):  # type: ignore[no-untyped-def]
    from everlast.daemon.checkpoint.blobs import BlobStore, DirStore, EncryptedStore
    from everlast.daemon.checkpoint.model_state import ModelCheckpointer

    store: BlobStore = DirStore(root) if key is None else EncryptedStore(DirStore(root), bytes.fromhex(key))
    return asyncio.run(ModelCheckpointer(store, "m").load())


def _save(root: Path, key: str | None) -> None:
    from everlast.daemon.checkpoint.blobs import BlobStore, DirStore, EncryptedStore
    from everlast.daemon.checkpoint.model_state import ModelCheckpointer

    p = _predictor()
    p.answer(np.random.default_rng(1).random(3_000))  # counters, RNG states and reservoir move
    store: BlobStore = DirStore(root) if key is None else EncryptedStore(DirStore(root), bytes.fromhex(key))
    asyncio.run(ModelCheckpointer(store, "m").save(p, {0: 3_000}))


def _run(script: Path, src: Path, dst: Path, old: str, new: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OLD_KEY": old, "NEW_KEY": new, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(script), str(src), str(dst)], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("old", [KEY_OLD, ""], ids=["encrypted", "unencrypted"])
def test_the_documented_rekey_moves_a_checkpoint_to_the_new_key(tmp_path: Path, old: str) -> None:
    from everlast.daemon.errors import CorruptCheckpoint

    script = tmp_path / "rekey.py"
    script.write_text(_rekey_script())
    src, dst = tmp_path / "ck", tmp_path / "ck.new"
    _save(src, old or None)
    r = _run(script, src, dst, old, KEY_NEW)
    assert r.returncode == 0, r.stderr
    assert "m: " in r.stdout
    before, after = _load(src, old or None), _load(dst, KEY_NEW)
    assert before is not None and after is not None and after.offsets == {0: 3_000}
    qs = np.random.default_rng(2).random(2_000)
    assert np.array_equal(before.predictor.answer(qs).labels, after.predictor.answer(qs).labels)
    with pytest.raises(CorruptCheckpoint):
        _load(dst, KEY_OLD)  # the new copy is under the new key only
    assert sorted(p.name for p in (dst / "m").iterdir()) == sorted(p.name for p in (src / "m").iterdir())


def test_the_documented_rekey_refuses_a_wrong_old_key(tmp_path: Path) -> None:
    script = tmp_path / "rekey.py"
    script.write_text(_rekey_script())
    src, dst = tmp_path / "ck", tmp_path / "ck.new"
    _save(src, KEY_OLD)
    r = _run(script, src, dst, "33" * 32, KEY_NEW)
    assert r.returncode != 0 and "fails authentication" in r.stderr
    assert not (dst / "m" / "live").exists()  # nothing committed under a key it could not verify


def test_the_runbook_states_match_the_code() -> None:
    from everlast.daemon.checkpoint.blobs import key_from_env
    from everlast.daemon.config import CheckpointConfig, ConsumerConfig
    from everlast.engine.predictor import FORMAT

    text = OPERATIONS.read_text()
    assert f"`{FORMAT}`" in text  # the checkpoint format it names is the current one
    assert f"{ConsumerConfig().fetch_max_wait_ms} ms by default" in text
    assert f"{CheckpointConfig().max_chunk_bytes // 1000} kB" in text
    assert "murmur2_random" in text and "composes" in text
    assert "python -m bench.engine" in text and "python -m bench.e2e" in text
    assert key_from_env("EVERLAST_NO_SUCH_VARIABLE_SET") is None
