"""A pass-through TCP proxy in front of the embedded broker that lets librdkafka < 2.2 talk to it.

Why: Tansu answers ApiVersions v3+ with all four of the response's top-level tagged fields set to
their defaults (SupportedFeatures = [], FinalizedFeaturesEpoch = -1, FinalizedFeatures = [],
ZkMigrationReady = false). librdkafka before 2.2 (Debian 12's kcat runs 2.0.2) skips a tagged
field's payload one byte short (it reads the size as if it were a compact "length + 1"), loses its
place in the four tags and fails the handshake with "ApiVersionRequest failed: Local: Read
underflow" (fixed upstream in librdkafka PR #4278). KIP-482 defines an absent tagged field as its
default, so dropping default-valued tags changes nothing a client can observe; tags with any other
value are kept as they are. Every other byte passes through untouched; frames are streamed, never
buffered whole (only ApiVersions responses, a few hundred bytes, are).

Run as ``python -I daemon/kafka_compat.py --listen 127.0.0.1:9092 --upstream 127.0.0.1:PORT``
(``daemon.broker`` starts it, tied to the daemon's life like the broker itself).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import struct

API_VERSIONS = 18
FIRST_FLEXIBLE = 3
"""ApiVersions responses carry tagged fields from version 3 on (KIP-511)."""
DEFAULT_TAGS = {0: b"\x01", 1: b"\xff" * 8, 2: b"\x01", 3: b"\x00"}
"""ApiVersionsResponse's top-level tagged fields, encoded at their default values: empty compact
arrays (SupportedFeatures, FinalizedFeatures), int64 -1 (FinalizedFeaturesEpoch), false
(ZkMigrationReady)."""
CHUNK = 256 * 1024
MAX_SHIMMED_FRAME = 1 << 20


def _uvarint(b: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(b) or shift > 63:
            raise ValueError("truncated or overlong varint")
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return value, i


def _put_uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _tags(b: bytes, i: int) -> tuple[list[tuple[int, bytes]], int]:
    n, i = _uvarint(b, i)
    tags = []
    for _ in range(n):
        tag, i = _uvarint(b, i)
        size, i = _uvarint(b, i)
        if i + size > len(b):
            raise ValueError("tagged field runs past the frame")
        tags.append((tag, b[i : i + size]))
        i += size
    return tags, i


def strip_default_tags(body: bytes) -> bytes:
    """An ApiVersions v3+ response body (after the correlation id) without its default-valued
    top-level tagged fields. Anything it cannot parse, or an error response, comes back unchanged."""
    try:
        if len(body) < 2 or body[:2] != b"\x00\x00":
            return body  # an error response is laid out as v0: nothing to strip
        n, i = _uvarint(body, 2)
        for _ in range(max(n - 1, 0)):  # api_key, min_version, max_version, then the entry's tags
            i += 6
            _, i = _tags(body, i)
        i += 4  # throttle_time_ms
        tags, end = _tags(body, i)
        if end != len(body):
            return body
    except (ValueError, IndexError):
        return body
    kept = [(t, v) for t, v in tags if DEFAULT_TAGS.get(t) != v]
    if len(kept) == len(tags):
        return body
    out = bytearray(body[:i]) + _put_uvarint(len(kept))
    for t, v in kept:
        out += _put_uvarint(t) + _put_uvarint(len(v)) + v
    return bytes(out)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
    while n > 0:
        chunk = await reader.read(min(n, CHUNK))
        if not chunk:
            raise asyncio.IncompleteReadError(b"", n)
        writer.write(chunk)
        n -= len(chunk)
        await writer.drain()


async def _requests(src: asyncio.StreamReader, dst: asyncio.StreamWriter, shim: set[int]) -> None:
    """Client to broker: note the correlation ids of ApiVersions v3+ requests, pass every byte."""
    while True:
        head = await src.readexactly(12)  # size, api_key, api_version, correlation_id
        size, key, version, corr = struct.unpack(">ihhi", head)
        if size < 8:
            raise ValueError("malformed request frame")
        if key == API_VERSIONS and version >= FIRST_FLEXIBLE:
            shim.add(corr)
        dst.write(head)
        await _copy(src, dst, size - 8)


async def _responses(src: asyncio.StreamReader, dst: asyncio.StreamWriter, shim: set[int]) -> None:
    """Broker to client: rewrite the noted ApiVersions responses, stream the rest."""
    while True:
        head = await src.readexactly(8)  # size, correlation_id (ApiVersions uses response header v0)
        size, corr = struct.unpack(">ii", head)
        if size < 4:
            raise ValueError("malformed response frame")
        if corr in shim and size <= MAX_SHIMMED_FRAME:
            shim.discard(corr)
            body = strip_default_tags(await src.readexactly(size - 4))
            dst.write(struct.pack(">ii", len(body) + 4, corr) + body)
            await dst.drain()
        else:
            dst.write(head)
            await _copy(src, dst, size - 4)


async def _connection(
    client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter, upstream: tuple[str, int]
) -> None:
    try:
        broker_r, broker_w = await asyncio.open_connection(*upstream)
    except OSError:
        client_w.close()
        return
    shim: set[int] = set()
    pumps = [
        asyncio.create_task(_requests(client_r, broker_w, shim)),
        asyncio.create_task(_responses(broker_r, client_w, shim)),
    ]
    try:
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for p in pumps:
            p.cancel()
        for p in pumps:  # a closed connection ends a pump with an error: that is the normal end
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await p
        for w in (client_w, broker_w):
            w.close()


async def serve(listen: tuple[str, int], upstream: tuple[str, int]) -> None:
    server = await asyncio.start_server(lambda r, w: _connection(r, w, upstream), *listen, reuse_address=True)
    async with server:
        await server.serve_forever()


def _hostport(s: str) -> tuple[str, int]:
    host, _, port = s.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="kafka_compat.py", description="Kafka pass-through for librdkafka < 2.2 clients")
    p.add_argument("--listen", type=_hostport, required=True, help="HOST:PORT clients connect to")
    p.add_argument("--upstream", type=_hostport, required=True, help="HOST:PORT of the broker")
    args = p.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen, args.upstream))


if __name__ == "__main__":
    main()
