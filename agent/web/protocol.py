"""HTTP/1.1 on one connection: strict request parsing with h11, reads against deadlines.

Why h11 and not the standard library's ``http.server``: ``BaseHTTPRequestHandler`` answers an
HTTP/0.9 request line with a bare body, takes the first of two conflicting ``Content-Length``
fields, lets a ``Transfer-Encoding`` it does not implement through, and folds headers with
the e-mail parser; making it strict means re-parsing the request line and every framing header
by hand, in front of a parser that was written to be lenient. h11 (python-hyper, pure Python,
no dependencies, Python 3.8+) is a sans-I/O implementation of RFC 9110/9112 written to be
strict: it rejects conflicting or malformed ``Content-Length``, any transfer coding but a
single ``chunked``, obsolete line folding, whitespace before a colon, a missing or repeated
``Host`` in HTTP/1.1 and request lines without a version, and it bounds an incomplete request
head. It does no I/O, so the socket stays ours: every read runs against a deadline for the
whole head (a client trickling a byte a second is still dropped) and TLS stays plain ``ssl``.
Version 0.16 fixed the one request-smuggling issue h11 had (chunked trailers), hence the floor.

What the endpoints answer, beyond what h11 enforces (all of these close the connection):

- a request line h11 cannot parse (HTTP/0.9 ``GET /metrics`` included), conflicting
  ``Content-Length`` values, a transfer coding other than ``chunked``, both ``Transfer-Encoding``
  and ``Content-Length``, or ``Transfer-Encoding`` in HTTP/1.0: **400** (RFC 9112 §6.1, §6.3);
- HTTP versions other than 1.0 and 1.1 (``HTTP/0.9`` or ``HTTP/2.0`` written in a request line):
  **505**;
- a method other than GET and HEAD: **405**, with ``Allow: GET, HEAD``;
- a body on GET or HEAD (``Content-Length`` above 0, or chunked): **413**, unread. No endpoint
  takes a body; RFC 9110 gives a body on GET no meaning, so refusing it is the strict choice and
  keeps a smuggled second request from hiding in one;
- request line beyond ``max_header_bytes``: **414**; headers beyond it: **431**.

Identical repeated ``Content-Length`` values are one value (RFC 9110 §8.6 allows either), and an
obsolete folded header line is unfolded (RFC 9112 §5.2 allows that or a 400). The
request target may be origin-form (``/metrics``) or absolute-form
(``http://host:9611/metrics``, RFC 9112 §3.2.2: a server MUST accept it; the Host header is
then ignored); authority- and asterisk-form only go with CONNECT and OPTIONS, which get 405,
and any other target is a 400.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from urllib.parse import urlsplit

import h11

from agent.web.security import ServerLimits

__all__ = ["Connection", "Refusal", "Request"]

_TEXT = "text/plain; charset=utf-8"
_LINGER_S = 0.5  # after a refusal, how long unread input is drained before closing
_LINGER_BYTES = 65536


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # without the query
    headers: dict[str, str]  # lower-case names; a repeated field joined with ", "

    def header(self, name: str) -> str | None:
        return self.headers.get(name)


@dataclass(frozen=True)
class Refusal:
    """A request answered with an error and the connection closed."""

    status: HTTPStatus
    headers: tuple[tuple[str, str], ...] = ()


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` field value takes gzip (RFC 9110 §12.5.3): ``gzip`` or ``x-gzip`` with a
    weight above 0, else ``*`` with a weight above 0; ``gzip;q=0`` refuses it whatever ``*`` says."""
    weights: dict[str, float] = {}
    for item in (accept_encoding or "").split(","):
        coding, *params = (part.strip() for part in item.split(";"))
        weight = 1.0
        for param in params:
            name, _, value = param.partition("=")
            if name.strip().lower() == "q":
                try:
                    weight = float(value.strip())
                except ValueError:
                    weight = 0.0  # a weight that is not a number is not taken as consent
        if coding:
            weights[coding.lower()] = weight
    for coding in ("gzip", "x-gzip"):
        if coding in weights:
            return weights[coding] > 0
    return weights.get("*", 0.0) > 0


def status_text(status: HTTPStatus) -> bytes:
    return f"{status.value} {status.phrase}\n".encode()


def _versionless_request_line(buffered: bytes) -> bool:
    """Whether the first complete line of ``buffered`` is a request line without a version."""
    line, found, _rest = buffered.lstrip(b"\r\n").partition(b"\n")
    if not found:
        return False
    parts = line.rstrip(b"\r").split(b" ")
    return len(parts) < 3 or not parts[-1].startswith(b"HTTP/")


def _path_of(target: bytes) -> str | None:
    """The path of an origin- or absolute-form target; None when it is neither."""
    try:
        text = target.decode("ascii")
    except UnicodeDecodeError:
        return None
    if text.startswith("/"):
        return text.split("?", 1)[0]
    parts = urlsplit(text)
    if parts.scheme.lower() in ("http", "https") and parts.netloc:
        return parts.path or "/"
    return None


class Connection:
    """One client connection: ``next_request()`` until it returns None, answering each."""

    def __init__(self, sock: socket.socket, limits: ServerLimits, first_deadline: float,
                 sending: Callable[[bool], None] | None = None, moved: Callable[[], None] | None = None) -> None:
        """``sending`` hears an answer start and stop being written, ``moved`` each time the client took
        more of it (so a connection whose client stopped reading can be told from a slow answer)."""
        self._sock = sock
        self._sending = sending or (lambda _active: None)
        self._moved = moved or (lambda: None)
        self._limits = limits
        self._h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=limits.max_header_bytes)
        self._deadline = first_deadline  # the first request's head, TLS handshake included
        self._idle = False

    # --- reading
    def next_request(self) -> Request | Refusal | None:
        """The next request, a refusal to answer with, or None when the connection is done."""
        try:
            event = self._next_event()
            if event is None or isinstance(event, h11.ConnectionClosed):
                return None
            if not isinstance(event, h11.Request):
                return None
            checked = self._check(event)
            if isinstance(checked, Refusal):
                return checked
            end = self._next_event()  # the empty body's end, so the cycle can restart
            return checked if isinstance(end, h11.EndOfMessage) else None
        except h11.RemoteProtocolError as exc:
            return self._protocol_refusal(exc)

    def _next_event(self) -> object:
        """An h11 event (or PAUSED), or None when no more bytes will come."""
        while True:
            event = self._h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            if self._h11.their_state is h11.IDLE and _versionless_request_line(self._h11.trailing_data[0]):
                # HTTP/0.9 sends no headers, so it would wait out the head timeout: refuse at once.
                raise h11.RemoteProtocolError("request line without an HTTP version")
            data = self._recv()
            if data is None:
                return None
            self._h11.receive_data(data)

    def _recv(self) -> bytes | None:
        """Bytes before the deadline; None at end of stream, on timeout, reset or eviction.

        A client that closes with a request head half sent gets no answer: it is not listening.
        """
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            return None
        size = 16384
        if self._h11.their_state is h11.IDLE:
            # Never more than one byte past the head limit: h11 bounds only an *incomplete* head,
            # so a whole oversized head read at once would otherwise be parsed.
            size = max(1, self._limits.max_header_bytes + 1 - len(self._h11.trailing_data[0]))
        try:
            self._sock.settimeout(remaining)
            data = self._sock.recv(size)
        except OSError:
            return None
        if not data:
            return None
        if self._idle:
            self._idle = False  # a request has begun: its head must now arrive within the head timeout
            self._deadline = time.monotonic() + self._limits.head_timeout_s
        return data

    def _check(self, event: h11.Request) -> Request | Refusal:
        headers: dict[str, str] = {}
        for name, value in event.headers:
            key, text = name.decode("latin-1"), value.decode("latin-1")
            headers[key] = f"{headers[key]}, {text}" if key in headers else text
        if event.http_version not in (b"1.0", b"1.1"):
            return Refusal(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED)
        chunked = "transfer-encoding" in headers
        if chunked and ("content-length" in headers or event.http_version == b"1.0"):
            return Refusal(HTTPStatus.BAD_REQUEST)
        if event.method not in (b"GET", b"HEAD"):
            return Refusal(HTTPStatus.METHOD_NOT_ALLOWED, (("Allow", "GET, HEAD"),))
        if chunked or headers.get("content-length", "0") != "0":
            return Refusal(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        path = _path_of(event.target)
        if path is None:
            return Refusal(HTTPStatus.BAD_REQUEST)
        return Request(event.method.decode("ascii"), path, headers)

    def _protocol_refusal(self, exc: h11.RemoteProtocolError) -> Refusal:
        if exc.error_status_hint == HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE:
            buffered = self._h11.trailing_data[0]
            if b"\n" not in buffered[: self._limits.max_header_bytes]:
                return Refusal(HTTPStatus.REQUEST_URI_TOO_LONG)
            return Refusal(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
        return Refusal(HTTPStatus.BAD_REQUEST)  # framing, syntax, version-less request lines

    # --- writing
    def respond(self, status: int, body: bytes, content_type: str, headers: list[tuple[str, str]],
                *, head_only: bool = False, close: bool = False) -> bool:
        """Send a response; True when the connection can carry another request."""
        fields = [("Content-Type", content_type), ("Content-Length", str(len(body))),
                  ("Date", formatdate(usegmt=True)), ("Server", "npuwatch"), *headers]
        if close:
            fields.append(("Connection", "close"))
        try:
            self._sock.settimeout(self._limits.write_timeout_s)
            if self._h11.our_state is h11.SEND_RESPONSE:
                head = self._h11.send(h11.Response(status_code=status, headers=fields,
                                                   reason=HTTPStatus(status).phrase.encode()))
                payload = self._h11.send(h11.Data(data=body)) if body and not head_only else b""
                self._h11.send(h11.EndOfMessage())
                # One buffer: each blocking call hands the GIL over, and getting it back costs up to
                # a switch interval (5 ms) while a collector thread is busy in Python.
                self._send((head or b"") + (payload or b""))
            else:  # the request never parsed: no h11 state to follow, so write it out and close
                self._send(_raw_response(status, body, fields))
                return False
        except (OSError, h11.LocalProtocolError):
            return False
        if close or self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
            return False
        self._h11.start_next_cycle()
        if self._h11.trailing_data[0]:
            self._deadline = time.monotonic() + self._limits.head_timeout_s  # pipelined: already begun
        else:
            self._idle = True
            self._deadline = time.monotonic() + self._limits.idle_timeout_s
        return True

    def _send(self, data: bytes) -> None:
        """All of ``data`` within the write timeout, telling ``moved`` of each part the client took."""
        deadline = time.monotonic() + self._limits.write_timeout_s
        view = memoryview(data)
        self._sending(True)
        try:
            while view:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("the client did not take the answer within the write timeout")
                self._sock.settimeout(remaining)
                sent = self._sock.send(view)
                view = view[sent:]
                self._moved()
        finally:
            self._sending(False)

    def refuse(self, refusal: Refusal, headers: list[tuple[str, str]]) -> None:
        """Answer with an error, then close gently: input left unread would turn the close into a
        reset, which can destroy the answer before the client reads it."""
        status = refusal.status
        self.respond(status, status_text(status), _TEXT, [*refusal.headers, *headers], close=True)
        try:
            socket.socket.shutdown(self._sock, socket.SHUT_WR)
            deadline = time.monotonic() + _LINGER_S
            drained = 0
            while drained < _LINGER_BYTES and (remaining := deadline - time.monotonic()) > 0:
                self._sock.settimeout(remaining)
                chunk = self._sock.recv(16384)
                if not chunk:
                    break
                drained += len(chunk)
        except OSError:
            pass


def _raw_response(status: int, body: bytes, fields: list[tuple[str, str]]) -> bytes:
    phrase = HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {phrase}", *(f"{name}: {value}" for name, value in fields), "", ""]
    return "\r\n".join(lines).encode("latin-1") + body


def canned_response(status: HTTPStatus, body: bytes, version: str = "HTTP/1.1",
                    headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A complete response for a raw socket, before any request is parsed."""
    fields = [("Content-Type", _TEXT), *headers, ("Connection", "close"), ("Content-Length", str(len(body)))]
    lines = [f"{version} {status.value} {status.phrase}", *(f"{n}: {v}" for n, v in fields), "", ""]
    return "\r\n".join(lines).encode("latin-1") + body
