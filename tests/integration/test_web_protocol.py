"""Strict HTTP/1.1 request handling (agent/web/protocol.py lists each rule and its RFC), on raw sockets."""

from __future__ import annotations

import time

import pytest

from tests.support.web_harness import BODY, StartServer, raw_exchange, serve, status_of

__all__ = ["serve"]  # fixture

OK_HEAD = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"


@pytest.mark.parametrize(("request_bytes", "expected"), [
    # HTTP/0.9: no version, and a bare body must never come back
    (b"GET /metrics\r\n\r\n", 400),
    (b"GET /metrics\r\n", 400),
    (b"GET /metrics HTTP/0.9\r\nHost: x\r\n\r\n", 505),
    (b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    (b"GET /metrics HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400),
    (b"GET /metrics HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host
    (b"GET /metrics HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
    # framing
    (OK_HEAD + b"Content-Length: 0\r\nContent-Length: 5\r\n\r\nhello", 400),
    (OK_HEAD + b"Content-Length: 0, 5\r\n\r\nhello", 400),
    (OK_HEAD + b"Content-Length: -1\r\n\r\n", 400),
    (OK_HEAD + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello", 413),  # identical: one value
    (OK_HEAD + b"Content-Length: 3\r\n\r\nabc", 413),
    (OK_HEAD + b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 413),
    (OK_HEAD + b"Transfer-Encoding: gzip\r\n\r\n", 400),
    (OK_HEAD + b"Transfer-Encoding: chunked, chunked\r\n\r\n", 400),
    (OK_HEAD + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (OK_HEAD + b"Transfer-Encoding: \x0bchunked\r\n\r\n", 400),
    (OK_HEAD + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc", 400),
    (b"GET /metrics HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    # header syntax (an obs-fold is unfolded, as RFC 9112 §5.2 allows: see the test below)
    (OK_HEAD + b"Bad Name: x\r\n\r\n", 400),
    (OK_HEAD + b"X-Space : x\r\n\r\n", 400),
    (OK_HEAD + b"X-Bare: a\rb\r\n\r\n", 400),
    # targets and methods
    (b"GET metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    (b"GET ftp://x/metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400),
    (b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"CONNECT x:9611 HTTP/1.1\r\nHost: x\r\n\r\n", 405),
    (b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc", 405),
])
def test_malformed_requests_are_refused_and_closed(serve: StartServer, request_bytes: bytes, expected: int) -> None:
    server = serve()
    answer = raw_exchange(server.port, request_bytes)  # reads until the server closes
    assert answer.startswith(b"HTTP/1.1 "), answer[:80]
    assert status_of(answer) == expected
    assert b"npu_chips" not in answer
    assert b"Connection: close" in answer


@pytest.mark.parametrize("target", [b"http://x:9611/metrics", b"HTTP://x/metrics?name=y", b"https://x/metrics"])
def test_absolute_form_targets_are_served(serve: StartServer, target: bytes) -> None:
    server = serve()
    answer = raw_exchange(server.port, b"GET " + target + b" HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n")
    assert status_of(answer) == 200 and answer.endswith(BODY)


def test_no_body_smuggled_as_a_second_request(serve: StartServer) -> None:
    """With conflicting lengths the 'body' could be read as a request of its own: it never is."""
    server = serve()
    hidden = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    answer = raw_exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n"
                                       b"Content-Length: %d\r\n\r\n" % len(hidden) + hidden)
    assert answer.count(b"HTTP/1.1 ") == 1 and status_of(answer) == 400


def test_identical_repeated_zero_length_is_one_value(serve: StartServer) -> None:
    server = serve()
    answer = raw_exchange(server.port, OK_HEAD + b"Content-Length: 0\r\nContent-Length: 0\r\n\r\n")
    assert status_of(answer) == 200 and answer.endswith(BODY)


def test_http_1_0_is_served_and_closed(serve: StartServer) -> None:
    server = serve()
    answer = raw_exchange(server.port, b"GET /metrics HTTP/1.0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 OK") and answer.endswith(BODY)


def test_obsolete_line_folding_is_unfolded(serve: StartServer) -> None:
    server = serve()
    answer = raw_exchange(server.port, OK_HEAD + b"X-Folded: a\r\n b\r\n\r\n")
    assert status_of(answer) == 200


def test_http_0_9_is_refused_at_once(serve: StartServer) -> None:
    server = serve()
    started = time.monotonic()
    answer = raw_exchange(server.port, b"GET /metrics\r\n")  # all an HTTP/0.9 client sends
    assert status_of(answer) == 400 and BODY not in answer
    assert time.monotonic() - started < 1.0  # not after the head timeout


@pytest.mark.parametrize(("accept_encoding", "gzipped"), [
    (b"gzip", True), (b"gzip, deflate", True), (b"gzip;q=0.5", True), (b"*", True),
    (b"gzip;q=0", False), (b"gzip; q=0.000", False), (b"*;q=1, gzip;q=0", False), (b"identity", False),
    (b"deflate, *;q=0", False),
])
def test_gzip_is_sent_only_to_a_client_that_takes_it(serve: StartServer, accept_encoding: bytes,
                                                      gzipped: bool) -> None:
    from agent.core.exporter import Exposition
    from tests.support.web_harness import FakeCache

    asked: list[bool] = []

    class Recording(FakeCache):
        def render(self, openmetrics: bool = False, gzipped: bool = False) -> Exposition:
            asked.append(gzipped)
            return super().render(openmetrics, gzipped)

    server = serve(cache=Recording())
    answer = raw_exchange(server.port, OK_HEAD + b"Accept-Encoding: " + accept_encoding + b"\r\n\r\n")
    assert status_of(answer) == 200
    assert asked == [gzipped]
