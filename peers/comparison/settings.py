"""The methods ``everlast compare`` sets side by side, and the options of one comparison."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from everlast.engine.planner.learning import CLAIM_D5, SPLIT_VOTES

HORIZONS: tuple[int, ...] = tuple(10**e for e in range(3, 10))
DEFAULT_N: tuple[int, ...] = (10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000)
DEFAULT_QUERIES = 200_000
DEFAULT_MAX_RUN_N = 10_000_000
DEFAULT_GRID = 2**32
DEFAULT_DOMAIN_SIZES: tuple[int | None, ...] = (2**8, 2**16, 2**24, 2**32, 2**48, 2**62, None)
EXACT_MAX_HORIZON = 10**18
"""Largest horizon at which the peers' exact accountants are evaluated (the binomial tails of the
optimal composition need Q below 2^64); beyond it the numbers are extrapolated."""
CROSSOVER_MAX = 1e80
HALTS: tuple[tuple[str, str], ...] = (("everlast", CLAIM_D5), ("everlast_split_votes", SPLIT_VOTES))
"""Each everlast row's halt budget (``engine.planner.learning``)."""
EVERLAST_NAMES = tuple(name for name, _ in HALTS)
COMPUTED, RUN = "computed", "run"
QUERY_PRIVACY_NOTE = (
    "n is the planner's n for its default design, the cheapest whose query privacy is proven "
    "(docs/PRIVACY.md): training set and queries both at the target epsilon"
)


@dataclass(frozen=True, slots=True)
class Method:
    """One row of the comparison."""

    name: str
    label: str
    peer: str
    """Registry name (``peers.registry``) used for runs."""
    protects_queries: bool
    privacy: str
    """One line: what is guaranteed to whom."""


METHODS: tuple[Method, ...] = (
    Method("nonprivate", "Non-private majority (ceiling)", "nonprivate", True,
           "none for the training set (accuracy ceiling); an answer depends only on its own query"),
    Method("dwork_feldman", "Dwork-Feldman 2018 (noisy majority)", "dwork_feldman", True,
           "training set: Q-fold adaptive composition of Laplace answers; then refuses"),
    Method("sparse_vector", "Sparse vector (BTT 2018 style)", "sparse_vector", False,
           "training set: c AboveThreshold instances; the gate's state depends on earlier queries"),
    Method("private_learner", "Private learner (KLNRS 2008), X = reals", "private_learner", True,
           "impossible on an infinite domain (thresholds on the reals have no private learner)"),
    Method("private_learner_float64", "Private learner (served, mechanism = private-learner), X = float64",
           "served_learner", True,
           "training set: one threshold on all finite doubles by the exponential mechanism, sampled exactly "
           "(pure eps, Theorem L1); queries 0-DP; answers forever"),
    Method("private_learner_grid", "Private learner (served, mechanism = private-learner), finite grid",
           "served_learner", True,
           "training set: one threshold on the grid by the exponential mechanism, sampled exactly (pure eps, "
           "Theorem L1); queries 0-DP; answers forever"),
    Method("dagan_feldman", "Dagan-Feldman 2020 (single-query, composed)", "dagan_feldman", True,
           "training set: Q-fold composition of the per-query guarantee; then refuses"),
    Method("everlast", "everlast (planner, halts=paper)", "everlast", False,
           "training set: GenericBBL chain (tight accounting); " + QUERY_PRIVACY_NOTE),
    Method("everlast_split_votes", "everlast (planner, halts=split-votes)", "everlast", False,
           "training set: GenericBBL chain (tight accounting); " + QUERY_PRIVACY_NOTE),
)
GROWING = ("dwork_feldman", "sparse_vector", "dagan_feldman")
"""The peers whose n grows with the horizon (the candidates for a crossover)."""
LEARNER_NAMES = ("private_learner_float64", "private_learner_grid")


@dataclass(frozen=True, slots=True)
class Settings:
    """What ``everlast compare`` computes and runs."""

    epsilon: float = 1.0
    delta: float = 1e-6
    alpha: float = 0.1
    horizons: tuple[int, ...] = HORIZONS
    n_values: tuple[int, ...] = DEFAULT_N
    queries: int = DEFAULT_QUERIES
    domain_sizes: tuple[int | None, ...] = DEFAULT_DOMAIN_SIZES
    grid_size: int = DEFAULT_GRID
    seed: int = 0
    max_run_n: int = DEFAULT_MAX_RUN_N
    beta: float = 0.05


def settings_dict(s: Settings) -> dict[str, Any]:
    return {f: getattr(s, f) for f in Settings.__dataclass_fields__}
