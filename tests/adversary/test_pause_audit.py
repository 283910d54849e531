"""Paused rounds (docs/privacy/genericbbl.md 16) against broken variants that the tests must catch.

* ``answers while paused``: a round whose halt budget is spent keeps answering from its classifiers
  (fresh noise per query) instead of refusing. The band-edge attack (``flip``: every vote on the band's
  lower edge, one point probed for the whole round, the exact likelihood-ratio score) is run through
  the engine itself, game by game: the real engine stays below Lemma TC's claim for the round, the
  variant is caught far above it.
* ``D-hat at another rate``: paused queries kept out of D-hat, or paused queries all kept. Either makes
  D-hat's content depend on where the round paused, and the query chain's step Q6 charges the uniform
  rate m_D / R (F3). The invariant test (D-hat holds the queries at its positions, paused or not)
  catches both.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from everlast.adversary_sim.audit import stats
from everlast.adversary_sim.audit.games import FlipAttack, _scorer, trial_seeds
from everlast.adversary_sim.audit.variants import variant
from everlast.engine import predictor as pr
from everlast.engine.noise import sample
from everlast.engine.phases import Phase
from everlast.engine.planner import certify
from everlast.engine.predictor import Predictor
from everlast.engine.serving import Answers, Refusal
from tests.engine.helpers import tops_predictor

QUERIES = np.random.default_rng(5).random(3000)

REAL_PAUSED = Predictor._paused
REAL_OFFER = pr._offer


def _answering_paused(self: Predictor, xs: NDArray[Any], n: int) -> tuple[Any, Answers]:
    """The broken variant: a paused round answers from its classifiers with fresh noise."""
    new, out = REAL_PAUSED(self, xs, n)
    plan = self.plan
    g = np.random.default_rng([self.entropy & ((1 << 64) - 1), self.answered_in_round])
    z = sample(g, plan.query, n)
    labels = (self.ensemble.votes(xs[:n]) + z >= plan.lo).astype(np.int8)
    return new, replace(out, labels=labels, outcomes=labels.copy(), refusals=np.zeros(n, np.int8))


@contextmanager
def broken(kind: str) -> Iterator[None]:
    """Patch the engine into one of the broken variants for the duration of a block."""
    mp = pytest.MonkeyPatch()
    try:
        if kind == "answers while paused":
            mp.setattr(Predictor, "_paused", _answering_paused)
        elif kind in ("paused kept out of D-hat", "paused all kept"):
            def offer(points: Any, positions: Any, filled: int, start: int, x: Any) -> int:
                return filled if kind == "paused kept out of D-hat" else min(
                    filled + x.shape[0], points.shape[0])

            def paused(self: Predictor, xs: NDArray[Any], n: int) -> tuple[Any, Answers]:
                mp.setattr(pr, "_offer", offer)
                try:
                    return REAL_PAUSED(self, xs, n)
                finally:
                    mp.setattr(pr, "_offer", REAL_OFFER)

            mp.setattr(Predictor, "_paused", paused)
        else:
            raise ValueError(kind)
        yield
    finally:
        mp.undo()


def answer_round(make: Callable[[], Predictor], xs: NDArray[np.float64]) -> tuple[Predictor, NDArray[np.int8]]:
    """Answer ``xs`` with a fresh predictor from ``make``; if the round paused inside the batch, do it
    again in two batches cut at the pause (the same answers and state for the engine as shipped: any
    split gives the same, ``tests/engine/test_predictor.py``), so the paused part goes through the
    paused phase's path, where a broken variant differs."""
    p = make()
    res = p.answer(xs)
    at = np.flatnonzero(res.refusals == Refusal.ROUND_PAUSED)
    if not at.size:
        return p, res.labels
    p = make()
    head = p.answer(xs[: at[0]])
    tail = p.answer(xs[at[0] :])
    return p, np.concatenate([head.labels, tail.labels])


def flip_scores(world: int, games: int, seed: int) -> NDArray[np.float64]:
    """The band-edge game through the engine: each game a fresh predictor (its own seed) of the
    attack's round, R probes at the boundary, scored by the attack's exact likelihood ratio."""
    att = FlipAttack()
    concept, sched = att._engine(variant("real"))
    spec = sched.rounds[0]
    x, y = att.data(world, seed)
    scorer = _scorer(sched.design, spec, att.k0, spec.R)
    labels = np.empty((games, spec.R), np.int8)
    for i, s in enumerate(trial_seeds(seed, att.tag, world, games)):
        _, labels[i] = answer_round(lambda s=s: Predictor.create(concept, sched, x, y, seed=s),
                                    np.full(spec.R, 0.5))
    return scorer.scores(labels)


def flip_bound(games: int, seed: int) -> tuple[float, float]:
    """(lower bound, claim): the held-out audit bound at delta 1e-6, 95% confidence, and Lemma TC's
    round epsilon for the attack's round (what the audit compares against)."""
    att = FlipAttack()
    sc = att.scenario()
    cert = certify(sc.schedule, sc.n, delta=1e-6)
    claim = next(s.epsilon for s in cert.steps if s.name == "round composition, round 1")
    b = stats.audit_bound(flip_scores(0, games, seed), flip_scores(1, games, seed), 1e-6, 0.05)
    return b.epsilon_lower_bound, claim


@pytest.mark.statistical
def test_band_edge_audit_passes_the_paused_engine_and_catches_one_that_answers_while_paused() -> None:
    real, claim = flip_bound(1000, seed=1)
    assert real < claim
    with broken("answers while paused"):
        caught, _ = flip_bound(1000, seed=1)
    # the variant answers all R = 2,000 probes as randomized responses at eps0 instead of ~c/q: the
    # worlds separate completely (the bound is the trial count's ceiling, 5.24 at 700 held-out games)
    assert caught > claim and caught > real + 3.0


def _make(design: str) -> Predictor:
    return tops_predictor(design, halt_threshold=4, c=10) if design == "target-charged" else tops_predictor(design, c=4)


def _pause_then_fill(design: str) -> tuple[Predictor, NDArray[np.float64]]:
    xs = np.r_[np.full(4, 0.5), QUERIES[: _make(design).spec.R - 4]]
    p, _ = answer_round(lambda: _make(design), xs)
    return p, xs


def d_hat_holds_its_positions(p: Predictor, xs: NDArray[np.float64]) -> bool:
    """The invariant the query chain's Q6 needs (F3): after a round that paused, D-hat holds exactly
    the queries at its positions, as an unpaused round would."""
    positions = np.asarray(p.round_part()["round_state"]["reservoir_positions"])
    got = p.reservoir_points(0, p.reservoir_filled)
    return p.reservoir_filled == positions.size and got.shape == xs[positions].shape and bool(
        np.array_equal(got, xs[positions]))


@pytest.mark.parametrize("design", ["target-charged", "paper"])
def test_d_hat_invariant_holds_and_catches_other_rates(design: str) -> None:
    p, xs = _pause_then_fill(design)
    assert p.phase is Phase.TRANSITION_DUE and d_hat_holds_its_positions(p, xs)
    for kind in ("paused kept out of D-hat", "paused all kept"):
        with broken(kind):
            q, ys = _pause_then_fill(design)
        assert not d_hat_holds_its_positions(q, ys), kind


def test_the_pause_invariant_catches_answers_while_paused() -> None:
    """Never answer from data once the budget is spent: every query after the pause is refused."""
    for mutant in (False, True):
        with broken("answers while paused") if mutant else _nothing():
            _, labels = answer_round(lambda: _make("target-charged"), np.r_[np.full(10, 0.5), QUERIES[:100]])
        assert labels[:4].tolist() == [1] * 4
        assert bool((labels[4:] == -1).all()) is (not mutant)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


if __name__ == "__main__":  # the figures of docs/ADVERSARY.md 2.5: python -m tests.adversary.test_pause_audit
    import json

    real, claim = flip_bound(1000, seed=1)
    with broken("answers while paused"):
        caught, _ = flip_bound(1000, seed=1)
    print(json.dumps({"claim": claim, "real": real, "answers_while_paused": caught}))
