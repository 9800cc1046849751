"""TLS, basic auth and request limits on the agent's HTTP endpoints, with real clients.

Helpers (certificates, servers, clients from any loopback address) are in ``tests/support/web_harness.py``.
"""

from __future__ import annotations

import http.client
import select
import shutil
import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import bcrypt
import pytest

from agent.web.config import build_web_config, load_web_config
from agent.web.security import ServerLimits
from tests.support.web_harness import (
    BODY,
    HASH,
    PASSWORD,
    USER,
    Certs,
    FakeCache,
    StartServer,
    _certs_with_openssl,
    basic,
    certs,
    client_context,
    get,
    make_certs,
    raw_exchange,
    serve,
    status_of,
    tls_config,
    wait_for,
    write_web_config,
)

__all__ = ["certs", "serve"]  # fixtures


# --- TLS + basic auth over real connections
def test_tls_with_basic_auth(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs))
    assert server.scheme == "https"
    context = client_context(certs)
    status, body, _ = get(server.port, context=context, headers={"Authorization": basic(USER, PASSWORD)})
    assert (status, body) == (200, BODY)
    status, body, _ = get(server.port, "/healthz", context=context,
                          headers={"Authorization": basic(USER, PASSWORD)})
    assert (status, body) == (200, b"ok\n")


@pytest.mark.parametrize("authorization", [
    None, basic(USER, "wrong"), basic("mallory", PASSWORD), basic(USER, ""), "Basic not-base64", "Bearer x",
])
@pytest.mark.parametrize("path", ["/metrics", "/readyz", "/"])
def test_tls_refuses_bad_credentials_without_leaking(serve: StartServer, certs: Certs,
                                                     authorization: str | None, path: str) -> None:
    server = serve(tls_config(certs))
    headers = {"Authorization": authorization} if authorization else {}
    status, body, response = get(server.port, path, context=client_context(certs), headers=headers)
    assert status == 401
    assert response.getheader("WWW-Authenticate", "").startswith("Basic")
    assert body == b"401 Unauthorized\n"
    everything = body + str(response.getheaders()).encode()
    for secret in (USER, HASH, PASSWORD, "mallory", "npu_chips"):
        assert secret.encode() not in everything


def test_plain_http_to_tls_port_gets_400_and_server_survives(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs))
    answer = raw_exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.0 400 Bad Request")
    assert b"npu_chips" not in answer
    assert raw_exchange(server.port, b"\x00\x01garbage") == b""  # not TLS, not HTTP: just closed
    status, body, _ = get(server.port, context=client_context(certs),
                          headers={"Authorization": basic(USER, PASSWORD)})
    assert (status, body) == (200, BODY)


def _old_tls_client(certs: Certs) -> ssl.SSLContext:
    context = client_context(certs)
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")  # let the client offer TLS 1.0/1.1 at all
    return context


def _tls_version_client(certs: Certs, version: ssl.TLSVersion) -> ssl.SSLContext:
    context = client_context(certs)
    context.minimum_version = context.maximum_version = version
    return context


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1:DeprecationWarning")
def test_old_tls_versions_are_refused_by_the_server(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs, users=False))
    with pytest.raises(ssl.SSLError) as error:
        get(server.port, context=_old_tls_client(certs))
    # The server's protocol_version alert, not a local refusal to offer TLS 1.1.
    assert "ALERT_PROTOCOL_VERSION" in str(error.value.reason)
    assert get(server.port, context=_tls_version_client(certs, ssl.TLSVersion.TLSv1_2))[0] == 200
    assert get(server.port, context=_tls_version_client(certs, ssl.TLSVersion.TLSv1_3))[0] == 200


def test_min_version_tls13_refuses_tls12(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs, "  min_version: TLS13\n", users=False))
    with pytest.raises(ssl.SSLError, match=r"(?i)protocol.version"):
        get(server.port, context=_tls_version_client(certs, ssl.TLSVersion.TLSv1_2))
    assert get(server.port, context=_tls_version_client(certs, ssl.TLSVersion.TLSv1_3))[0] == 200


def test_cipher_suites_limit_tls12(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs, "  max_version: TLS12\n  cipher_suites: "
                                     "[TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]\n", users=False))
    context = _tls_version_client(certs, ssl.TLSVersion.TLSv1_2)
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock, \
            context.wrap_socket(sock, server_hostname="127.0.0.1") as tls:
        assert tls.cipher()[0] == "ECDHE-ECDSA-AES256-GCM-SHA384"  # type: ignore[index]
    context.set_ciphers("ECDHE-ECDSA-AES128-GCM-SHA256")
    with pytest.raises(ssl.SSLError):
        get(server.port, context=context)


def test_client_certificates(serve: StartServer, certs: Certs) -> None:
    extra = f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certs.ca}\n"
    server = serve(tls_config(certs, extra, users=False))
    assert get(server.port, context=client_context(certs, certs.client_cert, certs.client_key))[0] == 200
    for context in (client_context(certs), client_context(certs, certs.rogue_cert, certs.rogue_key)):
        # TLS 1.3 reports a refused client certificate after the handshake, on the first read.
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
            get(server.port, context=context)


def test_client_allowed_sans(serve: StartServer, certs: Certs) -> None:
    base = f"  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {certs.ca}\n"
    good = serve(tls_config(certs, base + "  client_allowed_sans: [scraper.example]\n", users=False))
    bad = serve(tls_config(certs, base + "  client_allowed_sans: [other.example]\n", users=False))
    client = client_context(certs, certs.client_cert, certs.client_key)
    assert get(good.port, context=client)[0] == 200
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected)):
        get(bad.port, context=client)


def test_configured_headers_and_global_rate_limit(serve: StartServer, certs: Certs, tmp_path: Path) -> None:
    config = load_web_config(write_web_config(tmp_path, "http_server_config:\n  headers:\n"
                                                        "    X-Content-Type-Options: nosniff\n"
                                                        "rate_limit: {interval: 1h, burst: 2}\n"))
    server = serve(config)
    first = get(server.port)
    assert first[0] == 200 and first[2].getheader("X-Content-Type-Options") == "nosniff"
    assert get(server.port)[0] == 200
    status, _, response = get(server.port)
    assert status == 429 and response.getheader("X-Content-Type-Options") == "nosniff"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_curl_against_tls_and_auth(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs))
    url = f"https://127.0.0.1:{server.port}/metrics"

    def curl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["curl", "-sS", "--max-time", "5", "--cacert", str(certs.ca), "-o", "-",
                               "-w", "\n%{http_code}", *args, url],
                              capture_output=True, text=True, timeout=10)

    ok = curl("-u", f"{USER}:{PASSWORD}")
    assert ok.returncode == 0 and ok.stdout.endswith("\n200") and "npu_chips 8.0" in ok.stdout
    wrong = curl("-u", f"{USER}:nope")
    assert wrong.stdout.endswith("\n401") and USER not in wrong.stdout.rsplit("\n", 1)[0]
    assert curl().stdout.endswith("\n401")
    old = curl("-u", f"{USER}:{PASSWORD}", "--tlsv1.0", "--tls-max", "1.1",
               "--ciphers", "DEFAULT:@SECLEVEL=0")
    assert old.returncode != 0 and "protocol version" in old.stderr
    plain = subprocess.run(["curl", "-sS", "--max-time", "5", f"http://127.0.0.1:{server.port}/metrics"],
                           capture_output=True, text=True, timeout=10)
    assert "HTTP request to an HTTPS server" in plain.stdout


# --- plain HTTP path and limits
def test_plain_http_default_keeps_alive_and_never_runs_bcrypt(serve: StartServer,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    def no_bcrypt(*_: object) -> bool:
        raise AssertionError("bcrypt on a server without basic auth")

    monkeypatch.setattr(bcrypt, "checkpw", no_bcrypt)
    monkeypatch.setattr(bcrypt, "hashpw", no_bcrypt)
    server = serve()
    assert server.scheme == "http" and server.auth is None
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        for path, expected in (("/metrics", 200), ("/healthz", 200), ("/nope", 404), ("/", 200)):
            conn.request("GET", path, headers={"Authorization": basic(USER, "x")})
            response = conn.getresponse()
            response.read()
            assert response.status == expected
        conn.request("HEAD", "/metrics")
        response = conn.getresponse()
        assert response.status == 200 and response.read() == b""
        assert int(response.getheader("Content-Length", "0")) == len(BODY)
    finally:
        conn.close()


def test_pipelined_requests_on_one_connection(serve: StartServer) -> None:
    server = serve()
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    last = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    answer = raw_exchange(server.port, request * 2 + last)
    assert answer.count(b"HTTP/1.1 200 OK") == 3


def test_basic_auth_on_plain_http(serve: StartServer) -> None:
    server = serve(build_web_config({"basic_auth_users": {USER: HASH}}))
    assert get(server.port)[0] == 401
    assert get(server.port, headers={"Authorization": basic(USER, PASSWORD)})[:2] == (200, BODY)


def test_oversized_request_line_and_headers(serve: StartServer) -> None:
    server = serve()
    long_line = raw_exchange(server.port, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status_of(long_line) == 414
    big_headers = raw_exchange(
        server.port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n")
    assert status_of(big_headers) == 431
    many = b"".join(b"X-H%d: v\r\n" % i for i in range(1000))
    assert status_of(raw_exchange(server.port, b"GET / HTTP/1.1\r\n" + many + b"\r\n")) == 431
    assert b"aaaa" not in long_line and b"bbbb" not in big_headers
    assert get(server.port)[0] == 200


@pytest.mark.parametrize(("method", "body", "headers", "expected"), [
    ("POST", b"x=1", {}, 405),
    ("PUT", b"x", {}, 405),
    ("DELETE", None, {}, 405),
    ("GET", b"hello", {}, 413),
    ("GET", None, {"Transfer-Encoding": "chunked"}, 413),
])
def test_only_bodyless_get_and_head(serve: StartServer, method: str, body: bytes | None,
                                    headers: dict[str, str], expected: int) -> None:
    server = serve()
    status, response_body, response = get(server.port, method=method, body=body, headers=headers)
    assert status == expected
    assert b"npu_chips" not in response_body
    if expected == 405:
        assert response.getheader("Allow") == "GET, HEAD"
    assert get(server.port)[0] == 200


def test_per_client_rate_limit(serve: StartServer) -> None:
    server = serve(limits=ServerLimits(rate_per_s=0.5, burst=3))
    statuses = [get(server.port)[0] for _ in range(3)]
    status, _, response = get(server.port)
    assert statuses == [200, 200, 200]
    assert status == 429 and response.getheader("Retry-After") == "1"


def _busy_requests(port: int, count: int, context: ssl.SSLContext | None = None) -> list[threading.Thread]:
    """``count`` scrapes that stay in progress while the cache is held (see FakeCache.hold)."""
    threads = [threading.Thread(target=lambda: get(port, context=context, timeout=10)) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


def test_connection_cap_answers_503_quickly_when_every_connection_is_busy(serve: StartServer) -> None:
    cache = FakeCache()
    server = serve(limits=ServerLimits(max_connections=2, max_connections_per_client=8), cache=cache)
    cache.hold.clear()
    busy = _busy_requests(server.port, 2)
    try:
        assert wait_for(lambda: server.table.counts().get("127.0.0.1", {}).get("busy") == 2, timeout=5)
        started = time.monotonic()
        answer = raw_exchange(server.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(answer) == 503 and time.monotonic() - started < 1.0
        assert b"npu_chips" not in answer
    finally:
        cache.hold.set()
        for thread in busy:
            thread.join(10)
    assert get(server.port)[0] == 200


def test_slow_client_is_dropped_and_others_are_served(serve: StartServer) -> None:
    timeout = 1.0
    server = serve(limits=ServerLimits(head_timeout_s=timeout))
    slow = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
    started = time.monotonic()
    served: list[float] = []

    def other_client() -> None:
        assert get(server.port)[:2] == (200, BODY)
        served.append(time.monotonic() - started)

    thread = threading.Thread(target=other_client)
    thread.start()
    closed_after = None
    try:
        # Trickle a header byte every 0.2 s: each read is well inside the timeout, the whole head is not.
        while time.monotonic() - started < timeout + 3:
            readable, _, _ = select.select([slow], [], [], 0.2)
            if readable and slow.recv(4096) == b"":
                closed_after = time.monotonic() - started
                break
            try:
                slow.send(b"X")
            except OSError:
                closed_after = time.monotonic() - started
                break
    finally:
        slow.close()
        thread.join(5)
    assert served and served[0] < 0.5, "another client waited on the slow one"
    assert closed_after is not None, "trickling client was never dropped"
    assert timeout * 0.8 <= closed_after < timeout + 1.5


def test_tls_handshake_stall_does_not_block_others(serve: StartServer, certs: Certs) -> None:
    server = serve(tls_config(certs, users=False), limits=ServerLimits(head_timeout_s=1.0))
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as stalled:
        stalled.sendall(b"\x16\x03\x01")  # the start of a TLS record, then nothing
        started = time.monotonic()
        assert get(server.port, context=client_context(certs))[0] == 200
        assert time.monotonic() - started < 0.5
        assert stalled.recv(4096) == b""  # dropped at the handshake deadline
        assert time.monotonic() - started < 3


def test_openssl_cli_certificates_work(serve: StartServer, tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("openssl CLI not installed")
    generated = _certs_with_openssl(tmp_path)
    server = serve(tls_config(generated, users=False))
    assert get(server.port, context=client_context(generated))[0] == 200


def test_tls_connection_cap_closes_excess_when_every_connection_is_busy(serve: StartServer,
                                                                       certs: Certs) -> None:
    cache = FakeCache()
    server = serve(tls_config(certs, users=False), ServerLimits(max_connections=1), cache=cache)
    context = client_context(certs)
    cache.hold.clear()
    busy = _busy_requests(server.port, 1, context)
    try:
        assert wait_for(lambda: server.table.counts().get("127.0.0.1", {}).get("busy") == 1, timeout=5)
        started = time.monotonic()
        with pytest.raises((ssl.SSLError, ConnectionError, http.client.RemoteDisconnected, OSError)):
            get(server.port, context=context)
        assert time.monotonic() - started < 1.0
    finally:
        cache.hold.set()
        for thread in busy:
            thread.join(10)


def test_rotated_certificate_is_picked_up(serve: StartServer, tmp_path: Path) -> None:
    (tmp_path / "first").mkdir()
    (tmp_path / "second").mkdir()
    first, second = make_certs(tmp_path / "first"), make_certs(tmp_path / "second")
    live = tmp_path / "live"
    live.mkdir()
    shutil.copy(first.server_cert, live / "server.crt")
    shutil.copy(first.server_key, live / "server.key")
    config = load_web_config(write_web_config(live, "tls_server_config:\n  cert_file: server.crt\n"
                                                    "  key_file: server.key\n"))
    server = serve(config)
    assert server.tls_context is not None
    assert get(server.port, context=client_context(first))[0] == 200
    shutil.copy(second.server_cert, live / "server.crt")
    (live / "server.key").write_text("half-written")  # a rotation in progress keeps the old pair
    assert not server.poll_web_files()
    assert get(server.port, context=client_context(first))[0] == 200
    shutil.copy(second.server_key, live / "server.key")
    assert server.poll_web_files()
    assert get(server.port, context=client_context(second))[0] == 200
    with pytest.raises(ssl.SSLCertVerificationError):
        get(server.port, context=client_context(first))


@pytest.mark.parametrize(("eol", "blank"), [(b"\r\n", b"\r\n"), (b"\n", b"\n"), (b"\n", b"\r\n")])
def test_request_head_line_endings(serve: StartServer, eol: bytes, blank: bytes) -> None:
    server = serve()
    head = b"GET /healthz HTTP/1.1" + eol + b"Host: x" + eol + blank
    answer = raw_exchange(server.port, head + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert answer.count(b"HTTP/1.1 200 OK") == 2
