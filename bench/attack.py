"""Hostile clients against a running demo agent, while a legitimate scraper keeps scraping.

    python bench/attack.py [--quick] [--seconds S]

Two demo agents run as ``python -m agent run --demo`` subprocesses on 127.0.0.1, both behind
basic auth (bcrypt cost 10): one on plain HTTP, one on TLS. For each attack in turn, a legitimate
scraper at 127.0.0.1 scrapes ``/metrics`` every 0.5 s on a new connection (the harder case:
no kept-alive connection to hide behind) while the attack runs from another loopback address:

- slowloris: 64 connections trickling a request head one line every half second;
- idle connections: 64 connections that send nothing, reopened as soon as they are closed;
- wrong-password flood: 32 parallel clients, every request a new wrong password (a bcrypt check);
- slow readers: 40 addresses, each pipelining 40 authorised scrapes through a 4 KiB receive window
  and never reading, so every answer it gets stays busy (reopened as soon as it is closed);
- TLS handshake flood (TLS agent): 8 clients doing full handshakes back to back, plus idle TLS
  connections;
- garbage and oversize tool output: the demo's ``npu_smi_garbage`` fault, then an npu-smi that
  prints 64 MiB;
- a symlink-loop log tree: two symlinks to ``.`` under the demo's log directory, with a ``**``
  glob configured for the log scanner.

It prints: attack | legit scrapes answered | p50 | p99 | agent RSS max. Targets: 100 % answered,
p99 < 100 ms, RSS < 60 MB. Every loop is bounded (stop event and an iteration cap); only
127.0.0.x addresses are used; the agents are stopped at the end whatever happens.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# First on the path even when PYTHONPATH names it: bench/agent.py must not shadow the agent package.
sys.path[:] = [str(ROOT), *(entry for entry in sys.path if entry not in (str(ROOT), str(ROOT / "bench")))]

from bench._util import Table, free_port, percentile, rss_bytes, stop_process, wait_until  # noqa: E402

MB = 1 << 20
USER, PASSWORD = "prometheus", "scrape-secret"
SCRAPER = "127.0.0.1"
SCRAPE_EVERY_S = 0.5
RSS_ABORT_BYTES = 600 * MB  # an attack that drives the agent past this is stopped early
MAX_LOOPS = 100_000  # per attacker thread: every loop also stops on the attack's stop event


# --- the agents
def _make_certificate(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "server.crt", directory / "server.key"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost", "-days", "1",
                        "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True, timeout=60)
        return cert, key
    import datetime
    import ipaddress

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(private.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                  critical=False)
                   .sign(private, hashes.SHA256()))
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    return cert, key


@dataclass
class Agent:
    """One ``python -m agent run --demo`` subprocess and how to scrape it."""

    directory: Path
    tls: bool
    port: int = 0
    proc: Any = None
    cert: Path | None = None

    @property
    def demo_dir(self) -> Path:
        return self.directory / "demo"

    def start(self, hashed: str) -> None:
        import yaml

        self.directory.mkdir(parents=True)
        web = f"basic_auth_users:\n  {USER}: {hashed}\n"
        if self.tls:
            self.cert, key = _make_certificate(self.directory)
            web = f"tls_server_config:\n  cert_file: {self.cert}\n  key_file: {key}\n" + web
        (self.directory / "web.yml").write_text(web)
        config = {
            "web": {"listen_address": "127.0.0.1", "config_file": str(self.directory / "web.yml")},
            "probes": {"enabled": False},
            "collectors": {"npu_smi": {"timeout": "2s"},
                           "hccl_logs": {"interval": "1s", "globs": [str(self.demo_dir / "log" / "**" / "*.log")]}},
        }
        (self.directory / "config.yaml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        log = (self.directory / "agent.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agent", "run", "--config", str(self.directory / "config.yaml"), "--demo",
             "--demo-dir", str(self.demo_dir), "--demo-chips", "8", "--web.port", str(self.port)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        if not wait_until(lambda: scrape(self)[0] == 200, timeout_s=60, step_s=0.2):
            raise RuntimeError(f"agent did not come up; see {self.directory / 'agent.log'}")

    def context(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=str(self.cert)) if self.tls else None

    def rss(self) -> int:
        try:
            return rss_bytes(self.proc.pid)
        except OSError:
            return 0

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)


def connect(agent: Agent, source: str, timeout: float = 5.0) -> http.client.HTTPConnection:
    if agent.tls:
        return http.client.HTTPSConnection("127.0.0.1", agent.port, timeout=timeout, context=agent.context(),
                                           source_address=(source, 0))
    return http.client.HTTPConnection("127.0.0.1", agent.port, timeout=timeout, source_address=(source, 0))


def authorization(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def scrape(agent: Agent, source: str = SCRAPER, password: str = PASSWORD, timeout: float = 5.0) -> tuple[int, float]:
    """(status, seconds) of one /metrics scrape on a new connection; status 0 when it failed."""
    started = time.perf_counter()
    conn = connect(agent, source, timeout)
    try:
        conn.request("GET", "/metrics", headers={"Authorization": authorization(USER, password)})
        response = conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - started
    except (OSError, http.client.HTTPException):
        return 0, time.perf_counter() - started
    finally:
        conn.close()


def raw_connection(agent: Agent, source: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(2)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", agent.port))
    return sock


# --- attacks: each runs until ``stop`` is set, from its own loopback address
Attack = Callable[[Agent, threading.Event], None]


def _open(agent: Agent, source: str, count: int) -> list[socket.socket]:
    opened = []
    for _ in range(count):
        with contextlib.suppress(OSError):
            opened.append(raw_connection(agent, source))
    return opened


def _reopen_closed(agent: Agent, socks: list[socket.socket], source: str) -> None:
    for index, sock in enumerate(socks):
        try:
            sock.setblocking(False)
            closed = sock.recv(4096) == b""
        except BlockingIOError:
            closed = False
        except OSError:
            closed = True
        if closed:
            sock.close()
            with contextlib.suppress(OSError):
                socks[index] = raw_connection(agent, source)


def slowloris(agent: Agent, stop: threading.Event) -> None:
    source = "127.0.0.2"
    socks = _open(agent, source, 64)
    try:
        for loop in range(MAX_LOOPS):
            if stop.wait(0.5):
                return
            _reopen_closed(agent, socks, source)
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.send(b"GET /metrics HTTP/1.1\r\n" if loop == 0 else b"X-Slow: %d\r\n" % loop)
    finally:
        for sock in socks:
            sock.close()


def idle_connections(agent: Agent, stop: threading.Event) -> None:
    source = "127.0.0.3"
    socks = _open(agent, source, 64)
    try:
        for _ in range(MAX_LOOPS):
            if stop.wait(0.2):
                return
            _reopen_closed(agent, socks, source)
    finally:
        for sock in socks:
            sock.close()


def idle_tls_connections(agent: Agent, stop: threading.Event) -> None:
    source, context = "127.0.0.6", agent.context()
    assert context is not None
    held: list[ssl.SSLSocket] = []
    try:
        for _ in range(MAX_LOOPS):
            held = [sock for sock in held if sock.fileno() >= 0]
            while len(held) < 64 and not stop.is_set():
                try:
                    held.append(context.wrap_socket(raw_connection(agent, source), server_hostname="127.0.0.1"))
                except OSError:
                    break
            if stop.wait(0.5):
                return
            for sock in held:  # the server closed some: notice and replace them
                with contextlib.suppress(OSError):
                    sock.setblocking(False)
                    if sock.recv(1) == b"":
                        sock.close()
    finally:
        for sock in held:
            sock.close()


def _threads(count: int, body: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=body, args=(n,), daemon=True) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def wrong_password_flood(agent: Agent, stop: threading.Event) -> None:
    def guesser(n: int) -> None:
        for guess in range(MAX_LOOPS):
            if stop.is_set():
                return
            scrape(agent, "127.0.0.4", password=f"guess-{n}-{guess}", timeout=10)

    _threads(32, guesser)


def tls_handshake_flood(agent: Agent, stop: threading.Event) -> None:
    context = agent.context()
    assert context is not None

    def handshaker(_n: int) -> None:
        for _ in range(MAX_LOOPS):
            if stop.is_set():
                return
            try:
                with raw_connection(agent, "127.0.0.5") as sock, \
                        context.wrap_socket(sock, server_hostname="127.0.0.1"):
                    pass
            except OSError:
                time.sleep(0.01)

    _threads(8, handshaker)


_CLOSE, _CLOSE_WAIT = 7, 8  # TCP states (linux/tcp_states.h): the agent has closed its side


def slow_readers(agent: Agent, stop: threading.Event) -> None:
    """40 addresses, each pipelining 40 authorised scrapes through a 4 KiB receive window, never reading."""
    request = (f"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: {authorization(USER, PASSWORD)}\r\n\r\n"
               .encode() * 40)
    sources = [f"127.0.0.{100 + n}" for n in range(40)]

    def reader(source: str) -> socket.socket | None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(2)
            sock.bind((source, 0))
            sock.connect(("127.0.0.1", agent.port))
            sock.sendall(request)
        except OSError:
            sock.close()
            return None
        return sock

    held: dict[str, socket.socket | None] = {source: reader(source) for source in sources}
    try:
        for _ in range(MAX_LOOPS):
            if stop.wait(0.5):
                return
            for source, sock in held.items():  # a connection the agent closed is opened again at once
                closed = sock is None
                if sock is not None:  # unread answers sit before the close: ask TCP for its state
                    try:
                        closed = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] in (_CLOSE, _CLOSE_WAIT)
                    except OSError:
                        closed = True
                if closed:
                    if sock is not None:
                        sock.close()
                    held[source] = reader(source)
    finally:
        for sock in held.values():
            if sock is not None:
                sock.close()


def _demo_fault(agent: Agent, verb: str, fault: str) -> None:
    subprocess.run([sys.executable, "-m", "agent", "demo", "--demo-dir", str(agent.demo_dir), verb, fault],
                   cwd=ROOT, check=True, capture_output=True, timeout=30)


def garbage_tool_output(agent: Agent, stop: threading.Event) -> None:
    _demo_fault(agent, "set", "npu_smi_garbage")
    try:
        stop.wait()
    finally:
        _demo_fault(agent, "clear", "npu_smi_garbage")


def oversize_tool_output(agent: Agent, stop: threading.Event) -> None:
    """npu-smi replaced for the attack by a script printing 64 MiB of text on every call."""
    tool = agent.demo_dir / "bin" / "npu-smi"
    saved = tool.with_name("npu-smi.saved")
    shutil.copy2(tool, saved)
    try:
        tool.write_text("#!/bin/sh\nyes 'NPU 0 | 910B | OK | garbage line padding padding padding' "
                        "| head -c 67108864\n")
        stop.wait()
    finally:
        os.replace(saved, tool)


def symlink_loop(agent: Agent, stop: threading.Event) -> None:
    log_dir = agent.demo_dir / "log"
    log_dir.mkdir(parents=True, exist_ok=True)
    (log_dir / "job.log").write_text("plain job log line\n")
    loops = [log_dir / "loop-a", log_dir / "loop-b"]
    for link in loops:
        link.symlink_to(".")
    try:
        stop.wait()
    finally:
        for link in loops:
            link.unlink()


def baseline(_agent: Agent, stop: threading.Event) -> None:
    stop.wait()


ATTACKS: tuple[tuple[str, bool, Attack], ...] = (
    ("none (baseline)", False, baseline),
    ("slowloris, 64 connections", False, slowloris),
    ("idle connections, 64", False, idle_connections),
    ("wrong-password flood, 32 clients", False, wrong_password_flood),
    ("slow readers, 40 addresses x 40 pipelined scrapes", False, slow_readers),
    ("none (baseline), TLS", True, baseline),
    ("TLS handshake flood, 8 clients", True, tls_handshake_flood),
    ("idle TLS connections, 64", True, idle_tls_connections),
    ("garbage tool output (npu_smi_garbage)", False, garbage_tool_output),
    ("oversize tool output (64 MiB per call)", False, oversize_tool_output),
    ("symlink-loop log tree, recursive glob", False, symlink_loop),
)


# --- measuring
@dataclass
class Outcome:
    statuses: list[int] = field(default_factory=list)
    answered_latencies: list[float] = field(default_factory=list)
    rss_max: int = 0
    aborted: bool = False


def run_attack(agent: Agent, attack: Attack, seconds: float) -> Outcome:
    outcome = Outcome()
    stop, done = threading.Event(), threading.Event()
    attacker = threading.Thread(target=attack, args=(agent, stop), daemon=True)
    attacker.start()

    def sample_rss() -> None:
        while not done.wait(0.2):
            outcome.rss_max = max(outcome.rss_max, agent.rss())
            if outcome.rss_max > RSS_ABORT_BYTES:
                outcome.aborted = True
                stop.set()

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    try:
        time.sleep(min(1.0, seconds / 4))  # let the attack build up
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not outcome.aborted:
            started = time.monotonic()
            status, latency = scrape(agent)
            outcome.statuses.append(status)
            if status == 200:
                outcome.answered_latencies.append(latency)
            time.sleep(max(0.0, SCRAPE_EVERY_S - (time.monotonic() - started)))
    finally:
        stop.set()
        attacker.join(30)
        done.set()
        sampler.join(5)
    outcome.rss_max = max(outcome.rss_max, agent.rss())
    return outcome


@contextlib.contextmanager
def agents(directory: Path) -> Iterator[dict[bool, Agent]]:
    import bcrypt

    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=10)).decode()
    running = {tls: Agent(directory / ("tls" if tls else "plain"), tls) for tls in (False, True)}
    try:
        for agent in running.values():
            agent.start(hashed)
        yield running
    finally:
        for agent in running.values():
            agent.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2 s per attack (a smoke run)")
    parser.add_argument("--seconds", type=float, default=None, help="legit scraping per attack (default 10)")
    parser.add_argument("--only", default="", help="run only the attacks whose name contains this text")
    args = parser.parse_args(argv)
    seconds = args.seconds or (2.0 if args.quick else 10.0)
    table = Table(("attack", "legit answered", "p50", "p99", "agent RSS max"))
    with tempfile.TemporaryDirectory(prefix="npuwatch-attack-") as tmp, agents(Path(tmp)) as running:
        for name, tls, attack in ATTACKS:
            if args.only not in name:
                continue
            outcome = run_attack(running[tls], attack, seconds)
            answered = sum(status == 200 for status in outcome.statuses)
            share = 100.0 * answered / max(1, len(outcome.statuses))
            latencies = outcome.answered_latencies
            p50 = f"{percentile(latencies, 50) * 1e3:.1f} ms" if latencies else "-"
            p99 = f"{percentile(latencies, 99) * 1e3:.1f} ms" if latencies else "-"
            rss = f"{outcome.rss_max / MB:.1f} MB" + (" (stopped early)" if outcome.aborted else "")
            table.add(name, f"{share:.0f} % ({answered}/{len(outcome.statuses)})", p50, p99, rss)
            print(f"done: {name}", file=sys.stderr, flush=True)
    table.notes.append(f"legit scraper: 127.0.0.1, basic auth (bcrypt cost 10, cached), a new connection every "
                       f"{SCRAPE_EVERY_S} s for {seconds:g} s per attack; targets: 100 % answered, p99 < 100 ms, "
                       f"RSS < 60 MB")
    print(table.render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
