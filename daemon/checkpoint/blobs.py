"""Blob stores: named byte strings per model. A local directory (atomic write + rename, fsync,
mode 0600) or a Kafka topic (newest record per key, chunked, no reliance on compaction).
Optional AES-256-GCM encryption at rest wraps either one.

Each store also keeps a model's *claims* (``claim``, ``claimed``): the one decision that must be
the same for every replica, which fit of a new model is its release. A claim is a random token; the
first one a store records for a model wins, for ever (the directory: a file created once, atomically;
Kafka: the claim with the lowest offset on the checkpoints topic's partition 0). ``ModelCheckpointer``
claims a model before creating it: only the winner fits (docs/privacy/learner.md 2, "One fit per
model"). Only an operator voids a claim (``void_claim``, ``everlast void-claim``)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

from everlast.daemon.errors import CheckpointError, CorruptCheckpoint

CLAIM = "claim"
"""The directory store's claim file (not a blob: ``names`` leaves it out)."""


def _fsync_dir(d: Path) -> None:
    """Make a rename or link in ``d`` durable (fsync the directory)."""
    dfd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class BlobStore(Protocol):
    async def put(self, model: str, name: str, data: bytes) -> None: ...
    async def get(self, model: str, name: str) -> bytes | None: ...
    async def names(self, model: str) -> list[str]: ...
    async def delete(self, model: str, names: Iterable[str]) -> None: ...
    async def claim(self, model: str, token: str) -> str:
        """Record ``token`` as a claim on ``model`` (durably) and return the winning claim: the first
        ever recorded for the model, this one or an earlier one."""
        ...

    async def claimed(self, model: str) -> str | None:
        """The winning claim on ``model`` as the store last read it (None: no claim)."""
        ...

    async def claim_tokens(self, model: str) -> list[str]:
        """Every claim on ``model`` as the store last read it, the winning one first."""
        ...

    async def refresh(self) -> None:
        """Re-read what other replicas may have written since (a no-op where reads are live)."""
        ...

    async def void_claim(self, model: str) -> int:
        """Remove every claim on ``model`` (an operator's act: the model may then be created again);
        returns how many were removed."""
        ...


FRAME = b"EVB1"
"""First bytes of a checksummed blob: ``FRAME``, SHA-256 of (model, name, data), data."""


def frame(model: str, name: str, data: bytes) -> bytes:
    """``data`` with its checksum, bound to its model and name (so that a blob cannot be swapped or
    renamed unnoticed). Written by ``ModelCheckpointer`` into whatever store it uses: every blob is
    verified before use whatever the configuration (with a key, AES-GCM authenticates it as well)."""
    return FRAME + _digest(model, name, data) + data


def unframe(model: str, name: str, raw: bytes, authenticated: bool = False) -> bytes:
    """``frame``'s inverse; raises ``CorruptCheckpoint`` when the checksum fails. A blob without a
    frame (written before checksums) is accepted only from a store that authenticates its blobs
    itself (``authenticated``: the encrypted store)."""
    if raw[:4] != FRAME:
        if authenticated:
            return raw
        raise CorruptCheckpoint(f"checkpoint {model}/{name} carries no checksum (damaged, or written by a version "
                                "before checksums): it cannot be verified")
    data = raw[36:]
    if len(raw) < 36 or _digest(model, name, data) != raw[4:36]:
        raise CorruptCheckpoint(f"checkpoint {model}/{name} fails its checksum (damaged)")
    return data


def _digest(model: str, name: str, data: bytes) -> bytes:
    h = hashlib.sha256()
    h.update(f"everlast blob v1/{model}/{name}/".encode())
    h.update(data)
    return h.digest()


class DirStore:
    """``<root>/<model>/<name>``; directories 0700 (the root too), files 0600; every write is
    atomic and durable."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @classmethod
    def private(cls, root: Path) -> DirStore:
        """A store on ``root``, made private first (``secure_root``)."""
        store = cls(root)
        store.secure_root()
        return store

    def secure_root(self) -> None:
        """Create the root directory with mode 0700, or make an existing one 0700: checkpoints hold
        secrets (training data, random-stream state). Raises ``CheckpointError`` if it cannot."""
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            if self.root.stat().st_mode & 0o077:
                os.chmod(self.root, 0o700)
        except OSError as exc:
            raise CheckpointError(
                f"checkpoint directory {self.root}: cannot make it private (mode 0700): {exc.strerror}"
            ) from None

    def _dir(self, model: str) -> Path:
        d = self.root / model
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        return d

    async def put(self, model: str, name: str, data: bytes) -> None:
        await asyncio.to_thread(self._put, model, name, data)

    def _put(self, model: str, name: str, data: bytes) -> None:
        try:
            d = self._dir(model)
            tmp = d / f".{name}.tmp-{os.getpid()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, d / name)
            _fsync_dir(d)
        except OSError as exc:
            raise CheckpointError(f"cannot write checkpoint {model}/{name}: {exc.strerror}") from None

    async def get(self, model: str, name: str) -> bytes | None:
        path = self.root / model / name
        try:
            return await asyncio.to_thread(path.read_bytes)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read checkpoint {model}/{name}: {exc.strerror}") from None

    async def names(self, model: str) -> list[str]:
        d = self.root / model
        try:
            if not d.is_dir():
                return []
            return sorted(p.name for p in d.iterdir() if not p.name.startswith(".") and p.name != CLAIM)
        except OSError as exc:
            raise CheckpointError(f"cannot list checkpoint {model}: {exc.strerror}") from None

    async def delete(self, model: str, names: Iterable[str]) -> None:
        for n in names:
            try:
                with contextlib.suppress(FileNotFoundError):
                    (self.root / model / n).unlink()
            except OSError as exc:
                raise CheckpointError(f"cannot delete checkpoint {model}/{n}: {exc.strerror}") from None

    async def claim(self, model: str, token: str) -> str:
        return await asyncio.to_thread(self._claim, model, token)

    def _claim(self, model: str, token: str) -> str:
        """``<model>/claim``, holding the winning token: written to a temporary file, fsync'd, then
        hard-linked into place, which fails if the name exists (atomic, and never half written)."""
        try:
            d = self._dir(model)
            tmp = d / f".claim.tmp-{os.getpid()}-{token}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, token.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                with contextlib.suppress(FileExistsError):
                    os.link(tmp, d / CLAIM)
            finally:
                tmp.unlink()
            _fsync_dir(d)
        except OSError as exc:
            raise CheckpointError(f"cannot write the claim of {model}: {exc.strerror}") from None
        won = self._claimed(model)
        if won is None:
            raise CheckpointError(f"the claim of {model} vanished as it was written")
        return won

    async def claimed(self, model: str) -> str | None:
        return await asyncio.to_thread(self._claimed, model)

    def _claimed(self, model: str) -> str | None:
        try:
            return (self.root / model / CLAIM).read_text().strip() or None
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise CheckpointError(f"cannot read the claim of {model}: {exc.strerror}") from None

    async def claim_tokens(self, model: str) -> list[str]:
        won = await self.claimed(model)
        return [] if won is None else [won]

    async def refresh(self) -> None:
        return None  # every read is of the directory as it is

    async def void_claim(self, model: str) -> int:
        path = self.root / model / CLAIM
        try:
            path.unlink()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise CheckpointError(f"cannot void the claim of {model}: {exc.strerror}") from None
        return 1


PADDED = 0xC1
"""First byte of a padded plaintext: a byte msgpack never uses, so blobs sealed before padding
(msgpack, unpadded) still read."""
PAD_MIN = 4096


def pad(data: bytes) -> bytes:
    """``PADDED``, the length (8 bytes), ``data``, zeros: to the next power of two, at least 4 KiB. A
    ciphertext's length then shows only that bucket, not the exact length of a state whose size
    depends on secrets (msgpack's integers are variable-length: a fitted cut's width class, a round's
    counts; review G3)."""
    n = len(data) + 9
    size = max(PAD_MIN, 1 << (n - 1).bit_length())
    return bytes([PADDED]) + len(data).to_bytes(8, "big") + data + bytes(size - n)


def unpad(plain: bytes) -> bytes:
    """``pad``'s inverse; a plaintext sealed before padding is returned as it is."""
    if plain[:1] != bytes([PADDED]):
        return plain
    n = int.from_bytes(plain[1:9], "big")
    if len(plain) < 9 + n:
        raise ValueError("padded length exceeds the blob")
    return plain[9 : 9 + n]


class EncryptedStore:
    """AES-256-GCM around another store. Each blob is nonce (12 bytes) || ciphertext of the padded
    plaintext (``pad``); the associated data binds it to its model and name, so blobs cannot be
    swapped or renamed."""

    authenticated = True
    """Every blob is authenticated (AES-GCM) before it is returned."""

    def __init__(self, inner: BlobStore, key: bytes) -> None:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if len(key) != 32:
            raise CheckpointError("the checkpoint key must be 32 bytes (64 hex characters)")
        self.inner = inner
        self.aead = AESGCM(key)

    async def put(self, model: str, name: str, data: bytes) -> None:
        nonce = os.urandom(12)
        await self.inner.put(model, name, nonce + self.aead.encrypt(nonce, pad(data), f"{model}/{name}".encode()))

    async def get(self, model: str, name: str) -> bytes | None:
        from cryptography.exceptions import InvalidTag

        blob = await self.inner.get(model, name)
        if blob is None:
            return None
        try:
            return unpad(self.aead.decrypt(blob[:12], blob[12:], f"{model}/{name}".encode()))
        except (InvalidTag, ValueError):
            raise CorruptCheckpoint(
                f"checkpoint {model}/{name} fails authentication (wrong key, or tampered)"
            ) from None

    async def names(self, model: str) -> list[str]:
        return await self.inner.names(model)

    async def delete(self, model: str, names: Iterable[str]) -> None:
        await self.inner.delete(model, names)

    async def claim(self, model: str, token: str) -> str:
        return await self.inner.claim(model, token)  # a random token: no secret, stored as it is

    async def claimed(self, model: str) -> str | None:
        return await self.inner.claimed(model)

    async def claim_tokens(self, model: str) -> list[str]:
        return await self.inner.claim_tokens(model)

    async def refresh(self) -> None:
        await self.inner.refresh()

    async def void_claim(self, model: str) -> int:
        return await self.inner.void_claim(model)


def sealed(inner: BlobStore, key: bytes | None) -> BlobStore:
    """``inner`` as the daemon uses it: encrypted under ``key`` when one is configured."""
    return EncryptedStore(inner, key) if key is not None else inner


def key_from_env(var: str) -> bytes | None:
    """The AES key from environment variable ``var`` (64 hex characters), or None if unset."""
    raw = os.environ.get(var)
    if not raw:
        return None
    try:
        key = bytes.fromhex(raw.strip())
    except ValueError:
        raise CheckpointError(f"{var} must hold 64 hex characters (an AES-256 key)") from None
    if len(key) != 32:
        raise CheckpointError(f"{var} must hold 64 hex characters (an AES-256 key)")
    return key
