"""Request limits for the HTTP endpoints: what one client may cost (auth is ``agent/web/auth.py``).

- ``ServerLimits``: the caps the server enforces (head size, connections overall and per client
  address, time to send a request head, keep-alive idle time, request and connection rates).
- ``RateLimiter``: token buckets keyed by client address (or one shared key).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["RateLimiter", "ServerLimits"]


@dataclass(frozen=True)
class ServerLimits:
    """What one misbehaving client may cost the agent.

    A client is an IP address. Each may hold ``max_connections_per_client`` connections that are
    waiting for a request (a new one beyond that closes its longest-waiting one) and have as many
    requests in progress (a further request waits up to ``turn_wait_s`` for a turn, then gets 503).
    When ``max_connections`` are open, a new connection closes the longest-waiting connection of
    the client that holds the most. Connections and requests are each rate limited per client.

    ``head_timeout_s`` bounds the whole time to send a request head (and, on a new connection, the
    TLS handshake before it), not each read, so a client trickling one byte at a time is dropped;
    ``idle_timeout_s`` is how long a kept-alive connection may wait for the next request to begin.
    An answer must be taken within ``write_timeout_s``; while the server is full, a busy connection whose
    client has taken no byte of its answer for ``stall_s`` is closed to make room, like a waiting one. A
    new connection that finds every place busy and none stalled yet waits up to ``room_wait_s`` for one.
    """

    max_connections: int = 32  # config: web.max_connections
    max_connections_per_client: int = 4  # config: web.max_connections_per_client
    max_header_bytes: int = 8192  # request line + headers; 414 / 431 past it
    head_timeout_s: float = 3.0
    idle_timeout_s: float = 20.0  # longer than a 15 s scrape interval, so the connection is reused
    write_timeout_s: float = 10.0
    stall_s: float = 1.0  # a busy connection whose client took no byte of its answer this long may be closed
    turn_wait_s: float = 1.0
    room_wait_s: float = 2.0  # > stall_s: a connection filled as the newcomer came has had time to stall
    rate_per_s: float = 20.0  # requests, and new connections, per client address; 429 past it
    burst: int = 40
    max_tracked_clients: int = 4096  # rate buckets kept; least recently seen dropped first


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
