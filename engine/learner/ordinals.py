"""IEEE-754 binary64 doubles as ordered integers (the standard bit trick).

For a finite double x with bit pattern b (as a signed int64):

    ordinal(x) = b          if b >= 0   (x >= +0.0)
    ordinal(x) = -(b & 0x7FFF_FFFF_FFFF_FFFF)   otherwise (x <= -0.0)

This is strictly increasing on the finite doubles with -0.0 and +0.0 identified (both map to 0,
as they compare equal and every hypothesis of the learner compares by value): adjacent doubles get
adjacent ordinals, so the number of doubles in [a, b] is ordinal(b) - ordinal(a) + 1 exactly.
The finite doubles map onto the integer range [-MAX_ORDINAL, MAX_ORDINAL] (2 * MAX_ORDINAL + 1 =
2^64 - 2^53 - 1 points); +-inf would map to +-(MAX_ORDINAL + 1) and NaNs beyond, but callers reject
non-finite values before mapping. Ordinals fit int64; *differences* of ordinals reach 2^64 - 2^53
and do not: take them in uint64 (exact, as the true difference is in [0, 2^64)) or Python ints.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

MAX_ORDINAL = 0x7FEF_FFFF_FFFF_FFFF
"""ordinal(max finite double) = bits of 1.7976931348623157e308."""
FLOAT64_POINTS = 2 * MAX_ORDINAL + 1
"""Distinct finite doubles up to the sign of zero: 2^64 - 2^53 - 1."""
_MAG = np.int64(0x7FFF_FFFF_FFFF_FFFF)


def to_ordinal(x: NDArray[np.float64]) -> NDArray[np.int64]:
    """Ordinals of finite doubles (any shape). The caller guarantees finiteness."""
    b = np.ascontiguousarray(x, dtype=np.float64).view(np.int64)
    return np.where(b >= 0, b, -(b & _MAG))


def from_ordinal(o: NDArray[np.int64]) -> NDArray[np.float64]:
    """Inverse of ``to_ordinal`` on [-MAX_ORDINAL, MAX_ORDINAL]; ordinal 0 gives +0.0."""
    o = np.asarray(o, dtype=np.int64)
    b = np.where(o >= 0, o, (-o) | np.int64(np.iinfo(np.int64).min))
    return np.ascontiguousarray(b, dtype=np.int64).view(np.float64)


def ordinal(x: float) -> int:
    """Scalar ``to_ordinal`` as a Python int."""
    return int(to_ordinal(np.asarray([x], dtype=np.float64))[0])


def value(o: int) -> float:
    """Scalar ``from_ordinal``."""
    return float(from_ordinal(np.asarray([o], dtype=np.int64))[0])
