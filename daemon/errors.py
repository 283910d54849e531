"""Every error the daemon raises, with its retry policy as a property of the type (as aiokafka
does): ``daemon.retry.retrying`` asks ``err.retriable`` instead of listing types. Messages name
fields and reasons, never a query or training value."""

from __future__ import annotations


class DaemonError(Exception):
    retriable: bool = False


class ConfigError(DaemonError):
    """The configuration is invalid; the message says which setting and what would work."""


class BrokerError(DaemonError):
    """The broker could not be started or reached, or refused a request."""

    retriable = True

    def __init__(self, message: str, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


class CheckpointError(DaemonError):
    """A checkpoint could not be written or read (I/O, permissions, integrity, wrong key)."""

    retriable = True


class CorruptCheckpoint(CheckpointError):
    """A checkpoint exists but cannot be trusted (bad MAC, truncated, wrong format)."""

    retriable = False


class CommitOrderError(DaemonError):
    """A checkpoint step was asked for out of order (a bug: ``daemon/checkpoint/checkpoint.py``
    numbers the order)."""


class InvalidStoredOffset(CommitOrderError):
    """A partition's checkpoint was asked to store an offset that does not increase (it would
    cover answers twice, or skip some)."""


class Stopped(DaemonError):
    """Shutdown was requested while an operation waited (for the broker, or for a retry)."""


# aiokafka's own ``retriable`` flag marks e.g. KafkaTimeoutError as final; a daemon that must outlast
# a broker outage retries every broker error except those no retry can fix.
_PERMANENT = (
    "TopicAuthorizationFailedError",
    "GroupAuthorizationFailedError",
    "ClusterAuthorizationFailedError",
    "TransactionalIdAuthorizationFailed",
    "AuthenticationFailedError",
    "AuthenticationMethodNotSupported",
    "UnsupportedSaslMechanismError",
    "SaslAuthenticationFailed",
    "MessageSizeTooLargeError",
    "RecordTooLargeError",
    "RecordListTooLargeError",
    "UnsupportedVersionError",
    "IncompatibleBrokerVersion",
    "InvalidTopicError",
    "KafkaConfigurationError",
    "ProducerClosed",
)


def as_daemon_error(exc: BaseException) -> DaemonError | None:
    """The daemon's view of ``exc``: itself if it is a ``DaemonError``, a ``BrokerError`` for a
    Kafka client error or a timeout, ``None`` for anything else (a bug: not retried)."""
    if isinstance(exc, DaemonError):
        return exc
    from aiokafka.errors import KafkaError

    if isinstance(exc, KafkaError):
        name = type(exc).__name__
        return BrokerError(f"broker error ({name})", retriable=name not in _PERMANENT)
    if isinstance(exc, TimeoutError):
        return BrokerError("broker request timed out")
    return None


class OutOfTurn(DaemonError):
    """A partition processor was called in a state that does not take the call (``feed`` after
    ``revoke``, ``resume`` during a transition, ...): a bug in the caller, never swallowed."""
