"""``npuwatch triage --prometheus`` against a real Prometheus that holds the fleet rules' straggler finding.

The Prometheus scrapes an exposition whose body each step sets and evaluates the shipped NPUJobStraggler alert
rule (alerts/failslow.rules.yml, its ``for:`` shortened to 1 s) over the recorded condition the exposition serves,
as the fleet rules would record it for a job: without the condition triage says nothing of stragglers; with it,
triage names the rank, node, NPU and cause in check's verdict vocabulary and exits 1; a ``host`` finding (whose
condition keeps no scrape job) is read as well."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

from agent.cli import main as npuwatch_in_process
from agent.health.thresholds import fault_kind
from tests.support.paths import REPO
from tests.support.prom_harness import PromProcess, start_prometheus
from tests.support.static_exposition import StaticExposition

CONDITION = "npuwatch:alert_condition:NPUJobStraggler"
AGENT = 'npuwatch_build_info{node="node-b",version="test"} 1\n'
COMPUTE = (f'{CONDITION}{{kind="job_straggler",status="warn",node="node-b",npu="3",chip="0",rank="19",'
           'cause="compute",training_job="llm-7"} 1\n')
# what the host rule aggregates (max by training_job, node): the recorded condition keeps no job or instance
HOST_SOURCE = 'test_host_straggler{node="node-d",training_job="llm-7",cause="host"} 1\n'


def rules(path: Path) -> Path:
    """The shipped NPUJobStraggler rules (one a cause) with a 1 s ``for:``, and the host condition recorded from its
    source."""
    shipped = yaml.safe_load((REPO / "alerts" / "failslow.rules.yml").read_text(encoding="utf-8"))
    alerts = [{**rule, "for": "1s"} for group in shipped["groups"] for rule in group["rules"]
              if rule.get("alert") == "NPUJobStraggler"]
    assert sorted(rule["labels"]["cause"] for rule in alerts) == ["compute", "host", "link"]
    host = {"record": CONDITION, "expr": "max without (job, instance) (test_host_straggler)",
            "labels": {"kind": "job_straggler", "status": "warn", "cause": "host"}}
    path.write_text(yaml.safe_dump({"groups": [{"name": "failslow", "interval": "1s",
                                                "rules": [host, *alerts]}]}), encoding="utf-8")
    return path


@pytest.fixture()
def fleet(tmp_path: Path) -> Iterator[tuple[StaticExposition, PromProcess]]:
    exposition = StaticExposition(AGENT.encode())
    prometheus = start_prometheus(tmp_path, [exposition.target], [rules(tmp_path / "failslow.rules.yml")])
    try:
        prometheus.wait_for('npuwatch_build_info{job="npuwatch"}')
        yield exposition, prometheus
    finally:
        prometheus.stop()
        exposition.close()


def triage(prometheus: PromProcess, since: float, *options: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = npuwatch_in_process(["triage", *options, "--prometheus", prometheus.url, "--since", f"{since:.3f}"])
    assert out.getvalue(), err.getvalue()
    return code, out.getvalue()


def test_triage_names_the_straggler_the_fleet_rules_judged_and_nothing_without_it(
        fleet: tuple[StaticExposition, PromProcess]) -> None:
    exposition, prometheus = fleet
    since = time.time() - 30
    code, out = triage(prometheus, since, "--json")
    report = json.loads(out)
    assert (code, report["exit_code"], report["fleet_view"], report["findings"]) == (0, 0, True, []), report
    code, text = triage(prometheus, since)
    assert code == 0 and "straggler" not in text.lower(), text

    exposition.body = (AGENT + COMPUTE).encode()
    prometheus.wait_for('ALERTS{alertname="NPUJobStraggler", alertstate="firing", kind="job_straggler"}')
    code, out = triage(prometheus, since, "--json")
    report = json.loads(out)
    lead = report["verdict"]
    assert (code, report["exit_code"]) == (1, 1), report
    assert (lead["status"], lead["cause"], lead["node"], lead["npu"], lead["rank"], lead["training_job"]) == (
        "warn", "job_straggler", "node-b", 3, 19, "llm-7"), lead
    compute = fault_kind("job_straggler").rule_cause("compute")
    assert compute is not None
    assert lead["action"] == compute.hint and compute.label in lead["text"], lead
    assert str(lead["runbook"]).endswith("/NPUJobStraggler.md")
    [finding] = report["findings"]
    assert (finding["node"], finding["npu"], finding["rank"], finding["training_job"], finding["cause"],
            finding["status"]) == ("node-b", 3, 19, "llm-7", "compute", "warn"), finding
    code, text = triage(prometheus, since)
    flat = " ".join(text.split())
    assert code == 1 and "node-b NPU 3, rank 19 of job llm-7: compute:" in flat, text
    assert "verdict: WARN rank, port or host slowing its training job on node-b NPU 3" in flat, text

    exposition.body = (AGENT + COMPUTE + HOST_SOURCE).encode()
    prometheus.wait_for('ALERTS{alertname="NPUJobStraggler", alertstate="firing", cause="host", job=""}')
    code, out = triage(prometheus, since, "--json")
    report = json.loads(out)
    assert code == 1
    assert sorted((f["node"], f["npu"], f["rank"], f["cause"]) for f in report["findings"]) == [
        ("node-b", 3, 19, "compute"), ("node-d", None, None, "host")], report["findings"]
