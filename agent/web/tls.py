"""TLS for the HTTP endpoints: the ``tls_server_config`` types, the server context, reloads.

- ``TLSServerConfig`` / ``ClientAuth`` / ``CIPHER_SUITES``: what a web config file may ask for;
- ``server_ssl_context(tls)``: an ``ssl.SSLContext`` honouring versions, ciphers and client
  certificates (``agent/web/settings.py`` rebuilds it when the files change);
- ``peer_san_allowed``: the ``client_allowed_sans`` check on a verified client certificate.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent.core.config import ConfigError

log = logging.getLogger(__name__)

__all__ = [
    "CIPHER_SUITES",
    "TLS_VERSIONS",
    "ClientAuth",
    "TLSServerConfig",
    "peer_san_allowed",
    "server_ssl_context",
]

# Go crypto/tls suite name -> OpenSSL name. TLS 1.3 suites map to None: neither Go nor
# OpenSSL's TLS 1.2 cipher string configures them, so naming them changes nothing.
CIPHER_SUITES: Mapping[str, str | None] = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
}

TLS_VERSIONS = ("TLS12", "TLS13")
_OLD_TLS_VERSIONS = ("TLS10", "TLS11")


class ClientAuth:
    """exporter-toolkit ``client_auth_type`` values npuwatch serves."""

    NONE = "NoClientCert"
    VERIFY_IF_GIVEN = "VerifyClientCertIfGiven"
    REQUIRE_AND_VERIFY = "RequireAndVerifyClientCert"
    SUPPORTED = (NONE, VERIFY_IF_GIVEN, REQUIRE_AND_VERIFY)
    UNVERIFIED = ("RequestClientCert", "RequireAnyClientCert", "RequireClientCert")


@dataclass(frozen=True)
class TLSServerConfig:
    """``tls_server_config`` with paths made absolute; inline PEM fields kept as text."""

    cert_file: str | None = None
    key_file: str | None = None
    cert: str | None = field(default=None, repr=False)
    key: str | None = field(default=None, repr=False)
    client_auth_type: str = ClientAuth.NONE
    client_ca_file: str | None = None
    client_ca: str | None = field(default=None, repr=False)
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    cipher_suites: tuple[str, ...] = ()  # Go names, as written in the file
    prefer_server_cipher_suites: bool = True
    client_allowed_sans: tuple[str, ...] | None = None


# --- TLS
_TLS_VERSION = {"TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


def _verify_mode(client_auth_type: str) -> ssl.VerifyMode:
    return {
        ClientAuth.NONE: ssl.CERT_NONE,
        ClientAuth.VERIFY_IF_GIVEN: ssl.CERT_OPTIONAL,
        ClientAuth.REQUIRE_AND_VERIFY: ssl.CERT_REQUIRED,
    }[client_auth_type]


def _load_cert_chain(context: ssl.SSLContext, tls: TLSServerConfig) -> None:
    if tls.cert_file and tls.key_file:
        context.load_cert_chain(tls.cert_file, tls.key_file, password=b"")
        return
    # ssl loads a chain only from files: inline PEM goes through a private temporary directory.
    with tempfile.TemporaryDirectory(prefix="npuwatch-tls-") as tmp:
        cert_path = tls.cert_file or _write_private(os.path.join(tmp, "cert.pem"), tls.cert or "")
        key_path = tls.key_file or _write_private(os.path.join(tmp, "key.pem"), tls.key or "")
        context.load_cert_chain(cert_path, key_path, password=b"")


def _write_private(path: str, text: str) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return path


def server_ssl_context(tls: TLSServerConfig, source: str = "web config") -> ssl.SSLContext:
    """Server-side context honouring versions, ciphers and client-certificate policy.

    Raises ``ConfigError`` when the certificate, key or client CA cannot be loaded.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _TLS_VERSION[tls.min_version]
    context.maximum_version = _TLS_VERSION[tls.max_version]
    if tls.prefer_server_cipher_suites:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        openssl_names = [name for suite in tls.cipher_suites if (name := CIPHER_SUITES[suite])]
        if openssl_names:
            context.set_ciphers(":".join(openssl_names))
    except ssl.SSLError as exc:
        problem = f"tls_server_config.cipher_suites: none usable here ({exc.reason})"
        raise ConfigError([problem], source) from None
    try:
        _load_cert_chain(context, tls)
    except (ssl.SSLError, OSError) as exc:
        why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        raise ConfigError([f"tls_server_config: cannot load certificate and key: {why}"], source) from None
    context.verify_mode = _verify_mode(tls.client_auth_type)
    try:
        if tls.client_ca_file:
            context.load_verify_locations(cafile=tls.client_ca_file)
        if tls.client_ca:
            context.load_verify_locations(cadata=tls.client_ca)
    except (ssl.SSLError, OSError, ValueError) as exc:
        why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
        problem = f"tls_server_config.client_ca_file: cannot load client CAs: {why}"
        raise ConfigError([problem], source) from None
    return context


def _normal_san(value: str) -> str:
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return value


def peer_san_allowed(peer_cert: Mapping[str, Any] | None, allowed: Iterable[str]) -> bool:
    """True when any DNS, IP, email or URI SAN of the (verified) peer cert is in ``allowed``."""
    if not peer_cert:
        return False
    wanted = {_normal_san(item) for item in allowed}
    return any(_normal_san(str(value)) in wanted for _kind, value in peer_cert.get("subjectAltName", ()))

