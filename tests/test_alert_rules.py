"""Checks on alerts/: promtool validation and unit tests, plus our own contract checks.

promtool and amtool come from the Debian/Ubuntu ``prometheus`` and ``prometheus-alertmanager``
packages (CI installs both), so a missing one is a failure, not a skip. That every part of every
rule is needed by a promtool case is tests/test_alert_coverage.py's subject.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from collectors.catalogue import CATALOGUE
from tests.prom_harness import free_port, start_alertmanager_with

REPO = Path(__file__).resolve().parents[1]
ALERTS_DIR = REPO / "alerts"
RULE_FILES = sorted(ALERTS_DIR.glob("*.rules.yml"))
TEST_FILES = sorted((ALERTS_DIR / "tests").glob("*-test.yml"))
RUNBOOK_DIR = ALERTS_DIR / "runbooks"
ALERTMANAGER_EXAMPLE = ALERTS_DIR / "alertmanager.example.yml"
README = REPO / "README.md"

# The one place the runbook link base is defined; every rule must use it.
RUNBOOK_BASE = "https://github.com/npuwatch/npuwatch/blob/main/alerts/runbooks/"

REQUIRED_ALERTS = frozenset({
    "NPUWatchDown", "NPUCollectorFailing", "NPUChipMissing", "NPUUnhealthy",
    "NPUHBMDoubleBitECC", "NPUHBMSingleBitECCRate", "NPUTemperatureHigh",
    "NPUHCCSLinkUnhealthy", "NPURoCELinkDown", "NPURoCELinkFlapping", "NPURoCENetHealthFailed",
    "NPUOpticalModuleDegraded", "HCCLTimeout", "HCCLRoCECQEError", "NPUAllReduceBandwidthLow",
    "NPUGEMMProbeSlow", "NPUGEMMProbeWrongResult", "NPUAllReduceProbeWrongResult", "NPUProbeStale",
    "NPUProbeCannotRun",
})
RUNBOOK_SECTIONS = ("## Meaning", "## Confirm", "## Act", "## Escalate")

# Series that are not npuwatch's own but that rules may use.
EXTERNAL_METRICS = frozenset({"up", "ALERTS"})

PROMQL_WORDS = frozenset({
    # operators and modifiers
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "atan2", "inf", "nan", "Inf", "NaN",
    # aggregations
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile",
    # functions
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate",
    "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear",
    "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time", "timestamp",
    "vector", "year", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
    "count_over_time", "quantile_over_time", "stddev_over_time", "stdvar_over_time",
    "last_over_time", "present_over_time",
})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^}]*\}")
_BRACKETS = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_COMMENT = re.compile(r"#[^\n]*")
_IDENTIFIER = re.compile(r"(?<![\w.:])[A-Za-z_:][A-Za-z0-9_:]*")
_TEMPLATE_QUERY = re.compile(r'printf\s+"((?:[^"\\]|\\.)*)"')


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects, without recording rules (names with ':')."""
    text = _COMMENT.sub("", expr)
    text = _STRING.sub('""', text)
    text = _BRACES.sub("", text)
    text = _BRACKETS.sub("", text)
    text = _LABEL_LIST.sub("", text)
    return {
        name for name in _IDENTIFIER.findall(text)
        if name not in PROMQL_WORDS and ":" not in name
    }


def template_queries(annotation: str) -> list[str]:
    """The PromQL inside ``printf "..." | query`` calls of an annotation template."""
    return [m.encode().decode("unicode_escape") for m in _TEMPLATE_QUERY.findall(annotation)]


def _load(path: Path) -> dict[str, Any]:
    with path.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    assert isinstance(data, dict), f"{path} is not a YAML mapping"
    return data


def _rules() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in RULE_FILES:
        for group in _load(path)["groups"]:
            for rule in group["rules"]:
                yield path, rule


def _alert_rules() -> list[tuple[Path, dict[str, Any]]]:
    return [(path, rule) for path, rule in _rules() if "alert" in rule]


def _alert_tests() -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in TEST_FILES:
        for case in _load(path)["tests"]:
            for check in case.get("alert_rule_test", []):
                yield path, check


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool not found on PATH: install it (Debian/Ubuntu: apt-get install prometheus)")
    return found


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def test_rule_and_test_files_exist() -> None:
    assert len(RULE_FILES) >= 5, RULE_FILES
    assert {p.name.removesuffix(".rules.yml") for p in RULE_FILES} <= {
        p.name.removesuffix("-test.yml") for p in TEST_FILES
    }, "every alerts/<area>.rules.yml needs alerts/tests/<area>-test.yml"


def test_promtool_check_rules(promtool: str) -> None:
    result = _run([promtool, "check", "rules", *map(str, RULE_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests(promtool: str) -> None:
    result = _run([promtool, "test", "rules", *map(str, TEST_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_required_alerts_exist() -> None:
    names = {rule["alert"] for _, rule in _alert_rules()}
    assert names >= REQUIRED_ALERTS, f"missing alerts: {sorted(REQUIRED_ALERTS - names)}"


def _rule_id(path: Path, rule: dict[str, Any]) -> str:
    return f"{path.stem.removesuffix('.rules')}-{rule['alert']}-{rule.get('labels', {}).get('severity')}"


@pytest.mark.parametrize(("path", "rule"), [
    pytest.param(path, rule, id=_rule_id(path, rule)) for path, rule in _alert_rules()
])
def test_alert_has_severity_annotations_and_runbook(path: Path, rule: dict[str, Any]) -> None:
    name = rule["alert"]
    assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", name), f"{name} is not CamelCase"
    assert rule.get("labels", {}).get("severity") in {"warning", "critical"}, name
    annotations = rule.get("annotations", {})
    for key in ("summary", "description", "runbook_url"):
        assert annotations.get(key, "").strip(), f"{path.name}: {name} has no {key}"
    assert annotations["runbook_url"] == f"{RUNBOOK_BASE}{name}.md", annotations["runbook_url"]
    runbook = RUNBOOK_DIR / f"{name}.md"
    assert runbook.is_file(), f"{runbook} is missing"
    text = runbook.read_text(encoding="utf-8")
    assert text.startswith(f"# {name}\n"), f"{runbook} must start with '# {name}'"
    missing = [s for s in RUNBOOK_SECTIONS if s not in text]
    assert not missing, f"{runbook} lacks sections {missing}"


def test_no_orphan_runbooks() -> None:
    names = {rule["alert"] for _, rule in _alert_rules()}
    orphans = {p.stem for p in RUNBOOK_DIR.glob("*.md")} - names
    assert not orphans, f"runbooks without an alert: {sorted(orphans)}"


def test_metric_name_parser() -> None:
    expr = (
        'sum by (node, npu) (rate(foo_total{a="b", c=~"x|y"}[5m])) > 1e9\n'
        "  # bar_in_comment\n"
        "  and on (job) group_left (model) npu:recorded:ratio * 0.8 offset 5m\n"
        '  or absent(up{job="npuwatch"}) or time() - baz_seconds > 3 * 3600'
    )
    assert metric_names(expr) == {"foo_total", "up", "baz_seconds"}
    query = 'x {{ printf "npu_health_state{npu=%q} == 1" $labels.npu | query }}'
    assert template_queries(query) == ["npu_health_state{npu=%q} == 1"]


def test_every_metric_in_rules_is_in_the_catalogue() -> None:
    unknown: dict[str, set[str]] = {}
    for path, rule in _rules():
        name = rule.get("alert") or rule["record"]
        used = metric_names(rule["expr"])
        for text in rule.get("annotations", {}).values():
            for query in template_queries(text):
                used |= metric_names(query)
        bad = used - set(CATALOGUE) - EXTERNAL_METRICS
        if bad:
            unknown[f"{path.name}:{name}"] = bad
    assert not unknown, f"metric names not in collectors/catalogue.py: {unknown}"


def test_every_alert_has_a_firing_and_a_silent_test_case() -> None:
    names = {rule["alert"] for _, rule in _alert_rules()}
    fired: set[str] = set()
    silent: set[str] = set()
    for path, check in _alert_tests():
        alerts = check.get("exp_alerts") or []
        (fired if alerts else silent).add(check["alertname"])
        for alert in alerts:
            runbook = alert.get("exp_annotations", {}).get("runbook_url")
            assert runbook == f"{RUNBOOK_BASE}{check['alertname']}.md", (
                f"{path.name}: a firing case of {check['alertname']} must check its runbook_url"
            )
            assert alert.get("exp_labels", {}).get("severity"), f"{path.name}: check severity too"
    assert names <= fired, f"alerts never fired by a test: {sorted(names - fired)}"
    assert names <= silent, f"alerts with no silent test case: {sorted(names - silent)}"


def _rule_variant(rule: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = rule.get("labels", {})
    return rule["alert"], tuple(sorted((k, str(v)) for k, v in labels.items()))


def test_every_alert_rule_has_its_own_firing_case() -> None:
    """Per rule, not only per alert name: each variant (its static labels, e.g. severity or
    reason) fires in some case whose expected labels include all of them."""
    fired: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for _path, check in _alert_tests():
        for alert in check.get("exp_alerts") or []:
            fired.add((check["alertname"], tuple(sorted((k, str(v)) for k, v in alert["exp_labels"].items()))))
    missing = []
    for _path, rule in _alert_rules():
        name, labels = _rule_variant(rule)
        if not any(n == name and set(labels) <= set(got) for n, got in fired):
            missing.append(f"{name}{dict(labels)}")
    assert not missing, f"alert rules never fired by a test case: {missing}"


# ----------------------------------------------------------------------------- stable annotations

_VALUE = re.compile(r"\$value\b|\.Value\b|\$\.Value\b")
_QUERY_PIPE = re.compile(r"\|\s*query\b(?P<rest>[^}]*)\}\}")


@pytest.mark.parametrize(("path", "rule"), [
    pytest.param(path, rule, id=_rule_id(path, rule)) for path, rule in _alert_rules()
])
def test_annotations_are_stable_for_the_life_of_an_alert(path: Path, rule: dict[str, Any]) -> None:
    """No annotation prints the alert's value (it changes at every evaluation for counts, rates,
    temperatures and ages) and every template query is sorted, so an annotation changes only
    when the fault itself does, and promtool's expectations are deterministic."""
    for key, text in rule.get("annotations", {}).items():
        assert not _VALUE.search(text), f"{path.name} {rule['alert']}: {key} prints the alert value"
        for match in _QUERY_PIPE.finditer(text):
            assert re.match(r"\s*\|\s*sortByLabel\s+\"\w+\"", match.group("rest")), (
                f"{path.name} {rule['alert']}: {key} uses a query result unsorted: "
                f"pipe it through sortByLabel: {match.group(0)}"
            )
        assert text.count("query") == len(_QUERY_PIPE.findall(text)), (
            f"{path.name} {rule['alert']}: {key}: write template queries as `... | query | sortByLabel \"l\"`"
        )


def test_template_lists_come_out_in_the_same_order_every_time(promtool: str, tmp_path: Path) -> None:
    """The cases of alerts whose annotations list query results (error codes, collectors,
    states), run many times: query order is not stable, so an unsorted list fails some runs."""
    listing = {rule["alert"] for _, rule in _alert_rules()
               if any("range" in text and "query" in text for text in rule.get("annotations", {}).values())}
    assert {"NPUUnhealthy", "NPUCollectorFailing"} <= listing, listing
    files = []
    for path in TEST_FILES:
        document = _load(path)
        cases = [case for case in document["tests"]
                 if any(check["alertname"] in listing for check in case.get("alert_rule_test", []))]
        if not cases:
            continue
        document["tests"] = cases
        document["rule_files"] = [str((path.parent / rules).resolve()) for rules in document["rule_files"]]
        target = tmp_path / path.name
        target.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
        files.append(target)
    runs = 10
    result = _run([promtool, "test", "rules", *map(str, files * runs)])
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
    assert result.stdout.count("SUCCESS") == runs * len(files), result.stdout[-2000:]


# ----------------------------------------------------------------------------- scrape gaps

def _duration_s(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+)([smh])", text)
    assert "".join(n + u for n, u in parts) == text, text
    return sum(int(n) * units[u] for n, u in parts)


def test_node_alerts_keep_firing_through_a_scrape_gap_until_npuwatchdown_takes_over() -> None:
    """A killed or restarting agent makes its series stale; its node's alerts must not resolve
    (and page again on return) before NPUWatchDown fires and inhibits them."""
    down = next(rule for _, rule in _alert_rules()
                if rule["alert"] == "NPUWatchDown" and rule["labels"]["severity"] == "warning")
    handover_s = _duration_s(down["for"]) + 60  # + the first failed scrape and one evaluation
    short = [
        rule["alert"] for _, rule in _alert_rules()
        if rule["alert"] != "NPUWatchDown" and rule["labels"].get("node") != "all"
        and _duration_s(rule.get("keep_firing_for", "0s")) < handover_s
    ]
    assert not short, f"keep_firing_for shorter than {handover_s}s: {short}"


# ----------------------------------------------------------------------------- Alertmanager

@pytest.fixture(scope="module")
def amtool() -> str:
    found = shutil.which("amtool")
    if found is None:
        pytest.fail("amtool not found on PATH: install it (Debian/Ubuntu: apt-get install prometheus-alertmanager)")
    return found


def test_alertmanager_example_is_valid(amtool: str) -> None:
    result = _run([amtool, "check-config", str(ALERTMANAGER_EXAMPLE)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


@pytest.mark.parametrize(("labels", "receiver"), [
    ({"alertname": "HCCLTimeout", "severity": "critical", "node": "n1"}, "npu-pager"),
    ({"alertname": "NPUCollectorFailing", "severity": "warning", "node": "n1"}, "npu-team"),
])
def test_alertmanager_example_routes_critical_alerts_to_the_pager(
    amtool: str, labels: dict[str, str], receiver: str
) -> None:
    result = _run([amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER_EXAMPLE}",
                   *(f"{k}={v}" for k, v in labels.items())])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver, result.stdout


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


def test_readme_scrape_config_is_valid(promtool: str, tmp_path: Path) -> None:
    config = _readme_scrape_config()
    config.pop("rule_files")  # a path on the Prometheus host
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = _run([promtool, "check", "config", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr


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
