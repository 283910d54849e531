"""``everlast plan``: from privacy/accuracy targets to a schedule and the data it needs.

The numbers and the chain come from ``engine.planner`` (see docs/PRIVACY.md); this module only
parses options and prints. With ``--json`` exactly one JSON object goes to stdout.

The design (``--halting``, ``--restarts``) defaults to the cheapest one whose query privacy is
proven (noisy halting + private restarts, issue 8). Unless ``--no-designs``, every design is also
planned for the same targets and its query chain and data cost are reported (``designs`` in the
JSON).

``--mechanism`` compares mechanisms (``engine.planner.mechanisms``): ``private-learner`` plans only
the generic private learner (docs/PRIVACY.md section 16; its JSON has the same contract keys),
``all`` adds every mechanism's certificate and data cost (``mechanisms``, ``cheapest_mechanism``)
to GenericBBL's plan.
"""

from __future__ import annotations

import click

from cli.common import emit_json
from cli.params import Count
from engine.planner import Achievable, PlanInfeasible, Targets, best_epsilon, designs
from engine.planner import mechanisms as mech
from engine.planner import plan as make_plan
from engine.planner.report import infeasible_json, plan_json, plan_text


@click.command("plan")
@click.option("--concept", type=click.Choice(["thresholds", "intervals", "stumps", "finite"]),
              default="thresholds", show_default=True,
              help="Concept class: VC 1 (thresholds), 2 (intervals), a bound from --d (stumps), "
                   "--vc-dim (finite).")
@click.option("--epsilon", type=click.FloatRange(min=0.0, min_open=True), default=1.0,
              show_default=True, help="Target epsilon (training set; queries conditionally).")
@click.option("--delta", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
              default=1e-6, show_default=True, help="Target delta.")
@click.option("--alpha", type=click.FloatRange(0.0, 0.5, min_open=True, max_open=True),
              default=0.1, show_default=True, help="Accuracy target (alpha_i = alpha / 2^i).")
@click.option("--beta", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
              default=0.05, show_default=True, help="Failure probability target.")
@click.option("--accounting", type=click.Choice(["tight", "paper"]), default="tight",
              show_default=True, help="paper: the paper's formulas and lemmas (its n is reported, "
                                      "not run); tight: BBG amplification, exact composition.")
@click.option("--halts", type=click.Choice(["paper", "split-votes"]), default="paper",
              show_default=True, help="Halt budget c_i (accuracy only): paper = min(R_i, 64 "
                                      "alpha_i R_i) (uncapped under --accounting paper); "
                                      "split-votes = k R_i p_top (thresholds).")
@click.option("--k", "k", type=click.FloatRange(min=1.0), default=2.0, show_default=True,
              help="Safety factor of the split-votes halt budget.")
@click.option("--d", "dim", type=click.IntRange(min=1), default=1, show_default=True,
              help="Dimension (stumps): VC <= max{m: 2^m <= 2 + 2d(m-1)}.")
@click.option("--vc-dim", type=click.IntRange(min=1), default=None,
              help="VC dimension of the finite class (required for --concept finite).")
@click.option("--rounds", type=click.IntRange(min=2, max=40), default=12, show_default=True,
              help="Rounds listed in the schedule (the last repeats).")
@click.option("--lambda-log", type=click.Choice(["log2", "ln"]), default="log2", show_default=True,
              help="Log base inside lambda_i (Theorem A.2; accuracy only).")
@click.option("--halting", type=click.Choice(["noisy", "never", "paper"]), default=None,
              help="Halting policy (default: noisy; the paper accounting: paper). noisy = an "
                   "AboveThreshold test on the round's tops; never = c > R; paper = fail at c tops "
                   "(not query-private when c <= R).")
@click.option("--restarts", type=click.Choice(["private", "stateless", "per-top"]), default=None,
              help="Threshold-noise restarts (default: private; the paper accounting: per-top). "
                   "private = an AboveThreshold test on the block's tops; stateless = fresh noise "
                   "per query; per-top = the paper's (not query-private).")
@click.option("--eps-h", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="eps_h of the noisy halting test [default: 0.01].")
@click.option("--eps-r", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="eps_r of the private restart test [default: chosen to minimise n].")
@click.option("--lemma-s", is_flag=True,
              help="Conditional accounting: one threshold noise per round charged with the "
                   "UNREVIEWED Lemma S (private restarts only); every number is then conditional.")
@click.option("--designs/--no-designs", "with_designs", default=True, show_default=True,
              help="Also plan every (halting, restarts) design and report its query chain and n.")
@click.option("--n", "n", type=Count(), default=None,
              help="Training-set size available (e.g. 5000 or 1e9): also report the best epsilon it certifies.")
@click.option("--mechanism", type=click.Choice(["generic-bbl", "private-learner", "all"]), default="generic-bbl",
              show_default=True, help="GenericBBL, the generic private learner (finite float domain; "
                                      "docs/PRIVACY.md 16), or both side by side with the cheapest named.")
@click.option("--domain-size", "domain_size", type=Count(), default=None,
              help="Private learner: points of the declared domain (grid or range) [default: all finite "
                   "float64, 2^64 - 2^53 - 1].")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def plan_cmd(concept: str, epsilon: float, delta: float, alpha: float, beta: float,
             accounting: str, halts: str, k: float, dim: int, vc_dim: int | None, rounds: int,
             lambda_log: str, halting: str | None, restarts: str | None, eps_h: float | None,
             eps_r: float | None, lemma_s: bool, with_designs: bool, n: int | None,
             mechanism: str, domain_size: int | None, as_json: bool) -> None:
    """Plan a schedule for privacy/accuracy targets and certify it step by step."""
    if concept == "finite" and vc_dim is None and mechanism != "private-learner":
        raise click.UsageError("--concept finite needs --vc-dim")
    targets = Targets(
        epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, concept=concept, d=dim,
        vc_dim=vc_dim, accounting=accounting,  # type: ignore[arg-type]
        halts=halts, k=k, rounds=rounds, lambda_log=lambda_log,  # type: ignore[arg-type]
        halting=halting, restarts=restarts,  # type: ignore[arg-type]
        eps_h=eps_h, eps_r=eps_r, block_bound="lemma-s" if lemma_s else "pure",
    )
    size = domain_size if domain_size is not None else mech.FLOAT64_POINTS
    if mechanism == "private-learner":
        cost = mech.learner_cost(targets, n, size)
        if as_json:
            emit_json(mech.learner_json(targets, cost))
        else:
            click.echo(mech.learner_text(targets, cost))
        return
    achievable: Achievable | None = best_epsilon(n, targets) if n is not None else None
    try:
        p = make_plan(targets)
    except PlanInfeasible as exc:
        others = ((mech.bbl_infeasible(targets, str(exc), n, achievable), mech.learner_cost(targets, n, size))
                  if mechanism == "all" else None)
        if as_json:
            out = infeasible_json(targets, str(exc), achievable)
            if others is not None:
                out.update({"mechanism": "all", **mech.comparison_json(others)})
            emit_json(out)
        else:
            click.echo(f"The targets cannot be met by any schedule: {exc}")
            if achievable is not None:
                click.echo(f"n = {n}: best epsilon = {achievable.epsilon:g} {achievable.reason}")
            if others is not None:
                click.echo("\nMechanisms (same targets):\n" + mech.comparison_text(others))
        return
    costs = designs(targets) if with_designs else None
    compared = (mech.compare(targets, mech.MECHANISMS, n, size, bbl_plan=p, bbl_achievable=achievable)
                if mechanism == "all" else None)
    if as_json:
        out = plan_json(p, achievable, costs)
        if compared is not None:
            out.update({"mechanism": "all", **mech.comparison_json(compared)})
        emit_json(out)
    else:
        click.echo(plan_text(p, achievable, costs))
        if compared is not None:
            click.echo("\nMechanisms (same targets; docs/PRIVACY.md sections 3-9 and 16):\n"
                       + mech.comparison_text(compared))


plan = plan_cmd
"""The click command (``from cli.plan import plan``)."""
