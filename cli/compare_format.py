"""Number formats of ``everlast compare``'s tables and plots (one place, so a table and a plot print a
count the same way)."""

from __future__ import annotations

import math


def fmt_n(x: float | int | None) -> str:
    """A count for tables: exact below 10^5, else 3 significant digits ("1.96e8")."""
    if x is None:
        return "—"
    if isinstance(x, float) and not math.isfinite(x):
        return "∞"
    if abs(x) < 1e5:
        return f"{round(x):,}"
    mant, exp = f"{x:.3g}".split("e") if "e" in f"{x:.3g}" else (f"{x:.3g}", "0")
    return f"{mant}e{int(exp)}"


def fmt_eps(x: float | None) -> str:
    """An epsilon for tables; +inf (or null) means none is certified."""
    if x is None or not math.isfinite(x):
        return "∞ (none)"
    return f"{x:.3g}" if x < 1e4 else fmt_sci(x)


def fmt_err(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}"


def fmt_sci(x: float, digits: int = 2) -> str:
    """2 significant digits in plain scientific notation ("6.1e19"), exact below 1000."""
    if not math.isfinite(x):
        return "∞"
    if abs(x) < 1000:
        return f"{x:.{digits}g}"
    mant, exp = f"{x:.{digits - 1}e}".split("e")
    return f"{mant}e{int(exp)}"
