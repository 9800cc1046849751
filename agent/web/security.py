"""Protections for the HTTP endpoints: TLS context, basic auth, request limits.

Pure building blocks, used by ``agent/web/server.py``:

- ``server_ssl_context(tls)``: an ``ssl.SSLContext`` from a ``TLSServerConfig``;
  ``ReloadingSSLContext`` rebuilds it when the certificate files change.
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
import ipaddress
import logging
import os
import secrets
import ssl
import tempfile
import threading
import time
from base64 import b64decode
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agent.core.config import ConfigError

if TYPE_CHECKING:
    from agent.web.config import TLSServerConfig

log = logging.getLogger(__name__)

__all__ = [
    "BasicAuth",
    "RateLimiter",
    "ReloadingSSLContext",
    "ServerLimits",
    "parse_basic_authorization",
    "peer_san_allowed",
    "server_ssl_context",
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


# --- TLS
_TLS_VERSION = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


def _verify_mode(client_auth_type: str) -> ssl.VerifyMode:
    from agent.web.config import ClientAuth

    return {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.VERIFY_IF_GIVEN: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRE_AND_VERIFY: ssl.CERT_REQUIRED,
    }[client_auth_type]


def _load_cert_chain(context: ssl.SSLContext, tls: TLSServerConfig) -> None:
    if tls.cert_file and tls.key_file:
        context.load_cert_chain(tls.cert_file, tls.key_file, password=b"")
        return
    # ssl loads a chain only from files: inline PEM goes through a private temporary directory.
    with tempfile.TemporaryDirectory(prefix="npuwatch-tls-") as tmp:
        cert_path = tls.cert_file or _write_private(os.path.join(tmp, "cert.pem"), tls.cert or "")
        key_path = tls.key_file or _write_private(os.path.join(tmp, "key.pem"), tls.key or "")
        context.load_cert_chain(cert_path, key_path, password=b"")


def _write_private(path: str, text: str) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def server_ssl_context(tls: TLSServerConfig, source: str = "web config") -> ssl.SSLContext:
    """Server-side context honouring versions, ciphers and client-certificate policy.

    Raises ``ConfigError`` when the certificate, key or client CA cannot be loaded.
    """
    from agent.web.config import CIPHER_SUITES

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _TLS_VERSION[tls.min_version]
    context.maximum_version = _TLS_VERSION[tls.max_version]
    if tls.prefer_server_cipher_suites:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        openssl_names = [name for suite in tls.cipher_suites if (name := CIPHER_SUITES[suite])]
        if openssl_names:
            context.set_ciphers(":".join(openssl_names))
    except ssl.SSLError as exc:
        problem = f"tls_server_config.cipher_suites: none usable here ({exc.reason})"
        raise ConfigError([problem], source) from None
    try:
        _load_cert_chain(context, tls)
    except (ssl.SSLError, OSError) as exc:
        why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise ConfigError([f"tls_server_config: cannot load certificate and key: {why}"], source) from None
    context.verify_mode = _verify_mode(tls.client_auth_type)
    try:
        if tls.client_ca_file:
            context.load_verify_locations(cafile=tls.client_ca_file)
        if tls.client_ca:
            context.load_verify_locations(cadata=tls.client_ca)
    except (ssl.SSLError, OSError, ValueError) as exc:
        why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        problem = f"tls_server_config.client_ca_file: cannot load client CAs: {why}"
        raise ConfigError([problem], source) from None
    return context


def _normal_san(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value


def peer_san_allowed(peer_cert: Mapping[str, Any] | None, allowed: Iterable[str]) -> bool:
    """True when any DNS, IP, email or URI SAN of the (verified) peer cert is in ``allowed``."""
    if not peer_cert:
        return False
    wanted = {_normal_san(item) for item in allowed}
    return any(_normal_san(str(value)) in wanted for _kind, value in peer_cert.get("subjectAltName", ()))


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


class ReloadingSSLContext:
    """Rebuilds the context when a certificate, key or CA file changes (rotated certificates).

    Files are stat'ed at most once per ``check_interval_s``; a change that fails to load keeps
    the previous context and is logged, so a half-written rotation never takes the endpoint down.
    """

    def __init__(self, tls: TLSServerConfig, check_interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._tls = tls
        self._paths = [p for p in (tls.cert_file, tls.key_file, tls.client_ca_file) if p]
        self._interval = check_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._context = server_ssl_context(tls)
        self._checked_at = clock()

    def _stat(self) -> tuple[tuple[int, int], ...]:
        stamps = []
        for path in self._paths:
            try:
                info = os.stat(path)
                stamps.append((info.st_mtime_ns, info.st_size))
            except OSError:
                stamps.append((-1, -1))
        return tuple(stamps)

    def get(self) -> ssl.SSLContext:
        now = self._clock()
        with self._lock:
            if now - self._checked_at < self._interval:
                return self._context
            self._checked_at = now
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._context = server_ssl_context(self._tls)
                    log.info("reloaded TLS certificate and key")
                except ConfigError as exc:
                    log.warning("TLS files changed but cannot be loaded, keeping the previous ones: %s",
                                "; ".join(exc.problems))
            return self._context
