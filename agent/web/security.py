"""Protections for the HTTP endpoints: basic auth and request limits (TLS is ``agent/web/tls.py``).

Pure building blocks, used by ``agent/web/server.py``:

- ``BasicAuth(users).check(authorization_header)``: constant-time user match and
  bcrypt password check, with verified credentials cached (keyed by a SHA-256 of
  them) so bcrypt's deliberate cost is paid once, not on every scrape.
- ``RateLimiter``: token buckets keyed by client IP (or one shared key).
- ``ServerLimits``: the caps the server enforces (header size, connections,
  request rate, time to receive a request).
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import logging
import secrets
import threading
import time
from base64 import b64decode
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

__all__ = [
    "BasicAuth",
    "RateLimiter",
    "ServerLimits",
    "parse_basic_authorization",
]


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """What one misbehaving scraper may cost the agent.

    ``request_timeout_s`` bounds the whole time to receive a request head (and the TLS
    handshake), not each read, so a client trickling one byte at a time is still dropped.
    """

    max_connections: int = 32  # config: web.max_connections
    max_header_bytes: int = 8192  # request line + headers; 414 / 431 past it
    request_timeout_s: float = 10.0  # also the keep-alive idle timeout and the write timeout
    rate_per_s: float = 20.0  # per client IP; 429 past it
    burst: int = 40
    max_tracked_clients: int = 4096  # rate buckets kept; least recently seen dropped first


# --- basic auth
def parse_basic_authorization(header: str | None) -> tuple[bytes, bytes] | None:
    """``Authorization: Basic base64(user:password)`` -> (user, password), or None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = b64decode(token.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = decoded.partition(b":")
    return (user, password) if sep else None


class BasicAuth:
    """Checks Basic credentials against ``{user: bcrypt hash}``.

    The user name is compared with ``hmac.compare_digest`` against every configured user,
    and an unknown user is checked against a decoy hash of the same cost, so timing tells
    nothing about which users exist. Outcomes are cached under a salted SHA-256 of
    (user, hash, password): a scraper with the right password pays bcrypt once, one with a
    wrong password does too, and bcrypt runs one check at a time so a flood of guesses
    uses at most one core.
    """

    def __init__(self, users: Mapping[str, str], cache_size: int = 1024,
                 checkpw: Callable[[bytes, bytes], bool] | None = None) -> None:
        import bcrypt

        if not users:
            raise ValueError("BasicAuth needs at least one user")
        self._checkpw = checkpw or bcrypt.checkpw
        self._users = [(name.encode(), hashed.encode()) for name, hashed in users.items()]
        cost = max(int(hashed.split("$")[2]) for hashed in users.values())
        self._decoy = bcrypt.hashpw(secrets.token_bytes(18), bcrypt.gensalt(rounds=cost))
        self._salt = secrets.token_bytes(16)
        self._cache: OrderedDict[bytes, bool] = OrderedDict()
        self._cache_size = cache_size
        self._cache_lock = threading.Lock()
        self._bcrypt_lock = threading.Lock()

    def check(self, authorization: str | None) -> bool:
        credentials = parse_basic_authorization(authorization)
        if credentials is None:
            return False
        user, password = credentials
        hashed, known = self._decoy, False
        for name, candidate in self._users:
            if hmac.compare_digest(name, user):
                hashed, known = candidate, True
        key = hashlib.sha256(
            self._salt + f"{len(user)}:{len(hashed)}:".encode() + user + hashed + password
        ).digest()
        with self._cache_lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        with self._bcrypt_lock:
            try:
                ok = self._checkpw(password, hashed) and known
            except ValueError:  # e.g. a password over bcrypt's 72-byte limit
                ok = False
        with self._cache_lock:
            self._cache[key] = ok
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return ok


# --- rate limiting
class RateLimiter:
    """Token buckets: ``rate_per_s`` tokens a second, holding at most ``burst``."""

    def __init__(self, rate_per_s: float, burst: int, max_keys: int = 4096,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._rate = rate_per_s
        self._burst = float(burst)
        self._max_keys = max_keys
        self._clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (tokens, at)
        self._lock = threading.Lock()

    def allow(self, key: str = "") -> bool:
        now = self._clock()
        with self._lock:
            tokens, at = self._buckets.pop(key, (self._burst, now))
            tokens = min(self._burst, tokens + (now - at) * self._rate)
            allowed = tokens >= 1.0
            self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
            if len(self._buckets) > self._max_keys:
                self._buckets.popitem(last=False)
        return allowed
