"""Predictor state <-> bytes (msgpack). A pure codec: no files, no I/O.

numpy arrays travel as {"__nd__": dtype, "shape": [...], "data": raw little-endian bytes}.
The engine's other modules never import msgpack; the daemon and the CLI use this module.
"""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np

from everlast.engine.errors import CorruptState
from everlast.engine.restore import restore
from everlast.engine.serving import Servable

_ND = "__nd__"


def _default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        return {_ND: dt.str, "shape": list(a.shape), "data": a.astype(dt, copy=False).tobytes()}
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"cannot encode {type(obj).__name__}")


def _hook(d: dict[str, Any]) -> Any:
    if _ND in d:
        return np.frombuffer(d["data"], dtype=np.dtype(d[_ND])).reshape(d["shape"]).copy()
    return d


def pack(obj: Any) -> bytes:
    """Encode plain values and numpy arrays."""
    out = msgpack.packb(obj, default=_default, use_bin_type=True)
    assert isinstance(out, bytes)
    return out


def unpack(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, object_hook=_hook, raw=False, strict_map_key=False)
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
        raise CorruptState(f"state bytes could not be decoded ({type(exc).__name__})") from None


def dumps(m: Servable) -> bytes:
    """A served mechanism's whole state as bytes: its round part with the live part (reservoir
    points included) under ``live``."""
    live = {**m.live_part(), "reservoir_points": m.reservoir_points(0, m.reservoir_filled)}
    return pack({**m.round_part(), "live": live})


def loads(data: bytes) -> Servable:
    """Inverse of ``dumps``; raises ``CorruptState``."""
    st = unpack(data)
    if not isinstance(st, dict) or not isinstance(st.get("live"), dict):
        raise CorruptState("state bytes do not hold a served mechanism")
    live = dict(st.pop("live"))
    points = live.pop("reservoir_points", None)
    return restore(st, live, None if points is None else np.asarray(points, dtype=np.float64))
