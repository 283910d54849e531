"""Build any peer by name, sized by the accuracy rules of ``peers.design`` for a target error alpha.

``build(name, concept, n, epsilon, delta, alpha, seed, **kw)``: draws (or takes) n labeled examples
and returns a ``StreamPredictor``. Data keywords: ``task`` (an ``adversary_sim.iid.Task``; default:
``make_task(concept, "uniform", seed)``) or ``x`` and ``y``. The training sample is drawn from the
task with its own stream (seeded by ``seed``), separate from the peer's mechanism streams.

Defaults (thresholds; other classes need the sizes passed explicitly):
  * ensembles: lam = ceil(16/alpha) - 1 examples per chunk, T = n // lam chunks;
  * nonprivate: that ensemble (T = 1, lam = n when n < lam);
  * dwork_feldman: eps_query = 4 ln(1/alpha) / T (the noise keeps the error <= alpha); answers
    as many queries as (epsilon, delta) allows. With ``horizon=Q``: eps_query = the largest whose
    Q-fold composition fits, T from it and lam = n // T;
  * sparse_vector: the largest cutoff c that keeps the error and the unstable rate bounded
    (``sparse_vector.design_for_n``) and its query budget; with ``horizon=Q`` the cutoff of
    ``sample_complexity.sparse_vector_design`` and a budget of Q. ``max_queries=None`` lifts the
    query budget (refusal only after the c-th unstable query);
  * private_learner: a grid of ``grid_size`` points on ``grid_bounds`` (default (0, 1)); task
    samples are snapped to the grid and relabeled by the task's concept. ``grid_size=None``: an
    infinite domain, which raises ``InfiniteDomain``;
  * served_learner: the engine's private learner exactly as the daemon serves it
    (``peers.served_learner``): all finite float64, or with ``grid_size`` a grid as above;
  * dagan_feldman: rho = alpha/2, n0 = ceil(12/alpha) - 1, gamma = 12 (ln(n0+1)+1) / (alpha n);
  * everlast: needs ``schedule`` (an ``engine.schedule.Schedule``), optional ``privacy``.
Every default can be overridden by the keyword of the same name.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.adversary_sim.iid import Task, make_task
from everlast.engine.concepts import ConceptClass, from_spec
from everlast.peers import accounting, design, sample_complexity, served_learner, sparse_vector
from everlast.peers.base import Grid, PeerError, StreamPredictor, TooFewExamples
from everlast.peers.dagan_feldman import DaganFeldman, DFParams
from everlast.peers.dwork_feldman import DworkFeldman
from everlast.peers.nonprivate import NonPrivateMajority
from everlast.peers.private_learner import PrivateLearner
from everlast.peers.served_learner import ServedLearner
from everlast.peers.sparse_vector import SparseVector

NAMES = ("nonprivate", "dwork_feldman", "sparse_vector", "private_learner", "served_learner", "dagan_feldman",
         "everlast")
_DESIGN = object()


def _concept(concept: ConceptClass | str) -> ConceptClass:
    return from_spec({"name": concept}) if isinstance(concept, str) else concept


def _data_seed(seed: int | None) -> np.random.Generator:
    return np.random.default_rng([0 if seed is None else seed, 0xDA7A])


def draw_training(task: Task, n: int, seed: int | None,
                  grid: Grid | None = None) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    """n examples from the task (snapped to ``grid`` and relabeled by the task's concept if given)."""
    x, y = task.sample(_data_seed(seed), n)
    if grid is not None:
        x = grid.snap(x)
        y = task.concept.label(task.target, x)
    return x, y


def _ensemble_sizes(concept: ConceptClass, n: int, alpha: float, kw: dict[str, Any]) -> tuple[int, int]:
    if "lam" not in kw:
        design.require_thresholds(concept, "the ensemble")
    lam = int(kw.get("lam", design.chunk_size(alpha)))
    T = int(kw.get("T", n // lam))
    if T < 1:
        raise TooFewExamples(n, lam, "one chunk of the ensemble")
    return T, lam


def build(name: str, concept: ConceptClass | str, n: int, epsilon: float, delta: float, alpha: float,
          seed: int | None = None, **kw: Any) -> StreamPredictor:
    """A peer of the registry, trained on n examples (see the module docstring for keywords)."""
    if name not in NAMES:
        raise PeerError(f"unknown peer {name!r}; known: {', '.join(NAMES)}")
    design.check_alpha(alpha)
    cc = _concept(concept)
    grid: Grid | None = None
    if name in ("private_learner", "served_learner"):
        size = kw.get("grid_size")
        if size is not None:
            lo, hi = kw.get("grid_bounds", (0.0, 1.0))
            grid = Grid(float(lo), float(hi), int(size))
    if "x" in kw and "y" in kw:
        x, y = kw["x"], kw["y"]
    else:
        task = kw.get("task") or make_task(cc, "uniform", 0 if seed is None else seed)
        x, y = draw_training(task, n, seed, grid)
    n = len(x)

    if name == "nonprivate":
        lam = int(kw.get("lam", min(n, design.chunk_size(alpha))))
        T = int(kw.get("T", max(1, n // lam)))
        return NonPrivateMajority(cc, x, y, T=T, lam=lam, seed=seed)

    if name == "dwork_feldman":
        if "horizon" in kw and "eps_query" not in kw:
            eps_q = accounting.max_eps0(int(kw["horizon"]), epsilon, delta)
            T = int(kw.get("T", design.noisy_majority_t(eps_q, alpha)))
            lam = int(kw.get("lam", n // T))
            if lam < 1:
                raise TooFewExamples(n, T, f"{T} chunks for horizon {kw['horizon']}")
        else:
            T, lam = _ensemble_sizes(cc, n, alpha, kw)
            eps_q = float(kw.get("eps_query", design.noisy_majority_eps(T, alpha)))
        return DworkFeldman(cc, x, y, T=T, lam=lam, eps_query=eps_q, epsilon=epsilon, delta=delta, seed=seed,
                            pld_max_k=int(kw.get("pld_max_k", accounting.PLD_MAX_K)))

    if name == "sparse_vector":
        T, lam = _ensemble_sizes(cc, n, alpha, kw)
        if "c" in kw:
            params = sparse_vector.calibrate(int(kw["c"]), epsilon, delta)
            budget: int | None = int(kw.get("horizon", 0)) or None
        elif "horizon" in kw:
            _, c = sample_complexity.sparse_vector_design(int(kw["horizon"]), epsilon, delta, alpha)
            params = sparse_vector.calibrate(c, epsilon, delta)
            budget = int(kw["horizon"])
        else:
            params, budget = sparse_vector.design_for_n(T, lam, epsilon, delta, alpha)
        mq = kw.get("max_queries", _DESIGN)
        return SparseVector(cc, x, y, T=T, lam=lam, params=params, seed=seed,
                            max_queries=budget if mq is _DESIGN else mq)

    if name == "private_learner":
        return PrivateLearner(cc, x, y, grid=grid, epsilon=epsilon, seed=seed)

    if name == "served_learner":
        return ServedLearner(cc, x, y, grid=grid, epsilon=epsilon, seed=seed)

    if name == "dagan_feldman":
        n0 = int(kw.get("n0", design.df_subset_size(alpha)))
        df = DFParams(
            n0=n0,
            gamma=float(kw.get("gamma", design.df_gamma(n, n0, alpha))),
            rho=float(kw.get("rho", design.df_flip(alpha))),
        )
        return DaganFeldman(cc, x, y, params=df, epsilon=epsilon, delta=delta, seed=seed)

    # everlast
    from everlast.engine.predictor import Predictor
    from everlast.peers.everlast import EverlastPeer

    if "schedule" not in kw:
        raise PeerError("the everlast peer needs a schedule (from the planner or written by hand)")
    return EverlastPeer(Predictor.create(cc, kw["schedule"], x, y, seed=seed), kw.get("privacy"))


def error_bound(peer: StreamPredictor, alpha: float) -> float:
    """The design's bound on the expected error of ``peer``'s answers (nan when not applicable)."""
    if isinstance(peer, DworkFeldman):
        return design.noisy_majority_error_bound(peer.lam, peer.T, peer.eps_query)
    if isinstance(peer, SparseVector):
        return sparse_vector.error_bound(peer.lam, peer.T, peer.params)
    if isinstance(peer, NonPrivateMajority):
        return design.majority_error_bound(peer.lam)
    if isinstance(peer, DaganFeldman):
        p = peer.params
        return design.df_error_bound(peer.n, p.n0, p.gamma, p.rho)
    if isinstance(peer, PrivateLearner):
        return design.learner_error_bound(peer.n, peer.grid.size, peer.epsilon, alpha)
    if isinstance(peer, ServedLearner):
        return served_learner.expected_error_bound(peer.n, peer.epsilon, peer.grid)
    return math.nan
