"""One client address cannot lock out a scraper at another: idle and trickling connections, a
wrong-password flood below the rate limit, the TLS port; several scrapers behind one address
take turns instead of being refused.

Clients speak from distinct loopback addresses (127.0.0.2, ...: all of 127.0.0.0/8 is loopback
on Linux). Every loop is bounded in count and time.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import bcrypt
import pytest

from agent.web.auth import Auth, BcryptVerifier
from agent.web.config import build_web_config
from agent.web.security import ServerLimits
from tests.support.web_harness import (
    Certs,
    StartServer,
    basic,
    certs,
    client_context,
    closed_by_peer,
    connection,
    raw_socket,
    serve,
    status,
    tls_config,
    wait_for,
)

__all__ = ["certs", "serve"]  # fixtures

ATTACKER, SCRAPER, OTHER = "127.0.0.2", "127.0.0.1", "127.0.0.3"


def scrapes(port: int, count: int, pause_s: float, **kwargs: object) -> list[int]:
    """Statuses of ``count`` scrapes, each on a new connection."""
    out = []
    for _ in range(count):
        out.append(status(port, **kwargs))  # type: ignore[arg-type]
        time.sleep(pause_s)
    return out


@contextmanager
def idle_connections(port: int, count: int, source: str = ATTACKER,
                     context: ssl.SSLContext | None = None) -> Iterator[list[socket.socket]]:
    """``count`` connections that send nothing (or, with ``context``, only finish the TLS handshake)."""
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            try:
                sock = raw_socket(port, source)
                if context is not None:
                    sock = context.wrap_socket(sock, server_hostname="127.0.0.1")
                opened.append(sock)
            except OSError:
                continue  # closed at once: the server is protecting itself
        yield opened
    finally:
        for sock in opened:
            sock.close()


def test_idle_connections_from_one_address_do_not_starve_another(serve: StartServer) -> None:
    server = serve(limits=ServerLimits(head_timeout_s=30, idle_timeout_s=30))  # they would stay for good
    with idle_connections(server.port, 32):
        assert wait_for(lambda: server.table.counts().get(ATTACKER, {}).get("waiting", 0) > 0, timeout=5)
        assert sum(server.table.counts()[ATTACKER].values()) <= 4
        assert scrapes(server.port, 20, 0.02, source=SCRAPER) == [200] * 20


def test_idle_tls_connections_do_not_starve_another(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs, users=False), ServerLimits(head_timeout_s=30, idle_timeout_s=30))
    context = client_context(certs)
    with idle_connections(server.port, 32, context=context):
        assert scrapes(server.port, 20, 0.02, source=SCRAPER, context=context) == [200] * 20


def test_trickling_connections_do_not_starve_another(serve: StartServer) -> None:
    server = serve(limits=ServerLimits(head_timeout_s=30))
    stop = threading.Event()

    def trickle() -> None:
        with idle_connections(server.port, 32) as socks:
            for sock in socks:
                sock.settimeout(0.5)
            for _ in range(200):  # a header byte on every connection every 0.02 s, for at most 4 s
                if stop.is_set():
                    return
                for sock in socks:
                    with contextlib.suppress(OSError):
                        sock.send(b"X")
                time.sleep(0.02)

    attacker = threading.Thread(target=trickle)
    attacker.start()
    try:
        time.sleep(0.3)
        assert scrapes(server.port, 20, 0.05, source=SCRAPER) == [200] * 20
    finally:
        stop.set()
        attacker.join(10)


def test_many_addresses_of_idle_connections_still_leave_room(serve: StartServer) -> None:
    """Eight attacking addresses fill every slot; a scraper's connection closes one of theirs."""
    server = serve(limits=ServerLimits(max_connections=32, head_timeout_s=30, idle_timeout_s=30))
    with idle_connections(server.port, 4, "127.0.0.10") as first:
        holders = [idle_connections(server.port, 4, f"127.0.0.{11 + n}") for n in range(7)]
        for holder in holders:
            holder.__enter__()
        try:
            assert wait_for(lambda: sum(sum(c.values()) for c in server.table.counts().values()) == 32, timeout=5)
            assert scrapes(server.port, 10, 0.02, source=SCRAPER) == [200] * 10
            assert any(closed_by_peer(sock, 0.5) is not None for sock in first)  # an attacker's was closed
        finally:
            for holder in holders:
                holder.__exit__(None, None, None)


def test_head_timeout_is_short_and_keep_alive_idle_is_not(serve: StartServer) -> None:
    server = serve(limits=ServerLimits(head_timeout_s=0.5, idle_timeout_s=3.0))
    silent = raw_socket(server.port, ATTACKER)
    kept = connection(server.port, source=OTHER)
    try:
        kept.request("GET", "/healthz", headers={"Host": "x"})
        assert kept.getresponse().read() == b"ok\n"
        closed_after = closed_by_peer(silent, 3.0)
        assert closed_after is not None and closed_after < 1.5, "a silent new connection held its slot"
        kept.request("GET", "/healthz")  # idle 0.5 s+ past the head timeout, still open
        assert kept.getresponse().status == 200
    finally:
        silent.close()
        kept.close()


def test_a_new_connection_beyond_the_per_client_cap_closes_the_oldest(serve: StartServer) -> None:
    server = serve(limits=ServerLimits(max_connections_per_client=2, head_timeout_s=30))
    socks = [raw_socket(server.port, ATTACKER) for _ in range(3)]
    try:
        assert closed_by_peer(socks[0], 2.0) is not None
        assert wait_for(lambda: server.table.counts().get(ATTACKER, {}) == {"waiting": 2}, timeout=2)
        for sock in socks[1:]:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        for sock in socks:
            sock.close()


def test_scrapers_behind_one_address_take_turns(serve: StartServer) -> None:
    """Eight kept-alive scrapers share 127.0.0.4 under a cap of 4, each scraping every 0.5 s (16
    requests/s together, under the 20/s per address): an evicted idle connection is reconnected,
    as Go's HTTP client (Prometheus) does, and every scrape is answered."""
    server = serve()
    nat = "127.0.0.4"
    results: list[int] = []
    lock = threading.Lock()

    def scraper() -> None:
        conn = connection(server.port, source=nat)
        for _ in range(6):
            for attempt in range(2):
                try:
                    conn.request("GET", "/metrics")
                    response = conn.getresponse()
                    response.read()
                    code = response.status
                    break
                except (OSError, http.client.HTTPException):
                    conn.close()  # the server closed it while idle: reconnect and retry once
                    conn = connection(server.port, source=nat)
                    code = 0 if attempt else -1
            with lock:
                results.append(code)
            time.sleep(0.5)
        conn.close()

    threads = [threading.Thread(target=scraper) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == [200] * 48


def _flood(port: int, stop: threading.Event, source: str, bad: Callable[[int], str]) -> list[int]:
    statuses: list[int] = []
    for n in range(10_000):
        if stop.is_set():
            break
        statuses.append(status(port, source=source, headers={"Authorization": bad(n)}, timeout=10))
    return statuses


def test_wrong_password_flood_does_not_starve_the_scraper(serve: StartServer) -> None:
    """32 parallel wrong-password guesses from one address, each needing a bcrypt check (cost 10,
    a few tenths of a second here), stay under the request rate limit; the scraper at another
    address, whose credentials are cached, is answered every time."""
    password = "right-password"
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=10)).decode()
    server = serve(build_web_config({"basic_auth_users": {"prometheus": hashed}}))
    good = {"Authorization": basic("prometheus", password)}
    assert status(server.port, source=SCRAPER, headers=good, timeout=10) == 200  # bcrypt once, then cached
    stop = threading.Event()
    flood: list[list[int]] = []
    attackers = [threading.Thread(target=lambda n=n: flood.append(
        _flood(server.port, stop, ATTACKER, lambda i: basic("prometheus", f"guess-{n}-{i}"))))
        for n in range(32)]
    for thread in attackers:
        thread.start()
    try:
        time.sleep(0.5)
        answered = scrapes(server.port, 15, 0.2, source=SCRAPER, headers=good, timeout=5)
    finally:
        stop.set()
        for thread in attackers:
            thread.join(20)
    assert answered == [200] * 15
    guesses = [code for statuses in flood for code in statuses]
    assert 200 not in guesses and 401 in guesses  # some were checked, none got in


def test_verifier_runs_one_check_per_client_and_shares_identical_ones() -> None:
    release = threading.Event()
    calls: list[bytes] = []

    def slow_checkpw(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        release.wait(5)
        return password == b"right"

    verifier = BcryptVerifier(workers=2, wait_s=5, checkpw=slow_checkpw)
    results: dict[str, bool | None] = {}
    first = threading.Thread(target=lambda: results.update(a=verifier.verify(b"k1", b"right", b"h", "10.0.0.1")))
    twin = threading.Thread(target=lambda: results.update(b=verifier.verify(b"k1", b"right", b"h", "10.0.0.2")))
    first.start()
    assert wait_for(lambda: len(calls) == 1, timeout=2)
    twin.start()
    time.sleep(0.1)
    assert verifier.verify(b"k2", b"other", b"h", "10.0.0.1") is None  # one in flight per client: busy
    release.set()
    first.join(5)
    twin.join(5)
    assert results == {"a": True, "b": True} and calls == [b"right"]  # the twin shared the one run
    verifier.close()


def test_verifier_limits_uncached_checks_per_client() -> None:
    verifier = BcryptVerifier(per_client_rate=0.001, per_client_burst=3, checkpw=lambda _p, _h: False)
    outcomes = [verifier.verify(f"k{n}".encode(), b"p", b"h", "10.0.0.9") for n in range(5)]
    assert outcomes == [False, False, False, None, None]
    assert verifier.verify(b"k9", b"p", b"h", "10.0.0.8") is False  # another client is unaffected
    verifier.close()


def test_busy_verifier_answers_429_not_401(serve: StartServer, monkeypatch: pytest.MonkeyPatch) -> None:
    server = serve(build_web_config({"basic_auth_users": {"prometheus": bcrypt.hashpw(
        b"x", bcrypt.gensalt(rounds=4)).decode()}}))
    assert server.auth is not None
    monkeypatch.setattr(server.auth, "check", lambda *_args: Auth.BUSY)
    assert status(server.port, headers={"Authorization": basic("prometheus", "y")}) == 429
