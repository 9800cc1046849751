"""The thresholds table (agent/health/thresholds.py) against its consumers: the alerts generated from it (and the
hand-written ones it names), triage's weights, the check names, and the config keys that override it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.check.levels import CHECKS
from agent.check.settings import CheckSettings
from agent.core.config import build_config
from agent.diagnose.engine import PROBE_CHECKS
from agent.health.results import CheckResult, Result, fold
from agent.health.status import FAIL, VERDICT_OF, WARN
from agent.health.thresholds import CAUSE_GROUPS, FAIL_WEIGHT, FAULT_KINDS, FaultKind, fault_kind
from agent.health.verdict import lead
from agent.triage.faults import is_failure
from tests.support.paths import REPO
from tests.support.rule_files import alert_rules

WITH_ALERT = [entry for entry in FAULT_KINDS.values() if entry.alert]


def rules() -> dict[str, list[tuple[str, dict[str, Any]]]]:
    """Every alert rule of alerts/*.rules.yml by alert name (one name may have several rules), with its file."""
    found: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path, rule in alert_rules(sorted((REPO / "alerts").glob("*.rules.yml"))):
        found.setdefault(rule["alert"], []).append((path.name, rule))
    return found


RULES = rules()


@pytest.mark.parametrize("entry", WITH_ALERT, ids=[entry.kind for entry in WITH_ALERT])
def test_the_kinds_alert_exists_with_its_severity(entry: FaultKind) -> None:
    """A generated alert is in alerts/faults.rules.yml with the kind's label; a hand-written one elsewhere; a fleet
    rule's elsewhere too, with the kind's label and status (its finding in the registry's vocabulary)."""
    assert entry.alert in RULES, f"{entry.kind}: no alert rule named {entry.alert}"
    outside = entry.hand_written or entry.fleet
    severities = {rule["labels"]["severity"] for name, rule in RULES[entry.alert]
                  if (name == "faults.rules.yml") != outside
                  and (entry.hand_written or rule["labels"].get("kind") == entry.kind)}
    if entry.fleet:
        assert {name for name, _ in RULES[entry.alert]} == {f"{entry.check}.rules.yml"}, entry.kind
        assert all(rule["labels"].get("status") == VERDICT_OF[entry.status] for _, rule in RULES[entry.alert])
    assert entry.alert_severity in severities, f"{entry.kind}: no {entry.alert} rule of severity {entry.alert_severity}"


def test_a_kind_pages_as_its_status_says_or_says_why() -> None:
    for entry in FAULT_KINDS.values():
        if not entry.alert:
            assert entry.alert_note, f"{entry.kind}: say why it has no alert"
        elif (entry.status == FAIL) != (entry.alert_severity == "critical"):
            assert entry.alert_note, f"{entry.kind}: {entry.status} pages {entry.alert_severity}: say why"
        if entry.hand_written or entry.fleet:
            assert entry.alert and entry.alert_note, f"{entry.kind}: say why its alert is not the generated one"
    assert fault_kind("chip_hot").alert_severity == "warning"
    assert fault_kind("chip_too_hot").alert_severity == "critical"
    assert fault_kind("link_flap").alert_severity == "warning"  # the entry's own severity wins over FAIL's


def test_every_kind_is_judged_by_a_check_weighed_by_its_status_and_explained() -> None:
    checks = {spec.name for spec in CHECKS} | {"probes"}  # probes: every probe check (gemm, allreduce, ...)
    runbooks = {path.stem for path in (REPO / "alerts" / "runbooks").glob("*.md")}
    for entry in FAULT_KINDS.values():
        assert entry.status in (FAIL, WARN)
        # a fleet kind is judged by its rule file (alerts/<check>.rules.yml), which no check runs
        assert (entry.check not in checks and (REPO / "alerts" / f"{entry.check}.rules.yml").is_file()
                if entry.fleet else entry.check in checks), entry
        assert bool(entry.causes) == entry.fleet, entry
        assert entry.cause in CAUSE_GROUPS, entry
        assert is_failure(entry.kind) == (entry.status == FAIL)
        # every surface ranks what the table fails above what it warns; a job's own failure weighs as a failure
        # in triage (it stopped its rank) but does not fail the node
        if entry.cause == "process_exit":
            assert entry.status == WARN and entry.weight >= FAIL_WEIGHT, entry
        else:
            assert (entry.weight >= FAIL_WEIGHT) == (entry.status == FAIL), entry
        assert entry.label and entry.hint and 0 < len(entry.short) <= 8, entry
        assert entry.runbook_alert in runbooks, entry


def test_the_config_keys_override_the_table() -> None:
    default = CheckSettings.from_config(build_config({})).judging
    assert default.flap_window_s == FAULT_KINDS["link_flap"].window_s
    assert default.max_isolated_pages == FAULT_KINDS["hbm_pages_over"].threshold
    assert default.flap_window_basis == "the thresholds table"
    set_ = CheckSettings.from_config(build_config({"check": {"flap_window": "1h", "max_isolated_pages": 5}})).judging
    assert (set_.flap_window_s, set_.max_isolated_pages) == (3600.0, 5)
    assert set_.flap_window_basis == "config check.flap_window"


def sections(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file (lower case, spaces to dashes, no punctuation)."""
    return {re.sub(r"[^\w -]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def test_every_runbook_a_check_leads_to_exists_with_its_section() -> None:
    checks = {spec.name for spec in CHECKS} | set(PROBE_CHECKS)
    for entry in FAULT_KINDS.values():
        for check, runbook in entry.runbooks:
            assert check in checks, (entry.kind, check)
            page, _, section = runbook.partition("#")
            path = REPO / "alerts" / "runbooks" / f"{page}.md"
            assert path.exists(), (entry.kind, runbook)
            assert not section or section in sections(path), (entry.kind, runbook)


def test_a_probe_fault_leads_to_its_probes_runbook() -> None:
    failed, slow = fault_kind("probe_failed"), fault_kind("probe_slow")
    for kind in (failed, slow):
        assert len({kind.runbook_for(check) for check in ("gemm", "allreduce", "hbm_bandwidth")}) == 3, kind.kind
        assert kind.runbook_for("probe_gemm") == kind.runbook_for("gemm")  # diagnose's probe and check's alike
        assert kind.runbook_for("probe_allreduce") == kind.runbook_for("allreduce")
    assert failed.runbook_for(None) == failed.runbook_alert
    found = CheckResult("probe_allreduce", FAIL, "timed out", (Result(FAIL, "timed out", kind="probe_failed"),))
    assert str(lead([found]).runbook).endswith("/NPUCheckFailed.md#allreduce")
    slow_gemm = CheckResult("probe_gemm", WARN, "70% of peak", (Result(WARN, "70% of peak", kind="probe_slow"),))
    assert str(lead([slow_gemm]).runbook).endswith("/NPUGEMMProbeSlow.md")


def test_a_probe_fault_says_what_to_do_about_that_probe() -> None:
    failed = fault_kind("probe_failed")
    throttled = fold("sustained_gemm", [Result(FAIL, "NPU 0: fell 30%", kind="probe_failed")], "ok", "the check's")
    assert throttled.hint == failed.hint_for("sustained_gemm") != failed.hint
    assert "cooling" in throttled.hint
    assert fold("gemm", [Result(FAIL, "NPU 0: slow", kind="probe_failed")], "ok", "the check's").hint == failed.hint
    slow = CheckResult("probe_allreduce", WARN, "slow", (Result(WARN, "slow", kind="probe_slow"),))
    assert lead([slow]).action == fault_kind("probe_slow").hint_for("probe_allreduce") != fault_kind("probe_slow").hint


def test_a_fleet_kinds_causes_are_its_rules_cause_labels() -> None:
    """Each value of the fleet rule's ``cause`` label has its words and action in the registry, and no other."""
    for entry in FAULT_KINDS.values():
        if not entry.fleet:
            continue
        causes = {rule["labels"].get("cause") for path in sorted((REPO / "alerts").glob("*.rules.yml"))
                  for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
                  for rule in group["rules"] if rule.get("record") == "npuwatch:job_straggler:candidate"}
        assert {cause.cause for cause in entry.causes} == causes, entry.kind
        for cause in entry.causes:
            assert cause.label and cause.hint and entry.rule_cause(cause.cause) is cause
        assert entry.rule_cause("elsewhere") is None
