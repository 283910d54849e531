"""Who is asking: a credential -> the client id the gateway stamps on the client's queries.

A client presents an API key (``Authorization: Bearer <key>``) or, when the gateway serves TLS with
``gateway.tls.client_ca``, a client certificate the operator's CA signed. The client id comes from the
credential alone: the ``client`` of the key's configuration entry, or the normalised common name of
the certificate's subject. Nothing the client sends otherwise (a body field, an ``everlast-client``
header) is read.

Keys are stored only as their SHA-256 (hex) in the configuration or the environment. A key is 32
bytes from the OS's CSPRNG (``new_key``), so one unsalted SHA-256 is enough: a password hash such as
scrypt slows down guessing of low-entropy secrets, and 256 random bits cannot be guessed. The lookup
hashes the presented key, finds the entry by its digest and confirms with ``hmac.compare_digest``; the
time taken depends on the presented key only through its digest (which reveals nothing of any stored
key).

The client id is normalised (NFKC, case-folded, surrounding white space removed) and must then be
1-64 characters of ``[a-z0-9._-]`` starting with a letter or digit: ``Alice``, ``alice `` and
``ＡＬＩＣＥ`` are one client, not three; a name that does not normalise to that form is refused, never
silently changed. Its length bounds the header and every log line that names it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from everlast.daemon.config import ApiKeyConfig

KEY_PREFIX = "evk_"
MAX_CLIENT_CHARS = 64
_CLIENT = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_BEARER = re.compile(r"^Bearer[ \t]+(\S{1,512})[ \t]*$", re.I)


def new_key() -> str:
    """A fresh API key: ``evk_`` and 43 characters of URL-safe base64 (256 random bits)."""
    return KEY_PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()


def key_hash(key: str) -> str:
    """The hex SHA-256 of a key (what the configuration stores)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def normalise_client(name: str) -> str | None:
    """The client id of ``name`` (NFKC, case-folded, stripped), or None when it is not 1-64 characters
    of [a-z0-9._-] starting with a letter or digit after that."""
    n = unicodedata.normalize("NFKC", name).casefold().strip()
    return n if _CLIENT.match(n) else None


@dataclass(frozen=True, slots=True)
class Denied:
    """Why a request is not authenticated (the message names the rule, never the credential)."""

    message: str


NO_CREDENTIAL = Denied("no credential: send Authorization: Bearer <API key>, or a client certificate")
BAD_CREDENTIAL = Denied("the credential is not valid (unknown, malformed or revoked)")
BAD_CERT_NAME = Denied("the client certificate's subject has no common name usable as a client id "
                       "(1-64 characters of [a-z0-9._-] after normalisation)")


class Authenticator:
    """Credentials -> client ids. Built once from the configuration; revocation is a configuration
    change (``revoked = true`` or the entry removed) and a restart."""

    def __init__(self, keys: Iterable[ApiKeyConfig], *, certificates: bool = False) -> None:
        self._by_hash: dict[bytes, tuple[bytes, str | None]] = {}
        for k in keys:
            digest = bytes.fromhex(k.sha256)
            self._by_hash[digest] = (digest, None if k.revoked else k.client)
        self.certificates = certificates
        self.clients = frozenset(c for _, c in self._by_hash.values() if c is not None)

    def client_of_key(self, key: str) -> str | Denied:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        entry = self._by_hash.get(digest)
        if entry is None or not hmac.compare_digest(entry[0], digest) or entry[1] is None:
            return BAD_CREDENTIAL
        return entry[1]

    def authenticate(self, headers: Mapping[str, str], peercert: Any) -> str | Denied:
        """The client id from the ``Authorization`` header, else from the TLS peer certificate
        (``ssl.SSLSocket.getpeercert()``'s dict: only a certificate the CA verified reaches here)."""
        auth = headers.get("Authorization")
        if auth is not None:
            m = _BEARER.match(auth)
            return self.client_of_key(m.group(1)) if m else BAD_CREDENTIAL
        if self.certificates and peercert:
            return client_of_certificate(peercert)
        return NO_CREDENTIAL


def client_of_certificate(peercert: Any) -> str | Denied:
    """The normalised common name of a verified certificate's subject (exactly one CN)."""
    try:
        cns = [v for rdn in peercert.get("subject", ()) for k, v in rdn if k == "commonName"]
    except (AttributeError, TypeError, ValueError):
        return BAD_CERT_NAME
    if len(cns) != 1 or not isinstance(cns[0], str):
        return BAD_CERT_NAME
    c = normalise_client(cns[0])
    return c if c is not None else BAD_CERT_NAME
