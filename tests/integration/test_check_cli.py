"""`npuwatch check` and `npuwatch check-baseline` as commands: the stable --json document (a golden
file), the exit codes of both styles, NPD's one line, selection errors, and baselines on disk.

Regenerate the golden file after a deliberate change of the document with
``python -m tests.support.check_golden`` and review the diff (never done by a test run).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from agent.demo.node import DemoNode
from tests.support.check_golden import GOLDEN, REPO, golden_run, npuwatch, write_config


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.yaml")


def test_the_json_document_is_stable(tmp_path: Path) -> None:
    code, stderr, document = golden_run(tmp_path)
    assert code == 2, stderr
    assert document == json.loads(GOLDEN.read_text(encoding="utf-8"))


def test_the_golden_document_has_the_documented_shape() -> None:
    document = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert list(document) == ["format", "level", "verdict", "exit_code", "exit_codes", "message", "node", "model",
                              "chips", "started_at", "duration_s", "budget_s", "read_s", "skipped", "baseline",
                              "checks"]
    assert document["format"] == "npuwatch-check/2"
    assert list(document["verdict"]) == ["status", "cause", "npu", "check", "text", "summary", "also", "action",
                                         "runbook"]
    for check in document["checks"]:
        assert list(check) == ["name", "status", "evidence", "hint", "npu", "duration_s", "value", "threshold",
                               "unit", "basis", "results"]
        for result in check["results"]:
            assert list(result) == ["status", "npu", "chip", "peer", "value", "threshold", "unit", "basis",
                                    "measure", "model", "kind", "evidence"]
    # the manual's description of the document names every key
    manual = (REPO / "docs" / "check.md").read_text(encoding="utf-8")
    section = manual.split("## The `--json` document", 1)[1].split("\n## ", 1)[0]
    for key in (*document, *document["verdict"], *document["checks"][0], *document["checks"][0]["results"][0]):
        assert f"`{key}`" in section, key


@pytest.mark.parametrize(("style", "codes"), [("nagios", (2, 1, 0)), ("npd", (1, 0, 0))])
def test_a_failing_check_changes_the_verdict_and_the_exit_code(tmp_path: Path, config_file: Path, style: str,
                                                               codes: tuple[int, int, int]) -> None:
    fail, warn, ok = codes
    demo = DemoNode(tmp_path / "demo").create(chips=2)
    base = ["check", "--demo", "--demo-dir", str(demo.directory), "--demo-chips", "2", "--config",
            str(config_file), "--exit-codes", style, "--only", "chip_health,roce_link"]
    assert npuwatch(*base).returncode == ok
    demo.set_fault("health", chip=1, state="Warning", codes=["80CB8002"])  # RestartRequest: a level that warns
    assert npuwatch(*base).returncode == warn
    demo.set_fault("link_down", chip=0)
    failed = npuwatch(*base)
    assert failed.returncode == fail
    if style == "npd":  # node-problem-detector shows stdout as the condition's message
        assert failed.stdout.count("\n") == 1 and len(failed.stdout.rstrip("\n")) <= 80
        assert failed.stdout.startswith("FAIL roce_link: NPU 0: hccn_tool -i 0 -link -g says DOWN")
    else:
        assert failed.stdout.splitlines()[0].startswith("FAIL roce_link")
        assert re.search(r"^roce_link\s+FAIL\s", failed.stdout, re.M)
        assert "exit 2 (nagios)" in failed.stdout


@pytest.mark.parametrize(("args", "words"), [
    (("--only", "roce_lnk"), "unknown check 'roce_lnk'"),
    (("--only", "gemm"), "gemm not in level quick"),
])
def test_a_bad_selection_is_unknown_in_either_style(tmp_path: Path, config_file: Path, args: tuple[str, ...],
                                                    words: str) -> None:
    demo = ["--demo", "--demo-dir", str(tmp_path / "demo"), "--config", str(config_file)]
    for style, code in (("nagios", 3), ("npd", 2)):
        result = npuwatch("check", *demo, *args, "--exit-codes", style)
        assert result.returncode == code and words in result.stdout
        assert len(result.stdout.splitlines()[0]) <= 80 or style == "nagios"


def test_list_names_every_check_and_condition() -> None:
    result = npuwatch("check", "--list")
    assert result.returncode == 0
    from agent.check.levels import CHECKS, CONDITIONS

    for name in [spec.name for spec in CHECKS] + list(CONDITIONS):
        assert re.search(rf"^\s+{name}\s", result.stdout, re.M), name


def test_a_baseline_built_from_reports_is_used_and_a_bad_one_refused(tmp_path: Path) -> None:
    reports = []
    for node, value in (("a", 100e9), ("b", 120e9), ("c", 140e9)):
        path = tmp_path / f"{node}.json"
        path.write_text(json.dumps({"node": node, "checks": [{"name": "hbm_bandwidth", "results": [
            {"measure": "hbm_bandwidth", "model": "910B3", "value": value}]}]}))
        reports.append(str(path))
    out = tmp_path / "baseline.json"
    result = npuwatch("check-baseline", *reports, "-o", str(out))
    assert result.returncode == 0, result.stderr
    baseline = json.loads(out.read_text())
    assert baseline["format"] == "npuwatch-check-baseline/1"
    assert baseline["models"]["910B3"]["hbm_bandwidth"] == {"median": 120e9, "nodes": 3,
                                                            "unit": "bytes_per_second"}
    assert npuwatch("check-baseline").returncode == 2  # neither reports nor --prometheus
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "npuwatch-check-baseline/1", "models": {"910B3": {"x": {"median": 0}}}}')
    refused = npuwatch("check", "--demo", "--demo-dir", str(tmp_path / "demo"), "--level", "medium",
                       "--baseline", str(broken), "--only", "gemm")
    assert refused.returncode == 3 and "models.910B3.x.median" in refused.stdout


@contextlib.contextmanager
def _prometheus_api(answer: Callable[[str], list[dict[str, Any]]]) -> Iterator[str]:
    """A stand-in Prometheus query API on 127.0.0.1: ``answer(query)`` is the vector's result; yields its URL."""

    class Api(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlparse(self.path).query)["query"][0]
            result = answer(query)
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_check_baseline_reads_prometheus(tmp_path: Path) -> None:
    """The documented queries against a stand-in Prometheus API: medians and node counts by model and measure."""
    seen: list[str] = []

    def answer(query: str) -> list[dict[str, Any]]:
        seen.append(query)
        if "npu_check_bandwidth_bytes_per_second" not in query:
            return []
        value = "12" if query.startswith("count") else "1.5e12"
        return [{"metric": {"model": "910B3", "measure": "hbm_bandwidth"}, "value": [0, value]}]

    with _prometheus_api(answer) as url:
        result = npuwatch("check-baseline", "--prometheus", url)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["models"] == {
        "910B3": {"hbm_bandwidth": {"median": 1.5e12, "nodes": 12, "unit": "bytes_per_second"}}}
    from agent.check.baseline import PROMQL

    assert sorted(seen) == sorted(query for pair in PROMQL.values() for query in pair)


def test_check_baseline_takes_the_median_over_several_shards() -> None:
    """Two --prometheus (shards): each one's per-chip values, the median over all of them taken here (a
    median of the shards' medians would be wrong), a node both shards hold counted once."""
    from agent.check.baseline import PER_NODE

    def shard(values: dict[str, float]) -> Callable[[str], list[dict[str, Any]]]:
        def answer(query: str) -> list[dict[str, Any]]:
            assert query in PER_NODE.values(), query
            if "npu_check_bandwidth_bytes_per_second" not in query:
                return []
            return [{"metric": {"job": "npuwatch", "instance": instance, "npu": "0", "model": "910B3",
                                "measure": "hbm_bandwidth"}, "value": [0, str(value)]}
                    for instance, value in values.items()]
        return answer

    # the shards' medians are 4.0 and 4.5 (their mean 4.25); the fleet's over n1..n5 (n4 on both) is 4.5
    with _prometheus_api(shard({"n1:9101": 1.0, "n5:9101": 5.0, "n4:9101": 4.0})) as one, \
            _prometheus_api(shard({"n2:9101": 4.5, "n3:9101": 6.0, "n4:9101": 4.0})) as two:
        result = npuwatch("check-baseline", "--prometheus", one, "--prometheus", two)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["models"] == {
        "910B3": {"hbm_bandwidth": {"median": 4.5, "nodes": 5, "unit": "bytes_per_second"}}}
