"""Online HCCL-hang triage end to end: four demo agents, a real Prometheus with the shipped rules,
two real Alertmanagers, webhooks here.

``npuwatch demo fleet hccl-hang --culprit node-3 --npu 1`` writes one coordinated hang over the
four demo nodes (2 NPUs each, one communicator of 8 ranks): node-3's NPU 1 loses its RoCE link and
goes silent, the seven other ranks log EI0002 blocks naming its device IP and rank. Checked:

- HCCLCulpritSuspected reaches the webhook for node-3 NPU 1, and for nothing else, within two
  scrape + evaluation cycles (plus dispatch slack) of the scans that read the logs;
- through Alertmanager with alerts/alertmanager.example.yml, the incident is one notification to
  its receiver that holds the culprit and the victims' HCCLTimeout alerts;
- the dashboard's "HCCL incidents and culprits" queries answer with the incident and the culprit;
- ``npuwatch triage --prometheus URL --json`` names the same culprit (and its cause, the link).

What differs from production (CI time): every ``for:`` becomes ``for: 1s``; the Alertmanager
example's HCCL route waits 4 s (``group_wait``) and its receivers are the test's webhook; scrape and evaluation
every second; agents collect from one driver thread here (logs every 1 s; npu-smi table and the
hccn_tool link/ip sources every 2 s; the other sources off) instead of four schedulers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.daemon.assemble import AgentBundle
from agent.web.server import make_server
from dashboards.queries import iter_panel_queries, substitute
from tests.support.agent_harness import demo_bundle
from tests.support.hccl_fleet import (
    CHIPS,
    CULPRIT,
    CULPRIT_NPU,
    CULPRIT_RANK,
    NODES,
    Driver,
    node_config,
    run_fleet_fault,
    triage_json,
)
from tests.support.paths import REPO
from tests.support.prom_harness import (
    AMProcess,
    PromProcess,
    WebhookReceiver,
    shortened_rules,
    start_alertmanager,
    start_alertmanager_with,
    start_prometheus,
)

pytestmark = pytest.mark.slow

RULE_FILES = sorted((REPO / "alerts").glob("*.rules.yml"))
ROUTING_EXAMPLE = REPO / "alerts" / "alertmanager.example.yml"
INTERCONNECT = REPO / "dashboards" / "json" / "npu-interconnect-hccl.json"
INCIDENT_PANEL = "HCCL incidents and culprits"

SCRAPE_S = 1.0
EVAL_S = 1.0
RULE_FOR = "1s"
ROUTING_GROUP_WAIT = "4s"
# Alertmanager dispatch, the webhook POST, one more evaluation for `for: 1s`, and two CPU cores
# shared with the fake tools.
SLACK_S = 5.0

def start_routing_alertmanager(tmp_path: Path, webhook_url: str) -> AMProcess:
    """Alertmanager with the shipped routing example: receivers point at the webhook, group_wait shortened."""
    config = yaml.safe_load(ROUTING_EXAMPLE.read_text(encoding="utf-8"))
    for receiver in config["receivers"]:
        receiver["webhook_configs"] = [{"url": f"{webhook_url}?receiver={receiver['name']}", "send_resolved": True}]
    [hccl] = [route for route in config["route"]["routes"] if "HCCLCulpritSuspected" in str(route["matchers"])]
    hccl["group_wait"] = ROUTING_GROUP_WAIT
    workdir = tmp_path / "alertmanager-routing"
    workdir.mkdir(parents=True)
    config_path = workdir / "alertmanager.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return start_alertmanager_with(config_path, workdir, "alertmanager-routing")


def add_alertmanager(prom: PromProcess, am: AMProcess) -> None:
    """Make Prometheus send to a second Alertmanager too (config rewrite + /-/reload)."""
    config = yaml.safe_load(prom.config_path.read_text(encoding="utf-8"))
    config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"].append(f"127.0.0.1:{am.port}")
    prom.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    request = urllib.request.Request(prom.url + "/-/reload", method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
    deadline = time.monotonic() + 15
    while len(prom.api("alertmanagers")["activeAlertmanagers"]) < 2:
        assert time.monotonic() < deadline, "Prometheus did not pick up the second Alertmanager"
        time.sleep(0.2)


@dataclass
class Online:
    bundles: dict[str, AgentBundle]
    prom: PromProcess
    hook: WebhookReceiver
    routed: WebhookReceiver
    driver: Driver
    dirs: list[Path]
    notes: dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def online(tmp_path: Path) -> Iterator[Online]:
    stops: list[Callable[[], None]] = []
    try:
        bundles: dict[str, AgentBundle] = {}
        targets: dict[str, dict[str, str]] = {}
        for name in NODES:
            bundle = demo_bundle(tmp_path / name, node_config(name), chips=CHIPS)
            bundles[name] = bundle
            stops.append(bundle.agent.stop)
            server = make_server("127.0.0.1", 0, bundle.agent.cache, bundle.agent.health)
            server.start()
            stops.append(server.stop)
            targets[f"127.0.0.1:{server.port}"] = {}
        hook, routed = WebhookReceiver().start(), WebhookReceiver().start()
        stops += [hook.stop, routed.stop]
        am = start_alertmanager(tmp_path, hook.url)
        stops.append(am.stop)
        am_routing = start_routing_alertmanager(tmp_path, routed.url)
        stops.append(am_routing.stop)
        rules, changes = shortened_rules(RULE_FILES, tmp_path / "rules", RULE_FOR)
        assert ("triage.rules.yml", "HCCLCulpritSuspected", "1m", RULE_FOR) in {
            (c.file, c.alert, c.old_for, c.new_for) for c in changes}
        prom = start_prometheus(tmp_path, list(targets), rules, scrape_interval=f"{SCRAPE_S:g}s",
                                evaluation_interval=f"{EVAL_S:g}s", alertmanager_url=am.url, enable_lifecycle=True)
        stops.append(prom.stop)
        add_alertmanager(prom, am_routing)
        driver = Driver({name: bundle.agent for name, bundle in bundles.items()})
        driver.start()
        stops.append(driver.stop)
        dirs = [bundle.demo.directory for bundle in bundles.values() if bundle.demo is not None]
        yield Online(bundles, prom, hook, routed, driver, dirs)
    finally:
        for stop in reversed(stops):
            stop()


def culprit_alerts(alerts: list[dict[str, str]]) -> list[tuple[str, str]]:
    return sorted((a.get("node", ""), a.get("npu", "")) for a in alerts if a.get("alertname") == "HCCLCulpritSuspected")


def test_the_culprit_is_named_online_within_two_cycles(online: Online) -> None:
    prom = online.prom
    # every agent scraped, the triage rules evaluating, and nobody suspected before the hang
    prom.wait_for('count(up{job="npuwatch"} == 1) == 4', timeout=30)
    prom.wait_for('count(npu_roce_ip_info{job="npuwatch"}) == 8', timeout=30)
    assert prom.query("hccl:culprit:info") == []

    summary = run_fleet_fault(online.dirs)
    written = time.time()
    assert summary["culprit"]["rank"] == CULPRIT_RANK
    scanned = online.driver.first_pass_after(written)

    alert = online.hook.wait_for("HCCLCulpritSuspected", timeout=30, node=CULPRIT, npu=str(CULPRIT_NPU))
    assert alert is not None, f"no HCCLCulpritSuspected; Prometheus alerts: {prom.alerts()}"
    latency = alert.received_at - scanned
    budget = 2 * (SCRAPE_S + EVAL_S) + SLACK_S
    assert latency <= budget, f"HCCLCulpritSuspected {latency:.1f}s after the logs were scanned (budget {budget}s)"
    assert alert.labels["comm"] == summary["comm"]
    assert alert.labels["severity"] == "critical"
    description = alert.annotations["description"]
    assert f"NPU {CULPRIT_NPU} of {CULPRIT}" in description
    assert f"peers' logs blame its rank {CULPRIT_RANK} (lost)" in description

    # a few more cycles: the link-down and device-IP evidence arrive, and still nothing else is suspected
    prom.wait_for('count(hccl:culprit_evidence:info) >= 3', timeout=20)
    time.sleep(2 * (SCRAPE_S + EVAL_S))
    suspected = culprit_alerts([a.labels for a in online.hook.alerts()])
    assert set(suspected) == {(CULPRIT, str(CULPRIT_NPU))}, suspected
    assert culprit_alerts([a["labels"] for a in prom.alerts()]) == [(CULPRIT, str(CULPRIT_NPU))]

    # the routing example: one notification for the incident, the culprit with its victims
    deadline = time.monotonic() + 30
    grouped: dict[str, Any] | None = None
    while grouped is None and time.monotonic() < deadline:
        for _, payload in list(online.routed.payloads):
            names = {a["labels"]["alertname"] for a in payload.get("alerts", [])}
            if "HCCLCulpritSuspected" in names:
                grouped = payload
                break
        time.sleep(0.2)
    assert grouped is not None, "the routing example sent no notification with the culprit"
    assert grouped["receiver"] == "npu-pager"
    assert grouped["groupLabels"] == {"job": "npuwatch"}
    firing = [a["labels"] for a in grouped["alerts"] if a["status"] == "firing"]
    assert culprit_alerts(firing) == [(CULPRIT, str(CULPRIT_NPU))]
    victims = {a["node"] for a in firing if a["alertname"] == "HCCLTimeout"}
    assert victims >= {"node-1", "node-2", "node-4"}, firing
    first_incident = [p for _, p in online.routed.payloads
                      if any(a["labels"]["alertname"] in ("HCCLTimeout", "HCCLCulpritSuspected")
                             for a in p.get("alerts", []))]
    assert first_incident[0] is grouped, "an HCCL notification went out before the culprit was known"

    # the dashboard panel answers with the incident and the culprit
    dashboard = json.loads(INTERCONNECT.read_text(encoding="utf-8"))
    queries = [expr for title, expr in iter_panel_queries(dashboard) if title == INCIDENT_PANEL]
    assert len(queries) == 5
    answers = [prom.query(substitute(expr, {"node": ".*", "npu": ".*"})) for expr in queries]
    assert all(answers), [queries[i] for i, answer in enumerate(answers) if not answer]
    ranks, reporting, silent = (float(answers[i][0]["value"][1]) for i in range(3))
    assert (ranks, reporting, silent) == (8.0, 7.0, 1.0)
    culprit_rows = [(row["metric"].get("node"), row["metric"].get("npu")) for row in answers[4]]
    assert culprit_rows == [(CULPRIT, str(CULPRIT_NPU))]

    # npuwatch triage --prometheus runs the offline engine on the same series and agrees
    report, code = triage_online(prom.url)
    assert code == 2, report["verdict"]
    assert len(report["incidents"]) == 1, report["incidents"]
    incident = report["incidents"][0]
    assert incident["comm"] == summary["comm"]
    assert incident["rank_size"] == CHIPS * len(NODES)
    assert incident["reporting_ranks"] == [0, 1, 2, 3, 4, 6, 7]
    assert incident["silent_ranks"] == [CULPRIT_RANK]
    assert "EI0002" in incident["codes"]
    best = incident["culprits"][0]
    assert (best["node"], best["npu"], best["rank"], best["cause"]) == (CULPRIT, CULPRIT_NPU, CULPRIT_RANK,
                                                                        "link_down")
    assert all(c["score"] < best["score"] for c in incident["culprits"][1:])
    assert any("RoCE link down on node-3 NPU 1" in line for line in best["evidence"]), best["evidence"]


def triage_online(url: str) -> tuple[dict[str, Any], int]:
    return triage_json("--prometheus", url, "--since", "1h")


def test_the_online_benchmark_names_the_culprit_of_its_synthetic_fleet() -> None:
    """bench/triage_online.py --quick: backfill, a real Prometheus, the command; every row ok."""
    result = subprocess.run([sys.executable, str(REPO / "bench" / "triage_online.py"), "--quick"], cwd=REPO,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    rows = {line.split("|")[0].strip(): [cell.strip() for cell in line.split("|")]
            for line in result.stdout.splitlines() if "|" in line}
    assert rows["culprit named"][3] == "yes", result.stdout
    assert rows["npuwatch triage --prometheus (new process)"][3] == "yes", result.stdout
    assert "hccl:culprit:info at the end: [('node-004', '5')]" in result.stdout
