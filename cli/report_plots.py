"""``everlast report``'s plots, one function per kind of record (``cli/report.py`` says which).

matplotlib is imported only here (the ``plots`` extra); the Agg backend writes files, no display.
Each ``report_*`` returns the summary's Markdown lines and the PNGs it wrote.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click

from everlast.engine.design import PAPER

Obj = dict[str, Any]


def _plt() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise click.ClickException("everlast report needs matplotlib: pip install 'everlast[plots]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fit_titles(fig: Any) -> None:
    """Wrap every axes title (and the figure's suptitle) that is wider than the figure, so that no
    title is cut off at the figure's edge (a narrow figure: an audit of one row)."""
    import textwrap

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    room = 0.96 * fig.bbox.width
    titles = [ax.title for ax in fig.axes]
    if getattr(fig, "_suptitle", None) is not None:
        titles.append(fig._suptitle)
    for t in titles:
        text = t.get_text()
        width = t.get_window_extent(r).width
        if text and width > room:
            per_line = max(12, int(len(text) * room / width))
            t.set_text(textwrap.fill(text, per_line))


def _save(fig: Any, path: Path) -> Path:
    """Lay out, write (PNG, 110 dpi) and close a figure; returns its path."""
    fit_titles(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)
    return path


def _int_ticks() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _fmt(v: Any, nd: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return "inf" if math.isinf(v) else f"{v:.{nd}f}"
    return str(v)


# -- round-by-round runs -----------------------------------------------------------------------------


def report_rounds(obj: Obj, out: Path, stem: str) -> tuple[list[str], list[Path]]:
    plt = _plt()
    rounds = obj["rounds"]
    idx = [r["round"] for r in rounds]
    files: list[Path] = []
    lines = [f"## {stem}: {obj.get('stream') or obj.get('distribution') or 'run'}", ""]
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, name in (("error_answers", "answers to the stream's queries"),
                      ("error_fresh", "decision rule on fresh points of the true distribution"),
                      ("error_original", "decision rule on fresh points of the original distribution")):
        ys = [None if r.get(key) is None else 1.0 - r[key] for r in rounds]
        if any(y is not None for y in ys):
            ax.plot(idx, [math.nan if y is None else y for y in ys], marker="o", label=name)
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(_int_ticks())
    ax.set_ylabel("accuracy")
    ax.set_ylim(0.0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left")
    ax.set_title(f"{stem}: accuracy per round")
    files.append(_save(fig, out / f"{stem}-accuracy.png"))

    fig, ax = plt.subplots(figsize=(7, 4))
    used = [r.get("tops_used", 0) for r in rounds]
    allowed = [r.get("tops_allowed", 0) for r in rounds]
    ax.bar(idx, used, width=0.6, color="tab:orange", label="tops used")
    ax.set_xlim(min(idx) - 0.7, max(idx) + 0.7)
    ax.plot(idx, allowed, color="black", marker="_", markersize=20, linestyle="none", label="budget c_i")
    stopped = [(r["round"], "paused" if r.get("paused") else "halted") for r in rounds
               if r.get("paused") or r.get("halted_after") is not None]
    for h, what in stopped:
        ax.annotate(what, (h, allowed[idx.index(h)]), textcoords="offset points", xytext=(0, 6),
                    ha="center", color="red")
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(_int_ticks())
    ax.set_ylabel("tops (halt budget)")
    ax.set_ylim(0, 1.3 * max([1, *allowed, *used]))
    ax.legend(loc="upper left", ncol=2, fontsize=8)
    ax.set_title(f"{stem}: halt budget per round")
    files.append(_save(fig, out / f"{stem}-halts.png"))

    orig = any(r.get("error_original") is not None for r in rounds)
    lines += ["| round | queries | refused | tops / c | error (answers) | error (fresh) |"
              + (" error (original) |" if orig else ""),
              "|---:|---:|---:|---:|---:|---:|" + ("---:|" if orig else "")]
    for r in rounds:
        lines.append(f"| {r['round']} | {r.get('queries', '-')} | {r.get('refused', '-')} | "
                     f"{r.get('tops_used', '-')} / {r.get('tops_allowed', '-')} | "
                     f"{_fmt(r.get('error_answers'), 4)} | {_fmt(r.get('error_fresh'), 4)} |"
                     + (f" {_fmt(r.get('error_original'), 4)} |" if orig else ""))
    lines.append("")
    if obj.get("paused_rounds"):
        qp = obj.get("queries_to_pause")
        lines.append(f"Rounds **paused** (halt budget spent; the rest of the round refused, the next round "
                     f"answers again): {', '.join(map(str, obj['paused_rounds']))}"
                     + (f"; the first after {qp:,} queries." if qp else "."))
    if obj.get("halted"):
        qh = obj.get("queries_to_halt")
        lines.append("The predictor **halted**" + (f" after {qh:,} answered queries." if qh else "."))
    det = obj.get("stream_details")
    if det:
        lines.append("Stream: " + ", ".join(f"{k} = {_fmt(v)}" for k, v in det.items()))
    if obj.get("guarantee"):
        lines.append(str(obj["guarantee"]))
    lines.append("")
    return lines, files


def report_traces(objs: list[tuple[str, Obj]], out: Path, name: str) -> tuple[list[str], list[Path]]:
    """Tops used in the current round against queries sent, one line per stream run: how fast each
    stream spends the halt budget (an availability attack spends it in about c queries)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    budget = 0
    for label, o in objs:
        tr = o["trace"]
        ax.plot(tr["queries"], tr["tops"], label=label, drawstyle="steps-post")
        budget = max(budget, *(r.get("tops_allowed", 0) for r in o["rounds"]))
        stop = o.get("queries_to_pause") or o.get("queries_to_halt")
        if stop:
            ax.axvline(stop, color="red", linestyle=":", linewidth=1)
    ax.axhline(budget, color="black", linestyle="--", linewidth=1, label="budget c_i")
    ax.set_xscale("log")
    ax.set_xlabel("queries sent (log scale)")
    ax.set_ylabel("tops used in the current round")
    ax.set_title("halt budget spent over time (dotted: the first round paused)")
    ax.legend(fontsize=8)
    f = _save(fig, out / f"{name}-tops.png")
    lines = ["## halt budget over time", "", "| run | queries sent | first pause after |", "|---|---:|---:|"]
    lines += [f"| {lab} | {o.get('queries')} | {_fmt(o.get('queries_to_pause'))} |" for lab, o in objs]
    lines.append("")
    return lines, [f]


# -- replays -----------------------------------------------------------------------------------------


def report_replay(obj: Obj, out: Path, stem: str) -> tuple[list[str], list[Path]]:
    plt = _plt()
    files: list[Path] = []
    lines = [f"## {stem}: replay of {obj.get('stream', 'a stream')}", ""]
    lat = obj.get("latency_ms") or {}
    all_lat = obj.get("latencies_ms")
    fig, ax = plt.subplots(figsize=(7, 4))
    if isinstance(all_lat, list) and all_lat:
        ax.hist(all_lat, bins=50, color="tab:blue")
        ax.set_xlabel("latency (ms)")
        ax.set_ylabel("queries")
    else:
        keys = [k for k in ("p50", "p90", "p99", "max") if lat.get(k) is not None]
        ax.bar(keys, [lat[k] for k in keys], color="tab:blue")
        ax.set_ylabel("latency (ms)")
    ax.set_title(f"{stem}: latency")
    files.append(_save(fig, out / f"{stem}-latency.png"))
    rounds = obj.get("rounds")
    if isinstance(rounds, dict) and rounds:
        fig, ax = plt.subplots(figsize=(7, 4))
        ks = sorted(rounds, key=lambda k: int(k))
        ax.bar([int(k) for k in ks], [rounds[k] for k in ks], color="tab:green")
        ax.set_xlabel("round")
        ax.set_ylabel("answers")
        ax.set_title(f"{stem}: answers per round")
        files.append(_save(fig, out / f"{stem}-rounds.png"))
    lines += [
        f"- sent {obj.get('sent')}, answered {obj.get('answered')}, missing {obj.get('missing')}",
        f"- statuses: {obj.get('statuses')}",
        f"- accuracy: {_fmt(obj.get('accuracy'), 4)} against " + str(obj.get("accuracy_against") or (
            "the replay's synthetic concept (the distribution's median; this record predates `everlast replay "
            "--truth`): not necessarily your model's accuracy")),
        f"- throughput: {_fmt(obj.get('throughput_qps'), 0)} queries/s",
        "- latency (ms): " + ", ".join(f"{k} {_fmt(v, 1)}" for k, v in lat.items()),
        "",
    ]
    return lines, files


def report_queries(objs: list[Obj], out: Path, stem: str, truth: tuple[Any, str] | None = None
                   ) -> tuple[list[str], list[Path]]:
    """A query record (JSON lines with answers): accuracy and refusals per round, statuses. With
    ``truth`` (``truth_labeller``) the answers are scored against the user's concept; else against
    the labels the record holds (a replay's synthetic concept unless it ran with ``--truth``)."""
    plt = _plt()
    per: dict[int, list[int]] = {}
    correct = scored = 0
    statuses: dict[str, int] = {}
    lat: list[float] = []
    for o in objs:
        st = str(o.get("status", "-"))
        statuses[st] = statuses.get(st, 0) + 1
        if isinstance(o.get("latency_ms"), int | float):
            lat.append(float(o["latency_ms"]))
        r = o.get("round")
        if not isinstance(r, int):
            continue
        c = per.setdefault(r, [0, 0, 0])  # answered, correct (of scored), scored
        lab = o.get("label")
        try:
            y = truth[0](o["x"]) if truth is not None else o.get("y", o.get("true_label"))
        except (TypeError, ValueError, IndexError, KeyError):
            raise click.ClickException(f"{stem}: a record's x does not fit the --truth concept") from None
        if lab in (0, 1):
            c[0] += 1
            if y in (0, 1):
                c[2] += 1
                c[1] += int(lab == y)
                scored += 1
                correct += int(lab == y)
    files: list[Path] = []
    lines = [f"## {stem}: query record ({len(objs)} queries)", "", f"Statuses: {statuses}", ""]
    if scored:
        against = truth[1] if truth is not None else (
            "the labels the record holds (y / true_label: the replay's synthetic concept, unless it ran with "
            "--truth; give `everlast report --truth ...` to score against your model's concept)")
        lines += [f"Accuracy: {correct / scored:.4f} over {scored:,} answers, against {against}.", ""]
    elif truth is None:
        lines += ["No true labels in the record: give `--truth` to score the answers.", ""]
    if per:
        ks = sorted(per)
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(ks, [per[k][1] / per[k][2] if per[k][2] else math.nan for k in ks], marker="o")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("round")
        ax.set_ylabel("accuracy of the answers")
        ax.set_title(f"{stem}: accuracy per round")
        files.append(_save(fig, out / f"{stem}-accuracy.png"))
    if lat:
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.hist(lat, bins=50)
        ax.set_xlabel("latency (ms)")
        ax.set_title(f"{stem}: latency")
        files.append(_save(fig, out / f"{stem}-latency.png"))
    return lines, files


# -- audits ------------------------------------------------------------------------------------------


def _design(o: Obj) -> str:
    """The audited design's name (records before the two designs carry only halting/restarts)."""
    if o.get("design"):
        return str(o["design"])
    h, rs = o.get("halting", PAPER.halting.value), o.get("restarts", PAPER.restarts.value)
    return PAPER.name if (h, rs) == (PAPER.halting.value, PAPER.restarts.value) else f"{h}+{rs}"


def report_audits(objs: list[Obj], out: Path, stem: str) -> tuple[list[str], list[Path]]:
    plt = _plt()
    rows = []
    for o in objs:
        for a in o.get("attacks") or [o]:
            rows.append((o["game"], o["variant"], a.get("attack", o.get("attack", "?")),
                         a.get("claimed_epsilon", o.get("claimed_epsilon")),
                         a.get("claimed_kind", o.get("claimed_kind", "proven")),
                         a.get("epsilon_lower_bound", o.get("epsilon_lower_bound")),
                         a.get("caught", o.get("caught")), a, o))
    order = {"real": 0, "no-noise": 1, "majority-relabel": 2, "no-halt-limit": 3, "charged-c": 4,
             "deterministic-halting": 5}
    rows.sort(key=lambda r: (r[0] != "training", r[2], _design(r[8]) != "paper", order.get(r[1], 9)))
    files: list[Path] = []
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(rows) + 2), 4.8))
    xs = range(len(rows))
    bounds = [r[5] or 0.0 for r in rows]
    shown = [c for c in (r[3] for r in rows) if c is not None and math.isfinite(c) and c <= 20.0]
    top = 1.25 * max([1.0, *bounds, *shown])
    colors = ["tab:red" if r[6] else "tab:blue" for r in rows]
    ax.bar(xs, bounds, color=colors, label="empirical lower bound")
    for i, r in enumerate(rows):
        ax.annotate(_fmt(r[5], 2), (i, bounds[i]), textcoords="offset points", xytext=(0, 2), ha="center",
                    fontsize=7)
        claim = r[3]
        style = "-" if str(r[4]).startswith("proven") else "--"
        if claim is None or not math.isfinite(claim):
            ax.annotate("claim: none", (i, top * 0.93), ha="center", fontsize=7)
        elif claim > top:
            ax.annotate(f"claim {claim:.3g}", (i, top * 0.93), ha="center", fontsize=7)
        else:
            ax.plot([i - 0.4, i + 0.4], [claim, claim], color="black", linestyle=style)
    ax.set_ylim(0.0, top)
    ax.plot([], [], color="black", label="claimed epsilon (planner)")
    ax.plot([], [], color="black", linestyle="--", label="claimed, not proven (conditional / fallback)")
    ax.set_xticks(list(xs))
    labels = []
    for r in rows:
        labels.append(f"{r[0]}\n{r[1]}\n{r[2]}\n{_design(r[8])}")
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("epsilon")
    ax.set_title("audit: empirical lower bound vs claimed epsilon (red: above the claim)")
    ax.legend(loc="upper left", fontsize=7)
    files.append(_save(fig, out / f"{stem}-bounds.png"))

    files += _score_histograms(plt, rows, out, stem)

    lines = [f"## {stem}: privacy audit", "",
             "| game | design | variant | attack | claimed epsilon | kind | lower bound | trials | verdict |",
             "|---|---|---|---|---:|---|---:|---:|---|"]
    for r in rows:
        o = r[8]
        verdict = "**caught**: bound above the claim" if r[6] else "consistent with the claim"
        lines.append(f"| {r[0]} | {_design(o)} | {r[1]} | {r[2]} | {_fmt(r[3])} | {r[4]} | {_fmt(r[5])} | "
                     f"{o.get('trials', '-')} | {verdict} |")
    conf = {o.get("confidence") for o in objs}
    lines += ["", f"Lower bounds hold with confidence {', '.join(_fmt(c, 2) for c in conf)} (Clopper-Pearson, "
              "Bonferroni over the attacks of a run)."]
    warns = sorted({w for o in objs for w in o.get("warnings", [])})
    lines += [f"- {w}" for w in warns]
    lines.append("")
    return lines, files


def _score_histograms(plt: Any, rows: list[Any], out: Path, stem: str) -> list[Path]:
    """The adversary's score in the two worlds, one panel per audited attack that recorded them."""
    files: list[Path] = []
    hist_rows = [r for r in rows if isinstance(r[7].get("scores"), dict)]
    if hist_rows:
        n = len(hist_rows)
        cols = min(4, n)
        nrows = (n + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.6 * nrows), squeeze=False)
        for k, r in enumerate(hist_rows):
            ax = axes[k // cols][k % cols]
            h = r[7]["scores"]
            e = h["edges"]
            mids = [(e[i] + e[i + 1]) / 2 for i in range(len(e) - 1)]
            w = (e[1] - e[0]) if len(e) > 1 else 1.0
            ax.bar(mids, h["world0"], width=w, alpha=0.6, label="world 0")
            ax.bar(mids, h["world1"], width=w, alpha=0.6, label="world 1")
            ax.set_title(f"{r[0]}/{r[1]}/{r[2]}/{_design(r[8])}", fontsize=8)
            ax.tick_params(labelsize=7)
        for k in range(n, nrows * cols):
            axes[k // cols][k % cols].axis("off")
        axes[0][0].legend(fontsize=7)
        fig.suptitle("adversary's score in the two worlds", fontsize=9)
        files.append(_save(fig, out / f"{stem}-scores.png"))
    return files
