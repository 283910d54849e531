"""``everlast plan``: from privacy/accuracy targets to a schedule and the data it needs.

The numbers and the chain come from ``engine.planner`` (see docs/PRIVACY.md); this module only
parses options and prints. With ``--json`` exactly one JSON object goes to stdout.

The design (``--design``, or ``--halting`` and ``--restarts``) defaults to target-charged, the
only one whose query privacy is proven and the cheapest (engine.design); the paper's design is
planned on request. Retired designs and their flags (``--eps-r``, ``--lemma-s``) are refused with
the reason (engine.design.RETIRED). Unless ``--no-designs``, both designs are also planned for the
same targets and their query chain and data cost are reported (``designs`` in the JSON).

``--mechanism`` compares mechanisms (``engine.planner.mechanisms``): ``private-learner`` plans only
the generic private learner (docs/privacy/learner.md; its JSON has the same contract keys),
``all`` adds every mechanism's certificate and data cost (``mechanisms``, ``cheapest_mechanism``)
to GenericBBL's plan. The learner's n follows ``--guarantee``
(default validated, as the daemon's ``learner.guarantee``: plan = serve; the certificate itself is
known only after the fit).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from everlast.cli.common import emit_json, progress
from everlast.cli.params import Count
from everlast.daemon import plan_cache
from everlast.daemon.privacy import default_burn
from everlast.engine import burn as burn_defaults
from everlast.engine.burn import Burn
from everlast.engine.design import DEFAULT, PAPER, RETIRED, Design
from everlast.engine.errors import InvalidSchedule
from everlast.engine.planner import Achievable, PlanInfeasible, Targets, best_epsilon, designs
from everlast.engine.planner import mechanisms as mech
from everlast.engine.planner import plan as make_plan
from everlast.engine.planner.api import LEVERS, Plan, ablation
from everlast.engine.planner.report import infeasible_json, plan_json, plan_text
from everlast.engine.quotas import Quotas

HALTING = ("noisy", "paper")
RESTARTS = ("none", "per-top")
RETIRED_FLAGS = {
    "eps_r": "--eps-r: " + RETIRED["private"],
    "lemma_s": "--lemma-s: Lemma S belonged to the private-restarts design (one threshold noise per "
               "round); " + RETIRED["private"],
}


def _one_of(allowed: tuple[str, ...]) -> Any:
    """A click callback: one of ``allowed``; a retired value is refused with the retirement's reason."""

    def check(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is None or value in allowed:
            return value
        if value in RETIRED:
            raise click.BadParameter(RETIRED[value])
        raise click.BadParameter(f"{value[:20]!r} is not one of {', '.join(allowed)}")

    return check


def _design_fields(design: str | None, halting: str | None, restarts: str | None) -> tuple[str | None, str | None]:
    """(halting, restarts) for Targets. --design names both and must agree with --halting/--restarts;
    either of those alone names the one design that has it."""
    if design is not None:
        named = Design.named(design).to_dict()
        for flag, given in (("halting", halting), ("restarts", restarts)):
            if given is not None and given != named[flag]:
                raise click.UsageError(f"--design {design} runs {flag} {named[flag]!r}, not {given!r}")
        return named["halting"], named["restarts"]
    if (halting is None) == (restarts is None):
        return halting, restarts  # neither (the default design) or both (Design.parse checks the pair)
    for d in (DEFAULT, PAPER):
        if halting in (None, d.halting.value) and restarts in (None, d.restarts.value):
            return d.halting.value, d.restarts.value
    return halting, restarts


def _pair(value: str | None, flag: str, make: Any) -> Any:
    """A flag of the form A:B made into its setting, or a usage error that says the form."""
    if value is None:
        return None
    try:
        a, b = value.split(":")
        return make(a, b)
    except (ValueError, InvalidSchedule) as exc:
        raise click.UsageError(f"{flag} takes A:B (e.g. {'0.2:0.05' if flag == '--quotas' else '100000:0.01'}): "
                               f"{exc if isinstance(exc, InvalidSchedule) else 'not two numbers'}") from None


@click.command("plan")
@click.option("--concept", type=click.Choice(["thresholds", "intervals", "stumps", "trees", "finite"]),
              default="thresholds", show_default=True,
              help="Concept class: VC 1 (thresholds), 2 (intervals), a bound from --d (stumps), "
                   "--vc-dim (finite); trees (depth --depth on R^--d): --mechanism private-learner only.")
@click.option("--depth", type=click.IntRange(1, 8), default=3, show_default=True,
              help="Depth of the trees (--concept trees).")
@click.option("--guarantee", type=click.Choice(mech.GUARANTEES), default="validated", show_default=True,
              help="Private learner: the accuracy bound its n_required, epsilon at --n, meets_targets_at_n and the "
                   "comparison follow, as the daemon's learner.guarantee (both bounds are printed): agnostic (an "
                   "excess over a named comparator, any distribution), realizable (labels from the class) or validated "
                   "(the daemon's default: the released model's error measured privately on a held-out quarter; "
                   "its n_required makes the certificate's margin <= alpha at any holdout error).")
@click.option("--epsilon", type=click.FloatRange(min=0.0, min_open=True), default=1.0,
              show_default=True, help="Target epsilon (training set; queries conditionally).")
@click.option("--delta", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
              default=1e-6, show_default=True, help="Target delta.")
@click.option("--alpha", type=click.FloatRange(0.0, 0.5, min_open=True, max_open=True),
              default=0.1, show_default=True,
              help="Accuracy target: the error every answer is proven to meet (target-charged, Theorem A); "
                   "the paper's alpha (alpha_i = alpha / 2^i, Theorem 5.1) for the paper's design.")
@click.option("--accuracy", "reading", type=click.Choice(["per-query", "every-answer"]), default="per-query",
              show_default=True,
              help="How alpha is read (docs/privacy/genericbbl.md 6.3): per-query = each answer's hypothesis "
                   "with its own noise (the standard notion of private prediction); every-answer = "
                   "Definition 3.1 literally, a union bound over each round (more data).")
@click.option("--ablation/--no-ablation", "with_ablation", default=True, show_default=True,
              help="Also plan with each data-cost lever switched off in turn (what each lemma buys).")
@click.option("--quotas", "quotas", default=None, metavar="SHARE:EPS",
              help="Per-client top quotas the schedule runs (e.g. 0.2:0.05: a client over 20%% of the halting "
                   "threshold is refused; its test costs eps_q = 0.05 per query, Theorem Q+).")
@click.option("--burn", "burn", default=None, metavar="WINDOW:EPS|off",
              help="The private burn-rate signal (e.g. 100000:0.01: a noisy top count per 100,000 queries, "
                   "eps_b = 0.01 per query, Theorem Q+); off: none. Default: the one `everlast serve` runs for "
                   "planned targets (eps_b = 5%% of epsilon within [0.01, 0.5], four windows per round 1).")
@click.option("--engine-memory", "engine_memory", type=Count(), default=None,
              help="Memory of one engine, in GiB, for the per-round capacity table [default: 16].")
@click.option("--beta", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True),
              default=0.05, show_default=True, help="Failure probability target.")
@click.option("--accounting", type=click.Choice(["tight", "paper"]), default="tight",
              show_default=True, help="paper: the paper's formulas and lemmas (its n is reported, "
                                      "not run); tight: BBG amplification, exact composition.")
@click.option("--halts", type=click.Choice(["paper", "split-votes"]), default="split-votes",
              show_default=True, help="Halt budget c_i (accuracy only): split-votes = k R_i p_top "
                                      "(thresholds; docs/PRIVACY.md); paper = min(R_i, 64 alpha_i "
                                      "R_i), ~1e4 times the real top rate (uncapped under "
                                      "--accounting paper).")
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
@click.option("--design", "design", type=click.Choice(["target-charged", "paper"]), default=None,
              help="The design (default: target-charged; the paper accounting: paper). target-charged "
                   "= fresh noise per query, noisy halting (query privacy proven); paper = "
                   "BetweenThresholds restarted at every top, halting at c tops (NOT query-private).")
@click.option("--halting", default=None, callback=_one_of(HALTING), metavar="[noisy|paper]",
              help="Halting policy (another way to name the design): noisy = an AboveThreshold test "
                   "on the round's tops (target-charged); paper = fail at c tops.")
@click.option("--restarts", default=None, callback=_one_of(RESTARTS), metavar="[none|per-top]",
              help="Threshold noise (another way to name the design): none = fixed thresholds, fresh "
                   "noise per query (target-charged); per-top = the paper's.")
@click.option("--eps-h", type=click.FloatRange(min=0.0, min_open=True), default=None,
              help="eps_h of the noisy halting test [default: chosen per plan from 0.01, 0.03, 0.1, 0.3, 1 "
                   "(below epsilon/4), by the estimated n].")
@click.option("--eps-r", type=float, default=None,
              help="Retired with private restarts (refused with the reason).")
@click.option("--lemma-s", is_flag=True, help="Retired with private restarts (refused with the reason).")
@click.option("--designs/--no-designs", "with_designs", default=True, show_default=True,
              help="Also plan both designs (target-charged, paper) and report their query chain and n.")
@click.option("--n", "n", type=Count(), default=None,
              help="Training-set size available (e.g. 5000 or 1e9): also report the best epsilon it certifies.")
@click.option("--mechanism", type=click.Choice(["generic-bbl", "private-learner", "all"]), default="generic-bbl",
              show_default=True, help="GenericBBL, the generic private learner (finite float domain; "
                                      "docs/privacy/learner.md), or both side by side with the cheapest named.")
@click.option("--domain-size", "domain_size", type=Count(), default=None,
              help="Private learner: points of the declared domain (grid or range) [default: all finite "
                   "float64, 2^64 - 2^53 - 1].")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
def plan_cmd(concept: str, depth: int, epsilon: float, delta: float, alpha: float, beta: float,
             guarantee: str,
             accounting: str, halts: str, k: float, dim: int, vc_dim: int | None, rounds: int,
             lambda_log: str, design: str | None, halting: str | None, restarts: str | None,
             eps_h: float | None, eps_r: float | None, lemma_s: bool, with_designs: bool,
             n: int | None, mechanism: str, domain_size: int | None, as_json: bool, reading: str,
             with_ablation: bool, engine_memory: int | None, quotas: str | None, burn: str | None) -> None:
    """Plan a schedule for privacy/accuracy targets and certify it step by step."""
    # searched schedules are kept on disk (the claims are re-derived): $EVERLAST_PLAN_CACHE, or off
    cache = click.get_current_context().with_resource(plan_cache.active())
    if concept == "finite" and vc_dim is None and mechanism != "private-learner":
        raise click.UsageError("--concept finite needs --vc-dim")
    if concept == "trees" and mechanism != "private-learner":
        raise click.UsageError("--concept trees is served by the private learner only: add --mechanism private-learner")
    for flag, given in (("eps_r", eps_r is not None), ("lemma_s", lemma_s)):
        if given:
            raise click.UsageError(RETIRED_FLAGS[flag])
    halting, restarts = _design_fields(design, halting, restarts)
    targets = Targets(
        epsilon=epsilon, delta=delta, alpha=alpha, beta=beta, concept=concept, d=dim,
        vc_dim=vc_dim, accounting=accounting,  # type: ignore[arg-type]
        halt_budget=halts, k=k, rounds=rounds, lambda_log=lambda_log,  # type: ignore[arg-type]
        halting=halting, restarts=restarts, eps_h=eps_h, accuracy=reading,  # type: ignore[arg-type]
        quotas=_pair(quotas, "--quotas", lambda a, b: Quotas(float(a), float(b))),
        burn=None if burn in (None, "off") else _pair(burn, "--burn", lambda a, b: Burn(int(float(a)), float(b))),
    )
    auto_burn = burn is None and accounting == "tight" and halting in (None, DEFAULT.halting.value)
    if auto_burn:  # the daemon's default for planned targets (daemon.privacy.plan_model): plan = serve
        targets = dataclasses.replace(targets, burn=burn_defaults.planning_default(epsilon))
    memory = (engine_memory if engine_memory is not None else 16) * 2**30
    size = domain_size if domain_size is not None else mech.FLOAT64_POINTS
    if mechanism == "private-learner":
        cost = mech.learner_cost(targets, n, size, depth, guarantee)
        if as_json:
            emit_json(mech.learner_json(targets, cost))
        else:
            click.echo(mech.learner_text(targets, cost))
        return
    try:
        targets.design  # noqa: B018  (a design no engine runs: a usage error, not an infeasible plan)
    except InvalidSchedule as exc:
        raise click.UsageError(str(exc)) from None
    bar = _phases(n is not None, with_designs, with_ablation and targets.is_default_design)
    achievable: Achievable | None = (bar.step("best epsilon", lambda: best_epsilon(n, targets))
                                     if n is not None else None)
    try:
        p = bar.step("schedule", lambda: make_plan(targets))
    except PlanInfeasible as exc:
        bar.close()
        _infeasible(targets, str(exc), n, achievable, mechanism, size, guarantee, as_json)
        return
    if auto_burn:
        p = _served_burn(p)
    costs = bar.step("designs", lambda: designs(targets)) if with_designs else None
    levers = ablation(targets, on_row=bar.row) if with_ablation else None
    bar.close()
    compared = (mech.compare(targets, mech.MECHANISMS, n, size, bbl_plan=p, bbl_achievable=achievable,
                             guarantee=guarantee) if mechanism == "all" else None)
    # with --n, the schedule shown is the one those n examples run (at the best epsilon they certify);
    # the target's own plan stays the JSON's top level, the one for n is "plan_at_n"
    at_n = (achievable.plan if n is not None and achievable is not None and achievable.plan is not None
            else None)
    if auto_burn and at_n is not None:
        at_n = _served_burn(at_n)
    _emit(p, at_n, achievable, costs, levers, compared, memory, n, epsilon, as_json, cache)


class _Progress:
    """The plan's phases as a progress bar on stderr (a terminal only: ``common.progress``)."""

    def __init__(self, total: int) -> None:
        self.bar = progress(total, "planning", unit="step")

    def step(self, what: str, run: Any) -> Any:
        self.bar.set_postfix_str(what)
        out = run()
        self.bar.update()
        return out

    def row(self, key: str) -> None:
        self.bar.set_postfix_str(f"ablation: {key}")
        self.bar.update()

    def close(self) -> None:
        self.bar.close()


def _phases(with_n: bool, with_designs: bool, with_ablation: bool) -> _Progress:
    """A search of seconds (minutes with --n): say where it is. The ablation has a row per lever and all off."""
    return _Progress(int(with_n) + 1 + int(with_designs) + (len(LEVERS) + 1 if with_ablation else 0))


def _infeasible(targets: Targets, why: str, n: int | None, achievable: Achievable | None, mechanism: str,
                size: int, guarantee: str, as_json: bool) -> None:
    """No schedule meets the targets: say why, what ``--n`` certifies, and (``--mechanism all``) the others."""
    others = ((mech.bbl_infeasible(targets, why, n, achievable),
               mech.learner_cost(targets, n, size, guarantee=guarantee))
              if mechanism == "all" else None)
    if as_json:
        out = infeasible_json(targets, why, achievable)
        if others is not None:
            out.update({"mechanism": "all", **mech.comparison_json(others)})
        emit_json(out)
        return
    click.echo(f"The targets cannot be met by any schedule: {why}")
    if achievable is not None:
        click.echo(f"n = {n}: best epsilon = {achievable.epsilon:g} {achievable.reason}")
    if others is not None:
        click.echo("\nMechanisms (same targets):\n" + mech.comparison_text(others))


def _emit(p: Plan, at_n: Plan | None, achievable: Achievable | None, costs: Any, levers: Any, compared: Any,
          memory: int, n: int | None, epsilon: float, as_json: bool, cache: plan_cache.Cache) -> None:
    """The plan as JSON or text; with ``at_n``, the schedule ``--n`` examples run (the target's own plan
    stays in the JSON as the top level)."""
    if as_json:
        out = plan_json(p, achievable, costs, levers, memory)
        if at_n is not None:
            out["plan_at_n"] = plan_json(at_n, None, None, None, memory)
        if compared is not None:
            out.update({"mechanism": "all", **mech.comparison_json(compared)})
        out["plan_cache"] = cache.report()
        emit_json(out)
        return
    if at_n is not None:
        assert achievable is not None and n is not None
        def e(v: float) -> str:
            return f"{v:.3g}".replace("e+0", "e").replace("e+", "e")

        meets = (f"n = {e(n)} examples meet epsilon = {epsilon:g} (it needs n = {e(p.n_required)})"
                 if p.n_required <= n else
                 f"n = {e(n)} examples cannot meet epsilon = {epsilon:g} (it needs n = {e(p.n_required)})")
        click.echo(f"{meets}; the schedule they run certifies epsilon = {achievable.epsilon:.3g}:\n")
        click.echo(plan_text(at_n, achievable, costs, None, memory))
    else:
        click.echo(plan_text(p, achievable, costs, levers, memory))
    if compared is not None:
        click.echo("\nMechanisms (same targets; docs/privacy/genericbbl.md sections 3-9 and 17):\n"
                   + mech.comparison_text(compared))


def _served_burn(p: Any) -> Any:
    """The plan with the burn-rate window the daemon sets from R_1 (``daemon.privacy.default_burn``;
    the window is not charged, so the certificate is the plan's)."""
    if p.schedule is None:
        return p
    s = default_burn(p.schedule)
    return dataclasses.replace(p, schedule=s, targets=dataclasses.replace(p.targets, burn=s.burn))


plan = plan_cmd
"""The click command (``from cli.plan import plan``)."""
