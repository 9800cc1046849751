"""Checks on alerts/: promtool validation and unit tests, plus our own contract checks.

promtool and amtool come from the Debian/Ubuntu ``prometheus`` and ``prometheus-alertmanager``
packages (CI installs both), so a missing one is a failure, not a skip. That every part of every
rule is needed by a promtool case is tests/integration/test_alert_coverage.py's subject.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.paths import REPO
from tests.support.prom_harness import free_port, start_alertmanager_with

ALERTS_DIR = REPO / "alerts"
ALERTMANAGER_EXAMPLE = ALERTS_DIR / "alertmanager.example.yml"
README = REPO / "README.md"



# ----------------------------------------------------------------------------- stable annotations


# ----------------------------------------------------------------------------- scrape gaps


# ----------------------------------------------------------------------------- Alertmanager

@pytest.fixture(scope="module")
def amtool() -> str:
    found = shutil.which("amtool")
    if found is None:
        pytest.fail("amtool not found on PATH: install it (Debian/Ubuntu: apt-get install prometheus-alertmanager)")
    return found


def _http_json(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def _wait_ready(url: str, popen: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert popen.poll() is None, log.read_text(errors="replace")[-3000:]
        try:
            with urllib.request.urlopen(url + "/-/ready", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"{url} not ready after 30s: {log.read_text(errors='replace')[-3000:]}")


def _rfc3339(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _stop(popen: subprocess.Popen[bytes]) -> None:
    if popen.poll() is None:
        popen.terminate()
        try:
            popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout=10)


def test_alertmanager_example_inhibits_the_alerts_of_a_node_whose_agent_is_down(tmp_path: Path) -> None:
    """The example config in a real Alertmanager: NPUWatchDown mutes its node's other alerts and
    nothing else; a critical mutes the warning of the same alert and chip; groups are node x alert."""
    alertmanager = start_alertmanager_with(ALERTMANAGER_EXAMPLE, tmp_path / "alertmanager")
    url = alertmanager.url
    try:
        now = time.time()
        sent = {
            "down": {"alertname": "NPUWatchDown", "severity": "warning", "node": "n1", "instance": "n1:9611"},
            "hccl": {"alertname": "HCCLTimeout", "severity": "critical", "node": "n1", "code": "EI0002"},
            "other-node": {"alertname": "HCCLTimeout", "severity": "critical", "node": "n2", "code": "EI0002"},
            "critical": {"alertname": "NPUUnhealthy", "severity": "critical", "node": "n2", "npu": "1", "chip": "0",
                         "state": "alarm"},
            "warning": {"alertname": "NPUUnhealthy", "severity": "warning", "node": "n2", "npu": "1", "chip": "0"},
            "other-chip": {"alertname": "NPUUnhealthy", "severity": "warning", "node": "n2", "npu": "2", "chip": "0"},
            "fleet-down": {"alertname": "NPUWatchDown", "severity": "critical", "node": "all"},
            "fleet": {"alertname": "NPUGEMMFleetBelowPeak", "severity": "warning", "node": "all", "model": "910B3"},
        }
        _http_json(url + "/api/v2/alerts", [
            {"labels": labels, "annotations": {"summary": key}, "startsAt": _rfc3339(now),
             "endsAt": _rfc3339(now + 600)}
            for key, labels in sent.items()
        ])
        expected = {"hccl": "suppressed", "warning": "suppressed"}
        deadline = time.monotonic() + 15
        while True:
            state = {alert["annotations"]["summary"]: alert["status"]["state"]
                     for alert in _http_json(url + "/api/v2/alerts")}
            if state == {key: expected.get(key, "active") for key in sent} or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert state == {key: expected.get(key, "active") for key in sent}
        groups = {(group["receiver"]["name"], group["labels"].get("alertname"), group["labels"].get("node"))
                  for group in _http_json(url + "/api/v2/alerts/groups")}
        # the HCCL alerts of one Prometheus (grouped by job; none here) are one incident's group
        assert groups == {
            ("npu-pager", None, None) if labels["alertname"] == "HCCLTimeout" else
            ("npu-pager" if labels["severity"] == "critical" else "npu-team", labels["alertname"], labels["node"])
            for labels in sent.values()
        }
    finally:
        alertmanager.stop()


# ----------------------------------------------------------------------------- README scrape config

def _readme_scrape_config() -> dict[str, Any]:
    section = README.read_text(encoding="utf-8").split("## Prometheus scrape config", 1)[1]
    block = section.split("```yaml", 1)[1].split("```", 1)[0]
    config = yaml.safe_load(block)
    assert isinstance(config, dict)
    return config


class _StubAgent(BaseHTTPRequestHandler):
    """An npuwatch stand-in whose series carry the agent's own node label."""

    def do_GET(self) -> None:
        body = b'npuwatch_build_info{node="agent-side-name",version="0",python="3"} 1\n'
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        return


def test_readme_scrape_config_gives_every_series_the_targets_node(tmp_path: Path) -> None:
    """The README's scrape job in a real Prometheus: a static `node` label wins, a target without
    one gets its host, and the agent's own label does not come back as exported_node."""
    binary = shutil.which("prometheus")
    assert binary, "prometheus not found: apt-get install prometheus"
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), _StubAgent) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    labelled, bare = (f"127.0.0.1:{server.server_address[1]}" for server in servers)
    job = _readme_scrape_config()["scrape_configs"][0]
    job.update(scrape_interval="1s", scrape_timeout="1s",
               static_configs=[{"targets": [labelled], "labels": {"node": "npu-node-01"}}, {"targets": [bare]}])
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump({"scrape_configs": [job]}), encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "prometheus.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            [binary, f"--config.file={config}", f"--web.listen-address=127.0.0.1:{port}",
             f"--storage.tsdb.path={tmp_path / 'data'}"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    try:
        _wait_ready(url, popen, log)
        expected = {labelled: "npu-node-01", bare: "127.0.0.1"}
        deadline = time.monotonic() + 20
        while True:
            got = {metric: _query_labels(url, metric) for metric in ("up", "npuwatch_build_info")}
            if all(len(series) == 2 for series in got.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        for metric, series in got.items():
            assert {s["instance"]: s.get("node") for s in series} == expected, (metric, series)
            assert not any("exported_node" in s for s in series), (metric, series)
    finally:
        _stop(popen)
        for server in servers:
            server.shutdown()
            server.server_close()


def _query_labels(url: str, expr: str) -> list[dict[str, str]]:
    body = _http_json(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    return [item["metric"] for item in body["data"]["result"]]
