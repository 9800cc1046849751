"""Which connections are open, per client address: admission, turns and eviction.

A connection is *waiting* from accept (TLS handshake, request head) and between kept-alive
requests, *queued* while it has a request but its client has no free turn, and *busy* while its
request is answered. Waiting and queued connections cost a thread and nothing else, so they
may be closed to make room; busy ones are never interrupted. The rules (``ServerLimits``):

- per client, at most ``per_client`` waiting or queued connections: a new one closes the
  client's longest-waiting one, so idle or trickling connections from one address never pile up
  and several scrapers behind one address simply take turns;
- per client, at most ``per_client`` busy connections: a further request queues for a turn;
- overall, at most ``total`` connections: a new one closes the longest-waiting connection of the
  client with the most, and is refused only when every connection is busy.

All decisions are made under one lock in O(open connections), at most a few dozen.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

__all__ = ["ConnectionTable", "Slot"]

WAITING, QUEUED, BUSY = "waiting", "queued", "busy"


class Slot:
    """One open connection in the table."""

    __slots__ = ("client", "evicted", "since", "sock", "state")

    def __init__(self, client: str, sock: socket.socket, now: float) -> None:
        self.client = client
        self.sock = sock
        self.state = WAITING
        self.since = now
        self.evicted = False


class ConnectionTable:
    def __init__(self, total: int, per_client: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total = total
        self.per_client = per_client
        self._clock = clock
        self._cond = threading.Condition()
        self._by_client: dict[str, list[Slot]] = {}

    # --- accept loop: never blocks
    def admit(self, client: str, sock: socket.socket) -> Slot | None:
        """A slot for a new connection, after closing whatever must make room; None: refuse it."""
        with self._cond:
            mine = self._live(client)
            waiting = [slot for slot in mine if slot.state != BUSY]
            if len(waiting) >= self.per_client:
                self._evict(min(waiting, key=lambda slot: slot.since), "its client opened another")
            if self._open() >= self.total:
                victim = self._longest_waiting_of_biggest_client()
                if victim is None:
                    return None
                self._evict(victim, "the server is full")
            slot = Slot(client, sock, self._clock())
            self._by_client.setdefault(client, []).append(slot)
            return slot

    # --- connection threads
    def replace_socket(self, slot: Slot, sock: socket.socket) -> bool:
        """The TLS socket now carries the connection; False when it was evicted meanwhile."""
        with self._cond:
            slot.sock = sock
            return not slot.evicted

    def begin_request(self, slot: Slot, wait_s: float) -> bool | None:
        """Take a turn for a request: True; None if evicted; False if no turn came in ``wait_s``."""
        deadline = self._clock() + wait_s
        with self._cond:
            if slot.evicted:
                return None
            slot.state = QUEUED
            while sum(1 for other in self._live(slot.client) if other.state == BUSY) >= self.per_client:
                remaining = deadline - self._clock()
                if slot.evicted:
                    return None
                if remaining <= 0:
                    self._set_waiting(slot)
                    return False
                self._cond.wait(remaining)
            if slot.evicted:
                return None
            slot.state = BUSY
            return True

    def end_request(self, slot: Slot) -> None:
        with self._cond:
            self._set_waiting(slot)
            self._cond.notify_all()

    def release(self, slot: Slot) -> None:
        """Forget the slot; call before closing its socket, so no eviction can touch a closed one."""
        with self._cond:
            slots = self._by_client.get(slot.client, [])
            if slot in slots:
                slots.remove(slot)
            if not slots:
                self._by_client.pop(slot.client, None)
            self._cond.notify_all()

    def close_all(self) -> None:
        with self._cond:
            for slots in self._by_client.values():
                for slot in slots:
                    if not slot.evicted:
                        self._evict(slot, "the server is stopping")

    # --- reading
    def counts(self) -> dict[str, dict[str, int]]:
        """client -> {state: live connections}, for tests and logs."""
        with self._cond:
            out: dict[str, dict[str, int]] = {}
            for client in self._by_client:
                for slot in self._live(client):
                    states = out.setdefault(client, {})
                    states[slot.state] = states.get(slot.state, 0) + 1
            return out

    # --- under the lock
    def _live(self, client: str) -> list[Slot]:
        return [slot for slot in self._by_client.get(client, ()) if not slot.evicted]

    def _open(self) -> int:
        return sum(len(self._live(client)) for client in self._by_client)

    def _set_waiting(self, slot: Slot) -> None:
        slot.state = WAITING
        slot.since = self._clock()

    def _longest_waiting_of_biggest_client(self) -> Slot | None:
        ranked = sorted(self._by_client, key=lambda client: len(self._live(client)), reverse=True)
        for client in ranked:
            waiting = [slot for slot in self._live(client) if slot.state != BUSY]
            if waiting:
                return min(waiting, key=lambda slot: slot.since)
        return None

    def _evict(self, slot: Slot, why: str) -> None:
        slot.evicted = True
        log.debug("closing a %s connection from %s: %s", slot.state, slot.client, why)
        with contextlib.suppress(OSError):
            # The base method, also on a TLS socket: wakes the thread blocked in recv or handshake.
            socket.socket.shutdown(slot.sock, socket.SHUT_RDWR)
        self._cond.notify_all()
