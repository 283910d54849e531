from __future__ import annotations

from collections.abc import Iterator

import pytest

from everlast.daemon.broker import EmbeddedBroker


@pytest.fixture(scope="session")
def broker() -> Iterator[EmbeddedBroker]:
    """A real Kafka-protocol broker (Tansu) for the deployment tests; unique topics and groups per test."""
    with EmbeddedBroker() as b:
        yield b
