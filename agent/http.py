"""HTTP endpoints: ``/metrics`` (cached exposition) and ``/healthz``.

A scrape never runs a tool; it serves bytes rendered from the snapshot store,
so it answers in milliseconds even while npu-smi hangs.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent.exporter import ExpositionCache

__all__ = ["AgentHTTPServer", "HealthCheck", "make_server"]

log = logging.getLogger(__name__)

HealthCheck = Callable[[], tuple[bool, str]]

_LANDING = b"""<html><head><title>npuwatch</title></head><body>
<h1>npuwatch</h1><p><a href="/metrics">/metrics</a> &middot; <a href="/healthz">/healthz</a></p>
</body></html>
"""
_MAX_REQUEST_LINE = 8192


class _Handler(BaseHTTPRequestHandler):
    server: AgentHTTPServer
    protocol_version = "HTTP/1.1"
    server_version = "npuwatch"
    sys_version = ""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._metrics()
        elif path == "/healthz":
            ok, reason = self.server.health()
            self._reply(200 if ok else 503, (reason + "\n").encode(), "text/plain; charset=utf-8")
        elif path == "/":
            self._reply(200, _LANDING, "text/html; charset=utf-8")
        else:
            self._reply(404, b"not found\n", "text/plain; charset=utf-8")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _metrics(self) -> None:
        accept = self.headers.get("Accept", "")
        openmetrics = "application/openmetrics-text" in accept
        gzipped = "gzip" in self.headers.get("Accept-Encoding", "")
        exposition = self.server.cache.render(openmetrics=openmetrics, gzipped=gzipped)
        headers = {"Content-Encoding": "gzip"} if exposition.gzipped else {}
        self._reply(200, exposition.body, exposition.content_type, headers)

    def _reply(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("http %s " + format, self.address_string(), *args)


class AgentHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], cache: ExpositionCache, health: HealthCheck) -> None:
        self.cache = cache
        self.health = health
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.address_family = family
        super().__init__(address, _Handler)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> None:
        self._thread = threading.Thread(target=self.serve_forever, name="http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def make_server(address: str, port: int, cache: ExpositionCache, health: HealthCheck) -> AgentHTTPServer:
    return AgentHTTPServer((address, port), cache, health)
