"""How the commands that read another server (``triage --prometheus``, ``top --url``) talk HTTP: TLS against a CA
bundle (or not verified, when asked), a client certificate, basic auth with a password from a file or the
environment. urllib from the standard library: two GETs or POSTs a few seconds apart need no HTTP library.
"""

from __future__ import annotations

import base64
import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ClientTls", "basic_auth_header", "build_opener", "check_url", "read_password"]


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
