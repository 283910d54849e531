"""Training sets from files: CSV, Parquet or NPZ. Errors name the file, the place (a CSV's line and
column, an array's row) and the rule broken, never a value; no library warning reaches the user.

* CSV: one example per row, the label (0/1) in the last column, the coordinates before it; an
  optional header row; blank lines and lines starting with ``#`` are skipped.
* Parquet: a column ``y`` (or ``label``) and the coordinates in the other columns, in order.
* NPZ: arrays ``x`` (n,) or (n, d) and ``y`` (n,).

Every loaded set is checked: at least one example, finite coordinates, labels 0 or 1
(``check_points_and_labels``), so that a bad file stops the start with its place named, whatever
the mechanism. ``dimension_error`` says what a file has and which concept would take it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from everlast.daemon.errors import ConfigError

Where = Callable[[int], str]
"""A data row's place in its file, for messages (``line 7`` for a CSV, ``row 6`` for an array)."""


def load_training(path: Path) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    if not path.is_file():
        raise ConfigError(f"training data not found: {path}")
    suffix = path.suffix.lower()
    where: Where = _row
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if "x" not in z or "y" not in z:
                    raise ConfigError(f"{path}: an NPZ training set needs arrays 'x' and 'y'")
                x, y = _floats(path, z["x"], "x"), _floats(path, z["y"], "y")
            where = _row
        elif suffix == ".parquet":
            x, y = _parquet(path)
        elif suffix in (".csv", ".txt"):
            x, y, where = _csv(path)
        else:
            raise ConfigError(f"{path}: unknown training data format (use .csv, .parquet or .npz)")
    except ConfigError:
        raise
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read training data ({type(exc).__name__})") from None
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    check_points_and_labels(path, x, y, where)
    return x, y


def _row(i: int) -> str:
    return f"row {i} (0-based)"


def _floats(path: Path, a: NDArray[np.generic], name: str) -> NDArray[np.float64]:
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError):
        raise ConfigError(f"{path}: array '{name}' does not hold numbers") from None


def check_points_and_labels(path: Path, x: NDArray[np.float64], y: NDArray[np.float64], where: Where) -> None:
    """At least one example, one label per point, finite coordinates, labels 0 or 1."""
    n = int(x.shape[0]) if x.ndim else 0
    if n == 0:
        raise ConfigError(f"{path}: the training set is empty (no data rows)")
    if x.ndim not in (1, 2):
        raise ConfigError(f"{path}: the points must form a vector or a matrix (got {x.ndim} dimensions)")
    if y.ndim != 1 or y.shape[0] != n:
        raise ConfigError(f"{path}: {n} points but {y.size} labels: one label per point")
    csv = path.suffix.lower() in (".csv", ".txt")
    bad = ~np.isfinite(x) if x.ndim == 1 else ~np.isfinite(x).all(axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        c = 1 if x.ndim == 1 else int(np.argmax(~np.isfinite(x[i]))) + 1
        col = f", column {c}" if csv else f", coordinate {c - 1} (0-based)" if x.ndim == 2 else ""
        raise ConfigError(f"{path}: {where(i)}{col}: a coordinate is NaN or infinite ({_rows(int(bad.sum()))})")
    wrong = (y != 0) & (y != 1)
    if wrong.any():
        i = int(np.argmax(wrong))
        col = f", column {1 + (1 if x.ndim == 1 else x.shape[1])}" if csv else ""
        raise ConfigError(f"{path}: {where(i)}{col}: the label must be 0 or 1 ({_rows(int(wrong.sum()))})")


def _rows(k: int) -> str:
    return f"{k} such row" + ("s" if k != 1 else "")


def dimension_error(path: Path, x: NDArray[np.float64], concept: str, d: int) -> str | None:
    """None when the points fit the concept (thresholds and intervals: 1 coordinate; stumps and
    trees: d); else a message saying what the file has and which concept would take it."""
    k = 1 if x.ndim == 1 else int(x.shape[1])
    on_rd = concept in ("stumps", "trees")  # trees split R^d like stumps (engine.learner.model.validator_spec)
    want = d if on_rd else 1
    if k == want:
        return None
    has = f"{path}: the training set has {k} coordinate{'s' if k != 1 else ''} per example"
    takes = f"concept = \"{concept}\"" + (f" with d = {d}" if on_rd else "") + f" takes {want}"
    fits = (f'concept = "stumps" with d = {k} takes it' if k > 1 else
            'concept = "thresholds" or "intervals" (or "stumps" with d = 1) takes it')
    return f"{has}; {takes}. {fits[0].upper() + fits[1:]}."


def _csv(path: Path) -> tuple[NDArray[np.float64], NDArray[np.float64], Where]:
    text = path.read_text(errors="replace")
    lines = text.splitlines()
    data_lines = [i + 1 for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")]
    if not data_lines:
        raise ConfigError(f"{path}: the file is empty: a CSV training set has one example per line, its "
                          "coordinates then its label (0 or 1), e.g. `0.42,1`")
    first = lines[data_lines[0] - 1]
    skip = 0
    try:
        [float(v) for v in first.strip().split(",")]
    except ValueError:
        skip = 1  # a header
    rows = data_lines[skip:]
    if not rows:
        raise ConfigError(f"{path}: the file has a header but no data rows")

    def where(i: int) -> str:
        return f"line {rows[i]}" if 0 <= i < len(rows) else f"data row {i}"

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's "input contained no data" and friends: we say it ourselves
        try:
            data = np.loadtxt(path, delimiter=",", skiprows=data_lines[0] - 1 + skip, ndmin=2, dtype=np.float64)
        except ValueError:
            _locate(path, lines, rows)
            raise
    if data.shape[1] < 2:
        raise ConfigError(f"{path}: line {rows[0]} has {data.shape[1]} column; a CSV training set needs the "
                          "coordinates and then a label column (0 or 1)")
    return data[:, :-1], data[:, -1], where


def _locate(path: Path, lines: list[str], rows: list[int]) -> None:
    """The first place a CSV does not parse: raises a ``ConfigError`` naming the line and column."""
    width = None
    for ln in rows:
        cells = lines[ln - 1].strip().split(",")
        if width is None:
            width = len(cells)
        elif len(cells) != width:
            raise ConfigError(f"{path}: line {ln} has {len(cells)} columns, line {rows[0]} has {width}")
        for c, cell in enumerate(cells, start=1):
            try:
                float(cell)
            except ValueError:
                raise ConfigError(f"{path}: line {ln}, column {c}: not a number"
                                  + (" (empty)" if not cell.strip() else "")) from None


def _parquet(path: Path) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError("reading Parquet needs pyarrow: pip install 'everlast[parquet]'") from None
    table = pq.read_table(path)
    names = table.column_names
    label = "y" if "y" in names else "label" if "label" in names else None
    if label is None:
        raise ConfigError(f"{path}: a Parquet training set needs a column 'y' or 'label'")
    cols = [n for n in names if n != label]
    if not cols:
        raise ConfigError(f"{path}: no coordinate columns")
    out = []
    for n in [*cols, label]:
        col = table.column(n)
        if col.null_count:
            i = int(np.argmax(np.asarray(col.is_null())))
            raise ConfigError(f"{path}: row {i} (0-based), column '{n}': missing value "
                              f"({col.null_count} in the column)")
        try:
            out.append(col.to_numpy().astype(np.float64))
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: column '{n}' does not hold numbers") from None
    return np.column_stack(out[:-1]), out[-1]
