"""Every alert in alerts/*.rules.yml has a documented way to fire it on the demo (agent.demo.faults.ALERT_FAULTS),
and the chip faults named there raise the finding their alert reads."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from agent.demo.faults import ALERT_FAULTS, FAULTS, check_params
from agent.health.thresholds import fault_kind
from agent.health.verdict_metrics import FAULT_METRIC
from tests.support.agent_harness import demo_bundle
from tests.support.paths import REPO


def alert_names() -> set[str]:
    names = set()
    for path in sorted((REPO / "alerts").glob("*.rules.yml")):
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            names.update(rule["alert"] for rule in group["rules"] if "alert" in rule)
    return names


def test_every_alert_has_a_demo_trigger() -> None:
    names = alert_names()
    assert len(names) >= 20
    missing = sorted(names - set(ALERT_FAULTS))
    assert not missing, f"alerts without a demo trigger in agent/demo/faults.py ALERT_FAULTS: {missing}"


@pytest.mark.parametrize("alert", sorted(ALERT_FAULTS))
def test_each_trigger_is_a_real_fault_with_declared_parameters(alert: str) -> None:
    trigger = ALERT_FAULTS[alert]
    if trigger.fault is None:
        assert trigger.note, f"{alert}: a trigger that is not a fault must say what to do"
        return
    assert trigger.fault in FAULTS, alert
    check_params(trigger.fault, dict(trigger.params))  # raises on an undeclared or bad parameter


# alert -> the fault kind whose exported finding its generated rule reads (alerts/faults.rules.yml), for chip faults
# one collection shows
CHIP_CHECKS: dict[str, str] = {
    "NPUTemperatureHigh": "chip_too_hot",
    "NPUUnhealthy": "chip_warning",  # Alarm with a RestartBusiness code: the job restarts, the chip stays
    "NPUHBMDoubleBitECC": "hbm_dbe",
    "NPURoCELinkDown": "link_down",
    "NPURoCENetHealthFailed": "net_health",
    "NPUOpticalModuleDegraded": "optics_dark",
    "NPUHCCSLinkUnhealthy": "hccs_unhealthy",
}


def test_chip_faults_of_the_table_raise_the_finding_their_alert_reads(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, chips=10)
    assert bundle.demo is not None
    chips = {alert: chip for chip, alert in enumerate(sorted(CHIP_CHECKS))}
    missing_chip = len(chips)
    for alert, chip in chips.items():
        trigger = ALERT_FAULTS[alert]
        assert trigger.fault is not None
        bundle.demo.set_fault(trigger.fault, chip=chip, **dict(trigger.params))
    vanish = ALERT_FAULTS["NPUChipMissing"]
    assert vanish.fault is not None
    bundle.demo.set_fault(vanish.fault, chip=missing_chip)
    try:
        bundle.agent.collect_once()
        body = bundle.agent.cache.render().body.decode()
    finally:
        bundle.agent.stop()
    found: dict[str, set[str]] = {}
    chips_listed = []
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == FAULT_METRIC:
                found.setdefault(sample.labels["kind"], set()).add(sample.labels.get("npu", ""))
            if sample.name == "npu_chips":
                chips_listed.append(sample.value)
    for alert, kind in CHIP_CHECKS.items():
        assert fault_kind(kind).alert == alert, (alert, kind)
        assert str(chips[alert]) in found.get(kind, set()), (alert, kind, found)
        quiet = str(missing_chip + 1)  # a chip without faults does not fire it
        assert quiet not in found.get(kind, set()), (alert, kind, found)
    assert fault_kind("chip_missing").alert == "NPUChipMissing" and "" in found.get("chip_missing", set()), found
    assert chips_listed == [9.0]
