"""The web config (TLS, basic auth, limits) as loaded and checked, without a server.

The agent's HTTP endpoints with real clients: tests/integration/test_web_security.py.
"""

from __future__ import annotations

import base64
import time
from pathlib import Path

import bcrypt
import pytest

from agent.core.config import ConfigError
from agent.web.auth import Auth, BasicAuth, parse_basic_authorization
from agent.web.config import build_web_config, load_web_config
from agent.web.security import RateLimiter
from tests.support.web_harness import (
    HASH,
    PASSWORD,
    USER,
    Certs,
    basic,
    certs,
    serve,
    write_web_config,
)

__all__ = ["certs", "serve"]  # fixtures


# --- web config file
def test_load_full_config_resolves_relative_paths(certs: Certs) -> None:
    path = write_web_config(certs.dir, f"""
tls_server_config:
  cert_file: server.crt
  key_file: server.key
  client_auth_type: RequireAndVerifyClientCert
  client_ca_file: ca.crt
  min_version: TLS13
  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]
  client_allowed_sans: [scraper.example]
http_server_config:
  http2: false
  headers: {{X-Content-Type-Options: nosniff, X-Frame-Options: deny}}
basic_auth_users:
  {USER}: {HASH}
rate_limit: {{interval: 100ms, burst: 5}}
""")
    config = load_web_config(path)
    assert config.tls is not None
    assert config.tls.cert_file == str(certs.server_cert)
    assert config.tls.client_ca_file == str(certs.ca)
    assert config.tls.min_version == "TLS13"
    assert config.tls.client_allowed_sans == ("scraper.example",)
    assert config.basic_auth_users == {USER: HASH}
    assert config.headers == {"X-Content-Type-Options": "nosniff", "X-Frame-Options": "deny"}
    assert config.rate_limit is not None and config.rate_limit.interval_s == pytest.approx(0.1)
    assert HASH not in repr(config)


def test_auth_only_config_means_plain_http() -> None:
    config = build_web_config({"basic_auth_users": {USER: HASH}})
    assert config.tls is None
    assert config.basic_auth_users == {USER: HASH}


@pytest.mark.parametrize(("text", "expected"), [
    ("tls_server_config:\n  min_versoin: TLS12\n", "tls_server_config.min_versoin: unknown setting"),
    ("tls_config: {}\n", "tls_config: unknown setting"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS10\n",
     "tls_server_config.min_version: TLS10 is refused"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS11\n",
     "tls_server_config.min_version: TLS11 is refused"),
    ("tls_server_config:\n  cert_file: server.crt\n", "tls_server_config: missing one of key_file or key"),
    ("tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n",
     "tls_server_config.cert_file: cannot read"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n",
     "client CAs are set but client_auth_type is NoClientCert"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
     "  client_auth_type: RequireAnyClientCert\n", "RequireAnyClientCert (accept a client certificate"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
     "  client_auth_type: RequireAndVerifyClientCert\n", "RequireAndVerifyClientCert needs client_ca_file"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suites: [RC4]\n",
     "tls_server_config.cipher_suites: unknown cipher suite"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  curve_preferences: [X25519]\n",
     "tls_server_config.curve_preferences: not supported by npuwatch"),
    ("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS13\n"
     "  max_version: TLS12\n", "tls_server_config.max_version: TLS12 is below min_version TLS13"),
    ("tls_server_config:\n  cert_file: ca.crt\n  key_file: server.key\n",
     "tls_server_config: cannot load certificate and key"),
    ("http_server_config:\n  headers: {Server: evil}\n", "http_server_config.headers.Server: this header"),
    ("http_server_config:\n  headers: {X-Frame-Options: allow}\n", "expected one of deny, sameorigin"),
    ("rate_limit: {interval: soon}\n", "rate_limit.interval: expected a duration"),
    ("- a list\n", "expected a mapping"),
    ("tls_server_config: [\n", "not valid YAML at line"),
])
def test_bad_web_config_names_the_path(certs: Certs, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as error:
        load_web_config(write_web_config(certs.dir, text))
    assert expected in str(error.value)


def test_bad_bcrypt_hash_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        load_web_config(write_web_config(tmp_path, "basic_auth_users:\n  alice: plaintext-password\n"))
    assert "basic_auth_users.alice: expected a bcrypt hash" in str(error.value)
    assert "plaintext-password" not in str(error.value)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        build_web_config({"tls_server_config": {"cert_file": "x", "bogus": 1}, "other": 2})
    problems = error.value.problems
    assert any(p.startswith("tls_server_config.bogus:") for p in problems)
    assert any(p.startswith("other:") for p in problems)
    assert any("missing one of key_file" in p for p in problems)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_web_config(tmp_path / "absent.yml")


# --- unit: auth header parsing, bcrypt cache, rate limiter
def test_parse_basic_authorization() -> None:
    assert parse_basic_authorization(basic("a", "b:c")) == (b"a", b"b:c")
    assert parse_basic_authorization("basic " + base64.b64encode(b"u:").decode()) == (b"u", b"")
    assert parse_basic_authorization("Bearer abc") is None
    assert parse_basic_authorization("Basic !!!") is None
    assert parse_basic_authorization("Basic " + base64.b64encode(b"no-colon").decode()) is None
    assert parse_basic_authorization(None) is None


def test_basic_auth_caches_verifications() -> None:
    calls: list[bytes] = []

    def counting_checkpw(password: bytes, hashed: bytes) -> bool:
        calls.append(password)
        return bcrypt.checkpw(password, hashed)

    auth = BasicAuth({USER: HASH}, checkpw=counting_checkpw)
    for _ in range(5):
        assert auth.check(basic(USER, PASSWORD)) is Auth.GRANTED
    assert len(calls) == 1
    assert auth.check(basic(USER, "wrong"), "127.0.0.2") is Auth.DENIED
    time.sleep(0.01)  # one check in flight per client
    assert auth.check(basic("mallory", PASSWORD), "127.0.0.2") is Auth.DENIED  # unknown user: decoy hash
    assert len(calls) == 3
    assert auth.check(basic("mallory", PASSWORD), "127.0.0.2") is Auth.DENIED
    assert len(calls) == 3
    auth.close()


def test_basic_auth_refuses_over_long_password() -> None:
    assert BasicAuth({USER: HASH}).check(basic(USER, "x" * 100)) is Auth.DENIED


def test_rate_limiter_token_bucket() -> None:
    now = [0.0]
    limiter = RateLimiter(rate_per_s=2.0, burst=3, clock=lambda: now[0])
    assert [limiter.allow("a") for _ in range(4)] == [True, True, True, False]
    assert limiter.allow("b")  # buckets are per key
    now[0] += 0.5  # one token back
    assert limiter.allow("a")
    assert not limiter.allow("a")


def test_rate_limiter_forgets_least_recent_clients() -> None:
    limiter = RateLimiter(rate_per_s=0.001, burst=1, max_keys=2, clock=lambda: 0.0)
    assert limiter.allow("a") and limiter.allow("b") and limiter.allow("c")
    assert not limiter.allow("c")
    assert limiter.allow("a")  # "a" was dropped when "c" came, so it starts with a full bucket


@pytest.mark.parametrize(("header", "taken"), [
    (None, False), ("", False), ("gzip", True), ("GZIP", True), ("x-gzip", True), ("br, gzip;q=0.1", True),
    ("gzip;q=0", False), ("gzip ; q=0.0", False), ("gzip;q=0, *", False), ("*", True), ("*;q=0", False),
    ("identity", False), ("gzip;q=abc", False), ("deflate, br", False),
])
def test_accept_encoding_weights_are_honoured(header: str | None, taken: bool) -> None:
    from agent.web.protocol import accepts_gzip

    assert accepts_gzip(header) is taken
