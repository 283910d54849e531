"""The boundary prober against the real engine: it halts a round far faster than i.i.d. traffic."""

from __future__ import annotations

import numpy as np

from everlast.adversary_sim.iid import make_task
from everlast.adversary_sim.prober import BoundaryProber
from everlast.adversary_sim.run import default_schedule
from everlast.adversary_sim.streams import IIDStream, run_stream
from everlast.engine.concepts import Thresholds
from everlast.engine.predictor import Predictor


def _predictor(seed: int) -> Predictor:
    task = make_task(Thresholds(), "uniform")
    sched = default_schedule()
    x, y = task.sample(np.random.default_rng([seed, 0]), sched.initial_size)
    return Predictor.create(Thresholds(), sched, x, y, seed=seed)


def test_prober_halts_far_faster_than_iid() -> None:
    task = make_task(Thresholds(), "uniform")
    c = default_schedule().rounds[0].c
    R = default_schedule().rounds[0].R
    iid = run_stream(_predictor(1), IIDStream(task, 1), 2 * R, batch=8192)
    # honest traffic: two full rounds, no halt, well under the budget
    assert not iid.halted and len(iid.rounds) >= 2
    assert all(r.tops_used < 0.7 * c for r in iid.rounds)
    prober = BoundaryProber(task, 1)
    att = run_stream(_predictor(1), prober, 2 * R, batch=64)
    assert att.halted and att.queries_to_halt is not None
    # the budget is spent at about 0.7 tops per query (the band's centre under the default round's
    # noise): a few hundred queries to find the boundary, then ~c / 0.7
    assert att.queries_to_halt < 1.5 * c + 1000
    assert att.queries_to_halt * 20 < R  # i.i.d. traffic answers all R (and more) without halting
    assert att.rounds[0].halted_after == att.queries_to_halt
    det = att.details
    assert det["phase"] == "exhaust" and det["queries_bisect"] <= 1024
    assert abs(det["boundary_estimate"] - task.target["t"]) < 0.05
