"""Renderings of a plan: the JSON contract of ``everlast plan --json``, a readable text report, and
the generated block of ``docs/PRIVACY.md``. Pure functions returning dicts/strings (no printing).

JSON contract (keys other tools rely on): ``n_required``, ``epsilon`` (the larger of the two
chains), ``epsilon_training``, ``epsilon_queries``, ``delta``, ``accounting``, ``steps`` (each with
``name``, ``lemma``, ``epsilon``, ``delta``), ``schedule`` (each with ``round``, ``T``, ``lambda``,
``R``, ``c``) and, when n is given, ``epsilon_achievable``. A non-finite number is ``null`` with a
sibling ``<key>_reason`` saying why. Added by issue 8: ``halting``, ``restarts``,
``query_private``, ``conditional_on``, ``design`` and, when computed, ``designs`` (one entry per
(halting, restarts) design: ``halting``, ``restarts``, ``n_required``, ``epsilon_training``,
``epsilon_queries``, ``query_private``, ``conditional_on``, the in-round step and the default flag).
"""

from __future__ import annotations

import math
from typing import Any

from engine.planner.api import Achievable, DesignCost, Plan, Targets, cheapest_sound, designs, plan
from engine.planner.chain import Certificate, certify, exact_rate
from engine.planner.composition import claim_d1_bound
from engine.planner.steps import Check, Step
from engine.planner.tight import TightOptions, solve

CONDITIONAL_NOTE = ("the query chain WITHOUT Claim E.6's in-round step, which is false for this "
                    "design (halting or threshold-noise restart channel open, issue 8): "
                    "not a guarantee")
CONDITIONAL_LEMMA_NOTE = ("the whole query chain under the UNREVIEWED Lemma S "
                          "(query_privacy.md 3.3): not a guarantee")


def _num(x: float | int) -> float | int | None:
    if isinstance(x, int):
        return x
    return x if math.isfinite(x) else None


def _put(d: dict[str, Any], key: str, x: float | int, reason: str) -> None:
    v = _num(x)
    d[key] = v
    if v is None:
        d[key + "_reason"] = reason or "not certified"


def step_json(s: Step) -> dict[str, Any]:
    d: dict[str, Any] = {"chain": s.chain, "round": s.round, "name": s.name, "lemma": s.lemma}
    _put(d, "epsilon", s.epsilon, s.note)
    _put(d, "delta", s.delta, s.note)
    d["valid"] = s.valid
    if s.note:
        d["note"] = s.note
    d["inputs"] = {k: (_num(v) if isinstance(v, float) else v) for k, v in s.inputs}
    return d


def check_json(c: Check) -> dict[str, Any]:
    return {"name": c.name, "lemma": c.lemma, "kind": c.kind, "round": c.round, "holds": c.holds,
            "value": _num(c.value), "bound": _num(c.bound), **({"detail": c.detail} if c.detail else {})}


def certificate_json(c: Certificate) -> dict[str, Any]:
    d: dict[str, Any] = {}
    why_eps = c.training_reason if not math.isfinite(c.epsilon_training) else c.queries_reason
    _put(d, "epsilon", c.epsilon, why_eps)
    _put(d, "epsilon_training", c.epsilon_training, c.training_reason)
    _put(d, "epsilon_queries", c.epsilon_queries, c.queries_reason)
    _put(d, "epsilon_queries_conditional", c.epsilon_queries_conditional, c.queries_reason)
    d["epsilon_queries_conditional_note"] = (CONDITIONAL_LEMMA_NOTE if c.conditional_on else
                                             CONDITIONAL_NOTE if not c.query_private else
                                             "the query chain without its in-round step Q0; Q0 is "
                                             "proven (Theorem Q) and included in epsilon_queries")
    d["query_private"] = c.query_private
    d["conditional_on"] = c.conditional_on
    if c.conditional_on:
        _put(d, "epsilon_training_conditional", c.epsilon_training_conditional, c.training_reason)
    d["delta"] = c.delta
    d["delta_target"] = c.delta_target
    d["delta_training"] = c.delta_training
    d["delta_queries"] = c.delta_queries
    d["accounting"] = c.accounting
    d["n"] = c.n
    d["halting"] = c.halting
    d["restarts"] = c.restarts
    d["worst_query_round"] = c.worst_query_round
    d["privacy_checks_hold"] = c.privacy_checks_hold
    d["runnable"] = c.runnable
    if not c.runnable:
        d["not_runnable_reason"] = c.not_runnable_reason
    d["warnings"] = list(c.warnings)
    d["steps"] = [step_json(s) for s in c.steps]
    d["checks"] = [check_json(x) for x in c.checks]
    d["per_round_queries"] = [{"round": r, "epsilon_conditional": _num(e), "delta": _num(dl)}
                              for r, e, dl in c.per_round_queries]
    return d


def schedule_json(p: Plan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    rp = {r.round: r for r in p.round_plans}
    for i, r in enumerate(p.rounds, start=1):
        row: dict[str, Any] = {
            "round": i, "T": r.T, "lambda": r.lam, "R": r.R, "c": r.c, "eps_bt": r.eps_bt,
            "delta_bt": r.delta_bt, "gamma": r.band, "alpha": r.alpha, "beta": r.beta,
            "labeled_size": r.labeled_size, "m_S": r.m_S, "m_D": r.m_D,
            "r_S": exact_rate(r.m_S, r.labeled_size), "r_D": exact_rate(r.m_D, r.R),
            "repeats": p.repeat_last and i == len(p.rounds),
            "halt_eps": r.halt_eps, "halt_threshold": r.halt_threshold,
            "restart_eps": r.restart_eps, "restart_threshold": r.restart_threshold,
            "block_cap": r.block_cap,
        }
        if i in rp:
            x = rp[i]
            row.update({"E_budget": x.E, "Delta_budget": x.Delta, "theta": x.theta,
                        "T_privacy": x.t_privacy, "T_accuracy": x.t_accuracy,
                        "T_binding": x.binding, "eps_LS": x.eps_ls})
        out.append(row)
    return out


def design_json(x: DesignCost) -> dict[str, Any]:
    """One entry of the ``designs`` list."""
    d: dict[str, Any] = {"halting": x.halting, "restarts": x.restarts, "name": x.name,
                         "default": x.is_default}
    d["n_required"] = x.n_required
    if x.n_required is None:
        d["n_required_reason"] = x.reason
    _put(d, "epsilon_training", x.epsilon_training, x.reason)
    _put(d, "epsilon_queries", x.epsilon_queries, x.reason)
    d["query_private"] = x.query_private
    d["conditional_on"] = x.conditional_on
    _put(d, "epsilon_conditional", x.epsilon_conditional, x.reason)
    d["eps_h"] = x.eps_h
    d["eps_r"] = x.eps_r
    q0: dict[str, Any] = {"lemma": x.in_round_lemma, "valid": math.isfinite(x.in_round_epsilon)}
    _put(q0, "epsilon", x.in_round_epsilon, x.in_round_note)
    q0["delta"] = x.in_round_delta
    if x.in_round_note:
        q0["note"] = x.in_round_note
    d["in_round"] = q0
    return d


def plan_json(p: Plan, achievable: Achievable | None = None,
              costs: tuple[DesignCost, ...] | None = None) -> dict[str, Any]:
    """The ``everlast plan --json`` object (``costs``: :func:`engine.planner.api.designs`)."""
    t = p.targets
    d: dict[str, Any] = {"n_required": p.n_required}
    d.update(certificate_json(p.certificate))
    d["n"] = p.n_required
    d["halts"] = t.halts
    d["meets_targets"] = p.meets_targets
    r1 = p.rounds[0]
    d["design"] = {"halting": p.certificate.halting, "restarts": p.certificate.restarts,
                   "eps_h": r1.halt_eps, "eps_r": r1.restart_eps, "block_bound": t.block_bound}
    d["targets"] = {"epsilon": t.epsilon, "delta": t.delta, "alpha": t.alpha, "beta": t.beta,
                    "concept": t.concept, "vc_dim": t.vc, "halts": t.halts, "k": t.k,
                    "rounds": t.rounds, "lambda_log": t.lambda_log, "accounting": t.accounting,
                    "halting": t.halting, "restarts": t.restarts, "eps_h": t.eps_h,
                    "eps_r": t.eps_r, "block_bound": t.block_bound}
    if costs is not None:
        d["designs"] = [design_json(x) for x in costs]
        best = cheapest_sound(costs)
        d["cheapest_sound_design"] = None if best is None else best.name
    d["warnings"] = list(dict.fromkeys([*p.warnings, *d["warnings"]]))
    d["checks"] = [*d["checks"], *(check_json(c) for c in p.checks)]
    d["schedule"] = schedule_json(p)
    d["repeat_last"] = p.repeat_last
    if p.schedule is None:
        d["runnable"] = False
        d["not_runnable_reason"] = p.not_runnable_reason or d.get("not_runnable_reason", "")
    if t.accounting == "tight":
        d["budgets"] = {"E1": p.E1, "E2": p.E2, "r1": p.r1, "rD": p.rD}
    if p.paper is not None:
        ps = p.paper
        d["paper"] = {"tau": ps.tau, "r_hat": ps.r_hat, "n_formula": ps.n_formula,
                      "gap_ratio_round1": ps.rounds[0].gap_ratio,
                      "d6_ratio_round1": ps.d6_ratios[0] if ps.d6_ratios else None,
                      "d7_ratio_round1": ps.rounds[0].d7_ratio}
    if achievable is not None:
        _put(d, "epsilon_achievable", achievable.epsilon, achievable.reason)
        d["epsilon_achievable_n"] = achievable.n
        d["epsilon_achievable_target"] = _num(achievable.target)
        d["epsilon_achievable_note"] = ("max(epsilon_training, epsilon_queries) of the best plan "
                                        "for this n (the conditional query chain when the design "
                                        "is not query-private)")
        if achievable.plan is not None:
            d["epsilon_achievable_n_required"] = achievable.plan.n_required
    return d


def infeasible_json(t: Targets, reason: str, achievable: Achievable | None = None) -> dict[str, Any]:
    d: dict[str, Any] = {"n_required": None, "n_required_reason": reason}
    for k in ("epsilon", "epsilon_training", "epsilon_queries"):
        d[k] = None
        d[k + "_reason"] = reason
    d.update({"delta": t.delta, "accounting": t.accounting, "steps": [], "schedule": [],
              "query_private": False, "warnings": [reason]})
    if achievable is not None:
        _put(d, "epsilon_achievable", achievable.epsilon, achievable.reason)
        d["epsilon_achievable_n"] = achievable.n
    return d


# ---------------------------------------------------------------------------------------------
# Text


def fmt(x: float | int | None, digits: int = 3) -> str:
    """Compact number: 4.7e13, 0.98, inf."""
    if x is None:
        return "n/a"
    if isinstance(x, int) and abs(x) < 10**6:
        return str(x)
    xf = float(x)
    if math.isinf(xf):
        return "inf"
    if math.isnan(xf):
        return "nan"
    if xf != 0 and (abs(xf) >= 1e5 or abs(xf) < 1e-3):
        m, e = f"{xf:.{digits - 1}e}".split("e")
        return f"{m.rstrip('0').rstrip('.')}e{int(e)}"
    return f"{xf:.{digits}g}"


def _eps_text(x: float, reason: str) -> str:
    return fmt(x) if math.isfinite(x) else f"NOT CERTIFIED ({reason})"


def steps_table(c: Certificate) -> str:
    rows = ["| chain | step | lemma | epsilon | delta |", "|---|---|---|---|---|"]
    for s in c.steps:
        eps = fmt(s.epsilon) if math.isfinite(s.epsilon) else "not valid"
        rows.append(f"| {s.chain} | {s.name} | {s.lemma} | {eps} | {fmt(s.delta)} |")
    return "\n".join(rows)


def schedule_table(p: Plan, max_rows: int = 6) -> str:
    """The schedule, with the tests' parameters (c0, k0, k_max) when the design has them; delta'
    is delta_mu (Theorem B) for private restarts."""
    tests = any(r.halt_threshold is not None or r.restart_threshold is not None for r in p.rounds)
    head = "| round | T | lambda | R | c | eps' | delta' | m_S | m_D |"
    if tests:
        head += " c0 | k0 | k_max |"
    ncol = head.count("|") - 1
    rows = [head, "|" + "---|" * ncol]
    rs = list(enumerate(p.rounds, start=1))
    show = rs if len(rs) <= max_rows else [*rs[: max_rows - 1], rs[-1]]
    for i, r in show:
        tag = f"{i}+" if p.repeat_last and i == len(p.rounds) else str(i)
        row = (f"| {tag} | {fmt(r.T)} | {fmt(r.lam)} | {fmt(r.R)} | {fmt(r.c)} | "
               f"{fmt(r.eps_bt)} | {fmt(r.delta_bt)} | {fmt(r.m_S)} | {fmt(r.m_D)} |")
        if tests:
            row += (f" {fmt(r.halt_threshold) if r.halt_threshold is not None else '-'} | "
                    f"{fmt(r.restart_threshold) if r.restart_threshold is not None else '-'} | "
                    f"{fmt(r.block_cap) if r.block_cap is not None else '-'} |")
        rows.append(row)
    if len(rs) > max_rows:
        rows.insert(2 + max_rows - 1, "| ... " + "| " * (ncol - 1) + "|")
    return "\n".join(rows)


def summary_sentence(p: Plan, achievable: Achievable | None) -> str:
    t = p.targets
    if achievable is None:
        return f"epsilon = {fmt(t.epsilon)} needs n = {fmt(p.n_required)} training examples."
    n = achievable.n
    if n >= p.n_required:
        return (f"n = {fmt(n)} suffices for epsilon = {fmt(t.epsilon)} (needs n = "
                f"{fmt(p.n_required)}); the best epsilon for n = {fmt(n)} is "
                f"{fmt(achievable.epsilon)}.")
    if not math.isfinite(achievable.epsilon):
        return (f"n = {fmt(n)} certifies no finite epsilon ({achievable.reason}); "
                f"epsilon = {fmt(t.epsilon)} needs n = {fmt(p.n_required)}.")
    return (f"n = {fmt(n)} certifies epsilon = {fmt(achievable.epsilon)} only; "
            f"epsilon = {fmt(t.epsilon)} needs n = {fmt(p.n_required)}.")


def _design_line(p: Plan) -> str:
    c, r1 = p.certificate, p.rounds[0]
    parts = [f"halting = {c.halting}", f"restarts = {c.restarts}"]
    if r1.halt_eps is not None:
        parts.append(f"eps_h = {fmt(r1.halt_eps)}")
    if r1.restart_eps is not None:
        parts.append(f"eps_r = {fmt(r1.restart_eps)}")
    if c.conditional_on:
        parts.append(f"CONDITIONAL ON {c.conditional_on.upper()} (unreviewed)")
    return "design: " + ", ".join(parts)


def _queries_lines(c: Certificate) -> list[str]:
    if c.conditional_on:
        return [f"  queries:       CONDITIONAL ON {c.conditional_on} (unreviewed): epsilon = "
                f"{fmt(c.epsilon_queries_conditional)} -- not a guarantee"]
    if c.query_private:
        return [f"  queries:       epsilon = {fmt(c.epsilon_queries)}, delta = {fmt(c.delta_queries)} "
                f"(proven: docs/PRIVACY.md; worst round {c.worst_query_round})"]
    return [f"  queries:       NOT PROVEN -- {c.queries_reason}",
            f"                 (conditional chain, not a guarantee: epsilon = "
            f"{fmt(c.epsilon_queries_conditional)}, worst round {c.worst_query_round})"]


def designs_table(costs: tuple[DesignCost, ...]) -> str:
    """The data cost of every design (``engine.planner.api.designs``), as markdown."""
    rows = ["| design | query privacy | in-round step (Q0) | n_required | training eps | query eps |",
            "|---|---|---|---|---|---|"]
    for x in costs:
        if x.conditional_on:
            status = f"conditional on {x.conditional_on}"
        else:
            status = "proven" if x.query_private else "NOT proven"
        q0 = (f"eps = {fmt(x.in_round_epsilon)}" if math.isfinite(x.in_round_epsilon)
              else "open channel")
        n = fmt(x.n_required) if x.n_required is not None else "infeasible"
        tr = fmt(x.epsilon_training) if math.isfinite(x.epsilon_training) else (
            f"({fmt(x.epsilon_conditional)})" if math.isfinite(x.epsilon_conditional) else "-")
        qe = fmt(x.epsilon_queries) if math.isfinite(x.epsilon_queries) else (
            f"({fmt(x.epsilon_conditional)})" if math.isfinite(x.epsilon_conditional) else "-")
        name = x.name + (" **default**" if x.is_default else "")
        rows.append(f"| {name} | {status} | {q0} | {n} | {tr} | {qe} |")
    return "\n".join(rows)


def plan_text(p: Plan, achievable: Achievable | None = None,
              costs: tuple[DesignCost, ...] | None = None) -> str:
    t, c = p.targets, p.certificate
    train = (f"  training set:  CONDITIONAL ON {c.conditional_on} (unreviewed): epsilon = "
             f"{fmt(c.epsilon_training_conditional)} -- not a guarantee" if c.conditional_on else
             f"  training set:  epsilon = {_eps_text(c.epsilon_training, c.training_reason)}, "
             f"delta = {fmt(c.delta_training)}")
    lines = [
        f"everlast plan: {t.concept} (VC {t.vc}), epsilon = {fmt(t.epsilon)}, delta = {fmt(t.delta)}, "
        f"alpha = {fmt(t.alpha)}, beta = {fmt(t.beta)}; accounting = {t.accounting}, "
        f"halts = {t.halts}",
        _design_line(p),
        "",
        summary_sentence(p, achievable),
        train,
        *_queries_lines(c),
    ]
    if t.accounting == "paper":
        lines.append("  (the paper's own schedule, section 5; the numbers above are what the paper's "
                     "lemmas certify at its parameters -- it claims epsilon = "
                     f"{fmt(t.epsilon)}; its n is reported, not run)")
    if p.schedule is None:
        lines.append(f"  NOT RUNNABLE: {p.not_runnable_reason}")
    lines += ["", "Schedule (last round repeats):", schedule_table(p), "",
              "Privacy chain (training set; queries at the worst round):", steps_table(c)]
    failed = [x for x in (*c.checks, *p.checks) if not x.holds]
    if failed:
        lines += ["", "Failed conditions:"]
        lines += [f"  - [{x.kind}] round {x.round}: {x.name} ({x.lemma}): {fmt(x.value)} vs "
                  f"{fmt(x.bound)}" for x in failed[:12]]
        if len(failed) > 12:
            lines.append(f"  ... and {len(failed) - 12} more")
    warns = list(dict.fromkeys([*p.warnings, *c.warnings]))
    if warns:
        lines += ["", "Warnings:"] + [f"  - {w}" for w in warns]
    if costs is not None:
        best = cheapest_sound(costs)
        lines += ["", "Designs (same targets; query chain per policy, data cost; "
                  "docs/PRIVACY.md sections 5-9):", designs_table(costs)]
        lines.append("(numbers in parentheses are conditional: not guarantees)")
        if best is not None:
            lines.append(f"Cheapest design with proven query privacy: {best.name} "
                         f"(n = {fmt(best.n_required)}).")
    return "\n".join(lines)


def certificate_text(c: Certificate) -> str:
    """Plain summary of a certificate (for ``simulate`` and hand-written schedules)."""
    strength = ("no guarantee" if not math.isfinite(c.epsilon_training) else
                "weak" if c.epsilon_training > 10 else "ok")
    lines = [
        f"training set: epsilon = {_eps_text(c.epsilon_training, c.training_reason)}, "
        f"delta = {fmt(c.delta_training)} [{strength}] ({c.accounting} accounting, n = {fmt(c.n)})",
        ("queries: NOT PROVEN -- " + c.queries_reason) if not c.query_private else
        f"queries: epsilon = {fmt(c.epsilon_queries)}, delta = {fmt(c.delta_queries)}",
    ]
    if math.isfinite(c.epsilon_queries_conditional) and not c.query_private:
        lines.append(f"  (conditional query chain, not a guarantee: epsilon = "
                     f"{fmt(c.epsilon_queries_conditional)})")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# The generated block of docs/PRIVACY.md

def doc_blocks() -> dict[str, str]:
    """Name -> generated markdown, for the fenced blocks of docs/PRIVACY.md delimited by
    ``<!-- BEGIN GENERATED: name -->`` and ``<!-- END GENERATED: name -->``."""
    return {"worked-example": worked_example(), "designs": designs_block(),
            "calibration-crosscheck": calibration_crosscheck()}


WORKED = Targets(epsilon=1.0, delta=1e-6, alpha=0.1, beta=0.05, concept="thresholds",
                 halts="split-votes")
"""The worked example's targets (docs/PRIVACY.md section 10)."""


def worked_example() -> str:
    """The worked example quoted in docs/PRIVACY.md, regenerated by tests/planner/test_doc.py:
    the default design's chain, then the paper's design for comparison."""
    p = plan(WORKED)
    c = p.certificate
    r1 = p.rounds[0]
    lines = [
        "Targets: thresholds (VC 1), epsilon = 1, delta = 1e-6, alpha = 0.1, beta = 0.05, "
        "tight accounting, split-votes halt budget (k = 2), 12 listed rounds; the default design.",
        "",
        f"- design: halting = {c.halting}, restarts = {c.restarts}, eps_h = {fmt(r1.halt_eps)}, "
        f"eps_r = {fmt(r1.restart_eps)}.",
        f"- n_required = {fmt(p.n_required)}; round 1: T_1 = {fmt(r1.T)}, lambda_1 = {r1.lam}, "
        f"R_1 = {fmt(r1.R)}, c_1 = {fmt(r1.c)} (c_1 - halt_threshold c0 = "
        f"{fmt(r1.c - int(r1.halt_threshold or 0))}), "
        f"eps'_1 = {fmt(r1.eps_bt)}, delta_mu,1 = {fmt(r1.delta_bt)}, restart_threshold k0 = "
        f"{fmt(r1.restart_threshold)}, block_cap k_max = {fmt(r1.block_cap)}.",
        f"- budgets: E_1 = {fmt(p.E1, 4)}, E_2 = {fmt(p.E2, 4)}, r_1 = {fmt(p.r1, 4)}, "
        f"r_D = {fmt(p.rD, 4)}.",
        f"- certified: training epsilon = {fmt(c.epsilon_training, 4)} (delta = "
        f"{fmt(c.delta_training)}); queries epsilon = {fmt(c.epsilon_queries, 4)} (delta = "
        f"{fmt(c.delta_queries)}), worst round {c.worst_query_round}; query-private: "
        f"{'yes' if c.query_private else 'NO'}.",
        "",
        steps_table(c),
        "",
        "The paper's design (halting paper, restarts per-top; NOT query-private) for the same "
        "targets (alpha = 0.1, delta = 1e-6):",
        "",
        "| accounting | halts | epsilon = 1 | epsilon = 8 |",
        "|---|---|---|---|",
    ]
    for acc, halts in (("paper", "paper"), ("tight", "paper"), ("tight", "split-votes")):
        ns = []
        for e in (1.0, 8.0):
            q = plan(Targets(epsilon=e, accounting=acc, halts=halts,  # type: ignore[arg-type]
                             halting="paper", restarts="per-top"))
            ns.append(fmt(q.n_required) + ("" if q.schedule is not None else " (not runnable)"))
        lines.append(f"| {acc} | {halts} | {ns[0]} | {ns[1]} |")
    pp = plan(Targets(epsilon=1.0, accounting="paper"))
    pc = pp.certificate
    bt1 = next(x for x in pc.steps if x.name == "BT composition, round 1")
    tc = certify(pp.rounds, pp.n_required, "tight", 1e-6)
    lines += [
        "",
        f"The paper's own schedule at epsilon = 1 (n = {fmt(pp.n_required)}): Observation 2 gives "
        f"{fmt(bt1.epsilon, 4)} per round (Claim D.1's bound: {fmt(claim_d1_bound(1e-6), 4)}; the "
        f"paper rounds it to 1); the paper's lemmas then certify training epsilon = "
        f"{fmt(pc.epsilon_training, 4)} and a conditional query epsilon = "
        f"{fmt(pc.epsilon_queries_conditional, 4)}; the tight accounting certifies "
        f"{fmt(tc.epsilon_training, 4)} and {fmt(tc.epsilon_queries_conditional, 4)} for the same "
        "schedule.",
    ]
    return "\n".join(lines)


def designs_block() -> str:
    """The data cost of every design at alpha = 0.1, delta = 1e-6 (docs/PRIVACY.md section 9)."""
    by_eps = {e: designs(Targets(epsilon=e, halts="split-votes")) for e in (1.0, 8.0)}
    lines = [
        "Split-votes halt budget (k = 2), thresholds, alpha = 0.1, delta = 1e-6, beta = 0.05, tight "
        "accounting, Claims D.2/D.7 accuracy floors applied. n_required for epsilon = 1 and 8:",
        "",
        "| design | query privacy | in-round step Q0 (epsilon = 1) | n, epsilon = 1 | n, epsilon = 8 |",
        "|---|---|---|---|---|",
    ]
    for x1, x8 in zip(by_eps[1.0], by_eps[8.0], strict=True):
        status = (f"conditional on {x1.conditional_on}" if x1.conditional_on else
                  "**proven**" if x1.query_private else "NOT proven")
        if math.isfinite(x1.in_round_epsilon):
            q0 = f"eps_h + eps_r = {fmt(x1.in_round_epsilon)}, delta {fmt(x1.in_round_delta)}"
        else:
            q0 = "open: " + ("halting and restart channels" if "halting" in x1.in_round_note
                             and "restart" in x1.in_round_note else
                             "restart channel" if "restart" in x1.in_round_note else "halting channel")
        tag = " (default)" if x1.is_default else ""
        n1 = fmt(x1.n_required) if x1.n_required else "infeasible"
        n8 = fmt(x8.n_required) if x8.n_required else "infeasible"
        lines.append(f"| {x1.name}{tag} | {status} | {q0} | {n1} | {n8} |")
    lines += [
        "",
        "The paper's halt budget (c_i = min(R_i, 64 alpha_i R_i), the CLI's default `--halts paper`) "
        "for the two candidates of the default design and the paper's design:",
        "",
        "| design | n, epsilon = 1 | n, epsilon = 8 |",
        "|---|---|---|",
    ]
    for h, r in (("noisy", "private"), ("never", "stateless"), ("paper", "per-top")):
        ns = [fmt(plan(Targets(epsilon=e, halting=h, restarts=r)).n_required)  # type: ignore[arg-type]
              for e in (1.0, 8.0)]
        lines.append(f"| {h}+{r} | {ns[0]} | {ns[1]} |")
    defaults = [plan(Targets(epsilon=e)) for e in (1.0, 8.0)]
    names = [f"{q.certificate.halting}+{q.certificate.restarts}" for q in defaults]
    lines += ["", f"Default design with the paper's halt budget: {names[0]} (epsilon = 1), "
              f"{names[1]} (epsilon = 8)."]
    return "\n".join(lines)


CALIBRATION = (
    # (table, epsilon, alpha, halts, cap_c, accuracy_floors, n, T_1, R_1, c_1, r_D) from calibration.md
    ("(iii)", 1.0, 0.1, "paper", False, True, 7.62e18, 4.26e15, 2.35e21, 7.52e21, 0.033),
    ("(iii)", 8.0, 0.1, "paper", False, True, 7.21e15, 4.03e12, 1.30e17, 4.15e17, 1.0),
    ("(iii)", 2.0, 0.05, "paper", False, True, 1.05e19, 2.70e15, 1.78e21, 2.84e21, 0.122),
    ("(iv)", 1.0, 0.1, "split-votes", True, False, 4.72e13, 2.64e10, 6.03e15, 7.10e11, 0.032),
    ("(iv)", 8.0, 0.1, "split-votes", True, False, 3.48e10, 1.94e7, 2.66e11, 3.13e7, 1.0),
    ("(iv)", 2.0, 0.05, "split-votes", True, False, 2.68e13, 6.88e9, 1.93e15, 5.09e10, 0.12),
)


def calibration_crosscheck() -> str:
    """Table comparing the tight solver with calibration.md tables (iii) and (iv) (same
    assumptions: c_i uncapped in (iii); no accuracy floors in (iv), whose rounds >= 4 would
    otherwise be raised by Claim D.7)."""
    rows = ["| table | epsilon | alpha | n (calib.) | n (planner) | T_1 | R_1 | c_1 | r_D |",
            "|---|---|---|---|---|---|---|---|---|"]
    for tab, e, a, halts, cap, floors, n, T1, R1, c1, rD in CALIBRATION:
        sol = solve(e, 1e-6, a, 0.05, 1, TightOptions(halts=halts, cap_c=cap,  # type: ignore[arg-type]
                                                         accuracy_floors=floors))
        r = sol.specs[0]
        rows.append(f"| {tab} | {fmt(e)} | {fmt(a)} | {fmt(n)} | {fmt(sol.n_required)} | "
                    f"{fmt(T1)} / {fmt(r.T)} | {fmt(R1)} / {fmt(r.R)} | {fmt(c1)} / {fmt(r.c)} | "
                    f"{fmt(rD)} / {fmt(sol.rD)} |")
    return "\n".join(rows)
