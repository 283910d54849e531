"""Replayable randomness: encoding of PCG64 states, the root entropy, and the float Laplace
sampler the *peers* use.

The engine's own noise is exact discrete Laplace (``engine.noise``), drawn from one PCG64 stream per
(round, purpose) derived from the root entropy (``engine.design.generator``). PCG64's 128-bit state
integers are encoded as hex strings so any codec (msgpack, JSON) can carry them.

``laplace`` (inverse CDF on a 52-bit grid) is kept only for the peers of ``peers/`` (the
alternatives the comparison runs): it is NOT the engine's noise, and the floating-point caveat of
Mironov (2012) applies to it.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from everlast.engine.errors import CorruptState


def root_entropy(seed: int | None) -> int:
    """The predictor's root entropy: ``seed`` itself, or 128 bits from the OS (numpy's
    SeedSequence). Every stream is derived from it (``engine.design.generator``): it is a secret."""
    if seed is None:
        ent = np.random.SeedSequence().entropy
        assert isinstance(ent, int)
        return ent
    if seed < 0:
        raise ValueError("a seed must be a non-negative integer")
    return int(seed)


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
