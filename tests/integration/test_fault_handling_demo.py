"""The demo's `health` fault gives a chip a code of each paging level, the agent exports the level and the
finding each level's alert reads, keeps the history in its state directory, and `npuwatch faults clear`
releases a held chip of a running demo node."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from agent.demo.faults import ALERT_FAULTS
from agent.health.thresholds import fault_kind
from agent.health.verdict_metrics import FAULT_METRIC
from tests.support.agent_harness import demo_bundle

LEVEL_ALERTS = {"NPUFaultIsolate": "SeparateNPU", "NPUFaultResetWhenIdle": "FreeRestartNPU",
                "NPUFaultDrainAfterJob": "PreSeparateNPU", "NPUUnhealthy": "RestartBusiness"}
# The finding each alert's generated rule reads (alerts/faults.rules.yml) for the chip at that level.
LEVEL_KINDS = {"NPUFaultIsolate": "chip_fault_isolate", "NPUFaultResetWhenIdle": "chip_fault_reset",
               "NPUFaultDrainAfterJob": "chip_fault_drain", "NPUUnhealthy": "chip_warning"}


def handling(body: bytes) -> dict[str, str]:
    return {sample.labels["npu"]: sample.labels["handling"]
            for family in text_string_to_metric_families(body.decode())
            for sample in family.samples if sample.name == "npu_fault_handling"}


def findings(body: bytes) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            if sample.name == FAULT_METRIC:
                out.setdefault(sample.labels.get("npu", ""), set()).add(sample.labels["kind"])
    return out


def check_chip_health(tmp_path: Path) -> dict[str, Any]:
    """`npuwatch check --only chip_health --json` on the demo node (its state directory is the agent's)."""
    run = subprocess.run([sys.executable, "-m", "agent", "check", "--demo", "--demo-dir", str(tmp_path / "demo"),
                          "--demo-chips", "2", "--only", "chip_health", "--json"], capture_output=True, text=True,
                         timeout=120, check=False)
    report = json.loads(run.stdout)
    (check,) = [c for c in report["checks"] if c["name"] == "chip_health"]
    return check  # type: ignore[no-any-return]


def test_each_alerts_demo_trigger_puts_its_chip_at_the_level_the_alert_reads(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, chips=len(LEVEL_ALERTS) + 1)
    assert bundle.demo is not None
    for chip, alert in enumerate(sorted(LEVEL_ALERTS)):
        trigger = ALERT_FAULTS[alert]
        assert trigger.fault is not None
        bundle.demo.set_fault(trigger.fault, chip=chip, **dict(trigger.params))
    try:
        bundle.agent.collect_once()
        body = bundle.agent.cache.render().body
    finally:
        bundle.agent.stop()
    assert handling(body) == {str(chip): LEVEL_ALERTS[alert] for chip, alert in enumerate(sorted(LEVEL_ALERTS))}
    found = findings(body)
    for chip, alert in enumerate(sorted(LEVEL_ALERTS)):
        kind = LEVEL_KINDS[alert]
        assert fault_kind(kind).alert == alert and kind in found.get(str(chip), set()), (alert, found)
    assert (tmp_path / "demo" / "state" / "fault_history.json").is_file()


def test_a_repeated_code_holds_the_chip_until_faults_clear(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, chips=2)
    assert bundle.demo is not None
    agent = bundle.agent
    try:
        agent.collect_once()  # the chip list first
        for _ in range(2):  # 80E01801 becomes active twice within 24 h: ManuallySeparateNPU
            bundle.demo.set_fault("health", chip=1, state="Alarm", codes=["80E01801"])
            agent.collect_group("health")
            bundle.demo.clear_fault("health", chip=1)
            agent.collect_group("health")
        assert handling(agent.cache.render().body) == {"1": "ManuallySeparateNPU"}
        held = check_chip_health(tmp_path)  # the chip says OK now; the agent's history still holds it
        assert held["status"] == "FAIL"
        assert "the agent holds 80E01801 as ManuallySeparateNPU since" in held["evidence"]
        assert "`npuwatch faults clear --npu 1`" in held["evidence"]
        clear = subprocess.run([sys.executable, "-m", "agent", "faults", "--demo-dir", str(tmp_path / "demo"),
                                "clear", "--npu", "1"], capture_output=True, text=True, timeout=60, check=False)
        assert clear.returncode == 0, clear.stderr
        assert "80E01801" in clear.stdout
        agent.collect_group("health")
        assert handling(agent.cache.render().body) == {}
        assert check_chip_health(tmp_path)["status"] == "PASS"
    finally:
        agent.stop()
