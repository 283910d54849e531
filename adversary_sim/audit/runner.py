"""Run an audit: play an attack's games in both worlds, bound epsilon, set it beside the claim.

The claim is the planner's certificate (``engine.planner.certify``, tight accounting, delta 1e-6)
for the attack's *nominal* configuration -- the same schedule and training-set size the games run
(the broken variants change the engine's inputs, never the claim). For the training-set game the
claim is ``epsilon_training``. For the query game's in-round attacks (halting, restart) against a
design that closes both channels, the claim is Theorem Q's in-round step Q0 -- proven, and exactly
the view those games have. Otherwise the query claim is ``epsilon_queries`` when certified, else
``epsilon_queries_conditional`` (the chain *if* Claim E.6's in-round step held), flagged as such.

Confidence: every attack's bound uses Clopper-Pearson limits at alpha / (2 * attacks) per rate, so
the reported maximum over attacks holds with the stated confidence (Bonferroni).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adversary_sim.audit.games import (
    ATTACKS,
    DEFAULT_ATTACKS,
    PLANNED_ATTACKS,
    Attack,
    HaltingAttack,
    RestartAttack,
)
from adversary_sim.audit.restart import WaitAndTest
from adversary_sim.audit.stats import audit_bound, max_bound_for_trials
from adversary_sim.audit.variants import variant as get_variant
from engine.planner import Certificate, certify, in_round_step

GAMES = ("training", "query")
CLAIM_DELTA = 1e-6
HIST_BINS = 30


def resolve_attacks(game: str, names: Sequence[str] | None, halting: str = "paper",
                    queries: int | None = None, restarts: str = "per-top",
                    adversary: WaitAndTest | None = None) -> list[Attack]:
    if game not in GAMES:
        raise ValueError(f"unknown game {game!r}; known: {', '.join(GAMES)}")
    known = ATTACKS[game]
    if not names or list(names) == ["default"]:
        names = DEFAULT_ATTACKS[game]
    elif list(names) == ["all"]:
        names = tuple(known)
    out: list[Attack] = []
    for n in names:
        if n in PLANNED_ATTACKS.get(game, ()):
            raise NotImplementedError(f"attack {n!r} is planned (issue 8) but not implemented yet")
        if n not in known:
            raise ValueError(f"unknown attack {n!r} for the {game} game; known: {', '.join(known)}")
        if n == "restart":
            out.append(RestartAttack(halting=halting, queries=queries, restarts=restarts, adversary=adversary))
            continue
        if restarts != "per-top" and n != "halting":
            raise ValueError(f"--restarts {restarts} applies to the halting and restart attacks only")
        out.append(known[n](halting=halting, queries=queries, restarts=restarts))
    return out


def claim(game: str, cert: Certificate) -> dict[str, Any]:
    """What the planner claims for this game, and how firmly."""
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


IN_ROUND_ATTACKS = ("halting", "restart")
"""Query-game attacks whose view is the challenge round's other answers: the claim to beat is Theorem
Q's in-round step Q0 (docs/PRIVACY.md section 5), exact for that view, when the design closes both
channels."""


def in_round_claim(att: Attack, cert: Certificate) -> dict[str, Any] | None:
    """Theorem Q's in-round step for the attack's nominal round, if it is valid for the design."""
    if att.name not in IN_ROUND_ATTACKS:
        return None
    sched = att.scenario().schedule
    ir = in_round_step(sched.rounds[0], 1, sched.halting, sched.restarts)
    if not ir.valid:
        return None
    chain = (f"the whole query chain is certified at epsilon {cert.epsilon_queries:.4g}"
             if math.isfinite(cert.epsilon_queries) else
             f"the planner certifies no whole query chain for this small round ({cert.queries_reason})")
    return {"claimed_epsilon": ir.epsilon, "claimed_delta": ir.delta,
            "claimed_kind": "proven (in-round step Q0, Theorem Q)", "claimed_epsilon_proven": ir.epsilon,
            "claim_note": (f"claimed: Theorem Q's in-round step for halting={sched.halting}, "
                           f"restarts={sched.restarts}: ({ir.epsilon:.4g}, {ir.delta:.3g}); this game's view is "
                           f"the challenge round's other answers, exactly what the step bounds; {chain}")}


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
    """Per world: mean follow-up queries answered (noisy halting) or P(last query refused)."""
    out: dict[str, Any] = {}
    for w, sc in sorted(getattr(att, "last_scores", {}).items()):
        if att.halting == "noisy":
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


def run_audit(
    game: str,
    variant: str = "real",
    attacks: Sequence[str] | None = None,
    trials: int = 2000,
    seed: int = 0,
    *,
    halting: str = "paper",
    restarts: str = "per-top",
    adversary: WaitAndTest | None = None,
    confidence: float = 0.95,
    queries: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Play ``trials`` games (half per world) of each attack against ``variant``; return the audit
    record (the JSON object ``everlast audit --json`` prints)."""
    if trials < 6:
        raise ValueError("an audit needs at least 6 trials (3 per world)")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")
    v = get_variant(variant)
    chosen = resolve_attacks(game, attacks, halting, queries, restarts, adversary)
    per_world = trials // 2
    alpha = (1.0 - confidence) / len(chosen)
    t0 = time.perf_counter()
    results: list[dict[str, Any]] = []
    for att in chosen:
        sc = att.scenario()
        cert = certify(sc.schedule, sc.n, "tight", CLAIM_DELTA)
        cl = claim(game, cert)
        override = in_round_claim(att, cert) if game == "query" else None
        if override is None and isinstance(att, HaltingAttack):
            override = att.claim_override(cert, CLAIM_DELTA)
        if override is not None:
            cl = override
        if not math.isfinite(cl["claimed_epsilon"]) and isinstance(att, RestartAttack):
            cl = att.fallback_claim(cert, CLAIM_DELTA)
        t1 = time.perf_counter()
        s0 = att.play(v, 0, per_world, seed, progress)
        s1 = att.play(v, 1, per_world, seed, progress)
        b = audit_bound(s0, s1, delta=cl["claimed_delta"], alpha=alpha)
        r: dict[str, Any] = {
            **att.describe(), **cl, **b.to_json(),
            "caught": b.epsilon_lower_bound > cl["claimed_epsilon"],
            "max_bound_at_this_trial_count": max_bound_for_trials(b.n0, cl["claimed_delta"], alpha),
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
                fb = audit_bound(f0, f1, delta=cl["claimed_delta"], alpha=alpha)
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
                        "conditional chain (Claim E.6's in-round step is false; issue 8)")
    if game == "query" and str(top["claimed_kind"]).startswith("in-round"):
        warnings.append("claimed_epsilon is the in-round halting step only (the planner certifies no "
                        "query chain for this configuration): " + top["claim_note"])
    if variant != "real" and not any(r["caught"] for r in results):
        warnings.append(f"the broken variant {variant!r} was not caught by "
                        f"{', '.join(r['attack'] for r in results)}; designed to catch it: "
                        + ", ".join(f"{r['attack']} -> {', '.join(r['designed_to_catch'])}" for r in results))
    return {
        "game": game,
        "variant": variant,
        "attack": ",".join(r["attack"] for r in results),
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
        "halting": halting,
        "restarts": restarts,
        "variant_description": v.description,
        "seconds": time.perf_counter() - t0,
        "attacks": results,
        "warnings": warnings,
    }
