"""``everlast compare``'s three plots (matplotlib, Agg backend), drawn from the result of
``peers.comparison.compute``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from everlast.cli.compare_tables import fmt_n, fmt_sci, methods_by_name, run_label
from everlast.peers.comparison.settings import EVERLAST_NAMES, GROWING, RUN

PLOT_FILES = ("compare_n_vs_horizon.png", "compare_answered_vs_n.png", "compare_domain_size.png")
_STYLE: dict[str, tuple[str, str]] = {
    "nonprivate": ("tab:gray", "o"),
    "dwork_feldman": ("tab:blue", "s"),
    "sparse_vector": ("tab:orange", "D"),
    "private_learner": ("tab:olive", "x"),
    "private_learner_grid": ("tab:green", "v"),
    "private_learner_float64": ("tab:cyan", "<"),
    "dagan_feldman": ("tab:purple", "^"),
    "everlast": ("tab:red", "*"),
    "everlast_split_votes": ("darkred", "P"),
}


def write_plots(result: dict[str, Any], img: Path) -> list[Path]:
    """The three PNGs of the docs (matplotlib, Agg backend)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise click.ClickException("the plots need matplotlib: pip install 'everlast[plots]'") from exc
    img.mkdir(parents=True, exist_ok=True)
    paths = [img / f for f in PLOT_FILES]
    for draw, path in zip((_n_vs_horizon, _answered_vs_n, _domain_size), paths, strict=True):
        draw(plt, result, path)
    return paths


def _n_vs_horizon(plt: Any, result: dict[str, Any], path: Path) -> None:
    """1. n required vs horizon."""
    fig, ax = plt.subplots(figsize=(9, 5.5))
    qs = result["horizons"]
    beyond = result.get("beyond_horizons", {"horizons": []})
    for m in result["methods"]:
        if all(n is None for n in m["n_required"]):
            continue
        color, marker = _STYLE[m["name"]]
        xs = [q for q, n in zip(qs, m["n_required"], strict=True) if n is not None]
        ys = [n for n in m["n_required"] if n is not None]
        if m["name"] in GROWING:
            ax.plot(xs, ys, color=color, marker=marker, label=m["label"])
            bq = beyond["horizons"]
            if bq:
                ex = beyond[f"{m['name']}_exact"]
                pts = list(zip(bq, beyond[m["name"]], ex, strict=True))
                last_exact = max((i for i, p in enumerate(pts) if p[2]), default=0)
                ax.plot([p[0] for p in pts[: last_exact + 1]], [p[1] for p in pts[: last_exact + 1]],
                        color=color, linestyle="--", linewidth=1)
                ax.plot([p[0] for p in pts[last_exact:]], [p[1] for p in pts[last_exact:]],
                        color=color, linestyle=":", linewidth=1.5)
            run_x = [q for q, c, n in zip(qs, m["computed_or_run"], m["n_required"], strict=True) if c == RUN]
            run_y = [n for c, n in zip(m["computed_or_run"], m["n_required"], strict=True) if c == RUN]
            ax.scatter(run_x, run_y, s=90, facecolors="none", edgecolors="black", zorder=5)
        else:
            xmax = max([*qs, *beyond["horizons"]])
            ax.hlines(ys[0], min(qs), xmax, color=color, linewidth=2 if m["name"] in EVERLAST_NAMES else 1,
                      label=m["label"])
    for c in result["crossovers"]:
        if c.get("q_star") is not None and c["peer"] == "dwork_feldman":
            ax.axvline(c["q_star"], color=_STYLE[c["everlast"]][0], linestyle=":", linewidth=1)
            ax.annotate(f"Q* = {fmt_sci(c['q_star'])}", (c["q_star"], c["everlast_n"]), textcoords="offset points",
                        xytext=(4, -14), fontsize=8)
    ax.axvspan(min(qs), max(qs), color="0.92", zorder=0)
    exact_max = result["extrapolation"]["exact_up_to"]
    ax.axvline(exact_max, color="0.5", linewidth=0.8)
    ax.text(exact_max, 0.985, "exact | extrapolated ", transform=ax.get_xaxis_transform(), fontsize=7,
            color="0.35", ha="center", va="top")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("horizon Q (queries); shaded: the table's horizons; dashed: computed beyond them; "
                  "dotted: extrapolated")
    ax.set_ylabel("labeled examples n required")
    ax.set_title(f"n to answer Q queries at error {result['alpha']:g}, "
                 f"(eps={result['epsilon']:g}, delta={result['delta']:g}); circles: also run")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)



def _answered_vs_n(plt: Any, result: dict[str, Any], path: Path) -> None:
    """2. Queries answered before refusal vs n, and the error of those answers."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    cap = result["queries"]
    for m in result["methods"]:
        color, marker = _STYLE[m["name"]]
        ok = [r for r in m["runs"] if r.get("status") == "ok"]
        if not ok:
            continue
        xs = [r["n"] for r in ok]
        a1.plot(xs, [max(r["answered_before_refusal"], 0.8) for r in ok], color=color, marker=marker,
                label=run_label(m))
        never = [r for r in ok if not r["refused"]]
        a1.scatter([r["n"] for r in never], [cap for _ in never], color=color, marker="^", s=60, zorder=5)
        errs = [(r["n"], r["error_rate"]) for r in ok if r["error_rate"] is not None]
        if errs:
            a2.plot([e[0] for e in errs], [e[1] for e in errs], color=color, marker=marker, label=run_label(m))
    a1.axhline(cap, color="black", linestyle=":", linewidth=1)
    a1.set_xscale("log")
    a1.set_yscale("log")
    a1.set_xlabel("labeled examples n")
    a1.set_ylabel("queries answered before refusal")
    a1.set_title(f"of {cap:,} queries (dotted); ▲ never refused", fontsize=9)
    a1.legend(fontsize=7)
    a1.grid(True, alpha=0.3)
    a2.axhline(result["alpha"], color="black", linestyle=":", linewidth=1, label="alpha")
    a2.set_xscale("log")
    a2.set_xlabel("labeled examples n")
    a2.set_ylabel("error rate of the answers given")
    a2.grid(True, alpha=0.3)
    fig.suptitle("Runs on the same thresholds task (everlast: explicit small schedule, weak certified epsilon)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)



def _domain_size(plt: Any, result: dict[str, Any], path: Path) -> None:
    """3. The private learner's n and error against the domain size."""
    M = methods_by_name(result)
    dom = result["domain_effect"]
    fig, (b1, b2) = plt.subplots(1, 2, figsize=(11, 4.5))
    fin = [r for r in dom["rows"] if r["domain_size"] is not None]
    xs = [r["log2_domain_size"] for r in fin]
    b1.plot(xs, [r["private_learner_n"] for r in fin], color=_STYLE["private_learner_grid"][0], marker="v",
            label="private learner, Theorem L2 (computed)")
    ev_text = "; ".join(f"{M[name]['label']}: n = {fmt_n(M[name]['n_required'][0])} for every |X|"
                        for name in EVERLAST_NAMES)
    b1.text(0.02, 0.97, "off the chart, the same for every |X| and on the reals:\n" + ev_text.replace("; ", "\n"),
            transform=b1.transAxes, fontsize=7, va="top", color=_STYLE["everlast"][0])
    b1.set_ylim(0, max([r["private_learner_n"] for r in fin], default=1) * 1.6)
    b1.set_xlabel("log2 |X|  (the reals: learner impossible)")
    b1.set_ylabel("labeled examples n required (computed)")
    b1.legend(fontsize=7, loc="lower right")
    b1.grid(True, alpha=0.3)
    for key, lab in (("run_at_computed_n", "learner at its computed n"),
                     ("run_at_fixed_n", f"learner at n = {fmt_n(dom['fixed_n'])}")):
        err_pts = [(r["log2_domain_size"], r[key]["error_rate"]) for r in fin
                   if r.get(key) and r[key].get("error_rate") is not None]
        if err_pts:
            b2.plot([p[0] for p in err_pts], [p[1] for p in err_pts], marker="o", label=lab)
    b2.axhline(result["alpha"], color="black", linestyle=":", linewidth=1, label="alpha")
    b2.set_xlabel("log2 |X|")
    b2.set_ylabel("error rate (run)")
    b2.legend(fontsize=7)
    b2.grid(True, alpha=0.3)
    fig.suptitle("Domain size: the private learner needs a finite X; everlast's n does not depend on |X|",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
