"""The guarantee a model runs under, from the planner (``engine.planner``), computed at start."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from everlast.daemon.config import ModelConfig
from everlast.daemon.errors import ConfigError
from everlast.engine import burn as burn_defaults
from everlast.engine.burn import Burn
from everlast.engine.concepts import ConceptClass
from everlast.engine.errors import InvalidSchedule
from everlast.engine.quotas import Quotas
from everlast.engine.schedule import Schedule

if TYPE_CHECKING:
    from everlast.daemon import plan_cache

log = logging.getLogger("everlast.daemon")


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


def _from_certificate(cert: Any, schedule: Schedule) -> Guarantee:
    return Guarantee(
        accounting=str(cert.accounting),
        epsilon_training=float(cert.epsilon_training),
        epsilon_queries=float(cert.epsilon_queries),
        delta=float(cert.delta),
        query_private=bool(cert.query_private),
        warnings=tuple(cert.warnings),
        details={"quotas": None if schedule.quotas is None else schedule.quotas.to_dict(),
                 "burn": None if schedule.burn is None else schedule.burn.to_dict()},
    )


def certify_running(cfg: ModelConfig, schedule: Schedule, n: int) -> Guarantee:
    """The certificate of the schedule a model actually runs (a restored checkpoint keeps the schedule
    it was created with, which may differ from what the configuration plans now)."""
    from everlast.engine.planner import certify

    t = cfg.targets
    cert = certify(schedule, n) if t is None else certify(schedule, n, accounting=t.accounting, delta=t.delta)
    return _from_certificate(cert, schedule)


DEFAULT_BURN_WINDOWS = burn_defaults.DEFAULT_WINDOWS
"""A planned model's default burn window is R_1 / this (``engine.burn.default_window``); its eps_b is
``engine.burn.default_eps`` of the target epsilon. ``everlast plan`` plans with the same default."""


def configured_quotas(cfg: ModelConfig) -> Quotas | None:
    return None if cfg.quotas is None else Quotas(cfg.quotas.share, cfg.quotas.eps)


def configured_burn(cfg: ModelConfig) -> Burn | None:
    return Burn(cfg.burn.window, cfg.burn.eps) if cfg.burn else None


def _with_client_tests(cfg: ModelConfig, schedule: Schedule) -> Schedule:
    """A schedule file with the model's configured quotas and burn-rate signal (a file may carry them
    itself: then the configuration must say the same, or nothing)."""
    q_cfg, b_cfg = configured_quotas(cfg), configured_burn(cfg)
    for name, want, have in (("quotas", q_cfg, schedule.quotas), ("burn", b_cfg, schedule.burn)):
        if want is not None and have is not None and want != have:
            raise ConfigError(f"model {cfg.id}: the schedule file sets {name} = {have.to_dict()} and the "
                              f"configuration {name} = {want.to_dict()}: give it in one place")
    if cfg.burn is False and schedule.burn is not None:
        raise ConfigError(f"model {cfg.id}: burn = false, but the schedule file runs the burn-rate signal "
                          f"({schedule.burn.to_dict()}): remove it from one of them")
    quotas = q_cfg or schedule.quotas
    burn = b_cfg or schedule.burn
    if quotas == schedule.quotas and burn == schedule.burn:
        return schedule
    try:
        return dataclasses.replace(schedule, quotas=quotas, burn=burn)
    except InvalidSchedule as exc:
        raise ConfigError(f"model {cfg.id}: {exc}") from None


def plan_model(cfg: ModelConfig, concept: ConceptClass, n: int) -> tuple[Schedule, Guarantee]:
    """A schedule file is certified as given (with the model's configured quotas and burn-rate signal
    added); targets are planned, and refused (saying what would work) when n is too small for them.
    A planned target-charged model runs the burn-rate signal by default (``default_burn``)."""
    if cfg.schedule is not None:
        return _schedule_file(cfg, n)
    from everlast.daemon import plan_cache  # the planner's imports cost seconds: only when a model plans

    with plan_cache.active() as cache:  # a restart re-plans from the searched schedule kept on disk
        return _planned(cfg, concept, n, cache)


def _schedule_file(cfg: ModelConfig, n: int) -> tuple[Schedule, Guarantee]:
    """The model's schedule file, with its configured client tests, certified; refused when it certifies
    nothing."""
    from everlast.engine.planner import certify

    assert cfg.schedule is not None
    try:
        schedule = Schedule.from_dict(json.loads(cfg.schedule.read_text()))
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"model {cfg.id}: cannot read schedule {cfg.schedule}: {exc}") from None
    except InvalidSchedule as exc:
        raise ConfigError(f"model {cfg.id}: {exc}") from None
    schedule = _with_client_tests(cfg, schedule)
    cert = certify(schedule, n)
    if not math.isfinite(cert.epsilon_training):
        raise ConfigError(
            f"model {cfg.id}: the schedule certifies no training-set guarantee ({cert.training_reason}). "
            f"Complete a hand-written schedule (`everlast complete SCHEDULE --n {n}`) or let the planner "
            f"make one (`everlast plan --n {n}`)."
        )
    return schedule, _from_certificate(cert, schedule)


def _planned(cfg: ModelConfig, concept: ConceptClass, n: int, cache: plan_cache.Cache) -> tuple[Schedule, Guarantee]:
    """A schedule planned for the model's targets on n examples, or a refusal saying what would work."""
    from everlast.engine.planner import PlanInfeasible, Targets, certify, plan
    from everlast.engine.planner.learning import SPLIT_VOTES

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
        halt_budget=SPLIT_VOTES,  # the CLI's default: the paper's c_i ~1e4 x the real top rate
    )
    quotas, burn = configured_quotas(cfg), configured_burn(cfg)
    if t.accounting != "tight" and (quotas is not None or burn is not None):
        raise ConfigError(f"model {cfg.id}: per-client quotas and the burn-rate signal run with the target-charged "
                          "design, which the tight accounting plans (accounting = \"paper\" plans the paper's)")
    auto_burn = t.accounting == "tight" and cfg.burn is None
    if auto_burn:  # the window does not enter the charge (eps_b does): set from R_1 once the plan is made
        burn = burn_defaults.planning_default(t.epsilon)
    targets = dataclasses.replace(targets, quotas=quotas, burn=burn)
    floor = bbl_floor(targets)
    if n < floor:  # refused in milliseconds: the planner's search takes seconds to minutes
        raise ConfigError(
            f"model {cfg.id}: GenericBBL cannot meet epsilon = {t.epsilon} at alpha = {t.alpha} with n = {n:,}: any "
            f"of its schedules needs at least {floor:,} examples (|S_1| = lambda_1 T_1, and round 1's accuracy "
            "bounds lambda_1 from below), "
            f"and far more for a useful epsilon (`everlast plan --epsilon {t.epsilon:g} --alpha {t.alpha:g}` "
            f"computes the exact n). {what_works(cfg, targets, n)}"
        )
    charged = _charged(targets, auto_burn)
    log.info("model %s: planning a schedule for epsilon = %g, delta = %g, alpha = %g on n = %d training examples "
             "(%s); this takes seconds", cfg.id, t.epsilon, t.delta, t.alpha, n, charged)
    started = time.monotonic()
    try:
        p = plan(targets)
    except PlanInfeasible as exc:
        raise ConfigError(f"model {cfg.id}: no schedule meets the targets ({exc}; {charged}). "
                          f"{what_works(cfg, targets, n)}") from None
    log.info("model %s: planned in %.1f s: n_required = %d (%s)", cfg.id, time.monotonic() - started,
             p.n_required, cache.note())
    if p.n_required > n or p.schedule is None:
        p = _below_required(cfg, targets, n, p, charged)
    assert p.schedule is not None  # a plan without a runnable schedule was refused above
    schedule = default_burn(p.schedule) if auto_burn else p.schedule
    return schedule, _from_certificate(certify(schedule, n, accounting=t.accounting, delta=t.delta), schedule)


def _below_required(cfg: ModelConfig, targets: Any, n: int, p: Any, charged: str) -> Any:
    """n is below the target's n_required: serve the schedule of a stronger epsilon that fits n, or refuse
    naming every charged component (never offering an epsilon stronger than the target)."""
    from everlast.engine.planner import best_epsilon

    t = cfg.targets
    assert t is not None
    log.info("model %s: n = %d is below n_required: searching the epsilon it certifies", cfg.id, n)
    best = best_epsilon(n, targets)
    fits = best.plan is not None and best.plan.schedule is not None and best.plan.n_required <= n
    if fits and best.epsilon <= t.epsilon * (1.0 + 1e-9):  # a stronger guarantee fits the data: serve it
        assert best.plan is not None
        log.info("model %s: the schedule planned for epsilon = %.4g fits n = %d and certifies epsilon = %.4g "
                 "(<= the target %g): serving it", cfg.id, best.target, n, best.epsilon, t.epsilon)
        p = best.plan
    else:
        better = (
            f"the strongest epsilon n = {n:,} certifies is {best.epsilon:.3g} (weaker than the target)"
            if math.isfinite(best.epsilon)
            else f"n = {n:,} certifies no finite epsilon at alpha = {t.alpha}"
        )
        raise ConfigError(
            f"model {cfg.id}: GenericBBL needs {p.n_required:,} training examples for epsilon = {t.epsilon} at "
            f"alpha = {t.alpha} (the training set has {n:,}; {charged}); {better}. "
            f"`everlast plan --epsilon {t.epsilon:g} --alpha {t.alpha:g}` plans with the same defaults. "
            f"{what_works(cfg, targets, n)}"
        )
    return p


def _charged(targets: Any, auto_burn: bool) -> str:
    """Every component the query chain charges besides the answers, named with its epsilon."""
    if targets.accounting != "tight":
        return "the paper's accounting: no in-round tests are charged"
    from everlast.engine.planner.api import choose_eps_h

    eps_h = targets.eps_h if targets.eps_h is not None else choose_eps_h(targets)
    parts = [f"the halting test eps_h = {eps_h:g}"]
    if targets.burn is not None:
        parts.append(f"the burn-rate signal eps_b = {targets.burn.eps:g}"
                     + (" (the default; burn = false turns it off)" if auto_burn else ""))
    if targets.quotas is not None:
        parts.append(f"the per-client quotas eps_q = {targets.quotas.eps:g}")
    return "each query is charged " + ", ".join(parts) + " besides its answer"


def default_burn(schedule: Schedule) -> Schedule:
    """The planned schedule with its default burn-rate signal: the eps_b the plan charged (``Burn(1,
    eps_b)``, ``engine.burn.planning_default``) and a window of R_1 / ``DEFAULT_BURN_WINDOWS`` queries."""
    assert schedule.burn is not None, "plan with burn_defaults.planning_default first: eps_b must be charged"
    window = burn_defaults.default_window(schedule.rounds[0].R)
    return dataclasses.replace(schedule, burn=Burn(window, schedule.burn.eps))


def bbl_floor(t: Any) -> int:
    """A lower bound on the training examples any GenericBBL schedule for the targets needs, cheap,
    so that hopeless targets are refused at once: round 1 draws |S_1| = lambda_1 T_1 examples. Under
    the tight accounting (Theorem A, docs/privacy/genericbbl.md 6.3) round 1's answers err by at most
    alpha only if the ensemble's bound mu(lambda_1) <= ebar_1 < alpha/2 (rho_1 < 1/2), so lambda_1 is
    at least the smallest lambda with mu(lambda) < alpha/2 (T_1 >= 1); under the paper's, lambda_1 is
    Theorem A.2's chunk size and T_1 at least Claim D.2's 96 ln(1/alpha_1). tests/daemon/test_units.py
    checks it stays below the planner's n_required."""
    from everlast.engine import roots
    from everlast.engine.planner.accountants import PUBLISHED_NAME
    from everlast.engine.planner.accuracy import mean_error_bound
    from everlast.engine.planner.learning import chunk_size, d2_floor

    if getattr(t, "accounting", "tight") == PUBLISHED_NAME:
        return chunk_size(t.alpha, t.beta, t.vc, t.lambda_log) * d2_floor(t.alpha)
    return roots.smallest_int_from(lambda lam: mean_error_bound(lam, t.vc) < t.alpha / 2.0, 1)


def what_works(cfg: ModelConfig, t: Any, n: int) -> str:
    """What certifies the targets with the data given: the private learner (the planner's mechanism
    comparison, ``engine.planner.mechanisms``), or what would."""
    from everlast.engine.planner.mechanisms import learner_cost

    c = learner_cost(t, n)  # the agnostic bound: an a-priori statement (the default, validated, comes after the fit)
    if c.n_required is None:
        return ("Give more data, relax the targets, or give an explicit schedule (its guarantee is certified and "
                "reported at start: `everlast round --n N` writes one).")
    real = learner_cost(t, n, guarantee="realizable").n_required
    learner = (f"mechanism = \"private-learner\" with [models.learner] epsilon = {t.epsilon:g}, alpha = {t.alpha:g} "
               f"and guarantee = \"agnostic\" (training set ({t.epsilon:g}, 0)-DP, queries (0, 0)-DP, error within "
               f"{t.alpha:g} of the class's best, proven before the fit; the default guarantee, validated, measures "
               f"the released model after the fit instead); {real:,} examples when the labels come from the class "
               f"(guarantee = \"realizable\"); docs/privacy/learner.md; it needs float inputs, i.e. a finite "
               "domain)")
    if n >= c.n_required:
        return (f"The private learner certifies these targets with the data given ({c.n_required:,} examples "
                f"needed, {n:,} given): {learner}. `everlast plan --mechanism all --epsilon {t.epsilon:g} --alpha "
                f"{t.alpha:g} --guarantee agnostic` compares the two.")
    return (f"The private learner would certify them with {c.n_required:,} examples ({learner}); "
            "or relax the targets, or give an explicit schedule (`everlast round --n N` writes one).")


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
    from everlast.engine.learner.validate import holdout_size
    from everlast.engine.planner import Targets
    from everlast.engine.planner.mechanisms import LEARNER_NOTE, learner_cost

    lc = cfg.learner
    assert lc is not None
    alpha = lc.alpha or 0.1
    t = Targets(epsilon=lc.epsilon, alpha=alpha, beta=lc.beta, concept=cfg.concept, d=cfg.d)
    m = holdout_size(n, lc.holdout_share)
    n_fit = n - m  # the a-priori bounds are about the fit, on the records not held out
    validated = lc.guarantee == "validated"
    c = learner_cost(t, n_fit, domain_size, cfg.depth, "agnostic" if validated else lc.guarantee)
    real, ag = c.extra["realizable"], c.extra["agnostic"]
    alpha_n = float(real["alpha_at_n"])
    excess_n = float(ag["excess_at_n"])
    n_real, n_agn = real["n_required"], int(ag["n_required"])
    if lc.alpha is not None and not validated and not c.meets_at_n:
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
        "n_required": c.n_required if lc.alpha is not None and not validated else None,
        "holdout": m, "n_fit": n_fit, "validation_beta": lc.validation_beta,
        "validated": None, "constant": None,
        **({"depth": cfg.depth} if trees else {}),
    }
    return Guarantee("exponential-mechanism", lc.epsilon, 0.0, 0.0, True, tuple(warnings),
                     "private-learner", details)


def capacity_summary(cfg: ModelConfig, concept: ConceptClass, schedule: Schedule) -> str:
    """One start-up log line: how many rounds (and queries) of ``schedule`` one engine's memory holds
    (``engine.planner.capacity``, the plan's ``capacity`` numbers) and, for a target-charged schedule
    with targets, Theorem A-infinity's accuracy horizon (docs/privacy/genericbbl.md 6.3). A round one
    engine cannot hold suspends the model at its transition (docs/OPERATIONS.md)."""
    from everlast.engine.planner.accuracy import accuracy_horizon
    from everlast.engine.planner.capacity import ENGINE_MEMORY, one_engine_rounds, schedule_capacity
    from everlast.engine.planner.design_rules import rules

    rounds = schedule.rounds
    cap = schedule_capacity(rounds, concept.name, cfg.d, ENGINE_MEMORY, schedule.repeat_last)
    k = one_engine_rounds(cap)
    gib = ENGINE_MEMORY / 2**30
    if k >= len(rounds):
        held = f"one engine of {gib:g} GiB holds every round"
    elif k == 0:
        held = (f"one engine of {gib:g} GiB holds no round: round 1 {cap[0].reason} (its fit or its transition "
                "will fail)")
    else:
        held = (f"one engine of {gib:g} GiB holds rounds 1-{k} ({sum(r.R for r in rounds[:k]):.3g} queries); "
                f"round {k + 1} {cap[k].reason}: its transition will suspend the model")
    t = cfg.targets
    accs = rules(schedule.design).answer_accuracy(rounds, concept.vc_dim, "per-query") if t is not None else ()
    if t is None or not accs:
        return f"{held}; accuracy horizon: not computed (a target-charged schedule with targets alpha, beta has one)"
    hz = accuracy_horizon(rounds, schedule.design, concept.vc_dim, t.alpha, t.beta, "per-query",
                          schedule.repeat_last, accs)
    where = ("every round" if hz.queries is None else "no query (round 1 is not covered)" if hz.rounds == 0
             else f"{hz.queries:.3g} queries (rounds 1-{hz.rounds})")
    return f"{held}; accuracy horizon (Theorem A-infinity, per query, alpha = {t.alpha:g}): {where}"

