"""The web config file: TLS and basic auth for ``/metrics`` and ``/healthz``.

The format is the one Prometheus exporters read through exporter-toolkit's
``--web.config.file``, so a site can point npuwatch at the file its
node_exporter already uses::

    tls_server_config:
      cert_file: server.crt          # relative paths are relative to this file
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert
      client_ca_file: ca.crt
      min_version: TLS12             # TLS12 (default) or TLS13
    http_server_config:
      headers: {X-Content-Type-Options: nosniff}
    basic_auth_users:
      prometheus: $2b$10$...         # bcrypt hash, cost 4..12 (htpasswd -nBC 10 "" | tr -d ':\\n')
    rate_limit: {interval: 50ms, burst: 40}

Where npuwatch cannot do what the file asks, loading fails with a clear
message instead of serving something weaker than configured: TLS below 1.2,
``curve_preferences`` and client certificates accepted without verification
(``RequestClientCert``, ``RequireAnyClientCert``) are refused.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.core.config import ConfigError, read_yaml_file
from agent.web.tls import (
    _OLD_TLS_VERSIONS,
    CIPHER_SUITES,
    TLS_VERSIONS,
    ClientAuth,
    TLSServerConfig,
    server_ssl_context,
)

__all__ = [
    "CIPHER_SUITES",
    "MAX_BCRYPT_COST",
    "ClientAuth",
    "RateLimit",
    "TLSServerConfig",
    "WebConfig",
    "build_web_config",
    "load_web_config",
]

# exporter-toolkit lets these response headers be set, some only to fixed values.
_EXTRA_HEADERS: Mapping[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}

# bcrypt's own floor, and what an uncached check in a scrape can afford (cost 12: ~0.3 s on a
# server core, ~1 s on a slow one; every step doubles it).
MIN_BCRYPT_COST, MAX_BCRYPT_COST = 4, 12
_BCRYPT_RE = re.compile(r"^\$2[aby]\$(\d\d)\$[./A-Za-z0-9]{53}$")
_GO_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_GO_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class RateLimit:
    """Server-wide token bucket (exporter-toolkit ``rate_limit``): one token per interval."""

    interval_s: float
    burst: int


@dataclass(frozen=True)
class WebConfig:
    """A validated web config file. ``tls`` None means plain HTTP (auth may still be on)."""

    tls: TLSServerConfig | None = None
    basic_auth_users: Mapping[str, str] = field(default_factory=dict, repr=False)  # user -> bcrypt hash
    headers: Mapping[str, str] = field(default_factory=dict)
    rate_limit: RateLimit | None = None
    source: str = "web config"


# --- field checkers: return the typed value or raise TypeError with the reason
def _show(value: Any) -> str:
    if isinstance(value, str):
        return f'"{value}"' if len(value) <= 60 else f'"{value[:57]}..."'
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _str(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, got {_show(value)}")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError(f"expected true or false, got {_show(value)}")


def _str_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise TypeError(f"expected a list of strings, got {_show(value)}")


def _min_version(value: Any) -> str:
    if value in _OLD_TLS_VERSIONS:
        raise TypeError(f"{value} is refused: npuwatch serves TLS 1.2 and 1.3 only (use TLS12 or TLS13)")
    if value in TLS_VERSIONS:
        return str(value)
    raise TypeError(f"expected one of {', '.join(TLS_VERSIONS)}, got {_show(value)}")


def _max_version(value: Any) -> str:
    if value in TLS_VERSIONS:
        return str(value)
    raise TypeError(f"expected one of {', '.join(TLS_VERSIONS)}, got {_show(value)}")


def _client_auth(value: Any) -> str:
    if value == "":
        return ClientAuth.NONE
    if value in ClientAuth.SUPPORTED:
        return str(value)
    if value in ClientAuth.UNVERIFIED:
        raise TypeError(
            f"{value} (accept a client certificate without verifying it) is not supported; "
            f"use {ClientAuth.VERIFY_IF_GIVEN} or {ClientAuth.REQUIRE_AND_VERIFY} with client_ca_file"
        )
    raise TypeError(f"expected one of {', '.join(ClientAuth.SUPPORTED)}, got {_show(value)}")


def _cipher_suites(value: Any) -> tuple[str, ...]:
    names = _str_list(value)
    unknown = [name for name in names if name not in CIPHER_SUITES]
    if unknown:
        raise TypeError(f"unknown cipher suite {_show(unknown[0])} (Go crypto/tls names, e.g. "
                        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256)")
    return names


def _unsupported(reason: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value in (None, [], ""):
            return None
        raise TypeError(f"not supported by npuwatch: {reason}; remove it")

    return check


def _go_duration(value: Any) -> float:
    if isinstance(value, str) and value and _GO_DURATION_RE.sub("", value) == "":
        seconds = sum(float(n) * _GO_DURATION_UNITS[u] for n, u in _GO_DURATION_RE.findall(value))
        if 0 < seconds < math.inf:
            return seconds
    raise TypeError(f"expected a duration above zero like 100ms or 1s, got {_show(value)}")


def _burst(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise TypeError(f"expected an integer of at least 1, got {_show(value)}")


_TLS_FIELDS: Mapping[str, Callable[[Any], Any]] = {
    "cert_file": _str,
    "key_file": _str,
    "cert": _str,
    "key": _str,
    "client_auth_type": _client_auth,
    "client_ca_file": _str,
    "client_ca": _str,
    "min_version": _min_version,
    "max_version": _max_version,
    "cipher_suites": _cipher_suites,
    "prefer_server_cipher_suites": _bool,
    "client_allowed_sans": _str_list,
    "curve_preferences": _unsupported("Python's ssl module cannot set a curve preference list"),
}
_HTTP_FIELDS: Mapping[str, Callable[[Any], Any]] = {
    "http2": _bool,  # accepted for compatibility; npuwatch serves HTTP/1.1
    "headers": lambda value: value,  # checked in _headers, which names each bad header
}
_RATE_FIELDS: Mapping[str, Callable[[Any], Any]] = {"interval": _go_duration, "burst": _burst}
_TOP_LEVEL = ("tls_server_config", "http_server_config", "basic_auth_users", "rate_limit")


def _section(raw: Any, fields: Mapping[str, Callable[[Any], Any]], path: str,
             problems: list[str]) -> dict[str, Any]:
    """Check one mapping against ``fields``; returns only the keys that were present and valid."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected a mapping, got {_show(raw)}")
        return {}
    values: dict[str, Any] = {}
    for key, item in raw.items():
        check = fields.get(key) if isinstance(key, str) else None
        if check is None:
            problems.append(f"{path}.{key}: unknown setting (known here: {', '.join(sorted(fields))})")
            continue
        try:
            values[key] = check(item)
        except TypeError as exc:
            problems.append(f"{path}.{key}: {exc}")
    return values


def _resolve(base_dir: Path | None, value: str | None) -> str | None:
    if not value or base_dir is None or os.path.isabs(value):
        return value or None
    return str(base_dir / value)


def _readable(path: str | None, where: str, problems: list[str]) -> None:
    if path is None:
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        problems.append(f"{where}: cannot read {path}: {exc.strerror or exc}")


def _tls(raw: Any, base_dir: Path | None, problems: list[str]) -> TLSServerConfig | None:
    path = "tls_server_config"
    values = _section(raw, _TLS_FIELDS, path, problems)
    values.pop("curve_preferences", None)
    for name in ("cert_file", "key_file", "client_ca_file"):
        if name in values:
            values[name] = _resolve(base_dir, values[name])
    enabling = ("cert_file", "key_file", "cert", "key", "client_ca_file", "client_ca", "client_auth_type")
    if not any(values.get(name) for name in enabling):
        return None  # as exporter-toolkit: no certificate configured means plain HTTP
    if not (values.get("cert_file") or values.get("cert")):
        problems.append(f"{path}: missing one of cert_file or cert")
    if not (values.get("key_file") or values.get("key")):
        problems.append(f"{path}: missing one of key_file or key")
    for name in ("cert_file", "key_file", "client_ca_file"):
        _readable(values.get(name), f"{path}.{name}", problems)
    auth = values.get("client_auth_type", ClientAuth.NONE)
    has_ca = bool(values.get("client_ca_file") or values.get("client_ca"))
    if has_ca and auth == ClientAuth.NONE:
        problems.append(f"{path}.client_ca_file: client CAs are set but client_auth_type is "
                        f"{ClientAuth.NONE}; set {ClientAuth.REQUIRE_AND_VERIFY} or remove the CA")
    if auth != ClientAuth.NONE and not has_ca:
        problems.append(f"{path}.client_auth_type: {auth} needs client_ca_file (or client_ca)")
    if values.get("client_allowed_sans") is not None and auth != ClientAuth.REQUIRE_AND_VERIFY:
        problems.append(f"{path}.client_allowed_sans: needs client_auth_type {ClientAuth.REQUIRE_AND_VERIFY}")
    low, high = values.get("min_version", "TLS12"), values.get("max_version", "TLS13")
    if TLS_VERSIONS.index(high) < TLS_VERSIONS.index(low):
        problems.append(f"{path}.max_version: {high} is below min_version {low}")
    return TLSServerConfig(**values)


def _headers(raw: Any, problems: list[str]) -> dict[str, str]:
    path = "http_server_config.headers"
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected a mapping of header names to values, got {_show(raw)}")
        return {}
    headers: dict[str, str] = {}
    for name, value in raw.items():
        allowed = _EXTRA_HEADERS.get(name) if isinstance(name, str) else None
        if allowed is None:
            problems.append(f"{path}.{name}: this header can not be configured "
                            f"(allowed: {', '.join(_EXTRA_HEADERS)})")
        elif not isinstance(value, str) or "\r" in value or "\n" in value:
            problems.append(f"{path}.{name}: expected a one-line string, got {_show(value)}")
        elif allowed and value not in allowed:
            problems.append(f"{path}.{name}: expected one of {', '.join(allowed)}, got {_show(value)}")
        else:
            headers[name] = value
    return headers


def _users(raw: Any, problems: list[str]) -> dict[str, str]:
    path = "basic_auth_users"
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        problems.append(f"{path}: expected a mapping of user name to bcrypt hash, got {_show(raw)}")
        return {}
    users: dict[str, str] = {}
    for user, hashed in raw.items():
        if not isinstance(user, str) or not user or ":" in user:
            problems.append(f"{path}: user names must be non-empty strings without ':', got {_show(user)}")
        # The hash itself is never echoed: a config error can end up in a log.
        elif not isinstance(hashed, str) or not _BCRYPT_RE.match(hashed):
            problems.append(f"{path}.{user}: expected a bcrypt hash like $2b$10$... (htpasswd -nB)")
        elif not MIN_BCRYPT_COST <= int(_BCRYPT_RE.match(hashed).group(1)) <= MAX_BCRYPT_COST:  # type: ignore[union-attr]
            cost = int(_BCRYPT_RE.match(hashed).group(1))  # type: ignore[union-attr]
            problems.append(
                f"{path}.{user}: bcrypt cost {cost} is outside {MIN_BCRYPT_COST}..{MAX_BCRYPT_COST}: "
                f"each new credential costs one bcrypt check in a scrape, about 0.1-1 s of CPU at cost "
                f"{MAX_BCRYPT_COST} and doubling with every step above it; rehash with cost 10 "
                f"(htpasswd -nBC 10 {user})")
        else:
            users[user] = hashed
    return users


def build_web_config(raw: Any, source: str = "web config", base_dir: Path | None = None) -> WebConfig:
    """Validate an already-parsed web config mapping; raises ``ConfigError`` listing every problem."""
    problems: list[str] = []
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError([f"expected a mapping with {', '.join(_TOP_LEVEL)}, got {_show(raw)}"], source)
    for key in raw:
        if key not in _TOP_LEVEL:
            problems.append(f"{key}: unknown setting (known here: {', '.join(_TOP_LEVEL)})")
    tls = _tls(raw.get("tls_server_config"), base_dir, problems)
    http = _section(raw.get("http_server_config"), _HTTP_FIELDS, "http_server_config", problems)
    headers = _headers(http.get("headers"), problems)
    users = _users(raw.get("basic_auth_users"), problems)
    rate = _section(raw.get("rate_limit"), _RATE_FIELDS, "rate_limit", problems)
    rate_limit = None
    if "interval" in rate:
        rate_limit = RateLimit(interval_s=rate["interval"], burst=rate.get("burst", 1))
    elif "burst" in rate:
        problems.append("rate_limit.interval: needed when rate_limit.burst is set")
    if problems:
        raise ConfigError(problems, source)
    if tls is not None:
        # Load the certificate and key now, so a bad pair fails at startup and in check-config.
        server_ssl_context(tls, source)
    return WebConfig(tls=tls, basic_auth_users=users, headers=headers, rate_limit=rate_limit, source=source)


def load_web_config(path: str | os.PathLike[str]) -> WebConfig:
    """Read and validate an exporter-toolkit style web config file.

    Relative ``cert_file``/``key_file``/``client_ca_file`` are resolved against the
    file's directory, and the certificate and key are loaded once to prove they
    match. Any problem raises ``agent.core.config.ConfigError`` naming each bad key by
    its path, e.g. ``tls_server_config.min_version: TLS10 is refused ...``.
    """
    source = str(path)
    raw = read_yaml_file(path)
    return build_web_config(raw, source, Path(path).resolve().parent)
