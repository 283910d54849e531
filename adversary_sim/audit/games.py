"""The adversaries of the audit: each plays the game of Definition 3.4 / Figure 1 against the engine
(paper: Naor, Nissim, Stemmer, Yan 2023) many times with fresh randomness and returns one score per
game; ``adversary_sim.audit.stats`` turns the scores of the two worlds into an epsilon lower bound.

Figure 1, in short: the adversary B picks two training sets that differ in at most one example; if
they are equal (Flag = 0) it may later pick two query streams that differ in one query, and it never
sees the answer to that differing query. The view is B's randomness and the predictions. The
predictor is (eps, delta)-private if the views of world 0 and world 1 are (eps, delta)-close.

Every attack runs against one of the engine's two designs (``engine.design``: target-charged, the
default, or the paper's) on a small *nominal configuration* per design (a schedule and a
training-set size n for which the planner's certificate is weak but finite) with a deterministic
strategy. The key choice for auditing with few games: lambda = 1 (every chunk classifier is trained
on one example, so it is the constant function of that example's label and the vote count is
exactly the number of ones, whatever the random chunking). The adversary then controls the count to
the single vote, the worst case the proof must cover (Definition 3.4 quantifies over all training
sets).

Training-set game (Flag = 1):
  * ``flip``: S^0 has k0 = lo - 1 ones and S^1 is S^0 with the label of the point nearest the
    boundary flipped, so the count is lo - 1 or lo: every vote sits on the band's lower edge. B
    probes one point for the whole round and scores the view with its exact likelihood ratio
    (``adversary_sim.audit.probe``). Against target-charged each query is then randomized response at
    level eps0 and the round ends at about c tops (docs/notes/target_charging.md 3.3); the
    configuration (``edge_round``) halts at the hard cap c, the worst case of Lemma TC. Catches
    ``no-noise``, ``no-halt-limit`` and ``charged-c``.
  * ``relabel``: S-hat's labeled points sit at 0 (label 0) and 1 (label 1) with a gap; the canary
    sits in the gap (label 0 or 1). B's round-1 queries all lie in the gap left of the canary, so
    LabelBoost's relabeling of D-hat -- hence all of S_2 and every round-2 answer -- depends on
    whether the canary is in S-hat and on its label. The real LabelBoost samples among the tied
    dichotomies (each shifted by e^{1/2} at most by the canary); a plain relabel decides
    deterministically. Catches ``majority-relabel``.
Query game (Flag = 0):
  * ``chain``: the differing query is the first of round 1: x^0 = -1 (relabeled 0) or x^1 = 2
    (relabeled 1); the other R - 1 queries are fixed so that S_2 (= all of D-hat, relabeled) holds
    k0 or k0 + 1 ones. B then probes round 2 as in ``flip``. This tests the later-round part of the
    query chain (Claim E.6's steps 1-6), not the in-round channels.
  * ``halting``: the halting channel (docs/notes/query_privacy.md 1): x^0 = 0 (far from the boundary, answered L)
    or x^1 = 1/2 (split vote, a top). Paper: then c - 1 queries at 1/2 and one at 0; in world 1 the
    c-th top fails the round and the last query is refused. Target-charged (noisy halting): B sends
    split-vote queries up to the hard cap and scores the halting time; the held-out threshold is the
    sweep over the number k of follow-up tops (``fixed_k_scores``: the single test k = c0 - 1).
    Catches the paper's halting and ``deterministic-halting``.
  * ``restart``: the wait-and-test adversary of ``adversary_sim.audit.restart``. Catches the paper's
    per-top restarts; cannot work against target-charged, which has no threshold noise.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from everlast.adversary_sim.audit.fastbt import BulkNoise, run_batch
from everlast.adversary_sim.audit.probe import PaperLLR, Scorer, TctLLR, edge_law, exact_epsilon, preregistered_test
from everlast.adversary_sim.audit.restart import Game, WaitAndTest
from everlast.adversary_sim.audit.restart import play as restart_play
from everlast.adversary_sim.audit.variants import Variant
from everlast.engine.concepts import ConceptClass, Thresholds
from everlast.engine.design import DEFAULT, PAPER, Design, NoisePlan, noise_plan
from everlast.engine.phases import Phase
from everlast.engine.planner import above_threshold as at
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import RoundSpec, Schedule

Progress = Callable[[int], None]
CHUNK = 4096
"""Games whose views are held in memory at once."""

# -- nominal configurations ------------------------------------------------------------------------

AUDIT_T = 4000
K0 = 1199
"""Ones in the world-0 training set of ``flip`` (paper) and in S_2 of ``chain``: count K0, with the
lower threshold lo = K0 + 1 (gamma = 1/2 - (K0 + 1/2)/T)."""
TCT_EPS0 = 0.01
"""eps0 of the target-charged main round: small, so that its chains stay under what a few thousand
games can show (training 2.0, queries 6.1); the round-1 count (600, 6 noise scales below lo) gives
about 5 tops in 4 000 queries, far below c0."""
TCT_HALT_EPS = 1.0
TCT_C0 = 80
"""c0 of the main round: the adversaries' round-1 traffic (~5 tops) halts with probability 2e-5."""
CAP_TAIL = 1e-11
"""P[the hard cap binds before the halting test fires] of the target-charged rounds (Lemma Cap)."""


def gap(k0: int, T: int) -> float:
    """gamma that puts the lower threshold half a vote above k0: lo = ceil(k0 + 1/2) = k0 + 1."""
    return 0.5 - (k0 + 0.5) / T


def main_round(design: Design = DEFAULT, T: int = AUDIT_T, k0: int = K0) -> RoundSpec:
    """The audit's main round (relabel, chain; flip under the paper's design): lambda = 1, R = m_D = T
    (S_{i+1} is all of D-hat), S-hat = T/10, lower threshold lo = k0 + 1.
    paper: c = 1, eps' = 0.9, delta' = 1e-9 (as in earlier audits).
    target-charged: eps0 = 0.01, noisy halting eps_h = 1, c0 = 80, hard cap c = c0 + the margin that
    the cap binds first with probability <= 1e-11 (181)."""
    return AUDIT_ROUNDS[design].main(T, k0)


def _paper_main(T: int, k0: int) -> RoundSpec:
    return RoundSpec(T=T, lam=1, R=T, c=1, eps_bt=0.9, delta_bt=1e-9, alpha=0.2, m_S=T // 10, m_D=T,
                     gamma=gap(k0, T), beta=0.05)


def _tct_main(T: int, k0: int) -> RoundSpec:
    return dataclasses.replace(_paper_main(T, k0), eps_bt=TCT_EPS0, delta_bt=None,
                               c=TCT_C0 + _margin(TCT_HALT_EPS), halt_eps=TCT_HALT_EPS, halt_threshold=TCT_C0)


@lru_cache(maxsize=8)
def _margin(eps_h: float) -> int:
    return at.at_margin(eps_h, CAP_TAIL)


EDGE_T = 1000
EDGE_K0 = 299
EDGE_EPS0 = 0.15
EDGE_C = 3
EDGE_HALT_EPS = float(1 << 20)
"""eps_h of the edge round: the halting test (c0 = c) without noise (scales 2^-18 and 2^-19 counts:
every draw is 0), so the round ends at exactly its c-th top, the worst case Lemma TC covers (the test
costs nothing on the training side), and the view's law is exactly ``probe.edge_law``."""


def edge_round() -> RoundSpec:
    """The target-charged round of the band-edge attack (``flip``): eps0 = 0.15, hard cap c = 3, the
    halting test at c0 = c without noise (eps_h = 2^20); T = 1000, lambda = 1, R = 2000 queries (what a round
    without a cap answers), lo = 300. Lemma TC claims 4.18 for its round (delta 1e-6); charging only
    c steps would claim 0.45."""
    return RoundSpec(T=EDGE_T, lam=1, R=2 * EDGE_T, c=EDGE_C, eps_bt=EDGE_EPS0, delta_bt=None, alpha=0.2,
                     m_S=EDGE_T // 10, m_D=EDGE_T, gamma=gap(EDGE_K0, EDGE_T), beta=0.05,
                     halt_eps=EDGE_HALT_EPS, halt_threshold=EDGE_C)


def halting_round(design: Design = PAPER) -> RoundSpec:
    """The halting attack's round (lambda = 10: the vote varies with x; R = 100 000 >> c).
    paper: c = 2. target-charged: noisy halting with eps_h = 1, c0 = 10 and hard cap
    c = c0 + 1 + ceil((8/eps_h) ln(1/1e-9)) = 177 (docs/notes/query_privacy.md 3.2)."""
    return AUDIT_ROUNDS[design].halting()


def _paper_halting() -> RoundSpec:
    return RoundSpec(T=1000, lam=10, R=100_000, c=2, eps_bt=0.9, delta_bt=1e-9, alpha=0.2, m_S=1000,
                     m_D=10_000, gamma=0.2005, beta=0.05)


def _tct_halting() -> RoundSpec:
    return dataclasses.replace(_paper_halting(), delta_bt=None, c=HALT_C0 + 1 + 166, halt_eps=HALT_EPS,
                               halt_threshold=HALT_C0)


HALT_EPS = 1.0
"""eps_h of the halting attack's target-charged round: large enough that the audit can resolve it."""
HALT_C0 = 10
"""c0 of the halting attack's target-charged round."""


def restart_round(design: Design = PAPER) -> RoundSpec:
    """The restart attack's round (docs/notes/query_privacy.md 4, audit B): c = 2000, alpha = 0.05,
    eps' = 1/(3 sqrt(c ln(2/delta))), delta' = delta/(2c) (delta = 1e-6), T = 1.2 T_min of Lemma C.3's
    gap, so the band is W = alpha eps' T = 227.9 threshold-noise units wide. R = 10^8 (more than any
    game uses). target-charged: the same round with eps0 = eps', noisy halting eps_h = 0.1, c0 = 1000
    under the hard cap c."""
    return AUDIT_ROUNDS[design].restart()


def _paper_restart() -> RoundSpec:
    from everlast.engine.planner import bt as planner_bt

    c, delta, R = 2000, 1e-6, 100_000_000
    eps = 1.0 / (3.0 * math.sqrt(c * math.log(2.0 / delta)))
    dbt = delta / (2 * c)
    T = math.ceil(1.2 * planner_bt.min_t(0.05, eps, dbt))
    return RoundSpec(T=T, lam=1, R=R, c=c, eps_bt=eps, delta_bt=dbt, alpha=0.05, m_S=T // 10, m_D=T, beta=0.05)


def _tct_restart() -> RoundSpec:
    return dataclasses.replace(_paper_restart(), delta_bt=None, halt_eps=0.1, halt_threshold=1000)


@dataclass(frozen=True, slots=True)
class AuditRounds:
    """What the attacks play against one design: its nominal rounds, the round and count of the
    band-edge (``flip``) game, the exact likelihood-ratio scorer of a probe's labels, and the
    halting adversary's strategy."""

    design: Design
    main: Callable[[int, int], RoundSpec]
    halting: Callable[[], RoundSpec]
    restart: Callable[[], RoundSpec]
    flip: Callable[[], RoundSpec]
    flip_k0: int
    scorer: Callable[[int, int, NoisePlan, int], Scorer]
    """(k0, k1, plan, probe queries) -> the view's exact likelihood-ratio scorer."""
    edge_law: bool
    """Whether the flip round's view has an exact law for a pre-registered test (``probe.edge_law``:
    the target-charged round ended by its c-th top)."""
    halting_sweep: bool
    """The halting adversary's strategy: sweep split-vote queries up to the hard cap and score the
    halting time (noisy halting), or spend the paper's c tops and read one refusal."""
    probe_offset: float
    """The restart adversary's probe offset z (``restart.WaitAndTest``): one noise unit inside the band
    for the paper's (tops are rare while mu is large), two below it for target-charged (where a probe
    inside the band is a top half the time, so a run of m zeros never comes)."""


def make_schedule(spec: RoundSpec, design: Design = DEFAULT) -> Schedule:
    """One round, repeated."""
    return Schedule((spec,), repeat_last=True, design=design)


@dataclass(frozen=True, slots=True)
class Scenario:
    """The nominal configuration an attack runs against (what the claim is computed for)."""

    schedule: Schedule
    n: int
    concept: ConceptClass


def trial_seeds(seed: int, tag: int, world: int, trials: int) -> list[int]:
    """Independent root seeds for the predictors of one world (fresh randomness per game)."""
    ss = np.random.SeedSequence([seed, tag, world])
    return [int(s) for s in ss.generate_state(trials, dtype=np.uint64)]


# -- attacks ------------------------------------------------------------------------------------------


class Attack(abc.ABC):
    name: ClassVar[str]
    game: ClassVar[str]
    tag: ClassVar[int]
    summary: ClassVar[str]
    catches: ClassVar[tuple[str, ...]]
    """Broken variants this adversary is designed to expose."""
    scope: ClassVar[str] = "chain"
    """What the claim covers: "round" (the view is one round's answers: its (E, Delta) from certify),
    "chain" (the whole training or query chain) or "in-round" (Theorem Q's in-round step)."""

    def __init__(self, design: Design = DEFAULT, queries: int | None = None) -> None:
        self.design = design
        self.queries = queries

    @abc.abstractmethod
    def scenario(self) -> Scenario:
        """The nominal configuration."""

    @abc.abstractmethod
    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        """Play ``trials`` games in world ``world`` against variant ``v``; one score per game."""

    def preregistered(self, per_world: int, delta: float, alpha: float) -> dict[str, Any] | None:
        """A test fixed before any game (threshold, direction), when the attack has one."""
        return None

    def describe(self) -> dict[str, Any]:
        return {"attack": self.name, "game": self.game, "summary": self.summary,
                "designed_to_catch": list(self.catches), "design": self.design.name, "claim_scope": self.scope}

    def _engine(self, v: Variant) -> tuple[ConceptClass, Schedule]:
        sc = self.scenario()
        return v.concept(sc.concept), v.schedule(sc.schedule)


def _probe_fast(plan_design: Design, spec: RoundSpec, counts: NDArray[np.int64], queries: int,
                rng: np.random.Generator) -> NDArray[np.int8]:
    """Probe labels of games whose probe count is ``counts``, replayed by ``fastbt`` (bulk noise)."""
    plan = noise_plan(plan_design, spec)
    return run_batch(plan_design, plan, counts, queries, BulkNoise(plan_design, plan, counts.size, rng)).labels


def _scorer(design: Design, spec: RoundSpec, k0: int, queries: int) -> Scorer:
    return AUDIT_ROUNDS[design].scorer(k0, k0 + 1, noise_plan(design, spec), queries)


class FlipAttack(Attack):
    name = "flip"
    game = "training"
    tag = 11
    summary = ("every vote on the band's lower edge: S^1 = S^0 with the label of the point nearest the "
               "boundary flipped (count lo - 1 vs lo); probe one point for the whole round; exact "
               "likelihood-ratio score")
    catches = ("no-noise", "no-halt-limit", "charged-c")
    scope = "round"

    @property
    def k0(self) -> int:
        return AUDIT_ROUNDS[self.design].flip_k0

    def scenario(self) -> Scenario:
        spec = AUDIT_ROUNDS[self.design].flip()
        return Scenario(make_schedule(spec, self.design), spec.labeled_size, Thresholds())

    def data(self, world: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        n = self.scenario().n
        x = np.sort(np.random.default_rng([seed, self.tag]).random(n))
        y = np.zeros(n, dtype=np.int8)
        y[n - self.k0 :] = 1
        if world == 1:
            y[n - self.k0 - 1] = 1  # the zero nearest the boundary, flipped
        return x, y

    def probe_queries(self) -> int:
        nominal = self.scenario().schedule.rounds[0]
        return min(self.queries or nominal.R, nominal.R)  # a probe round answers at most R queries

    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        """The count at the probe is read from the world's predictor: with lambda = 1 and n = |S_1| it
        is the training set's number of ones whatever the seed, so the games differ only in the round's
        noise, which ``fastbt`` draws game by game with the engine's sampler (a test ties fastbt to
        ``Predictor.answer`` outcome for outcome)."""
        concept, sched = self._engine(v)
        k = self.probe_queries()
        x, y = self.data(world, seed)
        p = Predictor.create(concept, sched, x, y, seed=trial_seeds(seed, self.tag, world, 1)[0])
        count = int(p.ensemble.votes(np.asarray([0.5]))[0])
        scorer = _scorer(self.design, self.scenario().schedule.rounds[0], self.k0, k)
        rng = np.random.default_rng([seed, self.tag, world, 1])
        out = np.empty(trials)
        for lo in range(0, trials, CHUNK):
            hi = min(trials, lo + CHUNK)
            labels = _probe_fast(sched.design, sched.rounds[0], np.full(hi - lo, count, np.int64), k, rng)
            out[lo:hi] = scorer.scores(labels)
            if progress is not None:
                progress(hi - lo)
        return out

    def preregistered(self, per_world: int, delta: float, alpha: float) -> dict[str, Any] | None:
        """target-charged: "fewer than k L answers" with k chosen from the exact law of the view when the
        round ends at its hard cap (``probe.preregistered_test``)."""
        if not AUDIT_ROUNDS[self.design].edge_law:
            return None
        plan = noise_plan(self.design, self.scenario().schedule.rounds[0])
        law = edge_law(plan, self.k0, self.k0 + 1)
        thr, k, expected = preregistered_test(law, per_world, delta, alpha)
        return {"threshold": thr, "direction": 1, "k": k, "expected_bound": expected,
                "exact_epsilon_of_view": exact_epsilon(law, delta),
                "note": (f"guess world 1 iff fewer than k = {k} L answers; k maximizes the bound expected "
                         "from this many games under the view's exact law (round ended by its c-th top), "
                         "chosen before any game: every game counts. exact_epsilon_of_view: the epsilon "
                         "this view attains at the claim's delta, what infinitely many games would show")}


class RelabelAttack(Attack):
    name = "relabel"
    game = "training"
    tag = 12
    summary = ("canary in the gap of S-hat's labeled points (label 0 or 1); round-1 queries in the gap "
               "left of it; read S_2's labels from one round-2 answer")
    catches = ("majority-relabel",)

    def scenario(self) -> Scenario:
        spec = main_round(self.design)
        return Scenario(make_schedule(spec, self.design), spec.labeled_size, Thresholds())

    @staticmethod
    def data(world: int, n: int) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        ones = round(0.15 * n) - 1
        zeros = n - ones - 1
        x = np.concatenate([np.zeros(zeros), np.ones(ones), [0.5]])
        y = np.concatenate([np.zeros(zeros, np.int8), np.ones(ones, np.int8), [world]]).astype(np.int8)
        return x, y

    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        concept, sched = self._engine(v)
        spec = sched.rounds[0]
        x, y = self.data(world, self.scenario().n)
        seeds = trial_seeds(seed, self.tag, world, trials)
        round1 = np.full(spec.R, 0.25)
        probe = np.full(8, 0.25)
        out = np.empty(trials)
        for i in range(trials):
            p = Predictor.create(concept, sched, x, y, seed=seeds[i])
            p.answer(round1)
            if p.phase is Phase.TRANSITION_DUE:
                p.transition()
            labels = p.answer(probe).labels
            out[i] = float(np.mean(labels == 1))
            if progress is not None:
                progress(1)
        return out


class ChainAttack(Attack):
    name = "chain"
    game = "query"
    tag = 21
    summary = ("differing first query of round 1 (x0 = -1 relabeled 0, x1 = 2 relabeled 1) shifts "
               "S_2's ones from k0 to k0+1 across round 2's lower threshold; probe round 2; "
               "likelihood-ratio score")
    catches = ("no-noise", "no-halt-limit")

    def scenario(self) -> Scenario:
        spec = main_round(self.design)
        return Scenario(make_schedule(spec, self.design), spec.labeled_size, Thresholds())

    @staticmethod
    def data(n: int) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        ones = round(0.15 * n)
        x = np.concatenate([np.zeros(n - ones), np.ones(ones)])
        return x, (x >= 0.5).astype(np.int8)

    def round1(self, world: int, R: int) -> NDArray[np.float64]:
        first = 2.0 if world == 1 else -1.0
        return np.concatenate([[first], np.full(K0, 2.0), np.full(R - 1 - K0, -1.0)])

    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        concept, sched = self._engine(v)
        nominal = self.scenario().schedule.rounds[0]
        k = min(self.queries or nominal.R, nominal.R)  # a probe round answers at most R queries
        x, y = self.data(self.scenario().n)
        seeds = trial_seeds(seed, self.tag, world, trials)
        queries = self.round1(world, sched.rounds[0].R)
        scorer = _scorer(self.design, nominal, K0, k)
        spec2 = sched.spec(2)
        assert spec2 is not None
        rng = np.random.default_rng([seed, self.tag, world, 1])
        probe = np.full(k, 0.5)
        out = np.empty(trials)
        for lo in range(0, trials, CHUNK):
            hi = min(trials, lo + CHUNK)
            labels = np.empty((hi - lo, k), dtype=np.int8)
            counts = np.empty(hi - lo, dtype=np.int64)
            for i in range(lo, hi):
                p = Predictor.create(concept, sched, x, y, seed=seeds[i])
                p.answer(queries)  # the adversary ignores round 1's answers (and never sees the first)
                if p.phase is Phase.TRANSITION_DUE:
                    p.transition()
                if v.fast_probe:
                    counts[i - lo] = int(p.ensemble.votes(probe[:1])[0])
                else:
                    res = p.answer(probe)
                    if res.consumed != k:
                        raise RuntimeError("the probe round ended early: probe at most R queries")
                    labels[i - lo] = res.labels
                if progress is not None:
                    progress(1)
            if v.fast_probe:
                labels = _probe_fast(sched.design, spec2, counts, k, rng)
            out[lo:hi] = scorer.scores(labels)
        return out


class HaltingAttack(Attack):
    name = "halting"
    game = "query"
    tag = 22
    summary = ("the halting channel (docs/notes/query_privacy.md 1): hidden x0 = 0 (L) or x1 = 1/2 (top), then c-1 "
               "queries at 1/2 and one at 0; world 1 has spent c tops, so the last query is refused")
    catches = ("paper's halting at c", "deterministic-halting")
    scope = "in-round"

    BUDGET = 2
    """The c of the paper configuration, which the adversary's strategy is built on."""

    def scenario(self) -> Scenario:
        spec = halting_round(self.design)
        return Scenario(make_schedule(spec, self.design), spec.labeled_size, Thresholds())

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        if AUDIT_ROUNDS[self.design].halting_sweep:
            spec = self.scenario().schedule.rounds[0]
            d["summary"] = (
                "the halting channel (docs/notes/query_privacy.md 1 and 3.2), against noisy halting: hidden x0 = 0 (L) "
                "or x1 = 1/2 (top), then split-vote queries at 1/2 up to the hard cap; the view is the "
                "halting time, i.e. for every k whether the query after k follow-up tops is refused. "
                "Score: -(follow-ups answered); the held-out protocol picks the best k (the sweep); "
                f"'fixed_k' reports the single test k = c0 - 1 = {int(spec.halt_threshold or 0) - 1}")
            d["adversary"] = {"follow_ups": spec.c, "fixed_k": int(spec.halt_threshold or 0) - 1}
        return d

    def _queries(self, world: int, follow_ups: int) -> NDArray[np.float64]:
        first = 0.5 if world == 1 else 0.0
        if AUDIT_ROUNDS[self.design].halting_sweep:  # split-vote queries up to the hard cap (the round halts)
            return np.concatenate([[first], np.full(follow_ups, 0.5)])
        return np.concatenate([[first], np.full(self.BUDGET - 1, 0.5), [0.0]])

    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        concept, sched = self._engine(v)
        n = self.scenario().n
        x = np.random.default_rng([seed, self.tag]).random(n)
        y = (x >= 0.5).astype(np.int8)
        nominal = self.scenario().schedule.rounds[0]
        queries = self._queries(world, min(nominal.c, nominal.R - 1))
        seeds = trial_seeds(seed, self.tag, world, trials)
        out = np.empty(trials)
        for i in range(trials):
            p = Predictor.create(concept, sched, x, y, seed=seeds[i])
            labels = p.answer(queries).labels
            if AUDIT_ROUNDS[self.design].halting_sweep:
                # follow-ups answered F: "the query after k follow-ups is refused" iff F <= k
                out[i] = -float(np.count_nonzero(labels[1:] >= 0))
            else:
                out[i] = 1.0 if labels[-1] < 0 else 0.0
            if progress is not None:
                progress(1)
        self.last_scores = getattr(self, "last_scores", {})
        self.last_scores[world] = out
        return out

    def fixed_k_scores(self, world: int) -> NDArray[np.float64] | None:
        """The single test of the paper adversary with k = c0 - 1 follow-up tops: 1.0 iff the next
        query is refused (from the games just played; target-charged only)."""
        if not AUDIT_ROUNDS[self.design].halting_sweep or world not in getattr(self, "last_scores", {}):
            return None
        k = int(self.scenario().schedule.rounds[0].halt_threshold or 0) - 1
        scores: NDArray[np.float64] = self.last_scores[world]
        return (-scores <= k).astype(np.float64)


class RestartAttack(Attack):
    name = "restart"
    game = "query"
    tag = 23
    summary = ("the restart channel (docs/notes/query_privacy.md 2), 'wait-and-test': probe at lo - z b; when the "
               "run of 0-labels reaches m send hidden x0 (L) or x1 (top: restarts mu under per-top restarts); "
               "guess world 0 iff the next run N2 >= theta. Played on engine.between_thresholds with "
               "engine.design.RoundNoise")
    catches = ("paper's per-top restarts",)
    scope = "in-round"

    def __init__(self, design: Design = DEFAULT, queries: int | None = None,
                 adversary: WaitAndTest | None = None) -> None:
        super().__init__(design, queries)
        adv = adversary or WaitAndTest(z=AUDIT_ROUNDS[design].probe_offset)
        if queries is not None:
            adv = dataclasses.replace(adv, max_queries=queries)
        self.adversary = adv

    def scenario(self) -> Scenario:
        spec = restart_round(self.design)
        return Scenario(make_schedule(spec, self.design), spec.labeled_size, Thresholds())

    def describe(self) -> dict[str, Any]:
        a = self.adversary
        return {**super().describe(), "adversary": {"m": a.m, "z": a.z, "theta": a.theta,
                                                    "max_queries": a.max_queries}}

    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        sched = v.schedule(self.scenario().schedule)
        g = Game(sched.rounds[0], sched.design)
        out = restart_play(g, self.adversary, world, trials, [seed, self.tag, world], progress)
        self.last_outcomes = getattr(self, "last_outcomes", {})
        self.last_outcomes[world] = out
        return np.asarray([o.score for o in out], dtype=np.float64)


ATTACKS: dict[str, dict[str, type[Attack]]] = {
    "training": {"flip": FlipAttack, "relabel": RelabelAttack},
    "query": {"chain": ChainAttack, "halting": HaltingAttack, "restart": RestartAttack},
}
DEFAULT_ATTACKS = {"training": ("flip", "relabel"), "query": ("chain",)}
PLANNED_ATTACKS: dict[str, tuple[str, ...]] = {}
"""Named in the CLI, not implemented yet."""
DESIGNS = {"target-charged": DEFAULT, "paper": PAPER}

AUDIT_ROUNDS: dict[Design, AuditRounds] = {
    DEFAULT: AuditRounds(DEFAULT, _tct_main, _tct_halting, _tct_restart, edge_round, EDGE_K0,
                         lambda k0, k1, plan, queries: TctLLR.build(k0, k1, plan), edge_law=True,
                         halting_sweep=True, probe_offset=2.0),
    PAPER: AuditRounds(PAPER, _paper_main, _paper_halting, _paper_restart, lambda: _paper_main(AUDIT_T, K0), K0,
                       PaperLLR.build, edge_law=False, halting_sweep=False, probe_offset=-1.0),
}
"""What the attacks play against each design (dispatched on the design, not branched on): the audits'
one registry of designs (the engine's is ``engine.design.SPECS``, the planner's
``engine.planner.design_table.PLANNERS``)."""
