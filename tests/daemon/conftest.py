from __future__ import annotations

from collections.abc import Iterator

import pytest

from everlast.daemon.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """One real Kafka-protocol broker (Tansu) for the session; tests use unique topics and groups."""
    with EmbeddedBroker() as b:
        yield b
