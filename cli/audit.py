"""``everlast audit``: play the privacy game of Definition 3.4 / Figure 1 many times and print an
empirical lower bound on epsilon beside the epsilon the planner claims (docs/ADVERSARY.md); or
(``--game availability``) play the availability scenario -- a boundary prober and an i.i.d. client on
one model -- through a real daemon on the embedded broker (``adversary_sim.availability_kafka``)."""

from __future__ import annotations

import math
from typing import Any

import click

from everlast.adversary_sim.audit.games import ATTACKS, DESIGNS, PLANNED_ATTACKS
from everlast.adversary_sim.audit.learner import ATTACK as LEARNER_ATTACK
from everlast.adversary_sim.audit.learner import LEARNER_VARIANTS
from everlast.adversary_sim.audit.runner import GAMES, run_audit
from everlast.adversary_sim.audit.variants import VARIANTS
from everlast.cli.common import emit_json, progress

_ATTACK_NAMES = sorted({a for g in ATTACKS.values() for a in g} | {a for g in PLANNED_ATTACKS.values() for a in g}
                       | {LEARNER_ATTACK})
_VARIANT_NAMES = [*VARIANTS, *(v for v in LEARNER_VARIANTS if v not in VARIANTS)]


@click.command("audit")
@click.option("--game", type=click.Choice([*GAMES, "availability"]), required=True,
              help="training: neighbouring training sets; query: two query streams differing in one query; "
                   "availability: the boundary prober (client A) and an i.i.d. client (B) at the same time on the "
                   "compose sample's model, through `everlast serve` on the embedded broker (per-client quotas).")
@click.option("--quotas/--no-quotas", "quotas", default=True, show_default=True,
              help="--game availability: run the sample model with its per-client quotas, or without them (the "
                   "prober then halts the model for both clients).")
@click.option("--trials", type=click.IntRange(min=6), default=2000, show_default=True,
              help="Games played in total (half in each world).")
@click.option("--mechanism", type=click.Choice(["generic-bbl", "private-learner"]), default="generic-bbl",
              show_default=True, help="The mechanism audited; private-learner: the training game's canary "
                                      "attack against the generic private learner (docs/privacy/learner.md 6).")
@click.option("--variant", type=click.Choice(_VARIANT_NAMES), default="real", show_default=True,
              help="The engine as shipped, with one safeguard removed, or (charged-c) with a broken claim: "
                   "to show the audit can see it; plain-erm: the private learner without its noise; "
                   "overspend-levels: trees whose every level spends the whole epsilon.")
@click.option("--attack", "attack", type=click.Choice(["default", "all", *_ATTACK_NAMES]), default="default",
              show_default=True,
              help="Adversary: training game flip|relabel (default both), query game chain (default)|halting|restart.")
@click.option("--design", "design_name", type=click.Choice(sorted(DESIGNS)), default=None,
              help="The design audited: target-charged (the product's default) or paper (not query-private). "
                   "Default: target-charged, or the one --halting/--restarts name.")
@click.option("--halting", type=click.Choice(["noisy", "paper", "never"]), default=None,
              help="Halting policy of the audited design: noisy (target-charged) or paper; 'never' is retired.")
@click.option("--restarts", type=click.Choice(["none", "per-top", "private", "stateless"]), default=None,
              help="Threshold-noise restarts of the audited design: none (target-charged) or per-top (paper); "
                   "'private' and 'stateless' are retired.")
@click.option("--wait-run", "wait_run", type=click.IntRange(min=1), default=18, show_default=True,
              help="Restart attack: run of 0-labels m to wait for before the differing query.")
@click.option("--probe-offset", "probe_offset", type=float, default=None,
              help="Restart attack: probe offset z (count lo - z b; b = the threshold noise's scale 2/eps' "
                   "(paper) or the per-query noise's 1/eps0 (target-charged)). Default: -1 (paper), 2 "
                   "(target-charged).")
@click.option("--theta", type=click.IntRange(min=1), default=5, show_default=True,
              help="Restart attack: guess world 0 iff N2 >= theta.")
@click.option("--queries", type=click.IntRange(min=1), default=None,
              help="Probe queries per round (default: the round's R); restart attack: the most probes spent "
                   "waiting.")
@click.option("--confidence", type=click.FloatRange(0.5, 1.0, max_open=True), default=0.95, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--epsilon", type=click.FloatRange(min=0.0, min_open=True), default=1.0, show_default=True,
              help="The private learner's epsilon (--mechanism private-learner only).")
@click.option("--concept", type=click.Choice(["thresholds", "trees"]), default="thresholds", show_default=True,
              help="The private learner's class audited (--mechanism private-learner only); trees: on R^1.")
@click.option("--depth", type=click.IntRange(1, 8), default=3, show_default=True, help="Depth of the trees.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def audit(game: str, trials: int, mechanism: str, variant: str, attack: str, design_name: str | None,
          halting: str | None, restarts: str | None, wait_run: int, probe_offset: float | None, theta: int,
          queries: int | None, confidence: float, seed: int, epsilon: float, concept: str, depth: int,
          as_json: bool, quotas: bool) -> None:
    """Empirical privacy audit: epsilon lower bound (Clopper-Pearson) vs the planner's claim.

    With no design option it audits the product's default design (target-charged). --game availability
    plays the availability scenario instead (no privacy bound: who was answered)."""
    if game == "availability":
        _audit_availability(quotas, seed, as_json)
        return
    if mechanism == "private-learner":
        _audit_learner(game, trials, variant, attack, confidence, seed, epsilon, as_json, concept, depth)
        return
    if concept != "thresholds":
        raise click.UsageError("--concept applies to --mechanism private-learner only")
    if variant not in VARIANTS:
        raise click.UsageError(f"--variant {variant} applies to --mechanism private-learner only")
    from everlast.adversary_sim.audit.games import AUDIT_ROUNDS
    from everlast.adversary_sim.audit.restart import WaitAndTest
    from everlast.adversary_sim.audit.runner import design_from, resolve_attacks

    try:
        design = design_from(design_name, halting, restarts)
        z = AUDIT_ROUNDS[design].probe_offset if probe_offset is None else probe_offset
        adversary = WaitAndTest(m=wait_run, z=z, theta=theta)
        n_att = len(resolve_attacks(game, [attack], design, queries, adversary, variant))
    except NotImplementedError as exc:
        raise click.ClickException(str(exc)) from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with progress(n_att * 2 * (trials // 2), f"audit {game}/{variant}/{design.name}", unit="game") as bar:
        out = run_audit(game, variant, [attack], trials, seed, design=design, adversary=adversary,
                        confidence=confidence, queries=queries, progress=bar.update)
    if as_json:
        emit_json(out)
        return
    _print_human(out)


def _audit_learner(game: str, trials: int, variant: str, attack: str, confidence: float, seed: int,
                   epsilon: float, as_json: bool, concept: str = "thresholds", depth: int = 3) -> None:
    from everlast.adversary_sim.audit.learner import run_learner_audit

    if game != "training":
        raise click.UsageError("the private learner's queries are 0-DP by construction; audit it with --game training")
    if variant not in LEARNER_VARIANTS:
        raise click.UsageError(f"--mechanism private-learner runs the variants {', '.join(LEARNER_VARIANTS)}")
    if attack not in ("default", "all", LEARNER_ATTACK):
        raise click.UsageError(f"--mechanism private-learner runs the {LEARNER_ATTACK} attack")
    from everlast.adversary_sim.audit.learner_trees import GRID_PER_WORLD

    grid = concept == "trees" and variant != "plain-erm"  # the trees' grid game plays at least its default
    total = 2 * (max(trials // 2, GRID_PER_WORLD) if grid else trials // 2)
    with progress(total, f"audit learner/{concept}/{variant}", unit="game") as bar:
        out = run_learner_audit(variant, trials, seed, epsilon=epsilon, confidence=confidence, progress=bar.update,
                                concept=concept, depth=depth)
    if as_json:
        emit_json(out)
    else:
        _print_human(out)


def _audit_availability(quotas: bool, seed: int, as_json: bool) -> None:
    import asyncio

    from everlast.adversary_sim.availability_kafka import COMPOSE, run_availability

    if not (COMPOSE / "everlast.toml").is_file():
        raise click.ClickException(f"the compose sample is not at {COMPOSE} (run from a checkout of the repository)")
    with progress(15_000, "audit availability", unit="q") as bar:
        out = asyncio.run(run_availability(quotas=quotas, seed=seed, progress=bar.update))
    if as_json:
        emit_json(out)
        return
    q = out["quotas"]
    click.echo(f"availability audit: model {out['model']} (the compose sample), per-client quotas "
               + (f"on (share {q['share']:g}, eps_q {q['eps']:g})" if q else "off") + f", seed {out['seed']}")
    click.echo(f"{'client':>8} {'sent':>7} {'ok':>7} {'refused':>8}  reasons")
    for name, c in out["clients"].items():
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(c["reasons"].items())) or "-"
        click.echo(f"{name:>8} {c['sent']:>7} {c['ok']:>7} {c['refused']:>8}  {reasons}")
    click.echo(f"round paused: {'yes' if out.get('paused') else 'no'}; "
               f"model halted: {'yes' if out['halted'] else 'no'} (round {out['round']}); quota fired for: "
               f"{', '.join(out['quota_fired']) or 'nobody'}")
    if out["burn_noisy_tops"] is not None:
        click.echo(f"burn-rate signal: ~{out['burn_noisy_tops']} tops (noisy) in the round's first "
                   f"{out['burn_queries']:,} queries; halt budget c = {out['halt_budget']:,}, halting threshold "
                   f"c0 = {out['halt_threshold']:,}")


def _fmt(x: Any) -> str:
    return "inf" if isinstance(x, float) and math.isinf(x) else f"{x:.3f}"


def _print_human(out: dict[str, Any]) -> None:
    what = f"design {out['design']}" if "design" in out else f"mechanism {out.get('mechanism', 'generic-bbl')}"
    if "concept" in out:
        what += f", concept {out['concept']}"
    click.echo(f"audit: {out['game']} game, {what}, variant {out['variant']}, {out['trials']} "
               f"games ({out['trials_per_world']} per world), confidence {out['confidence']:.2f}")
    click.echo(f"{'attack':>9} {'claimed':>10} {'kind':>12} {'lower bound':>12} {'FPR':>7} {'FNR':>7}  verdict")
    for r in out["attacks"]:
        verdict = "CAUGHT (bound above claim)" if r["caught"] else "consistent with the claim"
        click.echo(f"{r['attack']:>9} {_fmt(r['claimed_epsilon']):>10} {r['claimed_kind']:>12} "
                   f"{_fmt(r['epsilon_lower_bound']):>12} {r['fpr']:>7.4f} {r['fnr']:>7.4f}  {verdict}")
    for w in out["warnings"]:
        click.echo(f"warning: {w}")
