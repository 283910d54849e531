"""Every error the daemon raises, with its retry policy as a property of the type (as aiokafka
does): the run loop asks ``err.retriable`` instead of listing types. Messages name fields and
reasons, never a query or training value."""

from __future__ import annotations


class DaemonError(Exception):
    retriable: bool = False


class ConfigError(DaemonError):
    """The configuration is invalid; the message says which setting and what would work."""


class BrokerError(DaemonError):
    """The broker could not be started or reached."""

    retriable = True


class CheckpointError(DaemonError):
    """A checkpoint could not be written or read (I/O, permissions, integrity, wrong key)."""

    retriable = True


class CorruptCheckpoint(CheckpointError):
    """A checkpoint exists but cannot be trusted (bad MAC, truncated, wrong format)."""

    retriable = False
