"""What every request reads from the web config, swapped as one object when the config changes.

``WebSettings.build(config)`` turns a validated ``WebConfig`` into what a connection uses: the TLS
context, the ``BasicAuth`` checker, the response headers and the server-wide rate limit. A
server holds one ``WebSettings`` and replaces it whole, so a request sees either the old
settings or the new ones, never half of each.

``files_stamp`` is what the server polls to notice a change: the web config file itself and the
certificate, key and CA files it names (mtime, size, inode, ctime: an atomic rename, a copy that
keeps the mtime and an in-place edit all change it).

``weakening(old, new)`` says why a reloaded config may not replace a running one: a reload may
tighten or rotate anything, but switching basic auth or TLS off takes a restart, so a truncated
or half-written file can never leave the endpoint open.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from agent.web.auth import BasicAuth, BcryptVerifier, CredentialCache
from agent.web.config import RateLimit, WebConfig
from agent.web.security import RateLimiter
from agent.web.tls import server_ssl_context

__all__ = ["FilesStamp", "WebSettings", "files_stamp", "watched_files", "weakening"]

FilesStamp = tuple[tuple[str, tuple[int, int, int, int]], ...]


def watched_files(config: WebConfig | None, config_path: str | None) -> list[str]:
    paths = [config_path] if config_path else []
    tls = config.tls if config is not None else None
    if tls is not None:
        paths += [path for path in (tls.cert_file, tls.key_file, tls.client_ca_file) if path]
    return paths


def files_stamp(paths: Sequence[str]) -> FilesStamp:
    stamps = []
    for path in paths:
        try:
            info = os.stat(path)
            stamps.append((path, (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)))
        except OSError:
            stamps.append((path, (-1, -1, -1, -1)))
    return tuple(stamps)


def weakening(old: WebConfig | None, new: WebConfig | None) -> str | None:
    """Why ``new`` may not replace ``old`` without a restart, or None."""
    had_auth = bool(old and old.basic_auth_users)
    had_tls = bool(old and old.tls)
    if had_auth and not (new and new.basic_auth_users):
        return "it switches basic auth off"
    if had_tls and not (new and new.tls):
        return "it switches TLS off"
    return None


@dataclass(frozen=True)
class WebSettings:
    config: WebConfig | None = None
    tls_context: ssl.SSLContext | None = None
    auth: BasicAuth | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    global_rate: RateLimiter | None = None

    @property
    def allowed_sans(self) -> tuple[str, ...] | None:
        tls = self.config.tls if self.config is not None else None
        return tls.client_allowed_sans if tls is not None else None

    @classmethod
    def build(cls, config: WebConfig | None, *, verifier: BcryptVerifier, cache: CredentialCache,
              previous: WebSettings | None = None) -> WebSettings:
        """Settings for ``config``; raises ``ConfigError`` when its TLS files cannot be loaded."""
        if config is None:
            return cls()
        tls_context = server_ssl_context(config.tls, config.source) if config.tls else None
        users = config.basic_auth_users
        auth = BasicAuth(users, verifier=verifier, cache=cache) if users else None
        return cls(config, tls_context, auth, dict(config.headers),
                   _keep_rate(config.rate_limit, previous))


def _keep_rate(rate: RateLimit | None, previous: WebSettings | None) -> RateLimiter | None:
    """The running bucket when the limit is unchanged, so a reload does not refill it."""
    if rate is None:
        return None
    old = previous.config.rate_limit if previous is not None and previous.config is not None else None
    if old == rate and previous is not None and previous.global_rate is not None:
        return previous.global_rate
    return RateLimiter(1.0 / rate.interval_s, rate.burst)
