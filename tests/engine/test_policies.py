"""Halting (paper / never / noisy) and restart (per-top / private / stateless) policies: replayable,
batch-invariant, and doing what their definitions say (engine.between_thresholds.Rules)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import between_thresholds as bt
from engine import codec
from engine.concepts import Thresholds
from engine.errors import InvalidSchedule
from engine.phases import Phase
from engine.predictor import Predictor
from engine.schedule import RoundSpec, Schedule
from tests.engine.helpers import run_in_batches

BASE = {"T": 50, "lam": 10, "R": 600, "eps_bt": 0.5, "delta_bt": 1e-6, "alpha": 0.1, "m_S": 50, "m_D": 500}
DESIGNS = {
    ("paper", "per-top"): {"c": 1000},
    ("noisy", "private"): {"c": 400, "halt_eps": 0.5, "halt_threshold": 300.0, "restart_eps": 1.0,
                           "restart_threshold": 3.0, "block_cap": 12},
    ("never", "stateless"): {"c": 601},
    ("noisy", "per-top"): {"c": 60, "halt_eps": 1.0, "halt_threshold": 30.0},
    ("paper", "private"): {"c": 1000, "restart_eps": 0.5, "restart_threshold": 2.0, "block_cap": 5},
}
QUERIES = np.random.default_rng(5).random(3000)


def make(design: tuple[str, str], seed: int = 1, **over: float) -> Predictor:
    spec = RoundSpec.from_dict({**BASE, **DESIGNS[design], **over})
    sched = Schedule((spec,), halting=design[0], restarts=design[1])  # type: ignore[arg-type]
    x = np.random.default_rng(99).random(800)
    return Predictor.create(Thresholds(), sched, x, (x >= 0.5).astype(int), seed=seed)


REFS = {d: run_in_batches(make(d), QUERIES, []) for d in DESIGNS}


@pytest.mark.parametrize("design", list(DESIGNS))
@settings(max_examples=15, deadline=None)
@given(cuts=st.lists(st.integers(min_value=1, max_value=2999), max_size=20),
       stops=st.lists(st.integers(min_value=1, max_value=2999), max_size=3))
def test_every_design_is_batch_invariant_and_restorable(design: tuple[str, str], cuts: list[int],
                                                        stops: list[int]) -> None:
    p = make(design)
    bounds = [0, *sorted(set(stops)), QUERIES.size]
    out = []
    for lo, hi in itertools.pairwise(bounds):
        out.append(run_in_batches(p, QUERIES[lo:hi], [c - lo for c in cuts if lo < c < hi]))
        p = codec.loads(codec.dumps(p))
    assert np.array_equal(np.concatenate(out), REFS[design])


def split_vote(design: tuple[str, str], **over: float) -> Predictor:
    """Half the classifiers at 0, half at 1: the vote at 0.5 is exactly 1/2, noise negligible."""
    p = make(design, eps_bt=50.0, **over)
    s = p.state()
    s["round_state"]["ensemble"] = {"t": np.r_[np.zeros(25), np.ones(25)]}
    return Predictor.from_state(s)


def test_private_restarts_have_no_hard_block_cap() -> None:
    """block_cap is an accounting bound only (docs/PRIVACY.md 5.3, 6.4): a block whose test cannot
    fire keeps its threshold noise past block_cap tops (a cap reading the hidden query's outcome
    would re-open the restart channel)."""
    p = split_vote(("paper", "private"), restart_threshold=1e9, block_cap=3, c=1000)
    mus = []
    for _ in range(10):  # every query is a top; the test never fires
        mus.append(p.threshold_noise)
        p.answer(np.array([0.5]))
    assert len(set(mus)) == 1


def test_noisy_halting_fails_near_its_noisy_threshold_and_never_past_the_hard_cap() -> None:
    stopped = []
    for seed in range(40):
        p = split_vote(("noisy", "per-top"), seed=seed, c=60, halt_eps=1.0, halt_threshold=30.0)
        labels = p.answer(np.full(100, 0.5)).labels
        assert p.phase is Phase.HALTED
        stopped.append(int((labels >= 0).sum()))
    assert max(stopped) <= 60  # the hard cap c
    assert 15 <= np.median(stopped) <= 45  # the noisy threshold c0 = 30 (Laplace scales 2 and 4)
    assert len(set(stopped)) > 5  # the halting time is randomized, not the count itself


def test_never_halting_requires_c_above_r() -> None:
    with pytest.raises(InvalidSchedule, match="c > R"):
        make(("never", "stateless"), c=600)


@pytest.mark.parametrize(("halting", "restarts", "missing"), [
    ("noisy", "per-top", "halt_eps"), ("paper", "private", "restart_eps"), ("paper", "private", "block_cap"),
])
def test_policies_need_their_parameters(halting: str, restarts: str, missing: str) -> None:
    params = {**BASE, "c": 100, "halt_eps": 1.0, "halt_threshold": 50.0, "restart_eps": 1.0,
              "restart_threshold": 2.0, "block_cap": 5}
    params.pop(missing)
    with pytest.raises(InvalidSchedule, match=missing):
        Schedule((RoundSpec.from_dict(params),), halting=halting, restarts=restarts)  # type: ignore[arg-type]


def test_stateless_draws_a_threshold_noise_per_query() -> None:
    q = np.full(2000, 0.5)
    mus = np.random.default_rng(3).laplace(0, 0.2, 2000)
    res = bt.run(q, np.zeros(2000), band=0.1, state=bt.BTState(mu=0.0),
                 rules=bt.Rules(restarts="stateless", halting="never", c=10**6), mu_per_query=mus)
    assert list(res.outcomes) == [bt.TOP if m <= 0.1 else bt.L for m in mus]
    assert res.tops == int((mus <= 0.1).sum())
