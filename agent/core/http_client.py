"""How the commands that read another server (``triage --prometheus``, ``top --url``) talk HTTP: TLS against a CA
bundle (or not verified, when asked), a client certificate, basic auth with a password from a file or the
environment. urllib from the standard library: two GETs or POSTs a few seconds apart need no HTTP library.
"""

from __future__ import annotations

import base64
import errno
import os
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ClientTls", "basic_auth_header", "build_opener", "check_url", "connection_problem", "read_password"]

_ERRNO_WORDS = {
    errno.ECONNREFUSED: "connection refused (nothing listens there)",
    errno.ECONNRESET: "connection reset by the server",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.ETIMEDOUT: "timed out",
}


@dataclass(frozen=True)
class ClientTls:
    ca_file: str | None = None
    cert_file: str | None = None  # a client certificate (PEM), for a server that asks for one
    key_file: str | None = None  # its key, when not in cert_file
    insecure: bool = False  # do not verify the server's certificate


def check_url(url: str, flag: str) -> None:
    """ValueError unless ``url`` is http:// or https:// with a host (``flag`` names the option in the message)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ValueError(f"{flag} wants an http:// or https:// URL, got {url!r}")


def build_opener(url: str, tls: ClientTls) -> urllib.request.OpenerDirector:
    """An opener for ``url``: for https, a context with the CA bundle, the client certificate, and verification
    unless ``tls.insecure``. OSError or ssl.SSLError when a file cannot be loaded."""
    handlers: list[urllib.request.BaseHandler] = []
    if url.startswith("https://"):
        context = ssl.create_default_context(cafile=tls.ca_file)
        if tls.cert_file:
            context.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def basic_auth_header(username: str | None, password: str | None) -> dict[str, str]:
    if username is None:
        return {}
    token = base64.b64encode(f"{username}:{password or ''}".encode()).decode("ascii")
    return {"Authorization": f"Basic {token}"}


def read_password(path: str | None, flag: str, env_name: str, username: str | None,
                  environ: Mapping[str, str] | None = None) -> str | None:
    """The first line of ``path``; else, with a user name, ``$env_name``; else None. ValueError (naming ``flag``)
    when the file cannot be read."""
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                return handle.readline().rstrip("\r\n")
        except OSError as exc:
            raise ValueError(f"{flag}: {exc.strerror or exc}: {path}") from None
    environ = environ if environ is not None else os.environ
    if username and environ.get(env_name) is not None:
        return environ[env_name]
    return None


def connection_problem(exc: BaseException) -> str:
    """What went wrong reaching a server, in words (``connection refused (nothing listens there)``), never
    a Python repr such as ``<urlopen error [Errno 111] Connection refused>``."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"answered HTTP {exc.code} {exc.reason}".rstrip()
    reason: object = exc.reason if isinstance(exc, urllib.error.URLError) else exc
    if isinstance(reason, (socket.timeout, TimeoutError)):
        return "timed out"
    if isinstance(reason, socket.gaierror):
        return "host name not found"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed: {reason.reason or reason}"
    if isinstance(reason, OSError):
        if reason.errno in _ERRNO_WORDS:
            return _ERRNO_WORDS[reason.errno]
        if reason.strerror:
            return reason.strerror[:1].lower() + reason.strerror[1:]
    if isinstance(reason, ValueError):
        return f"unreadable answer ({reason})"
    return str(reason) or type(reason).__name__
