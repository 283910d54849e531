"""Replayable randomness: one root seed, one independent PCG64 stream per purpose.

Why separate streams: answers must not depend on how a query sequence is cut into batches.
Each stream is consumed in a fixed order (one query-noise draw per answered query, one
threshold-noise draw per restart, sampling draws only at round boundaries), so the state after
n queries is the same however they were batched. PCG64's doubles take one 64-bit output each with
no buffering, so a vector draw of size n equals n scalar draws.

State is a plain dict with a type tag; PCG64's 128-bit integers are encoded as hex strings so any
codec (msgpack, JSON) can carry them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from engine.errors import CorruptState

STREAMS = ("query_noise", "threshold_noise", "sampling", "restart_test", "halt_test")
"""Named streams, spawned in this order from the root SeedSequence (order is part of the format)."""


class Streams:
    """The predictor's random streams."""

    __slots__ = ("gens",)

    def __init__(self, gens: dict[str, np.random.Generator]) -> None:
        self.gens = gens

    @classmethod
    def from_seed(cls, seed: int | None) -> Streams:
        """``seed=None`` draws the root entropy from the OS (numpy's SeedSequence)."""
        root = np.random.SeedSequence(seed)
        children = root.spawn(len(STREAMS))
        return cls({name: np.random.Generator(np.random.PCG64(ss)) for name, ss in zip(STREAMS, children, strict=True)})

    def __getitem__(self, name: str) -> np.random.Generator:
        return self.gens[name]

    def state(self) -> dict[str, Any]:
        return {name: encode_pcg64(g) for name, g in self.gens.items()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Streams:
        if set(state) != set(STREAMS):
            raise CorruptState("random streams do not match this engine version")
        return cls({name: decode_pcg64(state[name]) for name in STREAMS})


def encode_pcg64(g: np.random.Generator) -> dict[str, Any]:
    st = g.bit_generator.state
    if st.get("bit_generator") != "PCG64":
        raise CorruptState("only PCG64 streams are serializable")
    return {
        "bit_generator": "PCG64",
        "state": format(st["state"]["state"], "x"),
        "inc": format(st["state"]["inc"], "x"),
        "has_uint32": int(st["has_uint32"]),
        "uinteger": int(st["uinteger"]),
    }


def decode_pcg64(d: dict[str, Any]) -> np.random.Generator:
    try:
        if d["bit_generator"] != "PCG64":
            raise CorruptState("unknown bit generator")
        bg = np.random.PCG64()
        bg.state = {
            "bit_generator": "PCG64",
            "state": {"state": int(d["state"], 16), "inc": int(d["inc"], 16)},
            "has_uint32": int(d["has_uint32"]),
            "uinteger": int(d["uinteger"]),
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptState(f"random stream state is malformed ({type(exc).__name__})") from None
    return np.random.Generator(bg)


def open_unit(g: np.random.Generator, n: int) -> NDArray[np.float64]:
    """n uniforms on the open interval (0, 1): the 52-bit grid shifted by half a step (exact in
    float64), so the Laplace inverse CDF below never sees 0 or 1. The range is a power of two, so
    numpy's bounded-integer draw never rejects: exactly one 64-bit output per uniform."""
    k = g.integers(0, 1 << 52, size=n, dtype=np.int64, endpoint=False)
    return (k.astype(np.float64) + 0.5) * (2.0 ** -52)


def laplace(g: np.random.Generator, scale: float, n: int) -> NDArray[np.float64]:
    """n draws of Lap(scale) by inverse CDF from ``open_unit`` (finite, batch-invariant).

    Caveat shared with every floating-point Laplace sampler: the output lies on a float grid, not
    on the reals (Mironov 2012); docs/PRIVACY.md says how this bears on the guarantee.
    """
    u = open_unit(g, n) - 0.5
    return -scale * np.sign(u) * np.log1p(-2.0 * np.abs(u))
