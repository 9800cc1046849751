"""Slow readers cannot hold every connection: a client that pipelines scrapes behind a tiny receive
window and never reads keeps its connections busy (the answers cannot be sent), yet a scraper at
another address still gets 200, because a busy connection whose reader makes no progress is closed
when a slot is needed, the largest holder's first.

Attackers speak from loopback addresses 127.0.0.20 and up; every loop is bounded in count and time.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from agent.core.exporter import Exposition
from agent.web.security import ServerLimits
from tests.support.web_harness import FakeCache, StartServer, serve, status, wait_for

__all__ = ["serve"]  # fixture

SCRAPER = "127.0.0.1"
BIG = b"# TYPE npu_filler gauge\n" + b"".join(b"npu_filler{n=\"%07d\"} 1\n" % n for n in range(120_000))  # ~3 MB
PIPELINED = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 8


class BigCache(FakeCache):
    def __init__(self, body: bytes = BIG) -> None:
        super().__init__()
        self.body = body

    def render(self, openmetrics: bool = False, gzipped: bool = False) -> Exposition:
        return Exposition(self.body, "text/plain; version=0.0.4; charset=utf-8", False)


@contextmanager
def slow_readers(port: int, addresses: int, per_address: int) -> Iterator[list[socket.socket]]:
    """Connections that ask for many answers and read none, through a 4 KiB receive window."""
    opened: list[socket.socket] = []
    try:
        for n in range(addresses):
            for _ in range(per_address):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.settimeout(2)
                try:
                    sock.bind((f"127.0.0.{20 + n}", 0))
                    sock.connect(("127.0.0.1", port))
                    sock.sendall(PIPELINED)
                except OSError:
                    sock.close()
                    continue
                opened.append(sock)
        yield opened
    finally:
        for sock in opened:
            with contextlib.suppress(OSError):
                sock.close()


def _busy(server: object) -> int:
    return sum(states.get("busy", 0) for states in server.table.counts().values())  # type: ignore[attr-defined]


def test_slow_readers_from_many_addresses_do_not_lock_out_a_scraper(serve: StartServer) -> None:
    server = serve(cache=BigCache(), limits=ServerLimits(max_connections=16, max_connections_per_client=4))
    started = time.monotonic()
    with slow_readers(server.port, addresses=8, per_address=4):
        assert wait_for(lambda: _busy(server) == 16, timeout=5), server.table.counts()
        time.sleep(1.2)  # past the time a busy connection may make no progress before it can be closed
        answers = [status(server.port, source=SCRAPER, timeout=5) for _ in range(10)]
        assert answers == [200] * 10, server.table.counts()
    assert time.monotonic() - started < 30


def test_the_first_scrape_as_slow_readers_fill_every_place_is_answered(serve: StartServer) -> None:
    """Every place busy a moment ago: no connection can have stalled yet, so the scraper waits for one."""
    limits = ServerLimits(max_connections=16, max_connections_per_client=4)
    server = serve(cache=BigCache(), limits=limits)
    with slow_readers(server.port, addresses=8, per_address=4):
        assert wait_for(lambda: _busy(server) == 16, timeout=5, step=0.005), server.table.counts()
        started = time.monotonic()
        first = status(server.port, source=SCRAPER, timeout=10)
        waited = time.monotonic() - started
        assert first == 200, server.table.counts()
        assert limits.stall_s * 0.5 < waited < limits.room_wait_s + 1, waited
        assert [status(server.port, source=SCRAPER, timeout=5) for _ in range(3)] == [200] * 3


def test_a_progressing_answer_is_never_closed_to_make_room(serve: StartServer) -> None:
    """A full table of connections that do read: a newcomer waits ``room_wait_s`` for a place, then is
    refused; no answer is cut off."""
    huge = BIG * 6  # more than the kernel's largest send buffer (4 MiB): the answer stays being written
    limits = ServerLimits(max_connections=2, max_connections_per_client=4)
    server = serve(cache=BigCache(huge), limits=limits)
    readers = []
    try:
        for _ in range(2):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(5)
            readers.append(sock)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            sock.recv(1)  # the answer has begun: the connection is busy, and read slowly but steadily
        assert wait_for(lambda: _busy(server) == 2, timeout=5)
        received = [1, 1]
        refused: list[int] = []
        newcomer = threading.Thread(target=lambda: refused.append(status(server.port, source="127.0.0.5", timeout=5)))
        started = time.monotonic()
        newcomer.start()
        while newcomer.is_alive() and time.monotonic() - started < 5:  # both read on while the newcomer waits
            for index, sock in enumerate(readers):
                received[index] += len(sock.recv(4096))
            time.sleep(0.005)
        newcomer.join(1)
        assert refused == [503], (refused, server.table.counts())
        assert time.monotonic() - started >= limits.room_wait_s
        for index, sock in enumerate(readers):
            sock.settimeout(5)
            while received[index] < len(huge):
                chunk = sock.recv(65536)
                assert chunk, f"answer {index} was cut off at {received[index]} bytes"
                received[index] += len(chunk)
    finally:
        for sock in readers:
            sock.close()


def test_a_reader_that_takes_a_few_bytes_now_and_then_is_still_a_slow_reader(serve: StartServer) -> None:
    server = serve(cache=BigCache(), limits=ServerLimits(max_connections=4, max_connections_per_client=4))
    with slow_readers(server.port, addresses=1, per_address=4) as socks:
        assert wait_for(lambda: _busy(server) == 4, timeout=5), server.table.counts()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # 100 bytes a connection every 50 ms: 2 KB/s, no more
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.recv(100)
            time.sleep(0.05)
        assert [status(server.port, source=SCRAPER, timeout=5) for _ in range(3)] == [200] * 3
