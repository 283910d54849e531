"""``everlast report``: turn run records into PNG plots and a short Markdown summary.

Reads the JSON that ``everlast simulate --json``, ``everlast replay --json``, ``everlast audit --json``
and ``python -m everlast.adversary_sim ... --json`` print (one object per file, a JSON list of objects, or JSON
lines), and query records (``everlast replay --record``, ``adversary_sim.recorded``). Each kind gets
the plots that make sense for it:

* round-by-round runs (simulate, in-process attacks): accuracy per round (answers, and the round's
  decision rule on fresh points of the true distribution), tops used against the budget c_i;
* replays: answers per round, statuses, latency percentiles (or their distribution when the record
  holds every latency);
* audits: the epsilon lower bound of every (game, variant, attack) beside the claimed epsilon, and
  the adversary's score distribution in the two worlds.

This module reads the records and writes the summary; the plots are ``cli/report_plots.py``, where
matplotlib is imported (the ``plots`` extra; the Agg backend writes files, no display).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from everlast.cli.report_plots import (
    fit_titles,
    report_audits,
    report_queries,
    report_replay,
    report_rounds,
    report_traces,
)

__all__ = [  # the command and its pieces; fit_titles and report_audits are read by the tests from here
    "build_report",
    "fit_titles",
    "kind_of",
    "load",
    "report",
    "report_audits",
    "truth_labeller",
]

Obj = dict[str, Any]


def load(path: Path) -> list[Obj]:
    """The objects of a report input: a JSON object, a JSON list, or JSON lines."""
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict):
        return [data]
    if isinstance(data, list):
        return [d for d in data if isinstance(d, dict)]
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            raise click.ClickException(f"{path.name}: line {i} is not JSON") from None
        if isinstance(obj, dict):
            out.append(obj)
    return out


def kind_of(obj: Obj) -> str:
    if "epsilon_lower_bound" in obj and "game" in obj:
        return "audit"
    if "latency_ms" in obj or "throughput_qps" in obj:
        return "replay"
    if isinstance(obj.get("rounds"), list):
        return "rounds"
    if "x" in obj:
        return "query"
    if "format" in obj:
        return "header"
    return "unknown"


def truth_labeller(truth: str, concept: str) -> tuple[Any, str]:
    """``--truth`` parameters as a function of a record's point, and how to say it."""
    try:
        v = [float(t) for t in truth.split(",")]
    except ValueError:
        raise click.UsageError(f"--truth {truth!r}: give the concept's numbers (thresholds: T; intervals: A,B; "
                               "stumps: J,T)") from None
    if concept == "thresholds" and len(v) == 1:
        return (lambda x: int(float(x) >= v[0])), f"your concept 1[x >= {v[0]:g}]"
    if concept == "intervals" and len(v) == 2:
        return (lambda x: int(v[0] <= float(x) <= v[1])), f"your concept 1[{v[0]:g} <= x <= {v[1]:g}]"
    if concept == "stumps" and len(v) == 2 and v[0].is_integer():
        j = int(v[0])
        return (lambda x: int(float(x[j]) >= v[1])), f"your concept 1[x_{j} >= {v[1]:g}]"
    raise click.UsageError(f"--truth for {concept} takes T (thresholds), A,B (intervals) or J,T (stumps)")


# -- command -----------------------------------------------------------------------------------------


def build_report(paths: list[Path], out: Path, name: str | None = None,
                 summary: bool = True, truth: tuple[Any, str] | None = None) -> tuple[Path | None, list[Path]]:
    out.mkdir(parents=True, exist_ok=True)
    md = ["# everlast report", ""]
    files: list[Path] = []
    audits: list[Obj] = []
    traced: list[tuple[str, Obj]] = []
    for path in paths:
        objs = load(path)
        if not objs:
            raise click.ClickException(f"{path.name}: no JSON objects")
        stem = path.stem
        kinds = {kind_of(o) for o in objs} - {"header"}
        if kinds == {"query"}:
            lines, fs = report_queries([o for o in objs if kind_of(o) == "query"], out, stem, truth)
        else:
            lines, fs = [], []
            for i, o in enumerate(objs):
                k = kind_of(o)
                s = stem if len(objs) == 1 else f"{stem}-{i + 1}"
                if k == "audit":
                    audits.append(o)
                    continue
                if k == "rounds":
                    ln, f = report_rounds(o, out, s)
                    if isinstance(o.get("trace"), dict) and o["trace"].get("queries"):
                        traced.append((s, o))
                elif k == "replay":
                    ln, f = report_replay(o, out, s)
                    if truth is not None:
                        ln += ["(--truth applies to query records: this replay summary holds no points; pass the "
                               "`everlast replay --record` file, or replay with --truth)", ""]
                else:
                    raise click.ClickException(f"{path.name}: object {i + 1} is not a simulate, replay, "
                                               "audit or query record")
                lines += ln
                fs += f
        md += lines
        files += fs
    if traced:
        lines, fs = report_traces(traced, out, name or (paths[0].stem if len(paths) == 1 else "streams"))
        md += lines
        files += fs
    if audits:
        stem = paths[0].stem if len(paths) == 1 else "audit"
        lines, fs = report_audits(audits, out, stem)
        md += lines
        files += fs
    for png in files:
        md.append(f"![{png.stem}]({png.name})")
    if not summary:
        return None, files
    if name is None:
        name = paths[0].stem if len(paths) == 1 else "summary"
    md_path = out / f"{name}.md"
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    return md_path, files


@click.command("report")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("report"),
              show_default=True, help="Directory for the PNGs and the Markdown summary.")
@click.option("--name", default=None,
              help="Base name of the summary (NAME.md) [the input's name, or 'summary' for several inputs].")
@click.option("--summary/--no-summary", default=True, show_default=True, help="Write the Markdown summary.")
@click.option("--truth", default=None, metavar="CONCEPT",
              help="Score a query record's answers against your concept: thresholds T (1[x >= T]), intervals A,B, "
                   "stumps J,T (with --concept). Without it, against the labels the record holds.")
@click.option("--concept", type=click.Choice(["thresholds", "intervals", "stumps"]), default="thresholds",
              show_default=True, help="The concept class --truth names.")
def report(files: tuple[Path, ...], out_dir: Path, name: str | None, summary: bool, truth: str | None,
           concept: str) -> None:
    """Plots and a Markdown summary from simulate, replay, audit or stream-run JSON (one or more FILES)."""
    md, pngs = build_report(list(files), out_dir, name, summary,
                            truth_labeller(truth, concept) if truth is not None else None)
    for f in pngs:
        click.echo(str(f))
    if md is not None:
        click.echo(str(md))
        for line in md.read_text(encoding="utf-8").splitlines():
            if line.startswith(("Accuracy: ", "- accuracy: ")):
                click.echo(line.lstrip("- "))
