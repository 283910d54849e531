"""The boundary prober against the real engine: it pauses a round far faster than i.i.d. traffic, and the
model serves again in the next round (docs/privacy/genericbbl.md 16)."""

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


def test_prober_pauses_a_round_far_faster_than_iid_and_the_next_round_serves() -> None:
    task = make_task(Thresholds(), "uniform")
    c = default_schedule().rounds[0].c
    R = default_schedule().rounds[0].R
    iid = run_stream(_predictor(1), IIDStream(task, 1), 2 * R, batch=8192)
    # honest traffic: two full rounds, no pause, well under the budget
    assert not iid.halted and not iid.paused_rounds and len(iid.rounds) >= 2
    assert all(r.tops_used < 0.7 * c for r in iid.rounds)
    prober = BoundaryProber(task, 1)
    p = _predictor(1)
    att = run_stream(p, prober, R + 500, batch=64)
    assert not att.halted and att.queries_to_halt is None  # nothing refuses for good
    assert att.paused_rounds[:1] == [1] and att.queries_to_pause is not None
    # the budget is spent at about 0.7 tops per query (the band's centre under the default round's
    # noise): a few hundred queries to find the boundary, then ~c / 0.7
    assert att.queries_to_pause < 1.5 * c + 1000
    assert att.queries_to_pause * 20 < R  # i.i.d. traffic answers all R (and more) without pausing
    first = att.rounds[0]
    assert first.paused_after == att.queries_to_pause and first.queries == R
    assert first.reasons == {"round-paused": R - first.paused_after}  # the rest of the round, refused
    # round 2 serves again: the prober's first queries of round 2 are answered, and so is honest traffic
    second = att.rounds[1]
    assert second.round == 2 and second.queries == 500 and second.refused < 500
    honest = run_stream(p, IIDStream(task, 2), 1000, batch=100)
    assert honest.rounds[0].round == 2 and honest.rounds[0].refused == 0
    det = att.details
    assert det["phase"] == "exhaust" and det["queries_bisect"] <= 1024
    assert abs(det["boundary_estimate"] - task.target["t"]) < 0.05
