"""Helpers for the web tests: certificates made at test time, servers on 127.0.0.1:0, clients
that can speak from any loopback address (the whole 127.0.0.0/8 is loopback on Linux, so
127.0.0.2 is a second client address as far as the server can tell).

Certificates come from ``cryptography`` if importable, else the ``openssl`` CLI; bcrypt hashes use
cost 4 unless a test is about cost, so the suites stay fast.
"""

from __future__ import annotations

import base64
import http.client
import ipaddress
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from agent.core.exporter import Exposition
from agent.web.config import WebConfig, load_web_config
from agent.web.security import ServerLimits
from agent.web.server import AgentHTTPServer, make_server

BODY = b"# HELP npu_chips Chips seen.\n# TYPE npu_chips gauge\nnpu_chips 8.0\n"
USER, PASSWORD = "prometheus", "s3cret-scrape"
HASH = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()


class FakeCache:
    """Serves BODY; ``hold`` makes every render wait until released (a request stays busy)."""

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.hold.set()

    def render(self, openmetrics: bool = False, gzipped: bool = False) -> Exposition:
        self.hold.wait(10)
        return Exposition(BODY, "text/plain; version=0.0.4; charset=utf-8", False)


# --- certificates
@dataclass(frozen=True)
class Certs:
    dir: Path
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path  # signed by ca, SAN DNS:scraper.example
    client_key: Path
    rogue_cert: Path  # self-signed, unknown to the server
    rogue_key: Path


def _certs_with_cryptography(out: Path) -> Certs:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.now(UTC)

    def write(name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
        cert_path, key_path = out / f"{name}.crt", out / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        return cert_path, key_path

    def issue(cn: str, sans: list[x509.GeneralName], signer: tuple[Any, x509.Name] | None,
              ca: bool = False) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        signing_key, issuer = signer or (key, subject)
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - timedelta(minutes=5)).not_valid_after(now + timedelta(days=1))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(signing_key, hashes.SHA256()), key

    ca_cert, ca_key = issue("npuwatch test CA", [], None, ca=True)
    ca_path, _ = write("ca", ca_cert, ca_key)
    signer = (ca_key, ca_cert.subject)
    loopback = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    server = issue("localhost", [x509.DNSName("localhost"), loopback], signer)
    client = issue("scraper", [x509.DNSName("scraper.example")], signer)
    rogue = issue("rogue", [x509.DNSName("scraper.example")], None)
    return Certs(out, ca_path, *write("server", *server), *write("client", *client), *write("rogue", *rogue))


def _certs_with_openssl(out: Path) -> Certs:
    def run(*argv: str) -> None:
        subprocess.run(["openssl", *argv], check=True, capture_output=True, timeout=30, cwd=out)

    ec_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec_key, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=npuwatch test CA",
        "-days", "1")
    run("req", "-x509", *ec_key, "-keyout", "rogue.key", "-out", "rogue.crt", "-subj", "/CN=rogue",
        "-days", "1", "-addext", "subjectAltName=DNS:scraper.example")
    for name, san in (("server", "DNS:localhost,IP:127.0.0.1"), ("client", "DNS:scraper.example")):
        (out / f"{name}.ext").write_text(f"subjectAltName={san}\nbasicConstraints=critical,CA:FALSE\n")
        run("req", *ec_key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "1", "-extfile", f"{name}.ext")
    return Certs(out, out / "ca.crt", out / "server.crt", out / "server.key", out / "client.crt",
                 out / "client.key", out / "rogue.crt", out / "rogue.key")


def make_certs(out: Path) -> Certs:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        return _certs_with_openssl(out)
    return _certs_with_cryptography(out)


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def write_web_config(directory: Path, text: str, name: str = "web.yml") -> Path:
    """Written atomically (temp file, rename), as a site's config management would."""
    path = directory / name
    temporary = directory / f".{name}.tmp"
    temporary.write_text(text)
    temporary.replace(path)
    return path


def tls_config_text(certs: Certs, extra: str = "", users: bool = True) -> str:
    text = f"tls_server_config:\n  cert_file: {certs.server_cert}\n  key_file: {certs.server_key}\n{extra}"
    if users:
        text += f"basic_auth_users:\n  {USER}: {HASH}\n"
    return text


def tls_config(certs: Certs, extra: str = "", users: bool = True) -> WebConfig:
    return load_web_config(write_web_config(certs.dir, tls_config_text(certs, extra, users)))


StartServer = Callable[..., AgentHTTPServer]


@pytest.fixture
def serve() -> Iterator[StartServer]:
    servers: list[AgentHTTPServer] = []

    def start(web_config: WebConfig | None = None, limits: ServerLimits | None = None, *,
              cache: Any = None, **kwargs: Any) -> AgentHTTPServer:
        server = make_server("127.0.0.1", 0, cache or FakeCache(), lambda: (True, "ok"),
                             web_config=web_config, limits=limits, **kwargs)
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def client_context(certs: Certs, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def connection(port: int, *, context: ssl.SSLContext | None = None, source: str = "127.0.0.1",
               timeout: float = 5.0) -> http.client.HTTPConnection:
    address = (source, 0)
    if context is None:
        return http.client.HTTPConnection("127.0.0.1", port, timeout=timeout, source_address=address)
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=timeout, context=context,
                                       source_address=address)


def get(port: int, path: str = "/metrics", *, context: ssl.SSLContext | None = None,
        headers: dict[str, str] | None = None, method: str = "GET", body: bytes | None = None,
        source: str = "127.0.0.1", timeout: float = 5.0) -> tuple[int, bytes, http.client.HTTPResponse]:
    conn = connection(port, context=context, source=source, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read(), response
    finally:
        conn.close()


def status(port: int, path: str = "/metrics", **kwargs: Any) -> int:
    """The status of one request on a new connection; 0 when the connection failed."""
    try:
        return get(port, path, **kwargs)[0]
    except (OSError, http.client.HTTPException):
        return 0


def raw_socket(port: int, source: str = "127.0.0.1", timeout: float = 5.0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def raw_exchange(port: int, data: bytes, timeout: float = 5.0, source: str = "127.0.0.1") -> bytes:
    """Send ``data`` on a plain socket and read until the server closes."""
    with raw_socket(port, source, timeout) as sock:
        sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except ConnectionResetError:
            pass
        return b"".join(chunks)


def status_of(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def closed_by_peer(sock: socket.socket, within_s: float) -> float | None:
    """Seconds until the server closed ``sock`` (reading and discarding), or None if it did not."""
    started = time.monotonic()
    sock.settimeout(0.05)
    while time.monotonic() - started < within_s:
        try:
            if sock.recv(65536) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue
        except OSError:
            return time.monotonic() - started
    return None


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
