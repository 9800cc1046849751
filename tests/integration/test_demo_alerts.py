"""Every alert in alerts/*.rules.yml has a documented way to fire it on the demo (agent.demo.faults.ALERT_FAULTS),
and the chip faults named there move the metric their alert reads."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from agent.demo.faults import ALERT_FAULTS, FAULTS, check_params
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


# alert -> (metric the alert reads, its firing condition) for chip faults one collection shows
Condition = Callable[[float], bool]
CHIP_CHECKS: dict[str, tuple[str, Condition]] = {
    "NPUTemperatureHigh": ("npu_temperature_celsius", lambda v: v > 95),
    "NPUUnhealthy": ("npu_healthy", lambda v: v == 0),
    "NPUHBMDoubleBitECC": ("npu_hbm_ecc_current_errors", lambda v: v > 0),
    "NPURoCELinkDown": ("npu_roce_link_up", lambda v: v == 0),
    "NPURoCENetHealthFailed": ("npu_roce_net_healthy", lambda v: v == 0),
    "NPUOpticalModuleDegraded": ("npu_optical_signal_lost", lambda v: v == 1),
    "NPUHCCSLinkUnhealthy": ("npu_hccs_healthy", lambda v: v == 0),
}


def test_chip_faults_of_the_table_move_the_metric_their_alert_reads(tmp_path: Path) -> None:
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
    values: dict[str, dict[str, list[float]]] = {}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            values.setdefault(sample.name, {}).setdefault(sample.labels.get("npu", ""), []).append(sample.value)
    for alert, (metric, fires) in CHIP_CHECKS.items():
        chip = str(chips[alert])
        assert values[metric][chip] and any(fires(v) for v in values[metric][chip]), (alert, values[metric])
        quiet = str(missing_chip + 1)  # a chip without faults does not fire it
        assert values[metric][quiet] and not any(fires(v) for v in values[metric][quiet]), (alert, values[metric])
    assert values["npu_chips"][""] == [9.0]
