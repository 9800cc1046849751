"""An agent or a Prometheus that cannot be reached is named in words (``connection refused (nothing listens
there)``), never as a Python repr such as ``[Errno 111] Connection refused``: ``check``'s agent check and
``triage --prometheus``, as ``agent.core.http_client.connection_problem`` words it for every command."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agent.check.local_agent import read_agent
from agent.cli import main as npuwatch
from agent.core.config import build_config
from agent.demo.node import DemoNode
from agent.triage.prometheus import PrometheusClient, PrometheusError, PrometheusSource
from tests.support.check_harness import CHIPS, by_name, check_config, run_check
from tests.support.ports import free_port

REFUSED = "connection refused (nothing listens there)"
RAW = ("Errno", "urlopen error", "ConnectionRefusedError")


def in_words(text: str) -> bool:
    return not any(raw in text for raw in RAW)


class _Failing(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_error(503, "Service Unavailable")

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@contextmanager
def failing_server() -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), _Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_no_agent_on_its_port_is_said_in_words() -> None:
    port = free_port()
    reading = read_agent(build_config({"web": {"listen_address": "127.0.0.1", "port": port}}), timeout_s=2)
    assert reading.error == f"no agent answers on http://127.0.0.1:{port}/metrics: {REFUSED}"


def test_an_agent_answering_an_http_error_is_said_in_words() -> None:
    with failing_server() as port:
        reading = read_agent(build_config({"web": {"listen_address": "127.0.0.1", "port": port}}), timeout_s=2)
    assert reading.error == f"http://127.0.0.1:{port}/metrics answered HTTP 503 Service Unavailable"


def test_check_names_the_absent_agent_in_words(tmp_path: Path) -> None:
    demo = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    config = check_config()
    _, report = run_check(demo.directory, config, only=("agent",))
    agent = by_name(report)["agent"]
    assert agent["status"] == "UNKNOWN"
    assert agent["evidence"] == f"no agent answers on http://127.0.0.1:{config.web.port}/metrics: {REFUSED}"
    _, text = run_check(demo.directory, config, only=("agent",), as_json=False)
    assert REFUSED in text and in_words(text), text


def test_an_unreachable_prometheus_is_said_in_words() -> None:
    port = free_port()
    client = PrometheusClient(PrometheusSource(url=f"http://127.0.0.1:{port}", timeout_s=2))
    try:
        client.query("up", 1_700_000_000.0)
    except PrometheusError as exc:
        assert str(exc) == f"cannot reach http://127.0.0.1:{port}/api/v1/query: {REFUSED}"
    else:
        raise AssertionError("a Prometheus on a closed port was read")


def test_triage_names_an_unreachable_prometheus_in_words() -> None:
    port = free_port()
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = npuwatch(["triage", "--prometheus", f"http://127.0.0.1:{port}", "--prometheus-timeout", "2s",
                         "--json"])
    assert code == 3
    verdict = json.loads(out.getvalue())["verdict"]["text"]
    assert REFUSED in verdict and in_words(verdict), verdict
