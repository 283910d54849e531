"""Training sets from files: CSV, Parquet or NPZ. Errors name the file and the problem, never a value.

* CSV: one example per row, the label (0/1) in the last column, the coordinates before it; an
  optional header row.
* Parquet: a column ``y`` (or ``label``) and the coordinates in the other columns, in order.
* NPZ: arrays ``x`` (n,) or (n, d) and ``y`` (n,).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from everlast.daemon.errors import ConfigError


def load_training(path: Path) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    if not path.is_file():
        raise ConfigError(f"training data not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if "x" not in z or "y" not in z:
                    raise ConfigError(f"{path}: an NPZ training set needs arrays 'x' and 'y'")
                x, y = np.asarray(z["x"], dtype=np.float64), np.asarray(z["y"], dtype=np.float64)
        elif suffix == ".parquet":
            x, y = _parquet(path)
        elif suffix in (".csv", ".txt"):
            x, y = _csv(path)
        else:
            raise ConfigError(f"{path}: unknown training data format (use .csv, .parquet or .npz)")
    except ConfigError:
        raise
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read training data ({type(exc).__name__})") from None
    if x.ndim == 2 and x.shape[1] == 1:
        x = x[:, 0]
    return x, y


def _csv(path: Path) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    with path.open() as f:
        first = f.readline()
    try:
        [float(v) for v in first.strip().split(",")]
        skip = 0
    except ValueError:
        skip = 1
    data = np.loadtxt(path, delimiter=",", skiprows=skip, ndmin=2, dtype=np.float64)
    if data.shape[1] < 2:
        raise ConfigError(f"{path}: a CSV training set needs coordinates and a label column")
    return data[:, :-1], data[:, -1]


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
    x = np.column_stack([table.column(n).to_numpy().astype(np.float64) for n in cols])
    return x, table.column(label).to_numpy().astype(np.float64)
