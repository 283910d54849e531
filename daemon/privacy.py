"""The guarantee a model runs under, from the planner (``engine.planner``), computed at start."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from everlast.daemon.config import ModelConfig
from everlast.daemon.errors import ConfigError
from everlast.engine.concepts import ConceptClass
from everlast.engine.errors import InvalidSchedule
from everlast.engine.schedule import Schedule


@dataclass(frozen=True, slots=True)
class Guarantee:
    accounting: str
    epsilon_training: float
    epsilon_queries: float
    delta: float
    query_private: bool
    warnings: tuple[str, ...]
    mechanism: str = "generic-bbl"
    details: dict[str, Any] = field(default_factory=dict)
    """Public numbers of the mechanism's certificate beyond (epsilon, delta) (the private learner:
    class, domain, n, both accuracy bounds at n)."""

    @property
    def weak(self) -> bool:
        return not math.isfinite(self.epsilon_training) or self.epsilon_training > 10

    def to_json(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return v if math.isfinite(v) else None

        return {
            "mechanism": self.mechanism,
            "accounting": self.accounting,
            "epsilon_training": num(self.epsilon_training),
            "epsilon_queries": num(self.epsilon_queries),
            "delta": self.delta,
            "query_private": self.query_private,
            "warnings": list(self.warnings),
            **self.details,
        }


def _from_certificate(cert: Any) -> Guarantee:
    return Guarantee(
        accounting=str(cert.accounting),
        epsilon_training=float(cert.epsilon_training),
        epsilon_queries=float(cert.epsilon_queries),
        delta=float(cert.delta),
        query_private=bool(cert.query_private),
        warnings=tuple(cert.warnings),
    )


def plan_model(cfg: ModelConfig, concept: ConceptClass, n: int) -> tuple[Schedule, Guarantee]:
    """A schedule file is certified as given; targets are planned, and refused (saying what would
    work) when n is too small for them."""
    from everlast.engine.planner import PlanInfeasible, Targets, best_epsilon, certify, plan

    if cfg.schedule is not None:
        try:
            schedule = Schedule.from_dict(json.loads(cfg.schedule.read_text()))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"model {cfg.id}: cannot read schedule {cfg.schedule}: {exc}") from None
        except InvalidSchedule as exc:
            raise ConfigError(f"model {cfg.id}: {exc}") from None
        cert = certify(schedule, n)
        if not math.isfinite(cert.epsilon_training):
            raise ConfigError(
                f"model {cfg.id}: the schedule certifies no training-set guarantee ({cert.training_reason}). "
                f"Complete a hand-written schedule (`everlast complete SCHEDULE --n {n}`) or let the planner "
                f"make one (`everlast plan --n {n}`)."
            )
        return schedule, _from_certificate(cert)
    t = cfg.targets
    assert t is not None
    targets = Targets(
        epsilon=t.epsilon,
        delta=t.delta,
        alpha=t.alpha,
        beta=t.beta,
        concept=concept.name,
        d=cfg.d,
        accounting=t.accounting,
        halts="split-votes",  # the CLI's default: the paper's c_i ~1e4 x the real top rate
    )
    try:
        p = plan(targets)
    except PlanInfeasible as exc:
        raise ConfigError(f"model {cfg.id}: no schedule meets the targets ({exc})") from None
    if p.n_required > n or p.schedule is None:
        best = best_epsilon(n, targets)
        better = (
            f"n = {n} supports epsilon = {best.epsilon:.3g} at most"
            if math.isfinite(best.epsilon)
            else f"n = {n} certifies no finite epsilon at alpha = {t.alpha}"
        )
        raise ConfigError(
            f"model {cfg.id}: epsilon = {t.epsilon} at alpha = {t.alpha} needs {p.n_required:.3g} training examples "
            f"(the training set has {n}); {better}. Give more data, relax the targets, or give an explicit "
            f"schedule (its guarantee is certified and reported at start)."
        )
    return p.schedule, _from_certificate(certify(p.schedule, n, accounting=t.accounting, delta=t.delta))


LEARNER_CLAIM = "Theorem L1, docs/privacy/learner.md section 2"
TREES_CLAIM = "Theorem T1, docs/privacy/learner.md section 8"


def learner_guarantee(cfg: ModelConfig, n: int, domain_size: int, domain: str, domain_kind: str) -> Guarantee:
    """The private learner's certificate for the configuration and n (``engine.planner.mechanisms``):
    training set (epsilon, 0)-DP, queries (0, 0)-DP, and both accuracy bounds at n: the realizable
    one (Theorem L2, trees T2: only if ``realizable_if``, for trees labels from one stump) and the
    agnostic one (L3, trees T3: an excess over a named comparator); both only for a training set of n
    i.i.d. draws from the distribution the queries come from. With ``alpha`` configured, the start is
    refused (``ConfigError``) unless ``learner_cost(..., guarantee).meets_at_n``: the same numbers
    ``everlast plan --mechanism private-learner --guarantee G --n N`` prints; the message gives both
    bounds and the n each needs."""
    from everlast.engine.planner import Targets
    from everlast.engine.planner.mechanisms import LEARNER_NOTE, learner_cost

    lc = cfg.learner
    assert lc is not None
    alpha = lc.alpha or 0.1
    t = Targets(epsilon=lc.epsilon, alpha=alpha, beta=lc.beta, concept=cfg.concept, d=cfg.d)
    c = learner_cost(t, n, domain_size, cfg.depth, lc.guarantee)
    real, ag = c.extra["realizable"], c.extra["agnostic"]
    alpha_n = float(real["alpha_at_n"])
    excess_n = float(ag["excess_at_n"])
    n_real, n_agn = real["n_required"], int(ag["n_required"])
    if lc.alpha is not None and not c.meets_at_n:
        raise ConfigError(
            f"model {cfg.id}: alpha = {lc.alpha} under guarantee = \"{lc.guarantee}\" at epsilon = {lc.epsilon} "
            f"needs more data (the training set has {n}). With n = {n}: realizable bound error <= "
            f"{alpha_n:.3g} (needs n = {n_real} for {lc.alpha}; only if {real['if']}); agnostic "
            f"bound error <= {ag['comparator']} + {excess_n:.3g} (needs n = {n_agn} for an excess of {lc.alpha}). "
            "Give more data, raise epsilon or alpha, choose the other guarantee, or drop alpha (privacy holds "
            "at any n); docs/privacy/learner.md 4, 8, 9."
        )
    warnings = [LEARNER_NOTE]
    if alpha_n >= 0.5 and excess_n >= 0.5:
        warnings.append(f"with n = {n} neither bound proves useful accuracy (realizable alpha = {alpha_n:.3g}, "
                        f"agnostic excess = {excess_n:.3g} at beta = {lc.beta:g}); `everlast plan --mechanism "
                        "private-learner` says how many examples each needs")
    trees = cfg.concept == "trees"
    details = {
        "concept": cfg.concept, "d": cfg.d, "domain": domain, "domain_kind": domain_kind,
        "domain_size": str(domain_size), "n_train": n,
        "rounds": False, "halts": False, "claim": TREES_CLAIM if trees else LEARNER_CLAIM,
        "alpha_proven": alpha_n, "beta": lc.beta,
        "accuracy_theorem": f"Theorem {real['theorem']}",
        "realizable_if": real["if"],
        "agnostic_excess": excess_n, "agnostic_comparator": ag["comparator"],
        "agnostic_theorem": f"Theorem {ag['theorem']}",
        "guarantee": lc.guarantee,
        "alpha_target": lc.alpha,
        "n_required": c.n_required if lc.alpha is not None else None,
        **({"depth": cfg.depth} if trees else {}),
    }
    return Guarantee("exponential-mechanism", lc.epsilon, 0.0, 0.0, True, tuple(warnings),
                     "private-learner", details)
