"""Reading a schedule's objects from JSON or TOML: the one validator every ``from_dict`` uses.

A schedule file is written by hand or by the planner, and its certificate describes exactly the values
it holds, so nothing is coerced: an integer field takes an integer (or a float with an integral value,
as JSON writes ``12.0``) and refuses ``5.9`` and ``true``; a float field takes a number and refuses a
string or a boolean; a field typed ``X | None`` also takes null. Unknown and missing fields are refused.
Each error names the field (``round 1: lam must be an integer, not 5.9``); schedule values are public
configuration, so quoting the value leaks nothing.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any

import numpy as np

from everlast.engine.errors import InvalidSchedule


def integral(x: Any, what: str) -> int:
    """An integer-valued field as an int (JSON may carry 12.0; a caller in process, a numpy integer);
    refuses 12.5, ``true`` and strings."""
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        raise InvalidSchedule(f"{what} must be an integer, not {x!r}")
    if isinstance(x, numbers.Integral):
        return int(x)
    f = float(x)
    if not (math.isfinite(f) and f == math.floor(f)):
        raise InvalidSchedule(f"{what} must be an integer, not {x!r}")
    return int(f)


def number(x: Any, what: str) -> float:
    """A float field: any real number (numpy's too), never a boolean or a string."""
    if isinstance(x, bool | np.bool_) or not isinstance(x, numbers.Real):
        raise InvalidSchedule(f"{what} must be a number, not {x!r}")
    return float(x)


def flag(x: Any, what: str) -> bool:
    """A boolean field: ``true`` or ``false`` only (``bool("false")`` is True)."""
    if not isinstance(x, bool):
        raise InvalidSchedule(f"{what} must be true or false, not {x!r}")
    return x


_READERS = {int: integral, float: number, bool: flag}


@cache
def _kinds(cls: type) -> dict[str, tuple[Any, bool]]:
    """field name -> (its reader, whether it takes null), from the dataclass's annotations."""
    hints = typing.get_type_hints(cls)
    out: dict[str, tuple[Any, bool]] = {}
    for f in dataclasses.fields(cls):
        t = hints[f.name]
        args = typing.get_args(t) if isinstance(t, types.UnionType) else (t,)
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) != 1 or kinds[0] not in _READERS:
            raise TypeError(f"{cls.__name__}.{f.name}: no reader for {t}")
        out[f.name] = (_READERS[kinds[0]], len(kinds) != len(args))
    return out


def read(cls: type, d: Any, what: str, *, retired: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The keyword arguments of dataclass ``cls`` read from the mapping ``d``, each field checked
    against its annotation. ``what`` prefixes every error (``round 2``, ``quotas``); ``retired`` maps a
    field name no longer accepted to the message that says why."""
    if not isinstance(d, Mapping):
        raise InvalidSchedule(f"{what} must be an object with fields {sorted(_kinds(cls))}")
    kinds = _kinds(cls)
    unknown = set(d) - set(kinds)
    gone = sorted(str(k) for k in unknown if retired and k in retired)
    if gone:
        raise InvalidSchedule(f"{what}: fields {gone} {retired[gone[0]]}")  # type: ignore[index]
    if unknown:
        raise InvalidSchedule(f"{what}: unknown fields {sorted(map(str, unknown))}")
    required = {f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    missing = required - set(d)
    if missing:
        raise InvalidSchedule(f"{what} needs the fields {sorted(missing)}")
    out: dict[str, Any] = {}
    for name, v in d.items():
        reader, nullable = kinds[name]
        out[name] = None if v is None and nullable else reader(v, f"{what}: {name}")
    return out
