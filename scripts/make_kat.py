"""Regenerate the engine's known-answer vectors, ``tests/data/kat-<design>.json``.

Run by hand, from the repository root, and only on purpose::

    .venv/bin/python scripts/make_kat.py            # rewrite the files
    .venv/bin/python scripts/make_kat.py --check    # compare only; exit 1 on a difference

The vectors pin what the engine answers: for each design, a fixed seed, a hand-written schedule of
1,500-query rounds, a training set and 4,000 queries given by an integer recipe (no random
generator, so they do not depend on numpy's), the first 4,000 labels and BetweenThresholds
outcomes (across two round transitions), and the exact bytes of one msgpack and one JSON label
record as the daemon encodes them (``daemon.wire.encode_label``). ``tests/engine/test_known_answers.py``
recomputes everything with this module's ``vectors`` and compares.

A third file, ``tests/data/kat-target-charged-clients.json``, pins the same for the target-charged
design with per-client quotas and the burn-rate signal on (``engine.quotas``, ``engine.burn``): the
clients of the queries by the same kind of recipe, and the refusal codes, the quota firings and the
burn-rate releases besides the labels and outcomes. Its states are tagged
``engine.predictor.FORMAT_CLIENTS``.

A change that alters them changes what a restored checkpoint answers, so it must bump
``engine.predictor.FORMAT`` (or ``FORMAT_CLIENTS``; old states are then refused instead of replayed
differently). The
files record the FORMAT they were made under and the test checks it: bump FORMAT, then run this
script, and say in the commit why the answers changed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script: make the repository's packages importable
    sys.path.insert(0, str(ROOT))

from everlast.daemon.wire import encode_label  # noqa: E402
from everlast.engine.concepts import Thresholds  # noqa: E402
from everlast.engine.design import Design  # noqa: E402
from everlast.engine.phases import Phase  # noqa: E402
from everlast.engine.predictor import FORMAT, FORMAT_CLIENTS, Predictor  # noqa: E402
from everlast.engine.schedule import RoundSpec, Schedule  # noqa: E402

DATA = ROOT / "tests" / "data"
DESIGNS = ("target-charged", "paper")
SEED = 20_261_124
N_TRAIN, N_QUERIES = 800, 4000
TRAIN_SALT, QUERY_SALT = 1, 2
RECORD_AT = 1700
"""The query whose label records are pinned (round 2)."""
RECIPE = ("x_j = ((((j + 1) * 0x9E3779B97F4A7C15 + salt * 0xD1B54A32D192ED03) mod 2^64) >> 11) / 2^53 "
          "for j = 0..n-1 (exact doubles in [0, 1)); training label 1 iff x >= 0.5")
SYMBOLS = {-1: "x", 0: "0", 1: "1", 2: "2"}
"""Labels 0/1 (x: refused); outcomes L=0, R=1, TOP=2 (x: refused)."""

ROUNDS: dict[str, dict[str, Any]] = {
    # lo = 20, hi = 30 of T = 50 votes; per-query noise DLap(2); halting test c0 = 700 never fires
    "target-charged": {"T": 50, "lam": 10, "R": 1500, "c": 1500, "eps_bt": 0.5, "delta_bt": None, "alpha": 0.1,
                       "m_S": 50, "m_D": 500, "halt_eps": 0.5, "halt_threshold": 700},
    # nu ~ DLap(3), mu ~ DLap(1): the band stays open, so tops and threshold redraws are frequent
    "paper": {"T": 50, "lam": 10, "R": 1500, "c": 2000, "eps_bt": 2.0, "delta_bt": 1e-6, "alpha": 0.1,
              "m_S": 50, "m_D": 500},
}


def points(n: int, salt: int) -> NDArray[np.float64]:
    """The recipe (``RECIPE``): a fixed integer hash, exact in float64."""
    mask = (1 << 64) - 1
    return np.array([((((j + 1) * 0x9E3779B97F4A7C15 + salt * 0xD1B54A32D192ED03) & mask) >> 11) / 2.0**53
                     for j in range(n)], dtype=np.float64)


def schedule(design: str) -> Schedule:
    return Schedule((RoundSpec.from_dict(ROUNDS[design]),), repeat_last=True, design=Design.named(design))


def run(design: str, batch: int) -> tuple[list[int], list[int], list[int]]:
    """Labels, outcomes and rounds of the queries, fed in batches of ``batch``."""
    x = points(N_TRAIN, TRAIN_SALT)
    p = Predictor.create(Thresholds(), schedule(design), x, (x >= 0.5).astype(np.int8), seed=SEED)
    q = points(N_QUERIES, QUERY_SALT)
    labels: list[int] = []
    outcomes: list[int] = []
    rounds: list[int] = []
    pos = 0
    while pos < q.size:
        if p.phase is Phase.TRANSITION_DUE:
            p.transition()
        res = p.answer(q[pos : min(pos + batch, q.size)])
        labels += res.labels.tolist()
        outcomes += res.outcomes.tolist()
        rounds += [res.round] * res.consumed
        pos += res.consumed
    return labels, outcomes, rounds


def vectors(design: str, batch: int = 1000) -> dict[str, Any]:
    """Everything ``tests/data/kat-<design>.json`` holds, recomputed."""
    labels, outcomes, rounds = run(design, batch)
    label = labels[RECORD_AT]
    qid = f"kat-{RECORD_AT}"
    status = "ok" if label >= 0 else "refused"
    return {
        "format": FORMAT,
        "design": design,
        "seed": SEED,
        "schedule": schedule(design).to_dict(),
        "concept": Thresholds().to_spec(),
        "training": {"n": N_TRAIN, "salt": TRAIN_SALT, "recipe": RECIPE},
        "queries": {"n": N_QUERIES, "salt": QUERY_SALT, "recipe": RECIPE},
        "round_starts": [rounds.index(r) for r in sorted(set(rounds))],
        "labels": "".join(SYMBOLS[v] for v in labels),
        "outcomes": "".join(SYMBOLS[v] for v in outcomes),
        "label_record": {
            "query": RECORD_AT, "id": qid, "label": label, "round": rounds[RECORD_AT],
            "msgpack_hex": encode_label(qid, label, status, rounds[RECORD_AT], None, "msgpack").hex(),
            "json_hex": encode_label(qid, label, status, rounds[RECORD_AT], None, "json").hex(),
        },
    }


CLIENTS_KAT = "target-charged-clients"
CLIENT_SETTINGS: dict[str, Any] = {"quotas": {"share": 0.04, "eps": 1.0}, "burn": {"window": 250, "eps": 0.5}}
"""c0_q = ceil(0.04 * 700) = 28 tops per client and round (xi' ~ DLap(4), rho' ~ DLap(2)): three quota
tests fire in the 4,000 queries, and six windows per round are released."""
CLIENT_RECIPE = ("client of query j: 'a' if j % 4 == 0, bytes b'b' if j % 4 == 1, the anonymous client "
                 "(None) if j % 4 == 2, else 'c<j % 40>'")


def clients(n: int) -> list[str | bytes | None]:
    """The clients' recipe (``CLIENT_RECIPE``)."""
    return [("a", b"b", None, f"c{j % 40}")[j % 4] for j in range(n)]


def client_schedule() -> Schedule:
    return Schedule.from_dict({**schedule("target-charged").to_dict(), **CLIENT_SETTINGS})


def client_vectors(batch: int = 1000) -> dict[str, Any]:
    """Everything ``tests/data/kat-target-charged-clients.json`` holds, recomputed."""
    x = points(N_TRAIN, TRAIN_SALT)
    p = Predictor.create(Thresholds(), client_schedule(), x, (x >= 0.5).astype(np.int8), seed=SEED)
    q, who = points(N_QUERIES, QUERY_SALT), clients(N_QUERIES)
    labels: list[int] = []
    outcomes: list[int] = []
    refusals: list[int] = []
    fired: list[int] = []
    burn: list[list[int]] = []
    rounds: list[int] = []
    pos = 0
    while pos < q.size:
        if p.phase is Phase.TRANSITION_DUE:
            p.transition()
        end = min(pos + batch, q.size)
        res = p.answer(q[pos:end], who[pos:end])
        labels += res.labels.tolist()
        outcomes += res.outcomes.tolist()
        refusals += res.refusals.tolist()
        fired += (pos + np.flatnonzero(res.quota_fired)).tolist()
        burn += res.burn.tolist()
        rounds += [res.round] * res.consumed
        pos += res.consumed
    return {
        "format": FORMAT_CLIENTS,
        "design": CLIENTS_KAT,
        "seed": SEED,
        "schedule": client_schedule().to_dict(),
        "concept": Thresholds().to_spec(),
        "training": {"n": N_TRAIN, "salt": TRAIN_SALT, "recipe": RECIPE},
        "queries": {"n": N_QUERIES, "salt": QUERY_SALT, "recipe": RECIPE, "clients": CLIENT_RECIPE},
        "round_starts": [rounds.index(r) for r in sorted(set(rounds))],
        "labels": "".join(SYMBOLS[v] for v in labels),
        "outcomes": "".join(SYMBOLS[v] for v in outcomes),
        "refusals": "".join(str(v) for v in refusals),
        "quota_fired": fired,
        "burn": burn,
    }


def path(design: str) -> Path:
    return DATA / f"kat-{design}.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="compare with the stored files; write nothing")
    args = ap.parse_args(argv)
    differ = 0
    for design in (*DESIGNS, CLIENTS_KAT):
        v = client_vectors() if design == CLIENTS_KAT else vectors(design)
        text = json.dumps(v, indent=1) + "\n"
        if args.check:
            same = path(design).exists() and json.loads(path(design).read_text()) == v
            differ += not same
            print(f"{path(design).relative_to(ROOT)}: {'same' if same else 'DIFFERS'}")
        else:
            DATA.mkdir(parents=True, exist_ok=True)
            path(design).write_text(text)
            print(f"wrote {path(design).relative_to(ROOT)} (format {v['format']})")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
