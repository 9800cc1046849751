"""The node-fault alerts generated from the fault registry (``python -m alerts.generate``): the committed files are
what the generator writes, every paged kind has its rule and both sides of its promtool case, and the job selector
is a parameter. promtool runs the cases in tests/integration/test_alert_rules.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.health.thresholds import FAULT_KINDS, fault_kind
from agent.health.verdict_metrics import FAULT_METRIC
from alerts import generate

PAGED = generate.paged_kinds()


def _alerts(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


def test_the_committed_rules_and_cases_are_what_the_generator_writes() -> None:
    made = generate.generate()
    assert generate.RULES.read_text(encoding="utf-8") == made.rules, "run python -m alerts.generate"
    assert generate.TESTS.read_text(encoding="utf-8") == made.tests, "run python -m alerts.generate"
    assert generate.main(["--check"]) == 0


def test_check_fails_on_a_stale_file(tmp_path: Path) -> None:
    assert generate.main(["-o", str(tmp_path)]) == 0
    assert generate.main(["--check", "-o", str(tmp_path)]) == 0
    written = tmp_path / generate.RULES.name
    written.write_text(written.read_text(encoding="utf-8").replace("for: 5m", "for: 6m"), encoding="utf-8")
    assert generate.main(["--check", "-o", str(tmp_path)]) == 1


def test_every_paged_kind_has_one_rule_over_its_finding_with_its_hold_severity_and_wait() -> None:
    rules = {rule["labels"]["kind"]: rule for rule in _alerts(generate.rules())}
    assert set(rules) == {kind.kind for kind in PAGED}
    assert {kind.kind for kind in PAGED} >= {"held_while_healthy", "repeat_offender", "chip_fault_isolate"}
    records = {rule["labels"]["kind"]: rule for group in generate.rules()["groups"] for rule in group["rules"]
               if "record" in rule}
    for kind in PAGED:
        rule = rules[kind.kind]
        assert rule["alert"] == kind.alert
        assert rule["labels"] == {"kind": kind.kind, "severity": kind.alert_severity}
        assert rule.get("for", "0m") == (f"{int(kind.for_s // 60)}m" if kind.for_s else "0m")
        assert records[kind.kind]["expr"].strip() == f'{FAULT_METRIC}{{job="npuwatch", kind="{kind.kind}"}}'
        assert "last_over_time(" in rule["expr"] and "[10m]" in rule["expr"]  # the hold
        text = rule["annotations"]["description"]
        assert kind.label in text and "$labels.npu" in text and "$labels.node" in text, text
        assert rule["annotations"]["runbook_url"].endswith(f"/{kind.alert}.md")


def test_severity_is_the_status_unless_the_registry_says_otherwise() -> None:
    severities = {rule["labels"]["kind"]: rule["labels"]["severity"] for rule in _alerts(generate.rules())}
    assert severities["chip_too_hot"] == "critical" and severities["chip_hot"] == "warning"
    assert severities["link_flap"] == "warning"  # FAIL, paged as a warning: the registry's own severity
    assert severities["repeat_offender"] == "critical" and severities["held_while_healthy"] == "warning"


def test_hand_written_and_unpaged_kinds_get_no_generated_rule() -> None:
    kinds = {rule["labels"]["kind"] for rule in _alerts(generate.rules())}
    for entry in FAULT_KINDS.values():
        assert (entry.kind in kinds) == bool(entry.alert and not entry.hand_written and not entry.fleet), entry.kind
    assert fault_kind("job_straggler").fleet and "job_straggler" not in kinds  # judged by the fleet's rules


def test_each_rule_has_a_firing_case_after_its_wait_and_silent_cases() -> None:
    cases = generate.cases()["tests"]
    for kind in PAGED:
        mine = [case for case in cases if case["alert_rule_test"][0]["alertname"] == kind.alert
                and any(kind.kind in series["series"] for series in case["input_series"])]
        fired = [check for case in mine for check in case["alert_rule_test"] if check["exp_alerts"]]
        assert len(fired) == 1 and fired[0]["exp_alerts"][0]["exp_labels"]["kind"] == kind.kind, kind.kind
        quiet = [case for case in mine if not any(check["exp_alerts"] for check in case["alert_rule_test"])]
        assert quiet, f"{kind.kind}: no silent case"
        # the silent case holds another kind's finding and this kind's under another job
        other = [series["series"] for series in quiet[0]["input_series"]]
        assert any(f'kind="{kind.kind}"' not in text for text in other)
        assert any(f'kind="{kind.kind}"' in text and 'job="not-npuwatch"' in text for text in other)
        if kind.for_s >= 120:  # pending, not yet firing, before its wait
            assert any(not check["exp_alerts"] for case in mine for check in case["alert_rule_test"]
                       if case is not quiet[0]), kind.kind


def test_a_node_wide_finding_is_described_without_an_npu() -> None:
    missing = fault_kind("chip_missing")
    labels = {"job": "npuwatch", "instance": "n:9101", "node": "n", "kind": "chip_missing"}
    assert generate.description(missing, labels).startswith("n: chip missing from npu-smi")
    chip = {**labels, "npu": "3", "chip": "0"}
    assert generate.description(fault_kind("chip_hot"), chip).startswith("NPU 3 chip 0 on n: chip running hot")


def test_the_job_selector_is_a_parameter() -> None:
    made = generate.generate('job="npu-agents", cluster="a"')
    rules = yaml.safe_load(made.rules)
    records = [rule["expr"] for group in rules["groups"] for rule in group["rules"] if "record" in rule]
    assert all('{job="npu-agents", cluster="a", kind="' in expr for expr in records), records[:2]
    cases = yaml.safe_load(made.tests)
    assert 'job="npu-agents"' in cases["tests"][0]["input_series"][0]["series"]
    assert "--selector 'job=\"npu-agents\", cluster=\"a\"'" in made.rules.splitlines()[1]


@pytest.mark.parametrize("bad", ['job=~"npu.*"', "job=npuwatch", 'kind="x"', ""])
def test_a_selector_the_cases_cannot_follow_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        generate.parse_selector(bad)
