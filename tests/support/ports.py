"""Ports for the servers the tests start: below the kernel's ephemeral range and never handed out twice.

A port from ``bind(("127.0.0.1", 0))`` is one the kernel also gives to outgoing connections: between
the moment a test picks it and the moment its server binds it (seconds for a Prometheus or an agent
on a loaded machine), a scrape or an HTTP client may take it as its local port, and the server fails
to start. Ports below ``net.ipv4.ip_local_port_range`` are never chosen for outgoing connections, and
the set below keeps two servers of one test session from being handed the same one.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_LOWEST = 10000
_handed_out: set[int] = set()
_lock = threading.Lock()
_rng = random.Random()  # unseeded on purpose: parallel sessions on one machine should not walk in step


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago, outside the ephemeral range, new to this process."""
    high = _ephemeral_low() - 1
    with _lock:
        for _ in range(1000):
            port = _rng.randint(_LOWEST, high) if high > _LOWEST else 0
            if port in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
                chosen = int(sock.getsockname()[1])
            _handed_out.add(chosen)
            return chosen
    raise RuntimeError(f"no free port between {_LOWEST} and {high}")
