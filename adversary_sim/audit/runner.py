"""Run an audit: play an attack's games in both worlds, bound epsilon, set it beside the claim.

The claim is the planner's certificate (``engine.planner.certify``, tight accounting, delta 1e-6)
for the attack's *nominal* configuration -- the same schedule and training-set size the games run
(the broken variants change the engine's inputs, never the claim; ``charged-c`` changes only the
claim). Which part of the certificate depends on what the attack's view is (``Attack.scope``):
  * "round": the view is round 1's answers: the round's step of the training chain, (E, Delta) of
    Lemma TC (target-charged) or the composed Theorem B instances (paper), then the subsampling of S_1
    from S (Balle-Barthe-Gaboardi; rate 1 when n = |S_1|);
  * "chain": the whole training chain (``epsilon_training``), or the query chain
    (``epsilon_queries`` when certified, else ``epsilon_queries_conditional``: what Claim E.6 would give
    if its in-round step held, flagged as such);
  * "in-round": the challenge round's other answers: Theorem Q's in-round step (target-charged,
    proven); under the paper's design nothing in-round is proven and the conditional query chain is
    used, flagged.

Confidence: every attack's bound uses Clopper-Pearson limits, Bonferroni-divided over the attacks of
a run and over the tests of an attack (the held-out sweep and, when the attack has one, a test fixed
before any game), so the reported maximum holds with the stated confidence.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.adversary_sim.audit.games import (
    ATTACKS,
    DEFAULT_ATTACKS,
    PLANNED_ATTACKS,
    Attack,
    HaltingAttack,
    RestartAttack,
)
from everlast.adversary_sim.audit.restart import WaitAndTest
from everlast.adversary_sim.audit.stats import Bound, audit_bound, bound_at, max_bound_for_trials
from everlast.adversary_sim.audit.variants import Variant
from everlast.adversary_sim.audit.variants import variant as get_variant
from everlast.engine.design import DEFAULT, PAPER, RETIRED, Design, noise_plan
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import Certificate, certify, in_round_step
from everlast.engine.planner import amplification as amp
from everlast.engine.planner import composition as comp
from everlast.engine.planner.chain import exact_rate

GAMES = ("training", "query")
CLAIM_DELTA = 1e-6
HIST_BINS = 30
ROUND_STEPS = ("round composition, round 1", "BT composition, round 1")
"""certify's step names for round 1's (E, Delta): target-charged, paper."""


_RESTARTS_OF = {d.halting.value: d.restarts.value for d in (PAPER, DEFAULT)}
"""Each halting policy's restart policy, as the CLI spells them (each design has one of each)."""
_HALTING_OF = {v: k for k, v in _RESTARTS_OF.items()}


def design_from(name: str | None = None, halting: str | None = None, restarts: str | None = None) -> Design:
    """The design an audit runs: named (``target-charged`` or ``paper``) or given by its halting and
    restart policies (one of them is enough: each design has one of each); the default design when
    nothing is given. Retired policies are refused with engine.design.RETIRED's reason."""
    for value in (halting, restarts):
        if value is not None and value in RETIRED:
            raise ValueError(RETIRED[value])
    try:
        named = Design.named(name) if name is not None else None
        if halting is None and restarts is None:
            return named or DEFAULT
        h = halting if halting is not None else _HALTING_OF.get(str(restarts), str(restarts))
        r = restarts if restarts is not None else _RESTARTS_OF.get(str(halting), str(halting))
        d = Design.parse(h, r)
    except InvalidSchedule as exc:
        raise ValueError(str(exc)) from None
    if named is not None and d != named:
        raise ValueError(f"--design {named.name} contradicts halting {h!r} / restarts {r!r}")
    return d


def resolve_attacks(game: str, names: Sequence[str] | None, design: Design = DEFAULT,
                    queries: int | None = None, adversary: WaitAndTest | None = None,
                    variant: str = "real") -> list[Attack]:
    if game not in GAMES:
        raise ValueError(f"unknown game {game!r}; known: {', '.join(GAMES)}")
    v = get_variant(variant)
    if design.name not in v.designs:
        raise ValueError(f"the {variant} variant applies to the {' and '.join(v.designs)} design only")
    known = ATTACKS[game]
    asked = list(names or ())
    default = not asked or asked == ["default"]
    if default:
        asked = list(DEFAULT_ATTACKS[game])
    elif asked == ["all"]:
        asked = list(known)
    out: list[Attack] = []
    for n in asked:
        if n in PLANNED_ATTACKS.get(game, ()):
            raise NotImplementedError(f"attack {n!r} is planned but not implemented yet")
        if n not in known:
            raise ValueError(f"unknown attack {n!r} for the {game} game; known: {', '.join(known)}")
        att: Attack = (RestartAttack(design, queries, adversary) if n == "restart"
                       else known[n](design, queries))
        if v.charged_c and att.scope != "round":
            if default:
                continue
            raise ValueError(f"the charged-c variant is a claim about one round: it applies to the flip "
                             f"attack, not {n!r}")
        out.append(att)
    if not out:
        raise ValueError(f"the {variant} variant applies to none of the {game} game's attacks")
    return out


def _round_claim(att: Attack, cert: Certificate, v: Variant) -> dict[str, Any]:
    """Round 1's (E, Delta) from the certificate, subsampled from S at rate |S_1|/n."""
    sc = att.scenario()
    spec = sc.schedule.rounds[0]
    step = next((s for s in cert.steps if s.chain == "training" and s.name in ROUND_STEPS), None)
    if step is None or not step.valid:
        return {"claimed_epsilon": math.inf, "claimed_delta": 1.0, "claimed_kind": "none",
                "claimed_epsilon_proven": math.inf, "claim_note": cert.training_reason}
    E, Delta = step.epsilon, step.delta
    lemma = step.lemma
    note = ""
    if v.charged_c:
        plan = noise_plan(sc.schedule.design, spec)
        eps0 = next(s.epsilon for s in cert.steps if s.name == "per-query mechanism, round 1")
        E = comp.kov_epsilon(eps0, 0.0, plan.c, Delta)
        note = (f"BROKEN CLAIM (charged-c): the {plan.c}-fold composition of eps0 = {eps0:.4g} steps at "
                f"Delta = {Delta:.3g}, i.e. only the c tops charged; Lemma TC's round epsilon is "
                f"{step.epsilon:.4g}. ")
        lemma = "K = c (not a lemma: Lemma TC needs K with P[Bin(K, q) <= c - 1] small)"
    r1 = exact_rate(spec.labeled_size, sc.n)
    eps, delta = amp.bbg(r1, E, Delta)
    return {"claimed_epsilon": eps, "claimed_delta": delta,
            "claimed_kind": "broken (charged-c)" if v.charged_c else "proven",
            "claimed_epsilon_proven": step.epsilon if v.charged_c else eps,
            "claim_note": (note + f"claimed: round 1's step of the training chain ({lemma}): "
                           f"({E:.4g}, {Delta:.3g}), subsampled from S at rate {r1:.3g}; the view is round 1's "
                           f"answers only. The whole training chain is {cert.epsilon_training:.4g}")}


def _chain_claim(game: str, cert: Certificate) -> dict[str, Any]:
    if game == "training":
        return {"claimed_epsilon": cert.epsilon_training, "claimed_delta": cert.delta_training,
                "claimed_kind": "proven", "claimed_epsilon_proven": cert.epsilon_training,
                "claim_note": cert.training_reason}
    if math.isfinite(cert.epsilon_queries):
        return {"claimed_epsilon": cert.epsilon_queries, "claimed_delta": cert.delta_queries,
                "claimed_kind": "proven", "claimed_epsilon_proven": cert.epsilon_queries,
                "claim_note": ""}
    return {"claimed_epsilon": cert.epsilon_queries_conditional, "claimed_delta": cert.delta_queries,
            "claimed_kind": "conditional", "claimed_epsilon_proven": math.inf,
            "claim_note": "claimed (conditional): the planner proves no query epsilon for this "
                          f"configuration ({cert.queries_reason}); the number is the query chain "
                          "without Claim E.6's in-round step"}


def _in_round_claim(att: Attack, cert: Certificate) -> dict[str, Any] | None:
    """Theorem Q's in-round step for the attack's nominal round, when the design has one."""
    sched = att.scenario().schedule
    ir = in_round_step(sched.design, sched.rounds[0], 1)
    if not ir.valid:
        return None
    chain = (f"the whole query chain is certified at epsilon {cert.epsilon_queries:.4g}"
             if math.isfinite(cert.epsilon_queries) else
             f"the planner certifies no whole query chain for this small round ({cert.queries_reason})")
    return {"claimed_epsilon": ir.epsilon, "claimed_delta": ir.delta,
            "claimed_kind": "proven (in-round step Q0, Theorem Q)", "claimed_epsilon_proven": ir.epsilon,
            "claim_note": (f"claimed: Theorem Q's in-round step of the {sched.design.name} design: "
                           f"({ir.epsilon:.4g}, {ir.delta:.3g}); this game's view is the challenge round's "
                           f"other answers, exactly what the step bounds; {chain}")}


def claim(att: Attack, cert: Certificate, v: Variant) -> dict[str, Any]:
    """What the planner claims for this attack's view, and how firmly."""
    if att.scope == "round":
        return _round_claim(att, cert, v)
    if att.scope == "in-round":
        ir = _in_round_claim(att, cert)
        if ir is not None:
            return ir
    return _chain_claim(att.game, cert)


def _restart_summary(att: RestartAttack) -> dict[str, Any]:
    """Per world: P(N2 >= theta) (the guess "world 0"), games without a test, mean tops / queries."""
    out: dict[str, Any] = {}
    for w, res in sorted(att.last_outcomes.items()):
        out[f"world{w}"] = {
            "p_n2_at_least_theta": float(np.mean([o.score == 0.0 for o in res])),
            "no_test": float(np.mean([o.n2 < 0 for o in res])),
            "mean_tops": float(np.mean([o.tops for o in res])),
            "mean_queries": float(np.mean([o.queries for o in res])),
        }
    return out


def _halting_summary(att: HaltingAttack) -> dict[str, Any]:
    """Per world: mean follow-up queries answered (target-charged) or P(last query refused)."""
    out: dict[str, Any] = {}
    for w, sc in sorted(getattr(att, "last_scores", {}).items()):
        if att.design.target_charged:
            out[f"world{w}"] = {"mean_follow_ups_answered": float(-np.mean(sc))}
        else:
            out[f"world{w}"] = {"p_last_refused": float(np.mean(sc))}
    return out


def _histogram(s0: NDArray[np.float64], s1: NDArray[np.float64]) -> dict[str, Any]:
    both = np.concatenate([s0, s1])
    lo, hi = float(both.min()), float(both.max())
    if hi <= lo:
        hi = lo + 1.0
    edges = np.linspace(lo, hi, HIST_BINS + 1)
    return {"edges": edges.tolist(), "world0": np.histogram(s0, edges)[0].tolist(),
            "world1": np.histogram(s1, edges)[0].tolist()}


def _bounds(att: Attack, s0: NDArray[np.float64], s1: NDArray[np.float64], delta: float,
            alpha: float) -> tuple[Bound, dict[str, Any]]:
    """The attack's bound: the held-out sweep and, when the attack fixes a test before the games, that
    test on every game (each at alpha / 2); the larger, and both for the record."""
    pre = att.preregistered(s0.size, delta, alpha / 2.0)
    if pre is None:
        b = audit_bound(s0, s1, delta=delta, alpha=alpha)
        return b, {"held_out": b.to_json()}
    held = audit_bound(s0, s1, delta=delta, alpha=alpha / 2.0)
    fixed = bound_at(s0, s1, pre["threshold"], pre["direction"], delta, alpha / 2.0)
    best = fixed if fixed.epsilon_lower_bound >= held.epsilon_lower_bound else held
    return best, {"held_out": held.to_json(), "preregistered": {**fixed.to_json(), **pre}}


def run_audit(
    game: str,
    variant: str = "real",
    attacks: Sequence[str] | None = None,
    trials: int = 2000,
    seed: int = 0,
    *,
    design: Design = DEFAULT,
    adversary: WaitAndTest | None = None,
    confidence: float = 0.95,
    queries: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Play ``trials`` games (half per world) of each attack against ``variant`` of ``design``; return
    the audit record (the JSON object ``everlast audit --json`` prints)."""
    if trials < 6:
        raise ValueError("an audit needs at least 6 trials (3 per world)")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")
    v = get_variant(variant)
    chosen = resolve_attacks(game, attacks, design, queries, adversary, variant)
    per_world = trials // 2
    alpha = (1.0 - confidence) / len(chosen)
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    for att in chosen:
        sc = att.scenario()
        cert = certify(sc.schedule, sc.n, "tight", CLAIM_DELTA)
        cl = claim(att, cert, v)
        t1 = time.perf_counter()
        s0 = att.play(v, 0, per_world, seed, progress)
        s1 = att.play(v, 1, per_world, seed, progress)
        delta = cl["claimed_delta"] if cl["claimed_delta"] < 1.0 else CLAIM_DELTA
        b, tests = _bounds(att, s0, s1, delta, alpha)
        r: dict[str, Any] = {
            **att.describe(), **cl, **b.to_json(),
            "caught": b.epsilon_lower_bound > cl["claimed_epsilon"],
            "max_bound_at_this_trial_count": max_bound_for_trials(b.n0, delta, b.alpha),
            "tests": tests,
            "seconds": time.perf_counter() - t1,
            "scores": _histogram(s0, s1),
            "config": {"concept": sc.concept.name, "n": sc.n, "schedule": sc.schedule.to_dict(),
                       "engine_schedule": v.schedule(sc.schedule).to_dict()},
            "certificate": {"epsilon_training": cert.epsilon_training, "delta_training": cert.delta_training,
                            "epsilon_queries": cert.epsilon_queries,
                            "epsilon_queries_conditional": cert.epsilon_queries_conditional,
                            "delta_queries": cert.delta_queries, "query_private": cert.query_private,
                            "warnings": list(cert.warnings)},
        }
        if isinstance(att, RestartAttack):
            r["restart_game"] = _restart_summary(att)
        if isinstance(att, HaltingAttack):
            f0, f1 = att.fixed_k_scores(0), att.fixed_k_scores(1)
            if f0 is not None and f1 is not None:
                fb = audit_bound(f0, f1, delta=delta, alpha=alpha)
                r["fixed_k"] = {"k": att.describe()["adversary"]["fixed_k"],
                                "p_refused_world0": float(f0.mean()), "p_refused_world1": float(f1.mean()),
                                "epsilon_lower_bound": fb.epsilon_lower_bound,
                                "note": "the paper adversary's single test (k follow-up tops, then one "
                                        "more: refused?) on the same games; the reported bound is the "
                                        "sweep over k (held-out choice)"}
            r["halting_game"] = _halting_summary(att)
        results.append(r)
    top = max(results, key=lambda r: r["epsilon_lower_bound"] - r["claimed_epsilon"])
    warnings = []
    if game == "query" and top["claimed_kind"] == "conditional":
        warnings.append("QUERY PRIVACY NOT PROVEN for this configuration: claimed_epsilon is the "
                        "conditional chain (Claim E.6's in-round step is false for the paper's design; "
                        "docs/privacy/genericbbl.md 4)")
    if v.charged_c:
        warnings.append("claimed_epsilon is a BROKEN claim (charged-c: only c steps charged), not the "
                        "planner's: the audit tests whether the games violate it")
    if variant != "real" and not any(r["caught"] for r in results):
        warnings.append(f"the broken variant {variant!r} was not caught by "
                        f"{', '.join(r['attack'] for r in results)}; designed to catch it: "
                        + ", ".join(f"{r['attack']} -> {', '.join(r['designed_to_catch'])}" for r in results))
    return {
        "game": game,
        "variant": variant,
        "attack": ",".join(r["attack"] for r in results),
        "design": design.name,
        "claimed_epsilon": top["claimed_epsilon"],
        "claimed_delta": top["claimed_delta"],
        "claimed_kind": top["claimed_kind"],
        "claimed_epsilon_proven": top["claimed_epsilon_proven"],
        "epsilon_lower_bound": max(r["epsilon_lower_bound"] for r in results),
        "confidence": confidence,
        "trials": 2 * per_world,
        "trials_per_world": per_world,
        "caught": any(r["caught"] for r in results),
        "seed": seed,
        "halting": design.halting.value,
        "restarts": design.restarts.value,
        "variant_description": v.description,
        "seconds": time.perf_counter() - t0,
        "attacks": results,
        "warnings": warnings,
    }
