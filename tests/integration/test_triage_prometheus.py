"""``npuwatch triage --prometheus``: the HTTP client (POST, timeouts, basic auth, TLS, errors) and
the series -> evidence mapping (agent.triage.prometheus), against a fake Prometheus API here.

The real Prometheus run is tests/e2e/test_triage_online.py."""

from __future__ import annotations

import base64
import io
import json
import ssl
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent.cli import main as npuwatch
from agent.triage.engine import analyze
from agent.triage.evidence import Window
from agent.triage.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusSource,
    closed_window,
    read_evidence,
    read_fleet,
)
from tests.support.web_harness import make_certs

T_END = 1_760_003_600.0
T_START = T_END - 3600
T_HANG = T_END - 600
COMM = "29.1.0.10%enp_60000_0_17"

Answer = Callable[[str, dict[str, str]], Any]


class FakePrometheus:
    """Answers /api/v1/query and /api/v1/query_range from a function of (endpoint, form); records requests."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[tuple[str, str, dict[str, str], dict[str, str]]] = []
        self.answer = answer
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                endpoint = self.path.rsplit("/", 1)[-1]
                fake.requests.append((self.command, self.path, form, dict(self.headers)))
                status, body = fake.answer(endpoint, form)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


@contextmanager
def serving(answer: Answer, tls: ssl.SSLContext | None = None) -> Iterator[FakePrometheus]:
    fake = FakePrometheus(answer, tls)
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()


def ok(result: list[dict[str, Any]], kind: str = "vector") -> tuple[int, dict[str, Any]]:
    return 200, {"status": "success", "data": {"resultType": kind, "result": result}}


def vector(*rows: tuple[dict[str, str], float]) -> tuple[int, dict[str, Any]]:
    return ok([{"metric": labels, "value": [T_END, str(value)]} for labels, value in rows])


def node(name: str, **labels: str) -> dict[str, str]:
    return {"job": "npuwatch", "instance": f"10.0.0.{name[-1]}:9101", "node": name, **labels}


# A fleet of two nodes: node-a's ranks 0 and 1 timed out blaming rank 2 on node-b NPU 1, whose link is down.
INSTANT: dict[str, list[tuple[dict[str, str], float]]] = {
    "npuwatch_build_info": [(node("node-a"), 1), (node("node-b"), 1)],
    "up": [({"job": "npuwatch", "instance": "10.0.0.a:9101"}, 1),
           ({"job": "npuwatch", "instance": "10.0.0.b:9101"}, 1)],
    "npu_hccl_comm_ranks": [(node("node-a", comm=COMM), 4), (node("node-b", comm=COMM), 4)],
    "npu_hccl_rank_last_seen_timestamp_seconds": [
        (node("node-a", comm=COMM, rank="0", npu="0"), T_START - 100),
        (node("node-a", comm=COMM, rank="1", npu="1"), T_START - 100),
        (node("node-b", comm=COMM, rank="2", npu="1"), T_START - 100),
        (node("node-b", comm=COMM, rank="3", npu="0"), T_START - 100)],
    "npu_hccl_rank_timeout_timestamp_seconds": [
        (node("node-a", comm=COMM, rank="0", npu="0"), T_HANG),
        (node("node-a", comm=COMM, rank="1", npu="1"), T_HANG + 0.1),
        (node("node-b", comm=COMM, rank="3", npu="0"), T_HANG + 0.2),
        (node("node-a", comm="old-comm", rank="0", npu="0"), T_START - 10)],  # before the window
    "npu_hccl_peer_blamed_timestamp_seconds": [
        (node("node-a", comm=COMM, how="lost", rank="2", address="29.2.1.11"), T_HANG - 60),
        (node("node-b", comm=COMM, how="lost", rank="2", address="29.2.1.11"), T_HANG - 60)],
    "npu_roce_ip_info": [(node("node-b", npu="1", chip="0", address="29.2.1.11"), 1),
                         (node("node-a", npu="0", chip="0", address="29.1.0.10"), 1)],
    "npu_hccl_last_error_timestamp_seconds": [(node("node-a", category="exec_timeout"), T_HANG),
                                              (node("node-b", category="exec_timeout"), T_HANG)],
    "npu_roce_link_last_change_timestamp_seconds": [(node("node-b", npu="1", chip="0"), T_HANG - 70)],
}
COUNTED = [(node("node-a", code="EI0002", category="exec_timeout"), 1),
           (node("node-a", code="task_exec_timeout", category="exec_timeout"), 2),
           (node("node-b", code="task_exec_timeout", category="exec_timeout"), 1)]


def fleet_answer(endpoint: str, form: dict[str, str]) -> tuple[int, Any]:
    query = form["query"]
    if endpoint == "query_range":
        if query.startswith("npu_fault_since_timestamp_seconds{"):  # the agents' findings: node-b's link down
            step = float(form["step"])
            points = [[float(form["end"]) - k * step, str(T_HANG - 70)] for k in range(3)][::-1]
            finding = node("node-b", npu="1", chip="0", kind="link_down", status="fail")
            return ok([{"metric": {"__name__": "npu_fault_since_timestamp_seconds", **finding},
                        "values": points}], "matrix")
        return ok([], "matrix")
    if query.startswith("increase("):
        return vector(*COUNTED)
    for metric, rows in INSTANT.items():
        if f"({metric}{{" in query or query.startswith(f"{metric}{{"):
            return vector(*rows)
    return vector()


def client(url: str, **options: Any) -> PrometheusClient:
    return PrometheusClient(PrometheusSource(url, **options))


WINDOW = Window(T_START, T_END)
UP = 'up{job="npuwatch"}'


def test_the_fleet_series_become_the_evidence_records() -> None:
    with serving(fleet_answer) as fake:
        evidence = read_evidence(client(f"http://127.0.0.1:{fake.port}"), WINDOW)
    assert sorted(evidence.nodes) == ["node-a", "node-b"]  # up's instances named by the agents' node label
    assert sorted((r.node, r.comm, r.rank, r.npu, r.rank_size) for r in evidence.ranks) == [
        ("node-a", COMM, 0, 0, 4), ("node-a", COMM, 1, 1, 4), ("node-b", COMM, 2, 1, 4), ("node-b", COMM, 3, 0, 4)]
    # node-a counted EI0002 and task_exec_timeout: the Ascend code names its failures
    assert sorted((f.node, f.rank, f.at, f.code, f.category) for f in evidence.failures) == [
        ("node-a", 0, T_HANG, "EI0002", "exec_timeout"), ("node-a", 1, T_HANG + 0.1, "EI0002", "exec_timeout"),
        ("node-b", 3, T_HANG + 0.2, "task_exec_timeout", "exec_timeout")]
    assert sorted((b.node, b.how, b.comm, b.rank, b.ip) for b in evidence.blames) == [
        ("node-a", "lost", COMM, 2, "29.2.1.11"), ("node-b", "lost", COMM, 2, "29.2.1.11")]
    assert sorted((a.ip, a.node, a.npu) for a in evidence.addresses) == [("29.1.0.10", "node-a", 0),
                                                                        ("29.2.1.11", "node-b", 1)]
    [fault] = evidence.faults
    assert (fault.node, fault.npu, fault.kind, fault.until) == ("node-b", 1, "link_down", None)
    assert fault.at == T_HANG - 70  # when its agent found it, older than the first step that showed it
    assert evidence.problems == []


def test_the_engine_names_the_culprit_from_them() -> None:
    with serving(fleet_answer) as fake:
        evidence = read_evidence(client(f"http://127.0.0.1:{fake.port}"), WINDOW)
    report = analyze(evidence, WINDOW)
    assert report.exit_code == 2
    [incident] = report.incidents
    assert (incident.comm, incident.reporting_ranks, incident.silent_ranks) == (COMM, (0, 1, 3), (2,))
    best = incident.culprits[0]
    assert (best.node, best.npu, best.rank, best.cause) == ("node-b", 1, 2, "link_down")


def test_a_failure_that_stops_a_rank_is_a_fault_of_its_node() -> None:
    def answer(endpoint: str, form: dict[str, str]) -> tuple[int, Any]:
        if "npu_hccl_last_error_timestamp_seconds" in form["query"]:
            return vector((node("node-b", category="device_oom"), T_HANG - 30),
                          (node("node-a", category="exec_timeout"), T_HANG),
                          (node("node-a", category="aicore"), T_START - 60))  # before the window
        return fleet_answer(endpoint, form)

    with serving(answer) as fake:
        evidence = read_evidence(client(f"http://127.0.0.1:{fake.port}"), WINDOW)
    logged = [(f.node, f.npu, f.kind, f.at) for f in evidence.faults if f.kind != "link_down"]
    assert logged == [("node-b", None, "device_oom", T_HANG - 30)]


def test_queries_are_posted_with_the_window_and_the_job() -> None:
    with serving(fleet_answer) as fake:
        read_evidence(client(f"http://127.0.0.1:{fake.port}/", job="npu-fleet"), WINDOW)
    assert fake.requests
    for method, path, form, _ in fake.requests:
        assert method == "POST" and path in ("/api/v1/query", "/api/v1/query_range")
        # the fleet rules' alerts: of the job, or of no job (a host straggler's, aggregated over the node)
        assert 'job="npu-fleet"' in form["query"] or r'job=~"npu\\-fleet|"' in form["query"], form["query"]
        if path.endswith("/query"):
            assert float(form["time"]) == T_END
            assert "[3600s]" in form["query"]
        else:
            step = float(form["step"])
            assert step == 5.0  # an hour in 720 steps
            assert float(form["end"]) == T_END and T_START <= float(form["start"]) < T_START + step


def test_basic_auth_is_sent_when_configured() -> None:
    with serving(fleet_answer) as fake:
        read_evidence(client(f"http://127.0.0.1:{fake.port}", username="triage", password="s3cret"), WINDOW)
    expected = "Basic " + base64.b64encode(b"triage:s3cret").decode()
    assert {headers.get("Authorization") for _, _, _, headers in fake.requests} == {expected}


def test_tls_is_verified_against_the_given_ca(tmp_path: Path) -> None:
    certs = make_certs(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    with serving(fleet_answer, tls=context) as fake:
        url = f"https://127.0.0.1:{fake.port}"
        with pytest.raises(PrometheusError, match="CERTIFICATE_VERIFY_FAILED"):
            client(url).query(UP, T_END)
        assert client(url, ca_file=str(certs.ca)).query(UP, T_END)
        assert client(url, insecure=True).query(UP, T_END)


@pytest.mark.parametrize(("answer", "message"), [
    (lambda e, f: (400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"}),
     "HTTP 400 parse error at char 3"),
    (lambda e, f: (401, b"Unauthorized"), "HTTP 401"),
    (lambda e, f: (200, b"<html>not prometheus</html>"), "not JSON"),
    (lambda e, f: (200, {"status": "error", "error": "query timed out"}), "query timed out"),
    (lambda e, f: (200, {"status": "success", "data": {"resultType": "scalar", "result": 1}}), "no result list"),
])
def test_bad_answers_are_prometheus_errors(answer: Answer, message: str) -> None:
    with serving(answer) as fake, pytest.raises(PrometheusError, match=message):
        client(f"http://127.0.0.1:{fake.port}").query("up", T_END)


def test_an_unreachable_prometheus_is_an_error_naming_it() -> None:
    with serving(fleet_answer) as fake:
        port = fake.port
    with pytest.raises(PrometheusError, match=f"cannot reach http://127.0.0.1:{port}/api/v1/query"):
        client(f"http://127.0.0.1:{port}", timeout_s=2).query("up", T_END)


def test_a_slow_prometheus_times_out() -> None:
    release = threading.Event()

    def slow(endpoint: str, form: dict[str, str]) -> tuple[int, Any]:
        release.wait(5)
        return vector()

    with serving(slow) as fake:
        try:
            with pytest.raises(PrometheusError, match="timed out"):
                client(f"http://127.0.0.1:{fake.port}", timeout_s=0.3).query("up", T_END)
        finally:
            release.set()


@pytest.mark.parametrize(("options", "message"), [
    ({"url": "ftp://prom:21"}, "http:// or https://"),
    ({"url": "http://prom:9090", "timeout_s": 0}, "positive"),
    ({"url": "http://prom:9090", "password": "x"}, "needs a user name"),
])
def test_bad_sources_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PrometheusSource(**options)


def test_the_window_defaults_to_the_last_hour() -> None:
    assert closed_window(Window(), now=T_END) == Window(T_END - 3600, T_END)
    assert closed_window(Window(T_START, None), now=T_END + 5) == Window(T_START, T_END + 5)
    with pytest.raises(ValueError, match="empty"):
        closed_window(Window(T_END, T_START), now=T_END)


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = npuwatch(["triage", *argv])
        except SystemExit as exc:  # argparse refuses a bad value itself (exit 2, naming the option)
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_the_command_needs_paths_or_prometheus() -> None:
    code, out, err = run()
    assert code == 2 and out == ""
    assert "PATH..." in err and "--prometheus URL" in err


def test_the_command_refuses_bad_options_with_exit_2(tmp_path: Path) -> None:
    assert run("--prometheus", "prom:9090")[0] == 2
    code, _, err = run("--prometheus", "http://prom:9090", "--prometheus-timeout", "soon")
    assert code == 2 and "--prometheus-timeout" in err
    code, _, err = run("--prometheus", "http://prom:9090", "--prometheus-password-file", str(tmp_path / "none"))
    assert code == 2 and "--prometheus-password-file" in err


def test_the_command_reports_an_unreachable_prometheus_as_unreadable() -> None:
    with serving(fleet_answer) as fake:
        port = fake.port
    code, out, _ = run("--prometheus", f"http://127.0.0.1:{port}", "--prometheus-timeout", "2s", "--json")
    assert code == 3
    report = json.loads(out)
    assert f"cannot reach http://127.0.0.1:{port}" in report["verdict"]["text"]


def test_the_command_reads_the_password_file_and_prints_the_report(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n", encoding="utf-8")
    with serving(fleet_answer) as fake:
        code, out, _ = run("--prometheus", f"http://127.0.0.1:{fake.port}", "--prometheus-user", "triage",
                           "--prometheus-password-file", str(secret), "--since", str(T_START), "--until", str(T_END))
    assert code == 2
    assert "node-b NPU 1 (rank 2)" in out and "link_down" in out
    expected = "Basic " + base64.b64encode(b"triage:s3cret").decode()
    assert {headers.get("Authorization") for _, _, _, headers in fake.requests} == {expected}


# ----------------------------------------------------------------------------- several servers (shards)


def shard_answer(name: str) -> Answer:
    """``fleet_answer`` holding only node ``name``'s series: one shard of a sharded layout."""
    def mine(labels: dict[str, str]) -> bool:
        return labels.get("node") == name or labels.get("instance") == f"10.0.0.{name[-1]}:9101"

    def answer(endpoint: str, form: dict[str, str]) -> tuple[int, Any]:
        status, body = fleet_answer(endpoint, form)
        body["data"]["result"] = [row for row in body["data"]["result"] if mine(row["metric"])]
        return status, body

    return answer


def test_the_shards_are_read_and_joined_as_one_fleet(tmp_path: Path) -> None:
    """node-a (the victims) on one shard, node-b (the culprit) on another: neither names it alone;
    both, given as two --prometheus, do, with the credentials sent to each."""
    secret = tmp_path / "password"
    secret.write_text("s3cret\n", encoding="utf-8")
    window = ("--since", str(T_START), "--until", str(T_END), "--json")
    auth = ("--prometheus-user", "triage", "--prometheus-password-file", str(secret))
    with serving(shard_answer("node-a")) as shard_a, serving(shard_answer("node-b")) as shard_b:
        url_a, url_b = f"http://127.0.0.1:{shard_a.port}", f"http://127.0.0.1:{shard_b.port}"
        alone, out_alone, _ = run("--prometheus", url_a, *auth, *window)
        code, out, _ = run("--prometheus", url_a, "--prometheus", url_b, *auth, *window)
    # the victims alone blame an address that no node read holds: no node, no link-down cause
    [lone] = json.loads(out_alone)["incidents"]
    assert alone == 2 and lone["culprits"][0]["node"] != "node-b", out_alone
    assert lone["culprits"][0]["cause"] != "link_down", out_alone
    assert code == 2, out
    [incident] = json.loads(out)["incidents"]
    best = incident["culprits"][0]
    assert (best["node"], best["npu"], best["rank"], best["cause"]) == ("node-b", 1, 2, "link_down")
    assert incident["reporting_ranks"] == [0, 1, 3] and incident["silent_ranks"] == [2]
    expected = "Basic " + base64.b64encode(b"triage:s3cret").decode()
    for fake in (shard_a, shard_b):
        assert fake.requests
        assert {headers.get("Authorization") for _, _, _, headers in fake.requests} == {expected}


def test_a_node_two_servers_hold_counts_once() -> None:
    """Two servers that both scrape the whole fleet (an HA pair): the same records as one."""
    with serving(fleet_answer) as one, serving(fleet_answer) as two:
        single = read_fleet([PrometheusSource(f"http://127.0.0.1:{one.port}")], WINDOW)
        double = read_fleet([PrometheusSource(f"http://127.0.0.1:{one.port}"),
                             PrometheusSource(f"http://127.0.0.1:{two.port}")], WINDOW)
    for name in ("ranks", "failures", "blames", "addresses", "faults"):
        assert getattr(double, name) == getattr(single, name), name
    assert sorted(double.nodes) == ["node-a", "node-b"]
    assert double.problems == []


def test_an_unreachable_shard_is_a_problem_and_the_others_still_count() -> None:
    with serving(fleet_answer) as gone:
        dead = f"http://127.0.0.1:{gone.port}"
    with serving(fleet_answer) as fake:
        evidence = read_fleet([PrometheusSource(dead), PrometheusSource(f"http://127.0.0.1:{fake.port}")], WINDOW)
    assert sorted(evidence.nodes) == ["node-a", "node-b"]
    assert any(f"cannot reach {dead}" in problem for problem in evidence.problems), evidence.problems
    report = analyze(evidence, WINDOW)
    assert report.incidents and report.incidents[0].culprits[0].node == "node-b"
