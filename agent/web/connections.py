"""Which connections are open, per client address: admission, turns and eviction.

A connection is *waiting* from accept (TLS handshake, request head) and between kept-alive
requests, *queued* while it has a request but its client has no free turn, and *busy* while its
request is answered. Waiting and queued connections cost a thread and nothing else, so they
may be closed to make room; so may a busy one whose answer has not moved for ``stall_s`` (its
client is not reading: a slow reader would otherwise hold the slot until the write timeout). A busy
connection whose answer is being computed or read is never interrupted. The rules (``ServerLimits``):

- per client, at most ``per_client`` waiting connections: a new one closes the client's
  longest-waiting one, so idle or trickling connections from one address never pile up and several
  scrapers behind one address simply take turns (a queued one is never closed for its own client's
  next connection: its request is sent; the overall limit below still bounds them; one whose first
  request has not come yet is closed only when no other will do, or after ``FIRST_REQUEST_GRACE_S``);
- per client, at most ``per_client`` busy connections: a further request queues for a turn;
- overall, at most ``total`` connections: a new one closes a waiting or stalled connection of the
  client with the most (the one idle or stalled longest). When every connection is busy, none has
  stalled yet and some are sending answers, the new one is *pending*: its thread waits up to
  ``room_wait_s`` for one to stall or close, and is refused if none does. (A connection filled a moment
  ago cannot have stalled for ``stall_s`` yet: without the wait, the first scrape at the start of a
  slow-reader attack was refused.) At most ``total`` connections are pending, one per client; the next
  place goes to the pending connection whose client holds the fewest, the longest-waiting first. So no
  address, nor many addresses together, can keep a scraper at another address out by holding
  connections it does not use.

Whether a busy connection's client takes its answer is seen, at each new connection (and every 50 ms
while one is pending), from the bytes of
it the client has acknowledged (``TCP_INFO``'s ``tcpi_bytes_acked``): 16 KiB more than when it last
moved is progress, so a client that reads a few bytes now and then to look alive is still stalled. A
deep send buffer hides a slow but steady reader from ``send`` (it returns only when half the buffer
has drained), the acknowledgements do not. A connection looked at for the first time gets the
benefit of the doubt, so only one seen twice ``stall_s`` apart without progress counts as stalled;
where the kernel does not tell (not Linux, or before 4.2), no busy connection is ever closed.

All decisions are made under one lock in O(open connections), at most a few dozen.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

__all__ = ["PENDING", "ConnectionTable", "Slot"]

WAITING, QUEUED, BUSY, PENDING = "waiting", "queued", "busy", "pending"
MIN_PROGRESS_BYTES = 16 << 10  # what a busy connection's client must take within stall_s to count as reading
FIRST_REQUEST_GRACE_S = 1.0  # how long a new connection's first request may take before it counts as trickling
_LOOK_EVERY_S = 0.05  # how often a pending connection looks again for a stalled one


class Slot:
    """One open connection in the table."""

    __slots__ = ("accepted", "acked", "client", "evicted", "moved", "served", "since", "sock", "state", "writing")

    def __init__(self, client: str, sock: socket.socket, now: float) -> None:
        self.client = client
        self.sock = sock
        self.state = WAITING
        self.since = now
        self.accepted = now
        self.served = False  # it has carried a request: its client will retry on another connection
        self.evicted = False
        self.writing = False  # an answer is being sent
        self.moved = now  # when its client last took bytes of the answer
        self.acked: int | None = None  # bytes its client had acknowledged at the last look


class ConnectionTable:
    def __init__(self, total: int, per_client: int, clock: Callable[[], float] = time.monotonic,
                 stall_s: float = 1.0) -> None:
        self.total = total
        self.per_client = per_client
        self.stall_s = stall_s
        self._clock = clock
        self._cond = threading.Condition()
        self._by_client: dict[str, list[Slot]] = {}

    # --- accept loop: never blocks
    def admit(self, client: str, sock: socket.socket) -> Slot | None:
        """A slot for a new connection, after closing whatever must make room; None: refuse it."""
        with self._cond:
            mine = self._live(client)
            # A queued one holds a request already sent: closing it would lose that, so only those without count.
            waiting = [slot for slot in mine if slot.state == WAITING]
            now = self._clock()
            if len(waiting) >= self.per_client:
                # A connection whose first request is still on its way is closed last: its client retries a
                # kept-alive connection the server closed, not a new one (Go's client, as Prometheus scrapes).
                spare = [slot for slot in waiting if slot.served or now - slot.accepted >= FIRST_REQUEST_GRACE_S]
                self._evict(min(spare or waiting, key=lambda slot: slot.since), "its client opened another")
            for slots in self._by_client.values():
                for other in slots:
                    self._look(other, now)
            slot = Slot(client, sock, self._clock())
            if self._open() >= self.total:
                victim = self._idlest_of_biggest_client()
                if victim is not None:
                    self._evict(victim, "the server is full")
                elif self._may_stall() and self._pending() < self.total and not any(
                        other.state == PENDING and not other.evicted for other in mine):
                    slot.state = PENDING  # wait_room() decides, in the connection's own thread
                else:
                    return None
            self._by_client.setdefault(client, []).append(slot)
            return slot

    # --- connection threads
    def wait_room(self, slot: Slot, wait_s: float) -> bool:
        """A pending connection's place, once a connection stalls or closes: True; False after ``wait_s``
        (refuse it) or when it was evicted meanwhile."""
        deadline = self._clock() + wait_s
        with self._cond:
            while slot.state == PENDING:
                now = self._clock()
                if slot.evicted or now >= deadline or not self._may_stall():
                    self._drop_pending(slot)
                    return False
                if self._first_pending() is slot:
                    for slots in self._by_client.values():
                        for other in slots:
                            self._look(other, now)
                    # A stalled one, or a waiting one of a client holding more than this one's: a place just
                    # given to another pending connection is not taken back before its request comes.
                    victim = None if self._open() < self.total else self._idlest_of_biggest_client(
                        above=self._held(slot.client))
                    if victim is not None:
                        self._evict(victim, "the server is full and a new connection waits")
                    if victim is not None or self._open() < self.total:
                        self._set_waiting(slot)
                        self._cond.notify_all()  # the next pending one is first now
                        return True
                self._cond.wait(min(_LOOK_EVERY_S, deadline - now))
            return not slot.evicted

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
            slot.served = True
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

    def sending(self, slot: Slot, active: bool) -> None:
        """An answer starts (True) or stops (False) being sent on ``slot``."""
        slot.writing = active
        slot.moved = self._clock()

    def moved(self, slot: Slot) -> None:
        """The client took more bytes of the answer."""
        slot.moved = self._clock()

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
        return sum(1 for client in self._by_client for slot in self._live(client) if slot.state != PENDING)

    def _may_stall(self) -> bool:
        """Whether a place may come free by a stall: some answer is being sent (one being computed is never
        interrupted, so a newcomer that could only wait for those is refused at once)."""
        return any(slot.state == BUSY and slot.writing for client in self._by_client for slot in self._live(client))

    def _pending(self) -> int:
        return sum(1 for client in self._by_client for slot in self._live(client) if slot.state == PENDING)

    def _first_pending(self) -> Slot | None:
        """Who gets the next place: the pending connection whose client holds the fewest, then the oldest."""
        line = [(self._held(client), slot.since, slot) for client in self._by_client
                for slot in self._live(client) if slot.state == PENDING]
        return min(line, key=lambda entry: entry[:2])[2] if line else None

    def _drop_pending(self, slot: Slot) -> None:
        """A pending connection that got no place: out of the line (its thread closes it)."""
        slot.evicted = True
        self._cond.notify_all()

    def _set_waiting(self, slot: Slot) -> None:
        slot.state = WAITING
        slot.since = self._clock()

    def _look(self, slot: Slot, now: float) -> None:
        """Note progress of a busy connection's answer from the bytes its client has acknowledged."""
        if slot.evicted or slot.state != BUSY or not slot.writing:
            slot.acked = None
            return
        acked = _acknowledged(slot.sock)
        if acked is None or slot.acked is None or acked - slot.acked >= MIN_PROGRESS_BYTES:
            slot.moved = now
            slot.acked = acked

    def _idle_for(self, slot: Slot, now: float) -> float | None:
        """How long ``slot`` has been of no use (None: it may not be closed to make room)."""
        if slot.state == PENDING:
            return None
        if slot.state != BUSY:
            return now - slot.since
        if slot.writing and now - slot.moved >= self.stall_s:
            return now - slot.moved
        return None

    def _held(self, client: str) -> int:
        return sum(1 for slot in self._live(client) if slot.state != PENDING)

    def _idlest_of_biggest_client(self, above: int = 0) -> Slot | None:
        """The waiting or stalled connection to close: of the client holding the most, the idlest. A waiting
        one only of a client holding more than ``above`` places (a stalled one of any)."""
        now = self._clock()
        best: tuple[int, float] | None = None
        victim = None
        for client in self._by_client:
            live = self._live(client)
            spare_idle = self._held(client) > above
            for slot in live:
                idle = self._idle_for(slot, now)
                if idle is None or not (spare_idle or slot.state == BUSY):
                    continue
                if best is None or (len(live), idle) > best:
                    best, victim = (len(live), idle), slot
        return victim

    def _evict(self, slot: Slot, why: str) -> None:
        slot.evicted = True
        log.debug("closing a %s connection from %s: %s", slot.state, slot.client, why)
        with contextlib.suppress(OSError):
            # The base method, also on a TLS socket: wakes the thread blocked in recv or handshake.
            socket.socket.shutdown(slot.sock, socket.SHUT_RDWR)
        self._cond.notify_all()



_TCP_INFO_BYTES_ACKED = 120  # offset of tcpi_bytes_acked (u64) in Linux's struct tcp_info


def _acknowledged(sock: socket.socket) -> int | None:
    """Bytes the peer has acknowledged on this TCP connection (None: the kernel does not say)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, getattr(socket, "TCP_INFO", 11), 256)
    except (OSError, ValueError):
        return None
    if len(info) < _TCP_INFO_BYTES_ACKED + 8:
        return None
    acked: int = struct.unpack_from("Q", info, _TCP_INFO_BYTES_ACKED)[0]
    return acked
