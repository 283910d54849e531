"""Small hand-written schedules and predictors shared by the engine tests (no planner)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.concepts import Thresholds
from everlast.engine.design import PAPER, Design
from everlast.engine.phases import Phase
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import RoundSpec, Schedule

I8 = NDArray[np.int8]

DESIGNS = ("target-charged", "paper")

BASE: dict[str, Any] = {"T": 50, "lam": 10, "R": 600, "alpha": 0.1, "m_S": 50, "m_D": 500}
"""Rounds of 600 queries on 50 classifiers: several transitions in a few thousand queries.
Thresholds: lo = ceil(50 * 0.4) = 20, hi = floor(50 * 0.6) = 30."""
PER_DESIGN: dict[str, dict[str, Any]] = {
    # per-query noise DLap(2) on the count; the halting test (c0 = 300, DLap(8) vs DLap(4)) never
    # fires on the ~30 tops i.i.d. queries spend per round
    "target-charged": {"c": 600, "eps_bt": 0.5, "delta_bt": None, "halt_eps": 0.5, "halt_threshold": 300},
    # nu ~ DLap(12), mu ~ DLap(4) on the count: many tops and threshold redraws; c > R never fails
    "paper": {"c": 1000, "eps_bt": 0.5, "delta_bt": 1e-6},
}


def spec(design: str, **over: Any) -> RoundSpec:
    return RoundSpec.from_dict({**BASE, **PER_DESIGN[design], **over})


def schedule(design: str, rounds: int = 1, repeat_last: bool = True, quotas: dict[str, Any] | None = None,
             burn: dict[str, Any] | None = None, **over: Any) -> Schedule:
    s = spec(design, **over)
    d = Schedule((s,) * rounds, repeat_last=repeat_last, design=Design.named(design)).to_dict()
    if quotas is not None:
        d["quotas"] = quotas
    if burn is not None:
        d["burn"] = burn
    return Schedule.from_dict(d)


def training_set(n: int = 800, seed: int = 99) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    x = np.random.default_rng(seed).random(n)
    return x, (x >= 0.5).astype(np.int64)


def predictor(design: str, seed: int = 1, **over: Any) -> Predictor:
    x, y = training_set()
    return Predictor.create(Thresholds(), schedule(design, **over), x, y, seed=seed)


QUOTAS: dict[str, Any] = {"share": 0.2, "eps": 1.0}
"""c0_q = ceil(0.2 * 300) = 60 tops per client and round; xi' ~ DLap(4), rho' ~ DLap(2): a margin of
~40 tops above the ~20 an i.i.d. client of 360 queries per round spends (the largest of 360 DLap(4)
is ~4 ln 360 ~ 24)."""
BURN: dict[str, Any] = {"window": 100, "eps": 0.5}
"""Six windows per round of 600; each release's noise DLap(2)."""


def client_predictor(seed: int = 1, quotas: dict[str, Any] | None = QUOTAS, burn: dict[str, Any] | None = BURN,
                     **over: Any) -> Predictor:
    """A target-charged predictor with per-client quotas and the burn-rate signal on."""
    x, y = training_set()
    return Predictor.create(Thresholds(), schedule("target-charged", quotas=quotas, burn=burn, **over), x, y,
                            seed=seed)


def tiny_predictor(seed: int = 1, design: str = "target-charged", **over: Any) -> Predictor:
    """``predictor`` under its old name (tests/daemon uses it)."""
    return predictor(design, seed, **over)


def split_vote(p: Predictor) -> Predictor:
    """The same predictor with half its classifiers at 0 and half at 1: the vote at 0.5 is exactly
    T/2, mid-band, so with a tiny noise scale every query at 0.5 is a top."""
    st = p.state()
    T = p.spec.T
    st["round_state"]["ensemble"] = {"t": np.r_[np.zeros(T // 2), np.ones(T - T // 2)]}
    return Predictor.from_state(st)


def tops_predictor(design: str, seed: int = 1, **over: Any) -> Predictor:
    """A split-vote predictor whose noise is negligible (scales <= 0.12 counts against a band of
    +-5): each query at 0.5 is a top; target-charged halts at exactly c0 tops."""
    sharp: dict[str, Any] = {"eps_bt": 50.0}
    if design == "target-charged":
        sharp["halt_eps"] = 100.0
    return split_vote(predictor(design, seed, **{**sharp, **over}))


def answer_in_batches(p: Predictor, xs: NDArray[np.float64], cuts: list[int]) -> tuple[I8, I8, list[int]]:
    """Labels, outcomes and the round of every query, cut at ``cuts``, transitions as asked."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < xs.size}), xs.size]
    labels, outcomes, rounds = [], [], []
    for lo, hi in itertools.pairwise(bounds):
        pos = lo
        while pos < hi:
            if p.phase is Phase.TRANSITION_DUE:
                p.transition()
            res = p.answer(xs[pos:hi])
            labels.append(res.labels)
            outcomes.append(res.outcomes)
            rounds += [res.round] * res.consumed
            pos += res.consumed
    return np.concatenate(labels), np.concatenate(outcomes), rounds


def run_in_batches(p: Predictor, xs: NDArray[np.float64], cuts: list[int]) -> NDArray[np.int8]:
    """Answer ``xs`` cut at ``cuts``, running transitions as the engine asks for them: the labels."""
    return answer_in_batches(p, xs, cuts)[0]


def is_paper(design: str) -> bool:
    return Design.named(design) == PAPER
