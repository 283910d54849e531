"""Click parameter types shared by subcommands."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # click >= 8.2 types ParamType as generic; 8.1 (still allowed) cannot subscript it
    _ParamType = click.ParamType[int]
else:
    _ParamType = click.ParamType


class Count(_ParamType):
    """A positive integer written as an integer (``1000000``, ``1_000_000``) or in exact float
    notation (``1e9``, ``2.5e3``); a value that is not a whole number (``1.5``, ``1e-3``) is refused.
    Parsed with ``Decimal``, so ``1e20`` is exactly 10^20 (no float rounding)."""

    name = "count"

    def __init__(self, min: int = 1) -> None:
        self.min = min

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        else:
            text = str(value).strip().replace("_", "")
            try:
                d = Decimal(text)
            except InvalidOperation:
                self.fail(f"{value!r} is not a number (write e.g. 1000000 or 1e6)", param, ctx)
            if not d.is_finite() or d != d.to_integral_value():
                self.fail(f"{value!r} is not a whole number", param, ctx)
            n = int(d)
        if n < self.min:
            self.fail(f"{n} is smaller than the minimum {self.min}", param, ctx)
        return n
