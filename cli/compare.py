"""``everlast compare``: everlast against the alternatives a user would pick instead, side by side.

The command only parses options, shows progress and writes files: what is computed and run (n
required per horizon, the crossover horizon, runs at several n, the domain-size effect) is
``everlast.peers.comparison`` (its docstring says how); the text is ``cli/compare_tables.py`` and the
plots ``cli/compare_plots.py``.

``--json`` prints exactly one JSON object whose keys ``epsilon``, ``delta``, ``alpha``, ``horizons``
and ``methods`` (each with ``name``, ``n_required``, ``computed_or_run``, ``queries_answered_at_n``)
are a contract; ``--docs DIR`` writes ``DIR/COMPARISON.md`` and the PNG plots in ``DIR/img/``.
Progress goes to stderr only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from everlast.cli.common import emit_json, progress
from everlast.cli.compare_plots import PLOT_FILES, write_plots
from everlast.cli.compare_tables import fmt_n, fmt_sci, markdown, text_report
from everlast.peers.comparison.compute import compute
from everlast.peers.comparison.runs import everlast_run_schedule
from everlast.peers.comparison.settings import (
    DEFAULT_DOMAIN_SIZES,
    DEFAULT_MAX_RUN_N,
    DEFAULT_N,
    DEFAULT_QUERIES,
    EVERLAST_NAMES,
    HORIZONS,
    Settings,
)
from everlast.peers.comparison.sizes import crossover, eps0_at, extended_n, gdp_mu

__all__ = [  # the command, and the names its callers (bench.compare, the tests) read from this module
    "EVERLAST_NAMES",
    "PLOT_FILES",
    "Settings",
    "compare",
    "compute",
    "crossover",
    "eps0_at",
    "everlast_run_schedule",
    "extended_n",
    "fmt_n",
    "fmt_sci",
    "gdp_mu",
    "markdown",
    "run_progress",
    "text_report",
    "write_docs",
    "write_plots",
]


@contextmanager
def run_progress(total: int) -> Iterator[Callable[[], None]]:
    """A bar over the comparison's runs, on stderr (shown only on a terminal)."""
    with progress(total, "compare", unit="run") as bar:
        yield lambda: bar.update(1)


def write_docs(result: dict[str, Any], docs: Path, command: str) -> list[Path]:
    """Write ``docs/COMPARISON.md`` and the plots under ``docs/img``; returns the paths written."""
    docs.mkdir(parents=True, exist_ok=True)
    plots = write_plots(result, docs / "img")
    md = docs / "COMPARISON.md"
    md.write_text(markdown(result, command), encoding="utf-8")
    return [md, *plots]


def _domain(value: str) -> int | None:
    v = value.strip().lower()
    if v in ("inf", "infinite", "reals"):
        return None
    try:
        d = int(2 ** int(v[2:])) if v.startswith("2^") else int(float(v))
    except ValueError:
        raise click.BadParameter(f"{value!r}: give an integer, 2^k or 'inf'") from None
    if not 2 <= d <= 2**62:
        raise click.BadParameter(f"{value!r}: a grid has between 2 and 2^62 points")
    return d


def _command_line(epsilon: float, delta: float, alpha: float, docs: Path | None) -> str:
    extra = "".join(f" --{k} {v:g}" for k, v, dflt in (("epsilon", epsilon, 1.0), ("delta", delta, 1e-6),
                                                        ("alpha", alpha, 0.1)) if v != dflt)
    return f"everlast compare{extra} --docs {docs if docs is not None else 'docs'}"


@click.command("compare")
@click.option("--epsilon", type=click.FloatRange(min=0.0, min_open=True), default=1.0, show_default=True,
              help="Target epsilon (training set).")
@click.option("--delta", type=click.FloatRange(0.0, 1.0, min_open=True, max_open=True), default=1e-6,
              show_default=True, help="Target delta.")
@click.option("--alpha", type=click.FloatRange(0.0, 0.5, min_open=True, max_open=True), default=0.1,
              show_default=True, help="Target expected error.")
@click.option("--n", "n_values", type=click.IntRange(min=1), multiple=True,
              help=f"Labeled-set sizes to run every method at (repeat; default {', '.join(map(str, DEFAULT_N))}).")
@click.option("--horizon", "horizons", type=click.IntRange(min=1), multiple=True,
              help="Horizons Q of the table (repeat; default 10^3 to 10^9). Each costs everlast's best-epsilon "
                   "search at Dwork-Feldman's n for that Q: minutes once that n certifies some epsilon <= 64.")
@click.option("--queries", type=click.IntRange(min=1), default=DEFAULT_QUERIES, show_default=True,
              help="Queries per run; horizons up to this many are also run at their computed n.")
@click.option("--domain-sizes", "domain_sizes", multiple=True,
              help="Grid sizes |X| for the domain-size section (repeat; integer, 2^k or 'inf').")
@click.option("--grid-size", type=str, default="2^32", show_default=True,
              help="|X| of the finite-grid private learner row.")
@click.option("--max-run-n", type=click.IntRange(min=1), default=DEFAULT_MAX_RUN_N, show_default=True,
              help="Largest computed n that is also run.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the task, data and mechanisms.")
@click.option("--json", "as_json", is_flag=True, help="Print exactly one JSON object.")
@click.option("--docs", "docs", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write DIR/COMPARISON.md and DIR/img/*.png.")
def compare(epsilon: float, delta: float, alpha: float, n_values: tuple[int, ...], horizons: tuple[int, ...],
            queries: int,
            domain_sizes: tuple[str, ...], grid_size: str, max_run_n: int, seed: int, as_json: bool,
            docs: Path | None) -> None:
    """Compare everlast with the alternatives: n required per horizon, runs, domain size."""
    grid = _domain(grid_size)
    if grid is None:
        raise click.BadParameter("the grid row needs a finite grid", param_hint="--grid-size")
    s = Settings(
        epsilon=epsilon, delta=delta, alpha=alpha,
        n_values=tuple(sorted(set(n_values))) if n_values else DEFAULT_N,
        queries=queries,
        horizons=tuple(sorted(set(horizons))) if horizons else HORIZONS,
        domain_sizes=tuple(_domain(d) for d in domain_sizes) if domain_sizes else DEFAULT_DOMAIN_SIZES,
        grid_size=grid, seed=seed, max_run_n=max_run_n,
    )
    result = compute(s, beyond=True, progress=run_progress)
    if docs is not None:
        written = write_docs(result, docs, _command_line(epsilon, delta, alpha, docs))
        result["docs_written"] = [str(p) for p in written]
    if as_json:
        emit_json(result)
    else:
        click.echo(text_report(result))
        for p in result.get("docs_written", []):
            click.echo(f"wrote {p}")
