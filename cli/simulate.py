"""``everlast simulate``: run the predictor in-process on synthetic data and score it."""

from __future__ import annotations

import math
import resource
import sys
import time
from pathlib import Path
from typing import Any

import click
import numpy as np

from everlast.adversary_sim.iid import DISTRIBUTIONS, make_task
from everlast.adversary_sim.inprocess import run_iid
from everlast.cli.common import emit_json, progress
from everlast.cli.guarantee import plain_guarantee
from everlast.cli.params import Count
from everlast.cli.simulate_schedule import DEFAULT_ROUND, PAPER_DELTA_BT, build_schedule, planned_schedule
from everlast.daemon import plan_cache
from everlast.engine.concepts import ConceptClass, from_spec
from everlast.engine.design import DEFAULT, RETIRED, Design
from everlast.engine.errors import EngineError
from everlast.engine.planner import Targets, certify, plan
from everlast.engine.planner.accuracy import schedule_accuracy
from everlast.engine.planner.chain import Certificate
from everlast.engine.planner.learning import vc_dimension
from everlast.engine.planner.report import certificate_json
from everlast.engine.predictor import Predictor
from everlast.engine.schedule import Schedule

HALTING = ("noisy", "paper")
RESTARTS = ("none", "per-top")


def _policy(allowed: tuple[str, ...]) -> Any:
    """A click callback: one of ``allowed``; a retired value gets engine.design.RETIRED's reason."""

    def check(ctx: click.Context, param: click.Parameter, value: str) -> str:
        if value in RETIRED:
            raise click.BadParameter(RETIRED[value])
        if value not in allowed:
            raise click.BadParameter(f"{value[:20]!r} is not one of {', '.join(allowed)}")
        return value

    return check


def concept_for(name: str, d: int) -> ConceptClass:
    return from_spec({"name": name, "d": d})


@click.command()
@click.option(
    "--concept",
    type=click.Choice(["thresholds", "intervals", "stumps"]),
    default="thresholds",
    show_default=True,
    help="Concept class of the predictor and of the hidden target.",
)
@click.option("--d", "dim", type=click.IntRange(min=1), default=2, show_default=True, help="Dimension (stumps only).")
@click.option(
    "--n",
    "n",
    type=Count(),
    default=None,
    help="Size of the labeled training set [1,000,000; with --epsilon: the n the plan requires].",
)
@click.option(
    "--queries",
    type=click.IntRange(min=0),
    default=None,
    help="Number of i.i.d. queries to answer [5,000,000; with --rounds: what those rounds take].",
)
@click.option(
    "--rounds", "full_rounds", type=click.IntRange(min=0), default=None,
    help="Answer every query of this many rounds (with their transitions), then --after queries of "
         "the next round: e.g. --epsilon 8 --rounds 1 runs round 1 of the planned schedule for real.",
)
@click.option("--after", type=click.IntRange(min=0), default=1_000_000, show_default=True,
              help="With --rounds: queries answered in the round after the last full one.")
@click.option("--distribution", type=click.Choice(sorted(DISTRIBUTIONS)), default="uniform", show_default=True)
@click.option("--positives", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=None,
              help="Share of positive labels of the hidden concept [about half; intervals 40%]: a small "
                   "share puts the decision boundary in the distribution's tail.")
@click.option("--seed", type=int, default=None, help="Seed (default: OS entropy). The data seed is seed or 0.")
@click.option(
    "--schedule",
    "schedule_path",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="JSON schedule file ({'rounds': [...], 'repeat_last': true}).",
)
@click.option(
    "--T", "T", type=click.IntRange(min=1), default=None, help=f"Classifiers per round [{DEFAULT_ROUND['T']}]."
)
@click.option("--lam", type=click.IntRange(min=1), default=None, help=f"Points per chunk [{DEFAULT_ROUND['lam']}].")
@click.option("--R", "R", type=click.IntRange(min=1), default=None, help=f"Queries per round [{DEFAULT_ROUND['R']}].")
@click.option(
    "--c", "c", type=click.IntRange(min=1), default=None,
    help="Hard cap on a round's tops [from the concept's top rate, docs/halt_budget.md].",
)
@click.option("--eps-bt", type=float, default=None,
              help="Per-query level: eps0 of the default design, eps' of the paper's [the accuracy floor].")
@click.option("--delta-bt", type=float, default=None, help=f"The paper design's delta' [{PAPER_DELTA_BT}].")
@click.option("--alpha", type=float, default=None, help=f"Accuracy target alpha_i [{DEFAULT_ROUND['alpha']}].")
@click.option("--gamma", type=float, default=None, help="Band half-width (default alpha).")
@click.option("--m-s", type=click.IntRange(min=1), default=None, help=f"|S-hat| [{DEFAULT_ROUND['m_S']}].")
@click.option("--m-d", type=click.IntRange(min=1), default=None, help=f"|D-hat| [{DEFAULT_ROUND['m_D']}].")
@click.option(
    "--epsilon",
    type=float,
    default=None,
    help="Privacy target: plan the schedule with the tight accounting instead of giving one.",
)
@click.option("--delta", type=float, default=1e-6, show_default=True, help="Delta of the guarantee.")
@click.option("--accounting", type=click.Choice(["tight", "paper"]), default="tight", show_default=True)
@click.option("--halting", default=DEFAULT.halting.value, show_default=True, callback=_policy(HALTING),
              metavar="[noisy|paper]",
              help="Halting of a schedule built from flags: noisy (the default, target-charged design: a "
                   "private test on the round's tops) or paper (fail at the c-th top; with --restarts "
                   "per-top: the paper's design, NOT query-private).")
@click.option("--restarts", default=DEFAULT.restarts.value, show_default=True, callback=_policy(RESTARTS),
              metavar="[none|per-top]",
              help="Threshold noise of a schedule built from flags: none (the default, target-charged "
                   "design: fresh noise on every query's count) or per-top (the paper's).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def simulate(
    concept: str,
    dim: int,
    n: int | None,
    queries: int | None,
    full_rounds: int | None,
    after: int,
    distribution: str,
    positives: float | None,
    seed: int | None,
    schedule_path: Path | None,
    epsilon: float | None,
    delta: float,
    accounting: str,
    halting: str,
    restarts: str,
    as_json: bool,
    **flags: Any,
) -> None:
    """Run the predictor in-process on synthetic data labeled by a hidden concept, and print the
    privacy its schedule certifies for this n (docs/PRIVACY.md)."""
    started = time.perf_counter()
    with plan_cache.active():  # a planned schedule's search is kept on disk (its claims are re-derived)
        schedule, n, queries, cert = _resolve(concept, dim, n, queries, full_rounds, after, schedule_path, epsilon,
                                              delta, accounting, halting, restarts, flags)
    cls = concept_for(concept, dim)
    task = make_task(cls, distribution, seed=seed or 0, positives=positives)
    data_seed = seed if seed is not None else 0
    x, y = task.sample(np.random.default_rng([data_seed, 0]), n)
    positive_share = float(np.mean(y))
    try:
        p = Predictor.create(cls, schedule, x, y, seed=seed)
    except EngineError as exc:
        raise click.ClickException(str(exc)) from None
    del x, y  # the predictor keeps S_1 only
    with progress(queries, "simulate") as bar:
        report = run_iid(p, task, queries, seed=data_seed, progress=bar.update)
    cj = certificate_json(cert)
    out = {
        "alpha": schedule.rounds[0].alpha,  # round 1's alpha_i (a planned schedule splits the target)
        "alpha_target": float(flags.get("alpha") or 0.1) if epsilon is not None else schedule.rounds[0].alpha,
        "epsilon_certified": cj.get("epsilon"),
        "epsilon_training": cj.get("epsilon_training"),
        "epsilon_queries": cj.get("epsilon_queries"),
        "delta": cert.delta,
        "epsilon_queries_conditional": cj.get("epsilon_queries_conditional"),
        "query_private": cert.query_private,
        "guarantee": plain_guarantee(cert),
        "rounds": [r.to_json() for r in report.rounds],
        "halted": report.halted,
        "paused_rounds": report.paused_rounds,
        "queries_per_second": report.queries_per_second,
        "concept": concept,
        "distribution": distribution,
        "positive_share": positive_share,
        "n": n,
        "queries": report.queries,
        "schedule": schedule.to_dict(),
        "certificate": cj,
        "seconds": time.perf_counter() - started,
        "peak_rss_bytes": peak_rss_bytes(),
    }
    alpha_target = float(flags.get("alpha") or 0.1) if epsilon is not None else schedule.rounds[0].alpha
    out["errors_within_target"] = all(r.wrong <= alpha_target * r.scored for r in report.rounds)
    accs = schedule_accuracy(schedule.rounds, schedule.design, cls_vc(concept, dim), "per-query")
    if accs and any(a.bound < 1.0 for a in accs):
        out["accuracy_proven"] = [{"round": a.round, "bound": a.bound} for a in accs]
    if as_json:
        emit_json(out)
        return
    _print_human(out)


def _resolve(concept: str, dim: int, n: int | None, queries: int | None, full_rounds: int | None, after: int,
             schedule_path: Path | None, epsilon: float | None, delta: float, accounting: str, halting: str,
             restarts: str, flags: dict[str, Any]) -> tuple[Schedule, int, int, Certificate]:
    """The schedule to run (planned for ``--epsilon``, else from a file or flags), n, the number of
    queries, and the certificate (a planned schedule is certified whole)."""
    if epsilon is not None:
        schedule, n = planned_schedule(concept, dim, n, epsilon, delta, flags.get("alpha") or 0.1, accounting)
        full = plan(Targets(epsilon=epsilon, delta=delta, alpha=flags.get("alpha") or 0.1, concept=concept,
                            d=dim, accounting=accounting))  # type: ignore[arg-type]
    else:
        n = n if n is not None else 1_000_000
        try:
            design = Design.parse(halting, restarts)
        except EngineError as exc:
            raise click.UsageError(str(exc)) from None
        schedule = build_schedule(schedule_path, flags, design, delta, concept, dim)
    if full_rounds is not None:
        specs = [schedule.spec(i) for i in range(1, full_rounds + 1)]
        if any(r is None for r in specs):
            raise click.UsageError(f"the schedule runs fewer than {full_rounds} rounds on one engine")
        queries = sum(r.R for r in specs if r is not None) + after
    queries = queries if queries is not None else 5_000_000
    # a planned schedule is certified whole, even when one engine runs only a prefix of it
    cert = full.certificate if epsilon is not None else certify(schedule, n, accounting=accounting, delta=delta)
    return schedule, n, queries, cert


def _print_human(out: dict[str, Any]) -> None:
    click.echo(f"{out['concept']} on {out['distribution']} data, n = {out['n']:,}, {out['queries']:,} queries")
    click.echo(f"{'round':>5} {'queries':>10} {'answered':>10} {'refused':>8} {'tops':>14} {'err(answers)':>13} "
               f"{'err(fresh)':>11}  refusals")
    for r in out["rounds"]:
        ea = "-" if r["error_answers"] is None else f"{r['error_answers']:.4f}"
        ef = "-" if r["error_fresh"] is None else f"{r['error_fresh']:.4f}"
        tops = f"{r['tops_used']}/{r['tops_allowed']}"
        why = ", ".join(f"{k} {v:,}" for k, v in r["refusals"].items())
        click.echo(f"{r['round']:>5} {r['queries']:>10,} {r['answered']:>10,} {r['refused']:>8,} {tops:>14} {ea:>13} "
                   f"{ef:>11}  {why}")
    qps = out["queries_per_second"]
    speed = f"{qps:,.0f} queries/s in the engine" if qps is not None and math.isfinite(qps) else "no queries timed"
    click.echo(f"{speed}; halted: {out['halted']}; every round's error within alpha = {out['alpha_target']:g}: "
               f"{'yes' if out['errors_within_target'] else 'no'}")
    for r in out["rounds"]:
        if r["paused"]:
            click.echo(f"round {r['round']} spent its halt budget after {r['paused_after']:,} queries and paused: it "
                       f"refused the rest of the round (round-paused) and the next round answered again. This data "
                       f"consumes tops faster than the {out['concept']} rule sizes c for (mass at the boundary, atoms, "
                       "label noise: docs/halt_budget.md); a larger --c holds it, and costs privacy")
    if out["halted"]:
        click.echo("the predictor refuses for good (a state written before rounds paused)")
    click.echo(out["guarantee"])


def peak_rss_bytes() -> int:
    """This process's peak resident set size, in bytes (getrusage reports KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def cls_vc(concept: str, d: int) -> int:
    return vc_dimension(concept, d)
