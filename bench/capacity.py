"""A round's peak memory per D-hat point, measured, against the planner's model of it.

    python -m bench.capacity [--quick]

``everlast plan`` says how many rounds one engine holds (``engine.planner.capacity``) from a model:
bytes = ``POINT_BYTES`` x coordinates x (m_D + m_D of the next round) + ``POSITION_BYTES`` x m_D
(when the round keeps fewer queries than it answers) + ``TRANSITION_BYTES[concept]`` x m_D
(x coordinates for stumps). This benchmark runs a steady round of the planner's shape (S_{i+1}
has lambda T = m_D points, as every planned round: m_D,i = lambda_{i+1} T_{i+1}) and measures,
with ``tracemalloc`` (numpy reports its buffers to it), the peak of everything the process holds
from the start of round 2 through its answers and its transition. ``ratio`` = measured / model:
at most 1 means the model is an upper bound at that size. Rows: each concept at m_D = R (every
query kept) and m_D = R/2 (the reservoir stores its positions), at 2^18 and 2^20 points (and 2^22 in the full run).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from collections.abc import Callable

import numpy as np

from everlast.engine.concepts import from_spec
from everlast.engine.phases import Phase
from everlast.engine.planner.capacity import round_bytes
from everlast.engine.planner.fill import fill_tests
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import RoundSpec, Schedule

STUMPS_D = 3
CONCEPTS = ("thresholds", "intervals", "stumps")
LAM = 10
BATCH = 1 << 16


def _draw(concept: str) -> Callable[[np.random.Generator, int], np.ndarray]:
    if concept == "stumps":
        return lambda g, n: g.random((n, STUMPS_D))
    return lambda g, n: g.random(n)


def row(concept: str, m_D: int, keep_all: bool) -> dict[str, object]:
    """Round 2 of a schedule whose one round repeats: R = m_D (every query kept) or 2 m_D."""
    R = m_D if keep_all else 2 * m_D
    T = m_D // LAM
    spec = fill_tests(RoundSpec(T=T, lam=LAM, R=R, c=10**9, eps_bt=0.5, delta_bt=None, alpha=0.1,
                                m_S=1000, m_D=m_D))
    draw = _draw(concept)
    g = np.random.default_rng(0)
    x = draw(g, LAM * T)
    y = (np.asarray(x).reshape(LAM * T, -1)[:, 0] >= 0.5).astype(np.int8)
    spec_c = {"name": concept, "d": STUMPS_D} if concept == "stumps" else {"name": concept}
    p = Predictor.create(from_spec(spec_c), Schedule((spec,)), x, y, seed=0)
    del x, y

    def answer_round() -> None:
        for i in range(0, R, BATCH):
            p.answer(draw(g, min(BATCH, R - i)))
        assert p.phase is Phase.TRANSITION_DUE

    answer_round()
    p.transition()  # round 2 starts: the steady state the model describes
    gc.collect()
    tracemalloc.start()
    try:
        answer_round()
        p.transition()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    coords = STUMPS_D if concept == "stumps" else 1
    model = round_bytes(m_D, m_D, R, concept, coords)
    return {"concept": concept, "m_D": m_D, "R": R, "peak_bytes": peak,
            "bytes_per_point": round(peak / m_D, 2), "model_bytes": model, "ratio": round(peak / model, 3)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (a smoke run, for CI)")
    args = ap.parse_args(argv)
    sizes = [1 << 18, 1 << 20] if args.quick else [1 << 18, 1 << 20, 1 << 22]
    rows = []
    for concept in CONCEPTS:
        for m_D in sizes:
            for keep_all in (True, False):
                print(f"capacity {concept} m_D={m_D} {'m_D = R' if keep_all else 'm_D = R/2'} ...", file=sys.stderr)
                rows.append(row(concept, m_D, keep_all))
    print(json.dumps({"capacity": rows}))


if __name__ == "__main__":
    main()
