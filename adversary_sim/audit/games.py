"""The adversaries of the audit: each plays the game of Definition 3.4 / Figure 1 against the engine
(paper: Naor, Nissim, Stemmer, Yan 2023) many times with fresh randomness and returns one score per
trial; ``adversary_sim.audit.stats`` turns the scores of the two worlds into an epsilon lower bound.

Figure 1, in short: the adversary B picks two training sets that differ in at most one example; if
they are equal (Flag = 0) it may later pick two query streams that differ in one query, and it never
sees the answer to that differing query. The view is B's randomness and the predictions. The
predictor is (eps, delta)-private if the views of world 0 and world 1 are (eps, delta)-close.

Every attack fixes a small *nominal configuration* (a schedule and a training-set size n, for which
the planner's certificate is weak but finite) and a deterministic strategy. The key design choice
for auditing with few trials: lambda = 1 (every chunk classifier is trained on one example, so it is
the constant function of that example's label and the vote share is exactly #ones / T whatever the
random chunking). The adversary then controls the vote share to the single vote, which is the worst
case the proof must cover (Definition 3.4 quantifies over all training sets).

Training-set game (Flag = 1):
  * ``flip``: S^0 has k0 ones and S^1 is S^0 with the label of the point nearest the boundary
    flipped, so the vote share is k0/T or (k0+1)/T, and t_l lies half a vote between them. B probes
    one point for the whole round and scores the view with the likelihood ratio of
    ``adversary_sim.audit.probe``. Catches ``no-noise`` (the first answer decides) and
    ``no-halt-limit`` (thousands of tops instead of c).
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
    query chain (Claim E.6's steps 1-6), not the in-round channels. Catches ``no-noise`` and
    ``no-halt-limit``.
  * ``halting``: issue 8 / query_privacy.md section 1: x^0 = 0 (far from the boundary, answered L)
    or x^1 = 1/2 (split vote, a top), then c - 1 queries at 1/2 and one at 0. In world 1 the c-th
    top fails the round and the last query is refused. Needs lambda > 1 (a vote that varies with x).
    Under ``noisy`` halting (``noisy_halting_round``: eps_h = 1, c0 = 10, hard cap 177) B sends
    split-vote queries up to the hard cap and scores the halting time; the held-out threshold is
    the sweep over the number k of follow-up tops (``fixed_k_scores``: the single test k = c0 - 1).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from adversary_sim.audit.fastbt import run_batch
from adversary_sim.audit.probe import ProbeLLR
from adversary_sim.audit.restart import Game, WaitAndTest
from adversary_sim.audit.restart import play as restart_play
from adversary_sim.audit.variants import Variant
from engine.concepts import ConceptClass, Thresholds
from engine.phases import Phase
from engine.planner.fill import fill_tests
from engine.predictor import Predictor
from engine.schedule import RoundSpec, Schedule

Progress = Callable[[int], None]
CHUNK = 500
"""Trials whose views are held in memory at once."""

# -- nominal configurations ------------------------------------------------------------------------

AUDIT_T = 4000
K0 = 1199
"""Ones in the world-0 training set of ``flip`` (and in S_2 of ``chain``): vote share K0/T, with the
lower threshold t_l = (K0 + 1/2)/T half a vote above it (gamma = 1/2 - t_l)."""


def main_round(T: int = AUDIT_T, k0: int = K0, c: int = 1) -> RoundSpec:
    """The audit round: lambda = 1, R = m_D = T (S_{i+1} is all of D-hat), S-hat = T/10, c = 1,
    eps' = 0.9, band chosen so that t_l = (k0 + 1/2)/T."""
    return RoundSpec(T=T, lam=1, R=T, c=c, eps_bt=0.9, delta_bt=1e-9, alpha=0.2, m_S=T // 10, m_D=T,
                     gamma=0.5 - (k0 + 0.5) / T, beta=0.05)


def halting_round(c: int = 2) -> RoundSpec:
    """The halting attack's round (lambda = 10: the vote varies with x; R = 100 000 >> c)."""
    return RoundSpec(T=1000, lam=10, R=100_000, c=c, eps_bt=0.9, delta_bt=1e-9, alpha=0.2, m_S=1000,
                     m_D=10_000, gamma=0.2005, beta=0.05)


HALT_EPS = 1.0
"""eps_h of the halting attack's noisy configuration: large enough that the audit can resolve it."""
HALT_C0 = 10
"""c0 of the halting attack's noisy configuration (the noisy threshold on the round's top count)."""
HALT_DELTA_CAP = 1e-9
"""delta_cap of the halting attack's noisy configuration (query_privacy.md section 3.2)."""


def noisy_halting_round(eps_h: float = HALT_EPS, c0: int = HALT_C0,
                        delta_cap: float = HALT_DELTA_CAP) -> RoundSpec:
    """The halting attack's round under ``noisy`` halting (query_privacy.md sections 3.2 and 4):
    AboveThreshold on the round's top count with threshold c0 and privacy eps_h, hard cap
    c = c0 + 1 + g_high with g_high = ceil((8/eps_h) ln(1/delta_cap)) (177 for the defaults);
    R = 100 000 >> c, so the adversary can spend every top up to the cap."""
    g_high = math.ceil(8.0 / eps_h * math.log(1.0 / delta_cap))
    return dataclasses.replace(halting_round(c0 + 1 + g_high), halt_eps=eps_h, halt_threshold=float(c0))


def make_schedule(spec: RoundSpec, halting: str = "paper", restarts: str = "per-top") -> Schedule:
    """One round, repeated. ``halting='never'`` raises c to R + 1; ``halting='noisy'`` needs a spec
    with halt_eps and halt_threshold; ``restarts='private'`` adds the default design's restart test
    in its one-block form (``engine.planner.fill``) when the spec has none."""
    if halting not in ("paper", "never", "noisy"):
        raise ValueError(f"halting policy {halting!r} is not supported by the audit")
    if restarts not in ("per-top", "private", "stateless"):
        raise ValueError(f"restart policy {restarts!r} is not supported by the audit")
    if halting == "never":  # c > R: no round can fail, even if every query is a top
        spec = dataclasses.replace(spec, c=max(spec.c, spec.R + 1))
    if restarts == "private":
        spec = fill_tests(spec, "never", "private")
    return Schedule((spec,), repeat_last=True, halting=halting, restarts=restarts)  # type: ignore[arg-type]


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

    def __init__(self, halting: str = "paper", queries: int | None = None, restarts: str = "per-top") -> None:
        self.halting = halting
        self.queries = queries
        self.restarts = restarts

    @abc.abstractmethod
    def scenario(self) -> Scenario:
        """The nominal configuration."""

    @abc.abstractmethod
    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        """Play ``trials`` games in world ``world`` against variant ``v``; one score per game."""

    def describe(self) -> dict[str, Any]:
        return {"attack": self.name, "game": self.game, "summary": self.summary,
                "designed_to_catch": list(self.catches)}

    # shared helpers

    def _engine(self, v: Variant) -> tuple[ConceptClass, Schedule]:
        sc = self.scenario()
        return v.concept(sc.concept), v.schedule(sc.schedule)


def _probe_scores(
    predictors: Callable[[int], Predictor],
    trials: int,
    v: Variant,
    llr: ProbeLLR,
    spec: RoundSpec,
    queries: int,
    probe_x: float,
    rng: np.random.Generator,
    progress: Progress | None,
) -> NDArray[np.float64]:
    """Probe ``probe_x`` ``queries`` times in the current round of each trial's predictor and score
    the labels. Through ``Predictor.answer``, or (variants with ``fast_probe``) by reading the
    trial's vote share from its ensemble and replaying the round with ``fastbt``."""
    out = np.empty(trials)
    xs = np.full(queries, probe_x)
    for lo in range(0, trials, CHUNK):
        hi = min(trials, lo + CHUNK)
        if v.fast_probe:
            q = np.empty(hi - lo)
            for i in range(lo, hi):
                p = predictors(i)
                q[i - lo] = float(p.ensemble.votes(np.asarray([probe_x]))[0]) / p.spec.T
                if progress is not None:
                    progress(1)
            c = None if spec.c >= (1 << 61) else spec.c
            labels = run_batch(q, queries, eps_bt=spec.eps_bt, T=spec.T, band=spec.band, c=c, rng=rng).labels
        else:
            labels = np.empty((hi - lo, queries), dtype=np.int8)
            for i in range(lo, hi):
                p = predictors(i)
                res = p.answer(xs)
                if res.consumed != queries:
                    raise RuntimeError("the probe round ended early: probe at most R queries")
                labels[i - lo] = res.labels
                if progress is not None:
                    progress(1)
        out[lo:hi] = llr.scores(labels)
    return out


class FlipAttack(Attack):
    name = "flip"
    game = "training"
    tag = 11
    summary = ("S^1 = S^0 with the label of the point nearest the boundary flipped (vote share k0/T vs "
               "(k0+1)/T across t_l); probe one point for the whole round; likelihood-ratio score")
    catches = ("no-noise", "no-halt-limit")

    def scenario(self) -> Scenario:
        spec = main_round()
        return Scenario(make_schedule(spec, self.halting, self.restarts), spec.labeled_size, Thresholds())

    def data(self, world: int, seed: int) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
        n = self.scenario().n
        x = np.sort(np.random.default_rng([seed, self.tag]).random(n))
        y = np.zeros(n, dtype=np.int8)
        y[n - K0 :] = 1
        if world == 1:
            y[n - K0 - 1] = 1  # the zero nearest the boundary, flipped
        return x, y

    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        concept, sched = self._engine(v)
        nominal = self.scenario().schedule.rounds[0]
        k = min(self.queries or nominal.R, nominal.R)  # a probe round answers at most R queries
        x, y = self.data(world, seed)
        seeds = trial_seeds(seed, self.tag, world, trials)
        llr = ProbeLLR.build(K0 / nominal.T, (K0 + 1) / nominal.T, band=nominal.band, eps_bt=nominal.eps_bt,
                             T=nominal.T, queries=k)

        def predictor(i: int) -> Predictor:
            return Predictor.create(concept, sched, x, y, seed=seeds[i])

        rng = np.random.default_rng([seed, self.tag, world, 1])
        return _probe_scores(predictor, trials, v, llr, sched.rounds[0], k, 0.5, rng, progress)


class RelabelAttack(Attack):
    name = "relabel"
    game = "training"
    tag = 12
    summary = ("canary in the gap of S-hat's labeled points (label 0 or 1); round-1 queries in the gap "
               "left of it; read S_2's labels from one round-2 answer")
    catches = ("majority-relabel",)

    def scenario(self) -> Scenario:
        spec = main_round()
        return Scenario(make_schedule(spec, self.halting, self.restarts), spec.labeled_size, Thresholds())

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
               "S_2's ones from k0 to k0+1 across round 2's t_l; probe round 2; likelihood-ratio score")
    catches = ("no-noise", "no-halt-limit")

    def scenario(self) -> Scenario:
        spec = main_round()
        return Scenario(make_schedule(spec, self.halting, self.restarts), spec.labeled_size, Thresholds())

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
        llr = ProbeLLR.build(K0 / nominal.T, (K0 + 1) / nominal.T, band=nominal.band, eps_bt=nominal.eps_bt,
                             T=nominal.T, queries=k)

        def predictor(i: int) -> Predictor:
            p = Predictor.create(concept, sched, x, y, seed=seeds[i])
            p.answer(queries)  # the adversary ignores round 1's answers (and never sees the first)
            if p.phase is Phase.TRANSITION_DUE:
                p.transition()
            return p

        rng = np.random.default_rng([seed, self.tag, world, 1])
        spec2 = sched.spec(2)
        assert spec2 is not None
        return _probe_scores(predictor, trials, v, llr, spec2, k, 0.5, rng, progress)


class HaltingAttack(Attack):
    name = "halting"
    game = "query"
    tag = 22
    summary = ("issue 8 / query_privacy.md section 1: hidden x0 = 0 (L) or x1 = 1/2 (top), then c-1 "
               "queries at 1/2 and one at 0; world 1 has spent c tops, so the last query is refused")
    catches = ("real with c < R (paper halting)",)

    BUDGET = 2
    """The c of the paper configuration, which the adversary's strategy is built on."""

    def scenario(self) -> Scenario:
        spec = noisy_halting_round() if self.halting == "noisy" else halting_round(self.BUDGET)
        return Scenario(make_schedule(spec, self.halting, self.restarts), spec.labeled_size, Thresholds())

    def describe(self) -> dict[str, Any]:
        d = super().describe()
        if self.halting == "noisy":
            spec = self.scenario().schedule.rounds[0]
            d["summary"] = (
                "issue 8 / query_privacy.md sections 1 and 3.2, against noisy halting: hidden x0 = 0 (L) "
                "or x1 = 1/2 (top), then split-vote queries at 1/2 up to the hard cap; the view is the "
                "halting time, i.e. for every k whether the query after k follow-up tops is refused. "
                "Score: -(follow-ups answered); the held-out protocol picks the best k (the sweep); "
                f"'fixed_k' reports the single test k = c0 - 1 = {int(spec.halt_threshold or 0) - 1}")
            d["adversary"] = {"follow_ups": spec.c, "fixed_k": int(spec.halt_threshold or 0) - 1}
        return d

    def claim_override(self, cert: Any, delta: float) -> dict[str, Any] | None:
        """Under noisy halting with per-top restarts Theorem Q does not apply (the restart channel is
        open; the restart attack covers it), so the claim is the halting step alone: AboveThreshold's
        (eps_h, (1 + e^eps_h) delta_cap) (query_privacy.md section 3.2)."""
        if self.halting != "noisy" or self.restarts != "per-top":
            return None
        spec = self.scenario().schedule.rounds[0]
        eps_h = float(spec.halt_eps or 0.0)
        d_cap, src = HALT_DELTA_CAP, "design target"
        try:  # the planner's halting-only step (stateless restarts contribute nothing)
            from engine.planner.query_side import in_round

            ir = in_round(spec, "noisy", "stateless")
            if ir.valid and math.isfinite(ir.epsilon):
                eps_h, d_cap, src = float(ir.eps_h), float(ir.delta_cap_h), "engine.planner (Lemma Cap)"
        except Exception:  # the planner is being extended: fall back to the design's numbers
            pass
        return {"claimed_epsilon": eps_h, "claimed_delta": (1.0 + math.exp(eps_h)) * d_cap,
                "claimed_kind": "in-round (noisy halting, AboveThreshold)",
                "claimed_epsilon_proven": eps_h,
                "claim_note": (f"claimed: the halting step of the in-round query cost, eps_h = {eps_h:g} "
                               f"with delta (1 + e^eps_h) delta_cap, delta_cap = {d_cap:.3g} ({src}); "
                               "certify gives no query epsilon for this configuration "
                               f"({cert.queries_reason}): the round keeps per-top restarts, whose channel "
                               "this adversary does not use (see the restart attack). The full chain adds "
                               "the later rounds' LabelBoost steps (query_privacy.md section 4, item 3)")}

    def _queries(self, world: int, follow_ups: int) -> NDArray[np.float64]:
        first = 0.5 if world == 1 else 0.0
        if self.halting == "noisy":  # the sweep: split-vote queries up to the hard cap (the round halts)
            return np.concatenate([[first], np.full(follow_ups, 0.5)])
        return np.concatenate([[first], np.full(self.BUDGET - 1, 0.5), [0.0]])

    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        concept, sched = self._engine(v)
        n = self.scenario().n
        x = np.random.default_rng([seed, self.tag]).random(n)
        y = (x >= 0.5).astype(np.int8)
        spec = sched.rounds[0]
        queries = self._queries(world, min(spec.c, spec.R - 1))
        seeds = trial_seeds(seed, self.tag, world, trials)
        out = np.empty(trials)
        for i in range(trials):
            p = Predictor.create(concept, sched, x, y, seed=seeds[i])
            labels = p.answer(queries).labels
            if self.halting == "noisy":
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
        query is refused (from the games just played; noisy halting only)."""
        if self.halting != "noisy" or world not in getattr(self, "last_scores", {}):
            return None
        k = int(self.scenario().schedule.rounds[0].halt_threshold or 0) - 1
        scores: NDArray[np.float64] = self.last_scores[world]
        return (-scores <= k).astype(np.float64)


def restart_round(halting: str = "paper", restarts: str = "per-top") -> RoundSpec:
    """The restart attack's round (query_privacy.md section 4, audit B): c = 2000, alpha = 0.05,
    eps' = 1/(3 sqrt(c ln(2/delta))), delta' = delta/(2c) (delta = 1e-6), T = 1.2 T_min of Lemma C.3's
    gap, so the band is W = alpha eps' T = 227.9 threshold-noise units wide. R = 10^8 (more than any
    game uses). Halting "never": c = R + 1; "noisy": eps_h = 0.1, c0 = 1500 under the hard cap c.
    Restarts "private": eps_r = 1, k0 = 5, k_max = 5 + 166."""
    from engine.planner import bt as planner_bt

    c, delta, R = 2000, 1e-6, 100_000_000
    eps = 1.0 / (3.0 * math.sqrt(c * math.log(2.0 / delta)))
    dbt = delta / (2 * c)
    T = math.ceil(1.2 * planner_bt.min_t(0.05, eps, dbt))
    spec = RoundSpec(T=T, lam=1, R=R, c=c, eps_bt=eps, delta_bt=dbt, alpha=0.05, m_S=T // 10, m_D=T, beta=0.05)
    if halting == "never":
        spec = dataclasses.replace(spec, c=R + 1)
    elif halting == "noisy":
        spec = dataclasses.replace(spec, halt_eps=0.1, halt_threshold=1500.0)
    elif halting != "paper":
        raise ValueError(f"unknown halting policy {halting!r}")
    if restarts == "private":
        spec = dataclasses.replace(spec, restart_eps=1.0, restart_threshold=5.0, block_cap=5 + 166)
    elif restarts not in ("per-top", "stateless"):
        raise ValueError(f"unknown restart policy {restarts!r}")
    return spec


class RestartAttack(Attack):
    name = "restart"
    game = "query"
    tag = 23
    summary = ("issue 8 / query_privacy.md section 2, 'wait-and-test': probe at t_l - z b; when the run of "
               "0-labels reaches m send hidden x0 (L) or x1 (top: restarts mu under per-top restarts); "
               "guess world 0 iff the next run N2 >= theta. Played on engine.between_thresholds.run")
    catches = ("real with restarts per-top",)

    def __init__(self, halting: str = "paper", queries: int | None = None, restarts: str = "per-top",
                 adversary: WaitAndTest | None = None) -> None:
        super().__init__(halting, queries, restarts)
        adv = adversary or WaitAndTest()
        if queries is not None:
            adv = dataclasses.replace(adv, max_queries=queries)
        self.adversary = adv

    def scenario(self) -> Scenario:
        spec = restart_round(self.halting, self.restarts)
        sched = Schedule((spec,), repeat_last=True, halting=self.halting,  # type: ignore[arg-type]
                         restarts=self.restarts)  # type: ignore[arg-type]
        return Scenario(sched, spec.labeled_size, Thresholds())

    def describe(self) -> dict[str, Any]:
        a = self.adversary
        return {**super().describe(), "restarts": self.restarts, "halting": self.halting,
                "adversary": {"m": a.m, "z": a.z, "theta": a.theta, "max_queries": a.max_queries}}

    def fallback_claim(self, cert: Any, delta: float) -> dict[str, Any]:
        """The claim when ``certify`` gives no number (proven or conditional) for this design at the
        nominal round: the paper design's conditional query chain for the same round, flagged."""
        from engine.planner import certify, in_round_step

        sc = self.scenario()
        spec = sc.schedule.rounds[0]
        paper = dataclasses.replace(spec, c=2000, halt_eps=None, halt_threshold=None, restart_eps=None,
                                    restart_threshold=None, block_cap=None)
        pc = certify(Schedule((paper,), repeat_last=True, halting="paper", restarts="per-top"), sc.n, "tight", delta)
        ir = in_round_step(spec, 1, self.halting, self.restarts)
        return {"claimed_epsilon": pc.epsilon_queries_conditional, "claimed_delta": pc.delta_queries,
                "claimed_kind": "conditional", "claimed_epsilon_proven": math.inf,
                "in_round_epsilon": ir.epsilon if ir.valid else math.inf,
                "claim_note": (f"claimed (conditional, flagged): certify cannot account for "
                               f"halting={self.halting}, restarts={self.restarts} at this round "
                               f"({cert.queries_reason}); the number is the paper design's conditional "
                               "query chain for the same round; the design's in-round step (Theorem Q) is "
                               + (f"eps = {ir.epsilon:.3g}" if ir.valid else f"not valid: {ir.note}"))}

    def play(self, v: Variant, world: int, trials: int, seed: int,
             progress: Progress | None = None) -> NDArray[np.float64]:
        sched = v.schedule(self.scenario().schedule)
        g = Game(sched.rounds[0], sched.halting, sched.restarts)
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
