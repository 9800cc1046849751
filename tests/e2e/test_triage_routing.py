"""The HCCL route of alerts/alertmanager.example.yml, in a real Alertmanager: the victims'
HCCLTimeout and the culprit's HCCLCulpritSuspected of one Prometheus form one group, and the first
notification waits long enough for the culprit."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any

import yaml

from tests.support.paths import REPO
from tests.support.prom_harness import StartAlertmanager

EXAMPLE = REPO / "alerts" / "alertmanager.example.yml"
RULES = REPO / "alerts" / "triage.rules.yml"
HCCL_ALERTS = "HCCLCulpritSuspected|HCCLTimeout"


def hccl_route() -> dict[str, Any]:
    routes = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["route"]["routes"]
    [route] = [r for r in routes if any(HCCL_ALERTS in matcher for matcher in r["matchers"])]
    assert routes.index(route) == 0, "the HCCL route must come before the catch-all critical route"
    return dict(route)


def _seconds(duration: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", duration))


def test_the_first_notification_waits_for_the_culprit() -> None:
    route = hccl_route()
    rule = next(r for g in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"] for r in g["rules"]
                if r.get("alert") == "HCCLCulpritSuspected")
    # the culprit alert needs its `for:` plus a log scan (15 s), a scrape and an evaluation (30 s each
    # at most, as commonly configured) after the victims'
    assert _seconds(route["group_wait"]) > _seconds(rule["for"]) + 15 + 30 + 30
    assert route["group_by"] == ["job"]
    assert route["receiver"] == "npu-pager"


def _http_json(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=5) as response:
        raw = response.read()
    return json.loads(raw) if raw else None


def test_one_incident_is_one_group_and_other_alerts_keep_theirs(alertmanager: StartAlertmanager) -> None:
    url = alertmanager(config_path=EXAMPLE).url
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
    ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 600))
    job = {"job": "npuwatch", "severity": "critical"}
    sent = [
        {**job, "alertname": "HCCLTimeout", "node": "node-1", "code": "EI0002", "category": "exec_timeout"},
        {**job, "alertname": "HCCLTimeout", "node": "node-2", "code": "EI0002", "category": "exec_timeout"},
        {**job, "alertname": "HCCLCulpritSuspected", "node": "node-3", "npu": "1", "comm": "g"},
        {**job, "alertname": "NPURoCELinkDown", "node": "node-3", "npu": "1", "chip": "0"},
    ]
    _http_json(url + "/api/v2/alerts", [{"labels": labels, "startsAt": stamp, "endsAt": ends} for labels in sent])
    deadline = time.monotonic() + 15
    while len(_http_json(url + "/api/v2/alerts")) < len(sent):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    groups = {json.dumps(group["labels"], sort_keys=True): sorted(a["labels"]["alertname"] for a in group["alerts"])
              for group in _http_json(url + "/api/v2/alerts/groups")}
    assert groups == {
        '{"job": "npuwatch"}': ["HCCLCulpritSuspected", "HCCLTimeout", "HCCLTimeout"],
        '{"alertname": "NPURoCELinkDown", "node": "node-3"}': ["NPURoCELinkDown"],
    }
