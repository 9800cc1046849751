"""ConnectionTable's pending connections: who may wait for a place, who gets the next one, and for how long.

The sockets are socketpairs: the kernel says nothing of acknowledged bytes on them, so no busy connection is
ever seen to stall here; a place comes free only when a connection is released.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from agent.web.connections import BUSY, PENDING, ConnectionTable, Slot


@pytest.fixture
def sockets() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for sock in made:
        sock.close()


def _sock(made: list[socket.socket]) -> socket.socket:
    left, right = socket.socketpair()
    made.extend((left, right))
    return left


def _busy(table: ConnectionTable, client: str, made: list[socket.socket], *, writing: bool) -> Slot:
    slot = table.admit(client, _sock(made))
    assert slot is not None and slot.state != PENDING
    assert table.begin_request(slot, 0.1) is True
    if writing:
        table.sending(slot, True)
    return slot


def test_a_newcomer_waits_only_while_an_answer_is_being_sent(sockets: list[socket.socket]) -> None:
    table = ConnectionTable(total=1, per_client=4)
    computing = _busy(table, "10.0.0.1", sockets, writing=False)
    assert table.admit("10.0.0.2", _sock(sockets)) is None  # an answer being computed is never waited for
    table.sending(computing, True)
    assert computing.state == BUSY
    pending = table.admit("10.0.0.2", _sock(sockets))
    assert pending is not None and pending.state == PENDING


def test_one_pending_connection_per_client(sockets: list[socket.socket]) -> None:
    table = ConnectionTable(total=2, per_client=4)
    _busy(table, "10.0.0.1", sockets, writing=True)
    _busy(table, "10.0.0.1", sockets, writing=True)
    first = table.admit("10.0.0.2", _sock(sockets))
    assert first is not None and first.state == PENDING
    assert table.admit("10.0.0.2", _sock(sockets)) is None
    other = table.admit("10.0.0.3", _sock(sockets))
    assert other is not None and other.state == PENDING


def test_a_pending_connection_is_refused_after_its_wait(sockets: list[socket.socket]) -> None:
    table = ConnectionTable(total=1, per_client=4)
    _busy(table, "10.0.0.1", sockets, writing=True)
    pending = table.admit("10.0.0.2", _sock(sockets))
    assert pending is not None
    started = time.monotonic()
    assert table.wait_room(pending, 0.2) is False
    assert 0.2 <= time.monotonic() - started < 1.0
    assert table.counts() == {"10.0.0.1": {"busy": 1}}


def test_the_next_place_goes_to_the_pending_client_that_holds_the_fewest(sockets: list[socket.socket]) -> None:
    table = ConnectionTable(total=2, per_client=4)
    holder = _busy(table, "10.0.0.1", sockets, writing=True)
    _busy(table, "10.0.0.9", sockets, writing=True)
    greedy = table.admit("10.0.0.9", _sock(sockets))  # arrives first, but its client holds a place already
    scraper = table.admit("10.0.0.2", _sock(sockets))
    assert greedy is not None and scraper is not None and greedy.state == scraper.state == PENDING
    results: dict[str, bool] = {}
    threads = [threading.Thread(target=lambda name=name, slot=slot: results.__setitem__(name, table.wait_room(slot, 1)))
               for name, slot in (("greedy", greedy), ("scraper", scraper))]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    table.release(holder)  # one place comes free
    for thread in threads:
        thread.join(3)
    assert results == {"scraper": True, "greedy": False}


def test_a_queued_request_is_not_closed_for_its_clients_next_connection(sockets: list[socket.socket]) -> None:
    # Several scrapers behind one address: one is answered, one waits for its turn with its request sent; a third
    # connects. Closing the queued one (waiting longest, by its kept-alive idle time) would lose a sent request.
    table = ConnectionTable(total=8, per_client=1)
    _busy(table, "10.0.0.4", sockets, writing=True)
    queued = table.admit("10.0.0.4", _sock(sockets))
    assert queued is not None
    turn = threading.Thread(target=table.begin_request, args=(queued, 5.0))
    turn.start()
    deadline = time.monotonic() + 5
    while table.counts()["10.0.0.4"].get("queued") != 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    newcomer = table.admit("10.0.0.4", _sock(sockets))
    assert newcomer is not None and not queued.evicted
    idle = table.admit("10.0.0.4", _sock(sockets))  # the cap holds for connections without a request
    assert idle is not None and newcomer.evicted and not queued.evicted
    table.close_all()
    turn.join(5)


def test_a_new_connection_is_closed_last_before_its_first_request(sockets: list[socket.socket]) -> None:
    # A scraper's retry opens a new connection; two others behind the same address finish their answers (their
    # idle time starts after the new one's) and a fourth connects: the kept-alive ones go, the new one stays.
    now = [100.0]
    table = ConnectionTable(total=8, per_client=2, clock=lambda: now[0])
    fresh = table.admit("10.0.0.4", _sock(sockets))
    assert fresh is not None
    now[0] += 0.005
    served = table.admit("10.0.0.4", _sock(sockets))
    assert served is not None and table.begin_request(served, 0.1) is True
    table.end_request(served)
    now[0] += 0.001
    newcomer = table.admit("10.0.0.4", _sock(sockets))
    assert newcomer is not None and served.evicted and not fresh.evicted
    now[0] += 1.0  # a first request this late is trickling: the oldest goes, as any idle one
    assert table.admit("10.0.0.4", _sock(sockets)) is not None and fresh.evicted
