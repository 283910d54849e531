"""The training-set audit of the generic private learner (``engine.learner``; docs/privacy/learner.md).

The game (Definition 3.4, Flag = 1): two training sets that differ in one example, the *canary*.
Both hold k zeros at 0.0 and k ones at 1.0 (the pins); the canary sits at x_c in (0, 1) with label 0
(world 0) or 1 (world 1). The adversary may query anything, forever; it queries x_c once and scores
the answer (1 = guess world 1).

Why this view is optimal: substituting the canary's label changes the training errors of every
hypothesis by exactly -1 (if it labels x_c with 1) or +1 (if it labels x_c with 0), so the
likelihood ratio of any released hypothesis depends only on its label at x_c. The pins make every
hypothesis that errs on them negligible (weight e^{-eps k / 2} <= e^{-15}); among the rest, the cuts in
(0.0, x_c] label the canary 1 and those in (x_c, 1.0] label it 0. Their ratio r (a count of doubles)
sets P0[label 1] = r e^{-eps/2} / (r e^{-eps/2} + 1) and P1[label 1] = r / (r + e^{-eps/2}); their
ratio tends to e^eps as r -> 0 (the full epsilon, but rare events), and r is chosen to maximise the
bound the trial count can show (``best_ratio``). The audit bound cannot exceed eps for the real
learner (Theorem L1), up to its confidence.

Variants (built from the engine's inputs, as in ``variants.py``):
  * ``real``: ``PrivateLearner.fit`` as shipped;
  * ``plain-erm``: the exponential mechanism replaced by plain ERM (the first cut of the first
    cell with the fewest training errors): deterministic, so the canary's label is read off exactly.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.adversary_sim.audit.stats import (
    audit_bound,
    clopper_pearson_upper,
    epsilon_from_rates,
    max_bound_for_trials,
)
from everlast.engine.learner import Domain, Hypothesis, PrivateLearner
from everlast.engine.learner.cells import cells
from everlast.engine.learner.ordinals import ordinal, value


def pins(epsilon: float) -> int:
    return max(int(PIN_WEIGHT), math.ceil(PIN_WEIGHT / epsilon))

LEARNER_VARIANTS = ("real", "plain-erm", "overspend-levels")
ATTACK = "canary"
PIN_WEIGHT = 30.0
"""Copies of each pin: ceil(PIN_WEIGHT / eps) (at least PIN_WEIGHT), so a hypothesis that errs on a
pin carries weight <= e^{-15} relative to one that does not."""
TAG = 41
TREE_RATIO = 0.3
"""Trees: the canary's ratio r (measured: at epsilon 1, depth 3, P[label 1] ~0.21 in world 0 and ~0.31 in
world 1 here, against ~0.08 and ~0.14 at r = 0.1). No closed form gives the best r for trees."""
_DESCRIPTIONS = {
    "real": "the private learner as shipped (exponential mechanism, exact sampler)",
    "plain-erm": "the exponential mechanism replaced by plain ERM (no noise)",
    "overspend-levels": "trees whose every level spends the whole epsilon (a composition error: 2x at depth 2)",
}
Progress = Callable[[int], None]


def probabilities(epsilon: float, r: float) -> tuple[float, float]:
    """(P0, P1): the chance that the canary is labeled 1 in each world, the pins' errors neglected."""
    a = math.exp(-epsilon / 2.0)
    return r * a / (r * a + 1.0), r / (r + a)


def best_ratio(epsilon: float, eval_per_world: int, alpha: float) -> float:
    """The ratio r (cuts labeling the canary 1 : 0) maximising the bound expected at this trial count
    (Clopper-Pearson limits at the expected counts; either direction of the test)."""
    grid = np.exp(np.linspace(math.log(1e-3), math.log(1e3), 241))
    best, arg = -1.0, 1.0
    for r in grid:
        p0, p1 = probabilities(epsilon, float(r))
        fpr = float(clopper_pearson_upper(round(p0 * eval_per_world), eval_per_world, alpha / 2))
        fnr = float(clopper_pearson_upper(round((1 - p1) * eval_per_world), eval_per_world, alpha / 2))
        b = float(epsilon_from_rates(fpr, fnr, 0.0))
        if b > best:
            best, arg = b, float(r)
    return arg


def canary_point(r: float) -> float:
    """x_c with (#cuts in (0, x_c]) / (#cuts in (x_c, 1]) = r, the cuts counted as doubles."""
    one = ordinal(1.0)
    return value(max(1, min(one - 1, round(one * r / (1.0 + r)))))


def training_set(world: int, x_c: float, k: int) -> tuple[NDArray[np.float64], NDArray[np.int8]]:
    x = np.concatenate([np.zeros(k), np.ones(k), [x_c]])
    y = np.concatenate([np.zeros(k, np.int8), np.ones(k, np.int8), [world]]).astype(np.int8)
    return x, y


def exact_probability(world: int, x_c: float, epsilon: float, k: int) -> float:
    """P[the released hypothesis labels x_c with 1], summed over every cell of the mechanism
    (float log-weights: a display value, not part of any claim)."""
    x, y = training_set(world, x_c, k)
    dom = Domain.float64()
    c = cells(dom.positions(x), y, dom.lo_pos, dom.hi_pos)
    up = c.err_up[0]
    size = np.array([float(v) for v in c.sizes[0].tolist()])
    logw = np.log(np.where(size > 0, size, 1.0)) - epsilon * np.stack([up, c.n - up]) / 2.0
    logw[:, size == 0] = -np.inf
    w = np.exp(logw - logw.max())
    left = c.starts[0] <= ordinal(x_c)  # sign +1 cuts <= x_c label it 1; sign -1 cuts > x_c do
    return float((w[0][left].sum() + w[1][~left].sum()) / w.sum())


def plain_erm(x: NDArray[np.float64], y: NDArray[np.int8], epsilon: float) -> PrivateLearner:
    """The learner with its noise removed: the first cut of the first minimum-error cell (sign +1
    first), served through the same ``PrivateLearner`` (its *claim* is still epsilon)."""
    dom = Domain.float64()
    c = cells(dom.positions(x, "training"), y, dom.lo_pos, dom.hi_pos)
    up = c.err_up[0]
    err = np.concatenate([up, c.n - up]).astype(np.float64)
    sizes = np.concatenate([c.sizes[0], c.sizes[0]])
    err[sizes == 0] = np.inf
    k = int(np.argmin(err))
    j = k % (c.n + 1)
    cut = int(c.starts[0, j])
    h = Hypothesis("thresholds", cut, cut, 1 if k <= c.n else -1)
    return PrivateLearner({"name": "thresholds"}, dom, epsilon, int(x.size), h)


def play(variant: str, world: int, trials: int, seed: int, epsilon: float, x_c: float,
         progress: Progress | None = None, concept: str = "thresholds", depth: int = 3) -> NDArray[np.float64]:
    """Scores of ``trials`` games in ``world``: 1.0 when the canary is labeled 1. ``concept = "trees"``:
    the same game against depth-``depth`` trees on R^1 (docs/privacy/learner.md 8)."""
    from everlast.adversary_sim.audit.learner_trees import plain_erm_tree

    x, y = training_set(world, x_c, pins(epsilon))
    seeds = np.random.SeedSequence([seed, TAG, world]).generate_state(trials, dtype=np.uint64)
    out = np.empty(trials)
    trees = concept == "trees"
    probe = np.array([[x_c]]) if trees else np.array([x_c])
    for i in range(trials):
        if variant == "plain-erm":
            m = plain_erm_tree(x, y, epsilon, depth) if trees else plain_erm(x, y, epsilon)
        elif trees:
            spec = {"name": "trees", "d": 1, "depth": depth}
            m = PrivateLearner.fit(spec, x[:, None], y, epsilon=epsilon, seed=int(seeds[i]))
        else:
            m = PrivateLearner.fit("thresholds", x, y, epsilon=epsilon, seed=int(seeds[i]))
        out[i] = float(m.answer(probe).labels[0])
        if progress is not None:
            progress(1)
    return out


def _grid_audit(variant: str, trials: int, seed: int, epsilon: float, confidence: float,
                progress: Progress | None, t0: float) -> dict[str, Any]:
    """Trees: the grid game of ``learner_trees`` (depth 2 on a 3-point grid, an event from the exact law)."""
    from everlast.adversary_sim.audit.learner_trees import GRID, GRID_BASE, GRID_DEPTH, GRID_PER_WORLD, run_grid_audit

    per_world = max(trials // 2, GRID_PER_WORLD)
    g = run_grid_audit(variant, per_world, seed, epsilon, confidence, progress)
    b = float(g["epsilon_lower_bound"])
    caught = b > epsilon
    claim = {"claimed_epsilon": epsilon, "claimed_delta": 0.0, "claimed_kind": "proven (Theorem T1)",
             "claimed_epsilon_proven": epsilon,
             "claim_note": "one exponential mechanism per node, sequential across levels: (eps, 0)-DP; "
                           "docs/privacy/learner.md 8"}
    res: dict[str, Any] = {
        "attack": "grid-event", "game": "training",
        "summary": (f"depth-{GRID_DEPTH} trees on a {len(GRID)}-point grid; neighbouring training sets differ in one "
                    f"example's label; event: {g['event_size']} trees fixed from the claimed mechanism's exact law "
                    "before any fit; bound: ln(CP lower / CP upper) of the event's rates"),
        "designed_to_catch": ["overspend-levels"], **claim, "epsilon_lower_bound": b, "caught": caught,
        "fpr": g["counts"][1 - g["event_favours_world"]] / per_world,
        "fnr": 1.0 - g["counts"][g["event_favours_world"]] / per_world,
        "observed": {"event_counts_world0_world1": g["counts"], "fits_per_world": per_world,
                     "event_favours_world": g["event_favours_world"]},
        "config": {"mechanism": "private-learner", "concept": "trees", "domain": f"grid of {len(GRID)} points",
                   "n": len(GRID_BASE) + 1, "epsilon": epsilon, "depth": GRID_DEPTH, "d": 1},
    }
    warnings = []
    if variant != "real" and not caught:
        warnings.append(f"the broken variant {variant!r} was not caught by the grid game")
    if variant == "real" and caught:
        warnings.append("the real trees' bound exceeds their claim: a privacy bug or a confidence miss")
    return {
        "game": "training", "variant": variant, "mechanism": "private-learner", "concept": "trees",
        "attack": "grid-event", "claimed_epsilon": epsilon, "claimed_delta": 0.0,
        "claimed_kind": claim["claimed_kind"], "claimed_epsilon_proven": epsilon, "epsilon_lower_bound": b,
        "confidence": confidence, "trials": 2 * per_world, "trials_per_world": per_world, "caught": caught,
        "seed": seed, "variant_description": _DESCRIPTIONS[variant], "seconds": time.perf_counter() - t0,
        "attacks": [res], "warnings": warnings,
    }


def run_learner_audit(variant: str = "real", trials: int = 2000, seed: int = 0, *, epsilon: float = 1.0,
                      confidence: float = 0.95, progress: Progress | None = None, concept: str = "thresholds",
                      depth: int = 3) -> dict[str, Any]:
    """Play the canary game ``trials`` times (half per world) and bound epsilon; the record has the
    shape of ``adversary_sim.audit.run_audit``'s (``everlast audit --mechanism private-learner --json``)."""
    if variant not in LEARNER_VARIANTS:
        raise ValueError(f"unknown learner variant {variant!r}; known: {', '.join(LEARNER_VARIANTS)}")
    if trials < 6:
        raise ValueError("an audit needs at least 6 trials (3 per world)")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie in (0, 1)")
    t0 = time.perf_counter()
    if variant == "overspend-levels" and concept != "trees":
        raise ValueError("the overspend-levels variant is a tree's (--concept trees)")
    if concept == "trees" and variant != "plain-erm":
        return _grid_audit(variant, trials, seed, epsilon, confidence, progress, t0)
    per_world = trials // 2
    alpha = 1.0 - confidence
    n_eval = per_world - round(per_world / 3.0)
    r = TREE_RATIO if concept == "trees" else best_ratio(epsilon, n_eval, alpha)
    x_c = canary_point(r)
    if concept not in ("thresholds", "trees"):
        raise ValueError("the learner audit plays thresholds or trees")
    trees = concept == "trees"
    s0 = play(variant, 0, per_world, seed, epsilon, x_c, progress, concept, depth)
    s1 = play(variant, 1, per_world, seed, epsilon, x_c, progress, concept, depth)
    b = audit_bound(s0, s1, delta=0.0, alpha=alpha)
    k = pins(epsilon)
    expected: dict[str, Any]
    if trees:
        expected = {"note": "no closed form for trees: the canary's ratio is TREE_RATIO", "ratio": r}
    else:
        p0, p1 = exact_probability(0, x_c, epsilon, k), exact_probability(1, x_c, epsilon, k)
        expected = {"p_label1_world0": p0, "p_label1_world1": p1,
                    "epsilon_if_infinite_trials": math.log(p1 / p0), "ratio": r}
    theorem = "Theorem T1" if trees else "Theorem L1"
    claim = {"claimed_epsilon": epsilon, "claimed_delta": 0.0, "claimed_kind": f"proven ({theorem})",
             "claimed_epsilon_proven": epsilon,
             "claim_note": ("one exponential mechanism per node, parallel within a level, sequential across levels: "
                            "(eps, 0)-DP; docs/privacy/learner.md 8") if trees else
                           "the exponential mechanism with sensitivity 1 is (eps, 0)-DP; docs/privacy/learner.md 2"}
    caught = b.epsilon_lower_bound > epsilon
    res: dict[str, Any] = {
        "attack": ATTACK, "game": "training",
        "summary": ("neighbouring training sets differ in the canary's label (k pins at 0.0 and 1.0 each); "
                    "query the canary; score = its label"),
        "designed_to_catch": ["plain-erm"],
        **claim, **b.to_json(), "caught": caught,
        "max_bound_at_this_trial_count": max_bound_for_trials(b.n0, 0.0, alpha),
        "expected": expected,
        "observed": {"p_label1_world0": float(s0.mean()), "p_label1_world1": float(s1.mean())},
        "config": {"mechanism": "private-learner", "concept": concept, "domain": "float64",
                   "n": 2 * k + 1, "epsilon": epsilon, "pins": k, **({"depth": depth, "d": 1} if trees else {})},
    }
    warnings = []
    if variant != "real" and not caught:
        warnings.append(f"the broken variant {variant!r} was not caught by the canary attack")
    if variant == "real" and caught:
        warnings.append("the real learner's bound exceeds its claim: a privacy bug or a confidence miss")
    return {
        "game": "training", "variant": variant, "mechanism": "private-learner", "concept": concept, "attack": ATTACK,
        "claimed_epsilon": epsilon, "claimed_delta": 0.0, "claimed_kind": claim["claimed_kind"],
        "claimed_epsilon_proven": epsilon, "epsilon_lower_bound": b.epsilon_lower_bound,
        "confidence": confidence, "trials": 2 * per_world, "trials_per_world": per_world, "caught": caught,
        "seed": seed, "variant_description": _DESCRIPTIONS[variant], "seconds": time.perf_counter() - t0,
        "attacks": [res], "warnings": warnings,
    }
