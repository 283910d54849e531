"""``everlast round``: a runnable hand-written round of the default design for a given training-set
size, concept and query stream, with the values it chose, why, and what the planner certifies.

The planner (``everlast plan``) sizes rounds from privacy targets, and its rounds for a strong
guarantee need far more data than a trial has. A hand-written round instead starts from the data
one has: ``engine.planner.fill.hand_round`` completes it (the accuracy floor for eps0, the hard cap
c from the concept's top rate, the noisy halting test). This command chooses the rest -- lambda and
|S_1| by trying a small grid and keeping the strongest training-set certificate, m_D and m_S as the
planner sizes them -- and explains every value. A check that fails names the value that would make
it hold (``advice``), never only its formula.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from everlast.cli.common import emit_json
from everlast.engine import roots

LAMBDAS = (2, 3, 5, 8, 10, 15, 20, 30, 50)
"""Chunk sizes tried: a round's epsilon scales like sqrt(lambda R) / (gamma lambda T), so many chunks
of few points certify more for the same n, until T itself must shrink."""
SHARES = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
"""Shares of the training set tried for |S_1| = lambda T: subsampling S_1 from n amplifies the
training-set guarantee, a larger |S_1| lets the round answer more accurately with less noise."""
LAMBDA_FLOOR = 10
"""Below it a chunk's ERM is fitted on so few points that the classifiers disagree over much of the
domain: the answers err far more, and the round spends its halt budget faster than its rule. Measured
on the stream `everlast round --n 100000 --queries 80000` is checked on (thresholds at the 0.37
quantile): lambda = 2 errs 0.217 and pauses in three of five rounds, lambda = 10 errs 0.016 and never
pauses. The grid prefers lambda >= LAMBDA_FLOOR whenever such a round holds its checks."""
PROVEN_LAMBDAS = (100, 200, 300, 500, 1_000, 2_000, 3_000, 5_000, 10_000, 20_000, 50_000)
"""Chunk sizes tried for a round whose accuracy Theorem A proves at the alpha asked for (its ensemble
term T ebar/(lo - k + 1) needs a chunk error bound ebar far below alpha)."""
EPS0_MAX = 50.0
"""The largest per-query level tried for a proven round (flips vanish long before it)."""


@dataclass
class Choice:
    """A completed round and the reasons for its values."""

    spec: Any
    """The ``RoundSpec``."""
    cert: Any
    """Its certificate at n (``engine.planner.certify``)."""
    why: dict[str, str] = field(default_factory=dict)
    accuracy: str = ""
    """What Theorem A proves for the round (``accuracy_statement``)."""
    proven: bool = False
    """Whether Theorem A proves round 1's answers at the alpha asked for."""


def labelboost_m_s(m_d: int, s_size: int, lam: int, alpha: float, beta: float, concept: str, d: int) -> int:
    """|S-hat| as the planner sizes it: LabelBoost's sample for m_D points (Lemma C.2), at least lambda,
    at most |S_i|."""
    from everlast.engine.planner.learning import labelboost_size, vc_dimension

    return min(s_size, max(labelboost_size(m_d, alpha, beta, vc_dimension(concept, d)), lam))


def build(*, n: int, concept: str, d: int, R: int | None, alpha: float, beta: float, delta: float,
          lam: int, T: int, k: float = 2.0, eps0: float | None = None) -> Any:
    """The round for these sizes (m_D = lambda T: the next round's S; m_S as the planner sizes it;
    eps0 by the flip rule unless given)."""
    from everlast.engine.planner.fill import hand_round

    s1 = lam * T
    r = R if R is not None else s1
    m_d = min(s1, r)
    return hand_round(T=T, lam=lam, R=r, alpha=alpha, m_S=labelboost_m_s(m_d, s1, lam, alpha, beta, concept, d),
                      m_D=m_d, concept=concept, d=d, beta=beta, k=k, delta=delta, eps0=eps0)


def round_one_bound(spec: Any, concept: str, d: int) -> float:
    """Theorem A's per-query bound for the round as round 1 (no inherited relabelling error)."""
    from everlast.engine.design import DEFAULT
    from everlast.engine.planner.accuracy import round_accuracy
    from everlast.engine.planner.learning import vc_dimension

    return round_accuracy(spec, DEFAULT, 1, 0.0, vc_dimension(concept, d)).bound


def proven_round(*, n: int, concept: str, d: int, R: int | None, alpha: float, beta: float, delta: float,
                 lam: int, T: int, k: float = 2.0) -> tuple[Any | None, float]:
    """(the round of these sizes whose eps0 is the smallest at which Theorem A proves round 1's answers
    at ``alpha``, or None; the best bound these sizes reach at any eps0). eps0 by bisection, rounded up
    to 3 digits (the bound falls as eps0 grows: fewer flips, the same ensemble term)."""
    from everlast.engine.errors import InvalidSchedule
    from everlast.engine.planner.fill import _round_up

    def spec_at(e: float) -> Any:
        return build(n=n, concept=concept, d=d, R=R, alpha=alpha, beta=beta, delta=delta, lam=lam, T=T, k=k, eps0=e)

    try:
        best = round_one_bound(spec_at(EPS0_MAX), concept, d)
        if best > alpha:
            return None, best
        hi = roots.smallest_float(lambda e: round_one_bound(spec_at(e), concept, d) <= alpha, 1e-5, EPS0_MAX,
                                  steps=40, geometric=True)
        spec = spec_at(_round_up(hi))
    except InvalidSchedule:
        return None, 1.0
    return (spec if round_one_bound(spec, concept, d) <= alpha else None), best


def with_hand_checks(cert: Any, sched: Any) -> Any:
    """The certificate with the accuracy checks of hand-written rounds added (``fill.flip_checks``)."""
    from everlast.engine.planner.fill import flip_checks

    return dataclasses.replace(cert, checks=(*cert.checks, *flip_checks(sched.rounds, sched.design)))


def proven_accuracy(rounds: Sequence[Any], design: Any, concept: str, d: int) -> str:
    """What Theorem A proves for a hand-written schedule's answers (docs/privacy/genericbbl.md 6.3),
    each listed round against its own alpha: a hand-written round's lambda is usually far below what
    it needs, and then accuracy is measured (simulate), not proven."""
    from everlast.engine.planner.accuracy import schedule_accuracy
    from everlast.engine.planner.learning import vc_dimension

    if not design.target_charged:
        return ""
    accs = schedule_accuracy(rounds, design, vc_dimension(concept, d))
    worst = max(accs, key=lambda a: a.bound)
    if worst.bound >= 1.0:
        lam = rounds[worst.round - 1].lam
        return (f"proven accuracy: none (Theorem A needs more points per chunk than lambda = {lam}; the planner "
                "sizes them) -- measure it with everlast simulate")
    return (f"proven accuracy (Theorem A, per-query reading): every answer errs w.p. <= {worst.bound:.3g} "
            f"(worst round {worst.round})")


def accuracy_statement(spec: Any, alpha: float, best: tuple[float, int, int] | None, concept: str, d: int) -> str:
    """What Theorem A proves for a written round, said plainly: round 1 at alpha (or the best bound any
    round of this n reaches, ``best`` = (bound, lambda, T)), and that a repeated hand-written round's later
    rounds are not covered (each relabelling may add 2 alpha to the labels' error, Claim E.1)."""
    bound = round_one_bound(spec, concept, d)
    later = (f"rounds >= 2 of the repeated round: not proven (each relabelling may add up to 2 alpha = "
             f"{2 * spec.alpha:.3g} to the labels' error, Claim E.1; `everlast plan` sizes the relabelling of a "
             "schedule whose every round is proven)")
    if bound <= alpha:
        return (f"proven accuracy (Theorem A, per-query reading): round 1's answers err w.p. <= {bound:.3g} "
                f"<= alpha = {alpha:g}; {later}")
    at = "" if best is None else (f"; the best bound any round of n examples reaches is {best[0]:.3g} "
                                  f"(lambda = {best[1]:,}, T = {best[2]:,})")
    return (f"proven accuracy: none at alpha = {alpha:g} -- Theorem A cannot prove it with this n{at}. This round "
            f"(lambda = {spec.lam}) is sized for privacy; its accuracy is measured (everlast simulate), not proven")


def choose(*, n: int, concept: str, d: int, R: int | None, alpha: float, beta: float, delta: float,
           lam: int | None, T: int | None, k: float = 2.0) -> Choice:
    """Try the grid (or the sizes given) and keep the round whose checks hold and whose training-set
    epsilon is smallest (ties: the queries' epsilon). Raises ``click.UsageError`` when no size fits."""
    from everlast.engine.errors import InvalidSchedule
    from everlast.engine.planner import certify
    from everlast.engine.schedule import Schedule

    lams = (lam,) if lam is not None else LAMBDAS
    best: tuple[tuple[float, ...], Choice] | None = None
    errors: list[str] = []
    best_bound: tuple[float, int, int] | None = None  # the best Theorem A bound any size reaches

    def consider(spec: Any, proven: bool) -> None:
        nonlocal best
        try:
            sched = Schedule((spec,), repeat_last=True)
        except InvalidSchedule as exc:
            errors.append(str(exc))
            return
        cert = with_hand_checks(certify(sched, n, delta=delta), sched)
        failing = sum(1 for x in cert.checks if not x.holds)
        key = (float(failing), 0.0 if proven else 1.0, 0.0 if spec.lam >= LAMBDA_FLOOR or lam is not None else 1.0,
               cert.epsilon_training if math.isfinite(cert.epsilon_training) else math.inf,
               cert.epsilon_queries if math.isfinite(cert.epsilon_queries) else math.inf)
        if best is None or key < best[0]:
            best = (key, Choice(spec, cert))

    for lm in (lam,) if lam is not None else PROVEN_LAMBDAS:  # a round Theorem A proves at alpha, if any
        ts = (T,) if T is not None else tuple(sorted({max(1, int(n * s) // lm) for s in SHARES}))
        for t in ts:
            if lm * t > n and T is None:
                continue
            spec, reach = proven_round(n=n, concept=concept, d=d, R=R, alpha=alpha, beta=beta, delta=delta,
                                       lam=lm, T=t, k=k)
            if best_bound is None or reach < best_bound[0]:
                best_bound = (reach, lm, t)
            if spec is not None:
                consider(spec, True)
    for lm in lams:
        ts = (T,) if T is not None else tuple(sorted({max(1, int(n * s) // lm) for s in SHARES}))
        for t in ts:
            if lm * t > n and T is None:
                continue
            try:
                spec = build(n=n, concept=concept, d=d, R=R, alpha=alpha, beta=beta, delta=delta, lam=lm, T=t, k=k)
                consider(spec, round_one_bound(spec, concept, d) <= alpha)
            except InvalidSchedule as exc:
                errors.append(str(exc))
                continue
    if best is None:
        raise click.UsageError("no runnable round for these sizes: " + (errors[0] if errors else "nothing to try"))
    c = best[1]
    c.why = reasons(c.spec, n=n, R_given=R is not None, lam_given=lam is not None, T_given=T is not None,
                    concept=concept, d=d, k=k, cert=c.cert)
    from everlast.engine.design import DEFAULT

    c.accuracy = accuracy_statement(c.spec, alpha, best_bound, concept, d) if DEFAULT.target_charged else ""
    c.proven = round_one_bound(c.spec, concept, d) <= alpha
    if c.proven:
        c.why["eps_bt"] = (f"the smallest (3 digits, rounded up) at which Theorem A proves round 1's answers at "
                           f"alpha = {alpha:g} (docs/privacy/genericbbl.md 6.3); above the flip rule's floor")
    if lam is None:
        c.why["lam"] = ((f"of lambda in {{{', '.join(f'{x:,}' for x in PROVEN_LAMBDAS)}}} (eps0 the smallest at which "
                         f"Theorem A proves alpha = {alpha:g}): {c.why['lam'].split(': ', 1)[-1]}") if c.proven else
                        c.why["lam"] + f" among lambda >= {LAMBDA_FLOOR} (smaller chunks err far more); no size "
                        f"of n = {n:,} has accuracy proven at alpha = {alpha:g}")
    return c


def reasons(spec: Any, *, n: int, R_given: bool, lam_given: bool, T_given: bool, concept: str, d: int, k: float,
            cert: Any) -> dict[str, str]:
    from everlast.engine.planner.learning import top_rate

    s1 = spec.lam * spec.T
    grid = f"lambda in {{{', '.join(map(str, LAMBDAS))}}} x |S_1| in {{{', '.join(f'{s:.0%}' for s in SHARES)}}} of n"
    eps = cert.epsilon_training
    best = f"the strongest training-set certificate (epsilon {eps:.4g})" if math.isfinite(eps) else "the best found"
    p = top_rate(concept, spec.band, spec.lam, d)
    return {
        "lam": "given" if lam_given else f"of {grid}: {best}",
        "T": ("given" if T_given else f"|S_1| = lambda T = {s1:,} = {s1 / n:.0%} of n = {n:,} (same search)"),
        "R": "given (--queries)" if R_given else f"|S_1| = {s1:,}: the fewest a round relabels its successor from",
        "m_D": "min(lambda T, R): S_{i+1} needs lambda T points (Claim D.6), and no more keeps D-hat the smallest "
               "subsample of the round's queries",
        "m_S": "LabelBoost's sample for m_D points at alpha, beta (Lemma C.2), as the planner sizes it",
        "eps_bt": "the accuracy floor: a query every classifier agrees on is answered against them w.p. <= "
                  "alpha/16 (Theorem A's flip term, docs/privacy/genericbbl.md 6.3); larger only costs privacy",
        "c": f"the round's own i.i.d. stream spends about p_top R = {p * spec.R:,.0f} tops (p_top = {p:.3g} for "
             f"{concept}, docs/halt_budget.md); room for k = {k:g} times that, with the halting test's margin",
        "halt_eps": "the smallest of the grid whose margin between c0 and c fits 10% of c (Lemma T(ii))",
        "halt_threshold": "c minus that margin",
    }


def advice(check: Any, rounds: Sequence[Any], n: int | None = None, delta: float = 1e-6) -> str:
    """A failing check as the value that would make it hold (never only the formula)."""
    r = rounds[(check.round or 1) - 1] if rounds else None
    name: str = check.name
    if name.startswith("accuracy: T >=") and r is not None:
        from everlast.engine.planner.fill import accuracy_eps0, sample_eps0

        eps = (sample_eps0(r.T, r.band, r.alpha) if "alpha/16" in name
               else accuracy_eps0(r.band, r.T, r.R, r.beta))
        return (f"round {check.round}: T = {r.T:,} is too small for eps_bt = {r.eps_bt:g}: use T >= "
                f"{math.ceil(check.value):,}, or eps_bt >= {eps:.3g} at this T (its accuracy floor)")
    if name.startswith("D.2:") and r is not None:
        t = math.ceil(check.value)
        return (f"round {check.round}: use T >= {t:,} (Claim D.2 at alpha = {r.alpha:g}; with lambda = {r.lam}, "
                f"|S_1| = {r.lam * t:,} examples)")
    if name.startswith("D.6:"):
        return f"round {check.round}: use m_D >= {math.ceil(check.value):,} (the next round's lambda T; at most R)"
    if name.startswith("n >= |S_1|"):
        return (f"the training set has {int(check.bound):,} examples and round 1 needs lambda T = "
                f"{int(check.value):,}: lower lambda T to at most {int(check.bound):,}, or give more data")
    if name.startswith("S-hat is a subset"):
        return f"round {check.round}: use m_S <= {int(check.bound):,} (lambda T)"
    if name.startswith("D-hat is a subset"):
        return f"round {check.round}: use m_D <= {int(check.bound):,} (R)"
    if ("halt budget" in name or "noisy halting" in name) and r is not None:
        from everlast.engine.planner.fill import sample_cap
        from everlast.engine.planner.learning import top_rate

        c = sample_cap(r.R, top_rate("thresholds", r.band, r.lam, 1), 2.0, r.beta, delta)
        return (f"round {check.round}: c = {r.c:,} is too small for the round's own i.i.d. stream: use c >= {c:,} "
                "(thresholds; `everlast round` sizes it for your concept) and drop halt_eps/halt_threshold so that "
                "`everlast complete` refills them")
    return f"round {check.round}: {name}: {check.value:.4g} against {check.bound:.4g} ({check.lemma})"


def describe(c: Choice, n: int) -> list[str]:
    from everlast.engine.planner.report import guarantee_sentence

    s = c.spec
    lines = [f"  {'value':<15} {'chosen':>12}   why"]
    for key in ("lam", "T", "R", "m_D", "m_S", "eps_bt", "c", "halt_eps", "halt_threshold"):
        v = getattr(s, key)
        shown = f"{v:,}" if isinstance(v, int) else f"{v:g}"
        lines.append(f"  {key:<15} {shown:>12}   {c.why.get(key, '')}")
    lines.append("")
    lines.append("certified at n = " + f"{n:,}: " + guarantee_sentence(c.cert))
    if c.accuracy:
        lines.append(c.accuracy)
    failed = [x for x in c.cert.checks if not x.holds]
    if failed:
        lines.append(f"{len(failed)} check(s) fail:")
        lines += ["  " + advice(x, (s,)) for x in failed[:8]]
    else:
        lines.append(f"every check holds ({len(c.cert.checks)}); runnable: {'yes' if c.cert.runnable else 'no'}")
    return lines


@click.command("round")
@click.option("--n", "n", required=True, type=click.IntRange(min=1), help="Training-set size (labeled examples).")
@click.option("--concept", type=click.Choice(["thresholds", "intervals", "stumps"]), default="thresholds",
              show_default=True)
@click.option("--d", "dim", type=click.IntRange(min=1), default=1, show_default=True, help="Dimension (stumps).")
@click.option("--queries", "R", type=click.IntRange(min=1), default=None,
              help="Queries each round answers (R): the stream between two transitions [default: |S_1|].")
@click.option("--alpha", type=click.FloatRange(0.0, 0.5, min_open=True, max_open=True), default=0.1,
              show_default=True, help="Accuracy target (the band gamma = alpha).")
@click.option("--beta", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=0.05,
              show_default=True, help="Failure probability of a round.")
@click.option("--delta", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=1e-6,
              show_default=True, help="Target delta.")
@click.option("--lam", type=click.IntRange(min=1), default=None, help="Points per chunk [searched].")
@click.option("--T", "T", type=click.IntRange(min=1), default=None, help="Chunks (classifiers) [searched].")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the schedule (one round, repeated) here, for `[[models]] schedule = ...`.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: {schedule, choices, certificate}.")
def round_cmd(n: int, concept: str, dim: int, R: int | None, alpha: float, beta: float, delta: float,
              lam: int | None, T: int | None, out: Path | None, as_json: bool) -> None:
    """Build a runnable hand-written round for N examples of CONCEPT and a stream of R queries per
    round; print the values chosen, why, and what it certifies."""
    from everlast.engine.planner.report import certificate_json, guarantee_sentence
    from everlast.engine.schedule import Schedule

    if concept != "stumps" and dim != 1:
        raise click.UsageError("--d is for stumps")
    c = choose(n=n, concept=concept, d=dim, R=R, alpha=alpha, beta=beta, delta=delta, lam=lam, T=T)
    sched = Schedule((c.spec,), repeat_last=True)
    doc = sched.to_dict()
    if out is not None:
        out.write_text(json.dumps(doc, indent=2) + "\n")
    if as_json:
        emit_json({"schedule": doc, "choices": c.why, "certificate": certificate_json(c.cert),
                   "guarantee": guarantee_sentence(c.cert),
                   "accuracy": {"alpha": alpha, "proven_round_1": c.proven,
                                "round_1_bound": round_one_bound(c.spec, concept, dim), "statement": c.accuracy},
                   "failing_checks": [advice(x, (c.spec,)) for x in c.cert.checks if not x.holds]})
        return
    click.echo(f"A round of the default design (target-charged), repeated, for n = {n:,} {concept} examples "
               f"and R = {c.spec.R:,} queries per round:\n")
    click.echo("\n".join(describe(c, n)))
    sched_arg = str(out) if out is not None else "SCHEDULE.json"
    click.echo("\nThe halt budget c assumes i.i.d. queries from data the concept's rule covers (docs/halt_budget.md); "
               "an adversarial client can still spend it: the round then pauses (refuses the rest of the round) and "
               "the next round answers again. Check accuracy and pauses on a "
               f"stream of three rounds: everlast simulate --schedule {sched_arg} --n {n} --concept {concept}"
               + (f" --d {dim}" if concept == "stumps" else "") + f" --queries {3 * c.spec.R}")
    if out is not None:
        click.echo(f"schedule written to {out}: serve it with `schedule = \"{out.name}\"` in a [[models]] table")
    else:
        click.echo("\n" + json.dumps(doc, indent=2))
