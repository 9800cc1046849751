"""HTTP basic auth for the endpoints: bcrypt checks that neither leak user names nor block scrapes.

- ``parse_basic_authorization(header)``: ``Basic base64(user:password)`` -> (user, password).
- ``BasicAuth(users, verifier=...).check(header, client)``: GRANTED, DENIED or BUSY.
- ``BcryptVerifier``: the bounded pool every uncached bcrypt check runs on, shared across reloads
  together with the ``CredentialCache`` of verified outcomes.

Timing. Every configured user has a bcrypt cost of its own, and a wrong password for a user costs
one bcrypt at that user's cost. A name that is not configured is checked against a decoy hash
whose cost is picked per name, deterministically, from the configured users' costs (weighted by
how many users have each): ``HMAC(key, name)`` chooses, with the key derived from the configured
hashes, so the choice is stable across restarts and unpredictable without the hashes. An unknown
name therefore answers exactly like some configured user would, and the times an attacker sees
for any name are drawn from the same few values whether the name exists or not.

Cost of a flood. A credential is bcrypt-checked once: outcomes are cached under a salted SHA-256
(grants and denials in separate caches, so junk guesses never push a working credential out).
Uncached checks run on ``BcryptVerifier``'s few threads, never in the request's own thread
without a bound: each client address may have one check in flight and start ``per_client_rate``
a second; past that, or with the queue full, the answer is BUSY (HTTP 429) at once. Requests
whose credentials are cached, and requests that need no auth, never wait for bcrypt.
"""

from __future__ import annotations

import binascii
import enum
import hashlib
import hmac
import logging
import os
import secrets
import threading
from base64 import b64decode
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from agent.web.security import RateLimiter

log = logging.getLogger(__name__)

__all__ = [
    "Auth",
    "BasicAuth",
    "BcryptVerifier",
    "CredentialCache",
    "bcrypt_cost",
    "parse_basic_authorization",
]

Checkpw = Callable[[bytes, bytes], bool]


class Auth(enum.Enum):
    GRANTED = "granted"
    DENIED = "denied"  # 401
    BUSY = "busy"  # too many uncached checks from this client or overall: 429, try again


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


def bcrypt_cost(hashed: str | bytes) -> int:
    """The cost of a ``$2b$NN$...`` hash."""
    text = hashed.decode() if isinstance(hashed, bytes) else hashed
    return int(text.split("$")[2])


def _default_checkpw(password: bytes, hashed: bytes) -> bool:
    import bcrypt

    return bool(bcrypt.checkpw(password, hashed))


class CredentialCache:
    """Outcomes of bcrypt checks, keyed by a salted SHA-256 of (user, hash, password).

    Keys include the hash, so after a reload a removed user or a changed hash never matches an
    old entry: one cache serves every generation of the user list.
    """

    def __init__(self, granted_size: int = 64, denied_size: int = 1024) -> None:
        self._salt = secrets.token_bytes(16)
        self._sizes = {True: granted_size, False: denied_size}
        self._entries: dict[bool, OrderedDict[bytes, None]] = {True: OrderedDict(), False: OrderedDict()}
        self._lock = threading.Lock()

    def key(self, user: bytes, hashed: bytes, password: bytes) -> bytes:
        framing = f"{len(user)}:{len(hashed)}:".encode()
        return hashlib.sha256(self._salt + framing + user + hashed + password).digest()

    def get(self, key: bytes) -> bool | None:
        with self._lock:
            for outcome, entries in self._entries.items():
                if key in entries:
                    entries.move_to_end(key)
                    return outcome
        return None

    def put(self, key: bytes, outcome: bool) -> None:
        with self._lock:
            entries = self._entries[outcome]
            entries[key] = None
            entries.move_to_end(key)
            while len(entries) > self._sizes[outcome]:
                entries.popitem(last=False)


def _default_workers() -> int:
    # One bcrypt thread per four cores, at least one, at most two: a flood of guesses never
    # takes more than a slice of the node, and scrapes keep a core.
    return min(2, max(1, (os.cpu_count() or 1) // 4))


class BcryptVerifier:
    """A few threads that run uncached bcrypt checks, with per-client and overall bounds.

    ``verify`` waits at most ``wait_s`` for the outcome and returns None (BUSY) when the check
    could not be started (the client already has one in flight, spent its rate, or the queue is
    full) or did not finish in time. Concurrent checks of the same credential share one run.
    """

    def __init__(self, workers: int | None = None, *, max_pending: int = 16, per_client_rate: float = 1.0,
                 per_client_burst: int = 4, wait_s: float = 5.0, checkpw: Checkpw | None = None) -> None:
        self._pool = ThreadPoolExecutor(workers or _default_workers(), thread_name_prefix="bcrypt")
        self._checkpw = checkpw or _default_checkpw
        self._max_pending = max_pending
        self._wait_s = wait_s
        self._rate = RateLimiter(per_client_rate, per_client_burst)
        self._lock = threading.Lock()
        self._in_flight: dict[bytes, Future[bool]] = {}
        self._clients: set[str] = set()

    def verify(self, key: bytes, password: bytes, hashed: bytes, client: str) -> bool | None:
        started = False
        with self._lock:
            future = self._in_flight.get(key)
            if future is None:
                if client in self._clients or len(self._in_flight) >= self._max_pending:
                    return None
                if not self._rate.allow(client):
                    return None
                future = self._pool.submit(self._run, password, hashed)
                self._in_flight[key] = future
                self._clients.add(client)
                started = True
        if started:  # outside the lock: a finished future runs the callback at once
            future.add_done_callback(lambda _done: self._finished(key, client))
        try:
            return future.result(timeout=self._wait_s)
        except FutureTimeout:
            return None

    def _finished(self, key: bytes, client: str) -> None:
        with self._lock:
            self._in_flight.pop(key, None)
            self._clients.discard(client)

    def _run(self, password: bytes, hashed: bytes) -> bool:
        try:
            return bool(self._checkpw(password, hashed))
        except ValueError:  # e.g. a password over bcrypt's 72-byte limit
            return False

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _decoy_hash(cost: int) -> bytes:
    """A well-formed hash of ``cost`` that no password matches: checking it costs a full bcrypt."""
    import bcrypt

    checksum = "".join(secrets.choice("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
                       for _ in range(31))
    return bytes(bcrypt.gensalt(rounds=cost)) + checksum.encode()


class BasicAuth:
    """Checks Basic credentials against ``{user: bcrypt hash}`` (see the module docstring)."""

    def __init__(self, users: Mapping[str, str], *, verifier: BcryptVerifier | None = None,
                 cache: CredentialCache | None = None, checkpw: Checkpw | None = None) -> None:
        if not users:
            raise ValueError("BasicAuth needs at least one user")
        self._users = [(name.encode(), hashed.encode()) for name, hashed in users.items()]
        self._verifier = verifier or BcryptVerifier(checkpw=checkpw)
        self._owns_verifier = verifier is None
        self._cache = cache or CredentialCache()
        self._user_costs = sorted(bcrypt_cost(hashed) for hashed in users.values())
        self._decoys = {cost: _decoy_hash(cost) for cost in set(self._user_costs)}
        material = b"\0".join(sorted(hashed for _name, hashed in self._users))
        self._decoy_key = hashlib.sha256(b"npuwatch decoy cost\0" + material).digest()

    @property
    def users(self) -> tuple[str, ...]:
        return tuple(name.decode() for name, _hashed in self._users)

    def decoy_cost(self, user: bytes) -> int:
        """The bcrypt cost an unknown ``user`` is checked at: one of the configured users' costs."""
        digest = hmac.new(self._decoy_key, user, hashlib.sha256).digest()
        return self._user_costs[int.from_bytes(digest[:8], "big") % len(self._user_costs)]

    def check(self, authorization: str | None, client: str = "") -> Auth:
        credentials = parse_basic_authorization(authorization)
        if credentials is None:
            return Auth.DENIED
        user, password = credentials
        hashed, known = b"", False
        for name, candidate in self._users:  # every name compared, in constant time
            if hmac.compare_digest(name, user):
                hashed, known = candidate, True
        if not known:
            hashed = self._decoys[self.decoy_cost(user)]
        key = self._cache.key(user, hashed, password)
        cached = self._cache.get(key)
        if cached is None:
            verified = self._verifier.verify(key, password, hashed, client)
            if verified is None:
                return Auth.BUSY
            cached = verified and known
            self._cache.put(key, cached)
        return Auth.GRANTED if cached else Auth.DENIED

    def close(self) -> None:
        if self._owns_verifier:
            self._verifier.close()

