"""HTTP endpoints: ``/metrics`` (cached exposition) and ``/healthz``.

A scrape never runs a tool; it serves bytes rendered from the snapshot store,
so it answers in milliseconds even while npu-smi hangs.

With a ``WebConfig`` (see ``agent/web/config.py``) the endpoints are served over
TLS and/or behind HTTP basic auth. Whatever the config, ``ServerLimits`` caps what
one client may cost: request head size, concurrent connections, requests per
second per client IP, and the time allowed to send a request. Only GET and HEAD
without a body are accepted.
"""

from __future__ import annotations

import contextlib
import io
import logging
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent.core.exporter import ExpositionCache
from agent.web.config import WebConfig
from agent.web.security import BasicAuth, RateLimiter, ServerLimits
from agent.web.tls import ReloadingSSLContext, peer_san_allowed

__all__ = ["AgentHTTPServer", "HealthCheck", "ServerLimits", "make_server"]

log = logging.getLogger(__name__)

HealthCheck = Callable[[], tuple[bool, str]]

_LANDING = b"""<html><head><title>npuwatch</title></head><body>
<h1>npuwatch</h1><p><a href="/metrics">/metrics</a> &middot; <a href="/healthz">/healthz</a></p>
</body></html>
"""
_TEXT = "text/plain; charset=utf-8"
_TLS_HANDSHAKE_RECORD = 0x16


def _canned(status: HTTPStatus, body: bytes, version: str, *headers: str) -> bytes:
    """A complete response sent on a raw socket, before any request is parsed."""
    lines = [f"{version} {status.value} {status.phrase}", f"Content-Type: {_TEXT}", *headers,
             "Connection: close", f"Content-Length: {len(body)}", "", ""]
    return "\r\n".join(lines).encode() + body


_HTTP_TO_HTTPS = _canned(HTTPStatus.BAD_REQUEST, b"Client sent an HTTP request to an HTTPS server.\n",
                         "HTTP/1.0")
_BUSY = _canned(HTTPStatus.SERVICE_UNAVAILABLE, b"too many connections\n", "HTTP/1.1", "Retry-After: 1")


class _Dropped(Exception):
    """The connection is closed without an HTTP exchange (bad handshake, timeout, refused)."""


class _Handler(BaseHTTPRequestHandler):
    server: AgentHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "npuwatch"
    sys_version = ""
    disable_nagle_algorithm = True  # headers and body go in two writes; don't let Nagle hold the second

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.limits.request_timeout_s)
        # Request heads are read straight from the socket against a deadline (see _read_head):
        # a buffered readline would wait forever on a client trickling one byte per timeout.
        self.rfile.close()
        self.rfile = io.BytesIO()
        self._unread = b""

    # --- reading a request
    def _read_head(self) -> bytes | int | None:
        """The next request head, an HTTP status to refuse it with, or None to just close."""
        limits = self.server.limits
        deadline = time.monotonic() + limits.request_timeout_s
        buffer = self._unread.lstrip(b"\r\n")
        while True:
            ends = [at + len(mark) for mark in (b"\n\r\n", b"\n\n") if (at := buffer.find(mark)) >= 0]
            end = min(ends, default=-1)
            if 0 <= end <= limits.max_header_bytes:
                self._unread = buffer[end:]
                return buffer[:end]
            if end > limits.max_header_bytes or len(buffer) > limits.max_header_bytes:
                first_line_ends = buffer.find(b"\n", 0, limits.max_header_bytes)
                return HTTPStatus.REQUEST_URI_TOO_LONG if first_line_ends < 0 else (
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.connection.settimeout(remaining)
            try:
                chunk = self.connection.recv(4096)
            except (TimeoutError, OSError):
                return None
            if not chunk:
                return None
            buffer = (buffer + chunk).lstrip(b"\r\n")

    def handle_one_request(self) -> None:
        self.close_connection = True
        head = self._read_head()
        if head is None:
            return
        self.connection.settimeout(self.server.limits.request_timeout_s)  # bounds writing the reply
        if isinstance(head, int):
            self.requestline, self.request_version, self.command = "", "HTTP/1.1", ""
            self.send_error(head)
            return
        request_line, _, header_lines = head.partition(b"\n")
        self.raw_requestline = request_line + b"\n"
        self.rfile = io.BytesIO(header_lines)
        if not self.parse_request():
            return
        refusal = self._refusal()
        if refusal is not None:
            status, extra = refusal
            self.close_connection = True
            self._reply(status, f"{status.value} {status.phrase}\n".encode(), _TEXT, extra)
            return
        self.do_GET()
        self.wfile.flush()

    def _refusal(self) -> tuple[HTTPStatus, dict[str, str]] | None:
        """Why this request gets no answer from the endpoints, checked cheapest first."""
        server = self.server
        if not server.client_rate.allow(self.client_address[0]) or (
            server.global_rate is not None and not server.global_rate.allow()
        ):
            return HTTPStatus.TOO_MANY_REQUESTS, {"Retry-After": "1"}
        if self.command not in ("GET", "HEAD"):
            return HTTPStatus.METHOD_NOT_ALLOWED, {"Allow": "GET, HEAD"}
        if self.headers.get("Transfer-Encoding") or self.headers.get("Content-Length", "0").strip() != "0":
            return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, {}  # no endpoint takes a body
        if server.auth is not None and not server.auth.check(self.headers.get("Authorization")):
            return HTTPStatus.UNAUTHORIZED, {"WWW-Authenticate": 'Basic realm="npuwatch", charset="UTF-8"'}
        return None

    def handle_expect_100(self) -> bool:
        return True  # never invite a body: the request is refused before any would be read

    # --- answering
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._metrics()
        elif path == "/healthz":
            ok, reason = self.server.health()
            self._reply(200 if ok else 503, (reason + "\n").encode(), _TEXT)
        elif path == "/":
            self._reply(200, _LANDING, "text/html; charset=utf-8")
        else:
            self._reply(404, b"not found\n", _TEXT)

    def do_HEAD(self) -> None:
        self.do_GET()

    def _metrics(self) -> None:
        accept = self.headers.get("Accept", "")
        openmetrics = "application/openmetrics-text" in accept
        gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
        exposition = self.server.cache.render(openmetrics=openmetrics, gzipped=gzipped)
        headers = {"Content-Encoding": "gzip"} if exposition.gzipped else {}
        self._reply(200, exposition.body, exposition.content_type, headers)

    def _reply(self, status: int, body: bytes, content_type: str,
               headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def end_headers(self) -> None:
        for key, value in self.server.extra_headers.items():
            self.send_header(key, value)
        super().end_headers()

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        # The stock error page quotes the request back; a short fixed text leaks nothing.
        status = HTTPStatus(code)
        self.close_connection = True
        self._reply(status, f"{status.value} {status.phrase}\n".encode(), _TEXT)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("http %s " + format, self.address_string(), *args)


class AgentHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], cache: ExpositionCache, health: HealthCheck, *,
                 web_config: WebConfig | None = None, limits: ServerLimits | None = None) -> None:
        self.cache = cache
        self.health = health
        self.limits = limits or ServerLimits()
        self.web_config = web_config
        tls = web_config.tls if web_config else None
        self.tls_context = ReloadingSSLContext(tls) if tls else None
        self._allowed_sans = tls.client_allowed_sans if tls else None
        users = web_config.basic_auth_users if web_config else {}
        self.auth: BasicAuth | None = BasicAuth(users) if users else None
        self.extra_headers = dict(web_config.headers) if web_config else {}
        limits = self.limits
        self.client_rate = RateLimiter(limits.rate_per_s, limits.burst, limits.max_tracked_clients)
        rate = web_config.rate_limit if web_config else None
        self.global_rate = RateLimiter(1.0 / rate.interval_s, rate.burst) if rate else None
        self._slots = threading.BoundedSemaphore(self.limits.max_connections)
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, _Handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def scheme(self) -> str:
        return "https" if self.tls_context else "http"

    def start(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    # --- connection handling: runs in the accept loop, so nothing here may block
    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse_busy(request)
            return
        try:
            super().process_request(request, client_address)
        except RuntimeError:  # no thread could be started
            log.warning("cannot start a thread for a connection from %s", client_address[0])
            self._slots.release()
            self.shutdown_request(request)

    def _refuse_busy(self, sock: socket.socket) -> None:
        log.debug("refusing a connection: %d connections open", self.limits.max_connections)
        if self.tls_context is None:
            try:
                sock.setblocking(False)
                sock.recv(self.limits.max_header_bytes)  # unread input would turn our close into a reset
            except OSError:
                pass
            with contextlib.suppress(OSError):
                sock.send(_BUSY)
        self.shutdown_request(sock)

    # --- per connection, in its own thread
    def process_request_thread(self, request: Any, client_address: Any) -> None:
        connection = request
        try:
            connection = self._secure(request)
            self.finish_request(connection, client_address)
        except _Dropped as why:
            log.debug("http %s: connection dropped: %s", client_address[0], why)
        except Exception:
            self.handle_error(connection, client_address)
        finally:
            self.shutdown_request(connection)
            self._slots.release()

    def _secure(self, sock: socket.socket) -> socket.socket:
        """The TLS side of a fresh connection, handshake done within the request timeout."""
        if self.tls_context is None:
            return sock
        deadline = time.monotonic() + self.limits.request_timeout_s
        sock.settimeout(self.limits.request_timeout_s)
        try:
            first = sock.recv(1, socket.MSG_PEEK)
        except OSError as exc:
            raise _Dropped(f"no TLS handshake: {exc}") from None
        if not first:
            raise _Dropped("closed before the TLS handshake")
        if first[0] != _TLS_HANDSHAKE_RECORD:
            if first.isalpha():  # looks like a plain-HTTP request line
                with contextlib.suppress(OSError):
                    sock.sendall(_HTTP_TO_HTTPS)
            raise _Dropped("plain HTTP on the TLS port")
        try:
            context = self.tls_context.get()
            secured = context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        except (ssl.SSLError, OSError) as exc:
            raise _Dropped(f"TLS setup failed: {exc}") from None
        try:
            secured.settimeout(max(0.001, deadline - time.monotonic()))
            secured.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            secured.close()
            raise _Dropped(f"TLS handshake failed: {exc}") from None
        if self._allowed_sans is not None and not peer_san_allowed(secured.getpeercert(), self._allowed_sans):
            secured.close()
            raise _Dropped("client certificate has none of client_allowed_sans")
        return secured

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients vanishing or stalling mid-reply are routine for a scrape endpoint; anything else is a bug.
        peer = client_address[0] if client_address else "?"
        if isinstance(sys.exc_info()[1], OSError):
            log.debug("http %s: connection failed", peer, exc_info=True)
        else:
            log.exception("http %s: request failed", peer)


def make_server(address: str, port: int, cache: ExpositionCache, health: HealthCheck, *,
                web_config: WebConfig | None = None, limits: ServerLimits | None = None) -> AgentHTTPServer:
    """Bind the endpoints; ``web_config`` None serves plain HTTP without auth, as before."""
    return AgentHTTPServer((address, port), cache, health, web_config=web_config, limits=limits)
