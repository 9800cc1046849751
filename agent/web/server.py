"""HTTP endpoints: ``/metrics`` (cached exposition), ``/healthz``, ``/readyz`` and the node page at ``/``.

A scrape never runs a tool; it serves bytes rendered from the snapshot store, so it answers in
milliseconds even while npu-smi hangs. The node page (``page``, docs/node-page.md) is rendered on
request from what the agent holds, and runs no tool either; without one ``/`` is a list of links.

With a ``WebConfig`` (see ``agent/web/config.py``) the endpoints are served over TLS and/or
behind HTTP basic auth. The web config file and the TLS files it names are polled every few
seconds and reloaded when they change (and on the agent's SIGHUP); a config that fails to load,
or one that would switch basic auth or TLS off, is logged and the running one kept.

Each connection has a thread of its own; ``ConnectionTable`` decides which connections may stay
open (per client address and overall), ``Connection`` parses requests strictly (h11) against
deadlines (and refuses what it cannot serve: methods, bodies, versions), and ``ServerLimits``
holds the numbers. Requests are then checked cheapest first: rate, then basic auth (every
path but ``/healthz``; see ``_AUTH_EXEMPT``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from agent.core.config import ConfigError
from agent.web.auth import Auth, BasicAuth, BcryptVerifier, CredentialCache
from agent.web.config import WebConfig, load_web_config
from agent.web.connections import PENDING, ConnectionTable, Slot
from agent.web.protocol import Connection, Refusal, Request, accepts_gzip, canned_response, status_text
from agent.web.security import RateLimiter, ServerLimits
from agent.web.settings import WebSettings, files_stamp, watched_files, weakening
from agent.web.tls import peer_san_allowed

if TYPE_CHECKING:
    from agent.core.exporter import ExpositionCache

__all__ = ["AgentHTTPServer", "HealthCheck", "PageRenderer", "ReadyCheck", "ServerLimits", "make_server"]

log = logging.getLogger(__name__)

HealthCheck = Callable[[], tuple[bool, str]]
ReadyCheck = Callable[[], tuple[bool, dict[str, Any]]]
# The node page at "/" (agent.web.page), rendered on request: its HTML.
PageRenderer = Callable[[], bytes]

_LANDING = b"""<html><head><title>npuwatch</title></head><body>
<h1>npuwatch</h1><p><a href="/metrics">/metrics</a> &middot; <a href="/healthz">/healthz</a>
&middot; <a href="/readyz">/readyz</a></p>
</body></html>
"""
_TEXT = "text/plain; charset=utf-8"
_HTML = "text/html; charset=utf-8"
# The node page runs no script and fetches nothing: a value that escaped escaping could not act either.
_PAGE_HEADERS = [("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff"),
                 ("Referrer-Policy", "no-referrer"),
                 ("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                                             "base-uri 'none'; form-action 'none'; frame-ancestors 'none'")]
_JSON = "application/json"
_TLS_HANDSHAKE_RECORD = 0x16
# Liveness carries no data ("ok" or "scheduler stalled") and must be checkable by a supervisor
# or a Kubernetes probe that holds no password; everything else needs the password when one is set.
_AUTH_EXEMPT = frozenset({"/healthz"})
FAILSLOW_PATH = "/metrics/failslow"  # the fail-slow series alone, for a 5 s scrape (docs/failslow.md#signals)
_UNAUTHORIZED = (("WWW-Authenticate", 'Basic realm="npuwatch", charset="UTF-8"'),)
_RETRY = (("Retry-After", "1"),)

_HTTP_TO_HTTPS = canned_response(HTTPStatus.BAD_REQUEST, b"Client sent an HTTP request to an HTTPS server.\n",
                                 "HTTP/1.0")
_BUSY = canned_response(HTTPStatus.SERVICE_UNAVAILABLE, b"too many connections\n", headers=_RETRY)
_TOO_MANY = canned_response(HTTPStatus.TOO_MANY_REQUESTS, b"too many connections from this address\n",
                            headers=_RETRY)


class _Dropped(Exception):
    """The connection is closed without an HTTP exchange (bad handshake, timeout, refused)."""


class AgentHTTPServer(socketserver.TCPServer):
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], cache: ExpositionCache, health: HealthCheck, *,
                 ready: ReadyCheck | None = None, page: PageRenderer | None = None,
                 web_config: WebConfig | None = None, web_config_file: str | None = None,
                 limits: ServerLimits | None = None, reload_interval_s: float = 3.0) -> None:
        self.cache = cache
        self.health = health
        self.ready = ready
        self.page = page
        self.limits = limits or ServerLimits()
        self._credentials = CredentialCache()
        self._verifier = BcryptVerifier()
        # web_config_file: the file to reload; without one, web_config is fixed (its TLS files still reload).
        self._web_config_file = web_config_file
        self._fixed_config = None if web_config_file else web_config
        self.settings = WebSettings.build(web_config, verifier=self._verifier, cache=self._credentials)
        self._stamp = files_stamp(watched_files(web_config, web_config_file))
        self._reload_lock = threading.Lock()
        self._reload_interval_s = reload_interval_s
        self._stopped = threading.Event()
        limits = self.limits
        self.table = ConnectionTable(limits.max_connections, limits.max_connections_per_client,
                                     stall_s=limits.stall_s)
        self.client_rate = RateLimiter(limits.rate_per_s, limits.burst, limits.max_tracked_clients)
        # Connections get twice the request allowance, so a client over its rate normally reads a 429.
        self.connect_rate = RateLimiter(2 * limits.rate_per_s, 2 * limits.burst, limits.max_tracked_clients)
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, socketserver.BaseRequestHandler)
        self._wake_r, self._wake_w = os.pipe()  # stop() writes a byte: the accept loop needs no poll timeout
        self._closed = False
        self._threads: list[threading.Thread] = []

    # --- what the settings say
    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def scheme(self) -> str:
        return "https" if self.settings.tls_context else "http"

    @property
    def auth(self) -> BasicAuth | None:
        return self.settings.auth

    @property
    def tls_context(self) -> ssl.SSLContext | None:
        return self.settings.tls_context

    @property
    def web_config(self) -> WebConfig | None:
        return self.settings.config

    # --- lifecycle
    def start(self) -> None:
        serving = threading.Thread(target=self._serve, name="http", daemon=True)
        watching = threading.Thread(target=self._watch_files, name="web-config-watch", daemon=True)
        self._threads = [serving, watching]
        for thread in self._threads:
            thread.start()

    def _serve(self) -> None:
        """socketserver's accept loop without its poll timeout: the thread sleeps until a connection comes
        or stop() writes to the wake pipe (a 0.1 s poll was 10 wakes a second, ~3 CPU-s/h of an idle agent)."""
        with selectors.PollSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while not self._stopped.is_set():
                ready = selector.select()
                if self._stopped.is_set():
                    break
                if any(key.fileobj is self for key, _ in ready):
                    self._accept_one()
                self.service_actions()

    def _accept_one(self) -> None:
        """One waiting connection, handed to process_request (socketserver's own step, which is private)."""
        try:
            request, client_address = self.get_request()
        except OSError:  # the client left before the accept
            return
        try:
            self.process_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
            self.shutdown_request(request)

    def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stopped.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"\0")
        serving = self._threads[0] if self._threads else None
        if serving is not None and serving is not threading.current_thread():
            serving.join()  # no accept after this, as socketserver's shutdown() waits for its loop
        self.table.close_all()
        self.server_close()
        self._verifier.close()
        os.close(self._wake_r)
        os.close(self._wake_w)

    def set_connection_limits(self, max_connections: int, max_connections_per_client: int) -> None:
        self.limits = replace(self.limits, max_connections=max_connections,
                              max_connections_per_client=max_connections_per_client)
        self.table.total, self.table.per_client = max_connections, max_connections_per_client

    # --- web config reloads
    def reload_web_config(self, path: str | None) -> bool:
        """Load the web config at ``path`` (None: no file) now; False when the running one is kept."""
        with self._reload_lock:
            self._web_config_file = path
            self._fixed_config = None
        return self._reload("reload requested")

    def poll_web_files(self) -> bool:
        """Reload when the web config file or a TLS file changed; True when new settings apply."""
        paths = watched_files(self.settings.config, self._web_config_file)
        if files_stamp(paths) == self._stamp:
            return False
        return self._reload("changed on disk")

    def _watch_files(self) -> None:
        while not self._stopped.wait(self._reload_interval_s):
            try:
                self.poll_web_files()
            except Exception:  # the watcher must outlive any surprise
                log.exception("checking the web config files failed")

    def _reload(self, why: str) -> bool:
        with self._reload_lock:
            path = self._web_config_file
            source = path or "(no file)"
            if path is None and self._fixed_config is None and self.settings.config is None:
                return True  # no web config before or after: nothing to say
            try:
                config = load_web_config(path) if path else self._fixed_config
                weaker = weakening(self.settings.config, config)
                if weaker is not None:
                    log.error("web config %s: not applied, %s (restart npuwatch to do that); keeping the "
                              "running web config", source, weaker)
                    return False
                settings = WebSettings.build(config, verifier=self._verifier, cache=self._credentials,
                                             previous=self.settings)
            except ConfigError as exc:
                log.error("web config %s: keeping the running web config; the new one is %s", source, exc)
                return False
            finally:
                # Stamped whatever the outcome, so a file that keeps failing is reported once per change.
                self._stamp = files_stamp(watched_files(self.settings.config, path))
            self.settings = settings
            self._stamp = files_stamp(watched_files(settings.config, path))
            users = len(settings.auth.users) if settings.auth else 0
            log.info("web config %s reloaded (%s): TLS %s, basic auth %s", source, why,
                     "on" if settings.tls_context else "off", f"for {users} user(s)" if users else "off")
            return True

    # --- accept loop: runs in the serving thread, so nothing here may block
    def process_request(self, request: Any, client_address: Any) -> None:
        client = str(client_address[0])
        if not self.connect_rate.allow(client):
            log.debug("http %s: connection rate exceeded", client)
            self._refuse_at_once(request, _TOO_MANY)
            return
        slot = self.table.admit(client, request)
        if slot is None:
            log.debug("refusing a connection: %d connections open, all answering, and as many waiting",
                      self.limits.max_connections)
            self._refuse_at_once(request, _BUSY)
            return
        thread = threading.Thread(target=self._serve_connection, args=(request, client, slot, time.monotonic()),
                                  name="http-conn", daemon=True)
        try:
            thread.start()
        except RuntimeError:  # no thread could be started
            log.warning("cannot start a thread for a connection from %s", client)
            self.table.release(slot)
            self.shutdown_request(request)

    def _refuse_at_once(self, sock: socket.socket, answer: bytes) -> None:
        """Refuse a new connection without a thread: a canned answer on plain HTTP, a close on TLS."""
        if self.settings.tls_context is None:
            try:
                sock.setblocking(False)
                sock.recv(self.limits.max_header_bytes)  # unread input would turn our close into a reset
            except OSError:
                pass
            with contextlib.suppress(OSError):
                sock.send(answer)
        self.shutdown_request(sock)

    # --- per connection, in its own thread
    def _serve_connection(self, sock: socket.socket, client: str, slot: Slot, accepted_at: float) -> None:
        connection = sock
        try:
            if slot.state == PENDING:  # every place is answering: wait for a slow reader's to be closed
                if not self.table.wait_room(slot, self.limits.room_wait_s):
                    log.debug("refusing a connection from %s: %d connections open, all answering", client,
                              self.limits.max_connections)
                    self._refuse_at_once(sock, _BUSY)
                    return
                accepted_at = time.monotonic()  # the time to send a request head starts with its place
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            deadline = accepted_at + self.limits.head_timeout_s
            settings = self.settings
            if settings.tls_context is not None:
                connection = self._secure(sock, settings, deadline)
                if not self.table.replace_socket(slot, connection):
                    return
            conn = Connection(connection, self.limits, deadline,
                              sending=lambda active: self.table.sending(slot, active),
                              moved=lambda: self.table.moved(slot))
            self._exchange(conn, client, slot)
        except _Dropped as why:
            log.debug("http %s: connection dropped: %s", client, why)
        except OSError:
            log.debug("http %s: connection failed", client, exc_info=True)
        except Exception:
            log.exception("http %s: request failed", client)
        finally:
            self.table.release(slot)
            with contextlib.suppress(OSError):
                connection.close()
            with contextlib.suppress(OSError):
                sock.close()

    def _exchange(self, conn: Connection, client: str, slot: Slot) -> None:
        while True:
            request = conn.next_request()
            if request is None:
                return
            settings = self.settings  # per request: a revoked password stops working on open connections too
            headers = list(settings.headers.items())
            if isinstance(request, Refusal):
                conn.refuse(request, headers)
                return
            turn = self.table.begin_request(slot, self.limits.turn_wait_s)
            if turn is None:
                return
            if not turn:
                conn.refuse(Refusal(HTTPStatus.SERVICE_UNAVAILABLE, _RETRY), headers)
                return
            try:
                refusal = self._refusal(request, settings, client)
                if refusal is not None:
                    conn.refuse(refusal, headers)
                    return
                status, body, content_type, extra = self._route(request)
                keep = conn.respond(status, body, content_type, extra + headers, head_only=request.method == "HEAD")
            finally:
                self.table.end_request(slot)
            if not keep:
                return

    def _refusal(self, request: Request, settings: WebSettings, client: str) -> Refusal | None:
        """Why this request gets no answer from the endpoints, checked cheapest first."""
        if not self.client_rate.allow(client) or (
            settings.global_rate is not None and not settings.global_rate.allow()
        ):
            return Refusal(HTTPStatus.TOO_MANY_REQUESTS, _RETRY)
        if settings.auth is not None and request.path not in _AUTH_EXEMPT:
            verdict = settings.auth.check(request.header("authorization"), client)
            if verdict is Auth.BUSY:
                return Refusal(HTTPStatus.TOO_MANY_REQUESTS, _RETRY)
            if verdict is not Auth.GRANTED:
                return Refusal(HTTPStatus.UNAUTHORIZED, _UNAUTHORIZED)
        return None

    def _route(self, request: Request) -> tuple[int, bytes, str, list[tuple[str, str]]]:
        path = request.path
        if path in ("/metrics", FAILSLOW_PATH):
            accept = request.header("accept") or ""
            only = {"failslow": True} if path == FAILSLOW_PATH else {}
            exposition = self.cache.render(openmetrics="application/openmetrics-text" in accept,
                                           gzipped=accepts_gzip(request.header("accept-encoding")), **only)
            extra = [("Content-Encoding", "gzip")] if exposition.gzipped else []
            return 200, exposition.body, exposition.content_type, extra
        if path == "/healthz":
            alive, reason = self.health()
            return (200 if alive else 503), (reason + "\n").encode(), _TEXT, []
        if path == "/readyz" and self.ready is not None:
            ready, report = self.ready()
            body = (json.dumps(report, indent=1, sort_keys=True) + "\n").encode()
            return (200 if ready else 503), body, _JSON, [("Cache-Control", "no-store")]
        if path == "/":
            if self.page is None:
                return 200, _LANDING, _HTML, []
            try:
                return 200, self.page(), _HTML, list(_PAGE_HEADERS)
            except Exception:  # a page bug must not cost the endpoints: /metrics keeps answering
                log.exception("rendering the node page failed")
                return 500, b"the node page failed to render; see the agent's log\n", _TEXT, []
        return 404, status_text(HTTPStatus.NOT_FOUND), _TEXT, []

    def _secure(self, sock: socket.socket, settings: WebSettings, deadline: float) -> socket.socket:
        """The TLS side of a fresh connection, handshake done before ``deadline``."""
        assert settings.tls_context is not None
        try:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
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
            secured = settings.tls_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        except (ssl.SSLError, OSError) as exc:
            raise _Dropped(f"TLS setup failed: {exc}") from None
        try:
            secured.settimeout(max(0.001, deadline - time.monotonic()))
            secured.do_handshake()
        except (ssl.SSLError, OSError) as exc:
            secured.close()
            raise _Dropped(f"TLS handshake failed: {exc}") from None
        allowed = settings.allowed_sans
        if allowed is not None and not peer_san_allowed(secured.getpeercert(), allowed):
            secured.close()
            raise _Dropped("client certificate has none of client_allowed_sans")
        return secured


def make_server(address: str, port: int, cache: ExpositionCache, health: HealthCheck, *,
                ready: ReadyCheck | None = None, page: PageRenderer | None = None,
                web_config: WebConfig | None = None, web_config_file: str | None = None,
                limits: ServerLimits | None = None, reload_interval_s: float = 3.0) -> AgentHTTPServer:
    """Bind the endpoints; no ``web_config`` serves plain HTTP without auth.

    ``web_config_file`` is the file ``web_config`` was read from: it is polled every
    ``reload_interval_s`` and reloaded when it changes.
    """
    return AgentHTTPServer((address, port), cache, health, ready=ready, page=page, web_config=web_config,
                           web_config_file=web_config_file, limits=limits,
                           reload_interval_s=reload_interval_s)
