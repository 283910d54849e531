"""Who sent each query: client ids as the per-client quotas see them (``engine.quotas``).

A query may carry a client id, opaque ``bytes`` or ``str`` (the daemon passes the record's
``everlast-client`` header, which the operator's gateway sets: docs/privacy/genericbbl.md 8); ``None``
is the one shared *anonymous* client. A ``str`` is its UTF-8 bytes, so ``"a"`` and ``b"a"`` name the same
client. Each client is reduced to a 64-bit key, the first 8 bytes of SHA-256 over a domain-separated
encoding (a fixed hash: the same in every process and replay, unlike Python's salted ``hash``); the key
seeds the client's quota threshold noise (``engine.design.client_generator``) and indexes the round's
client table. Two ids whose keys collide share one quota (probability ~ m^2 / 2^65 among m clients): an
availability matter, never a privacy one (the test is then on the merged client).

The engine only ever stores keys, never the ids themselves, and no error quotes an id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from everlast.engine.errors import InvalidInput

ClientId: TypeAlias = str | bytes | None
"""One query's client: opaque bytes or str, ``None`` for the shared anonymous client."""
ClientIds: TypeAlias = ClientId | Sequence[ClientId] | NDArray[Any]
"""What ``Predictor.answer`` takes: one id for the whole batch (``None``: every query anonymous), or
one id per query."""

_DOMAIN = b"everlast-client/1\x00"


def client_key(client: ClientId) -> int:
    """The client's 64-bit key: the first 8 bytes (big-endian) of SHA-256 over a domain tag, a byte
    saying anonymous (0) or named (1), and the id's bytes. Part of the state format."""
    if client is None:
        data = _DOMAIN + b"\x00"
    elif isinstance(client, str):
        data = _DOMAIN + b"\x01" + client.encode("utf-8", "surrogatepass")
    elif isinstance(client, bytes):
        data = _DOMAIN + b"\x01" + client
    else:
        raise InvalidInput("a client id must be str, bytes or None")
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


ANONYMOUS_KEY = client_key(None)


@dataclass(frozen=True, slots=True)
class ClientBatch:
    """A batch's clients: their distinct keys (sorted) and, per query, the index of its key."""

    keys: NDArray[np.uint64]
    codes: NDArray[np.int64]

    def head(self, n: int) -> ClientBatch:
        """The first n queries' clients (only the keys they use)."""
        used, codes = np.unique(self.codes[:n], return_inverse=True)
        return ClientBatch(self.keys[used], codes.reshape(-1).astype(np.int64))


def batch(clients: Any, n: int) -> ClientBatch:
    """The ``ClientBatch`` of n queries; ``InvalidInput`` (naming no id) for anything else than
    ``ClientIds`` with n entries. One pass over the ids at C speed (``dict.fromkeys``, ``map``), one
    hash per distinct id."""
    if clients is None or isinstance(clients, str | bytes):
        return ClientBatch(np.array([client_key(clients)], dtype=np.uint64), np.zeros(n, dtype=np.int64))
    if isinstance(clients, np.ndarray):
        if clients.ndim != 1:
            raise InvalidInput("clients must be one id per query (a one-dimensional sequence)")
        clients = clients.tolist()
    if not isinstance(clients, Sequence):
        raise InvalidInput("clients must be None, one id (str or bytes), or one id per query")
    if len(clients) != n:
        raise InvalidInput(f"clients has {len(clients)} entries for a batch of {n} queries")
    try:
        index: dict[Any, int] = dict.fromkeys(clients, 0)
    except TypeError:
        raise InvalidInput("a client id must be str, bytes or None") from None
    raw = np.empty(len(index), dtype=np.uint64)
    for i, c in enumerate(index):  # one step per distinct client, not per query
        raw[i] = client_key(c)
        index[c] = i
    codes = np.fromiter(map(index.__getitem__, clients), dtype=np.int64, count=n)
    keys, inverse = np.unique(raw, return_inverse=True)  # "a" and b"a": one key
    return ClientBatch(keys, inverse.reshape(-1).astype(np.int64)[codes])
