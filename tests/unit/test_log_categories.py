"""One list: the classifier's categories (collectors.hccl.codes), the agent's record of each
(agent.health.log_categories: hint, runbook, local fault), the alerts that page them and the triage
weights of the faults they are."""

from __future__ import annotations

import pytest
import yaml

from agent.health.log_categories import (
    CODE_FAULTS,
    LOG_CATEGORIES,
    LOG_FAULTS,
    category_hint,
    category_runbook,
    fault_of,
)
from agent.triage.faults import CAUSES, FAULT_KINDS
from collectors.hccl.codes import ASCEND_CODE_CATEGORIES, CATEGORIES, TRIAGE_FAILURE_CATEGORIES
from tests.support.paths import REPO

RULES = REPO / "alerts" / "hccl.rules.yml"


def _runbook_urls() -> dict[str, str]:
    found = {}
    for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                found[rule["alert"]] = rule["annotations"]["runbook_url"]
    return found


def test_one_record_per_category_in_the_classifiers_order() -> None:
    assert [c.name for c in LOG_CATEGORIES] == [c.name for c in CATEGORIES]


@pytest.mark.parametrize("category", CATEGORIES, ids=lambda c: c.name)
def test_each_category_has_a_hint_and_a_runbook_that_exists(category: object) -> None:
    name = category.name  # type: ignore[attr-defined]
    assert category_hint(name)
    assert (REPO / category_runbook(name)).is_file()


@pytest.mark.parametrize("category", [c for c in CATEGORIES if c.pages], ids=lambda c: c.name)
def test_a_paged_category_points_at_its_alerts_runbook(category: object) -> None:
    alert = category.pages  # type: ignore[attr-defined]
    assert _runbook_urls()[alert].endswith("/" + category_runbook(category.name))  # type: ignore[attr-defined]


def test_every_log_fault_is_a_triage_fault_kind_with_the_records_weight() -> None:
    for fault in LOG_FAULTS:
        kind = FAULT_KINDS[fault.kind]
        assert (kind.weight, kind.cause, kind.label) == (fault.weight, fault.cause, fault.label)
        assert fault.cause in CAUSES
    assert len({f.kind for f in LOG_FAULTS}) == len(LOG_FAULTS)


def test_the_failures_that_stop_a_rank_are_local_faults_not_failure_reports() -> None:
    stopping = {"device_oom", "aicore", "operator", "sdma", "device_lost", "link", "hbm_ecc", "program_error",
                "config_error"}
    assert {c.name for c in LOG_CATEGORIES if c.fault is not None} == stopping
    # sdma stays a failure report too (an SDMA task of a collective failed); the others open no incident
    assert stopping & TRIAGE_FAILURE_CATEGORIES == {"sdma"}
    assert {"tcp_store", "watchdog_exception"} <= TRIAGE_FAILURE_CATEGORIES


def test_a_code_fault_names_a_code_the_classifier_gives() -> None:
    from collectors.hccl.knowledge import KNOWLEDGE
    from collectors.hccl.rules import _SYNTHETIC_RULES

    known = set(ASCEND_CODE_CATEGORIES) | {code for _, code, _ in _SYNTHETIC_RULES} | {e.code for e in KNOWLEDGE}
    assert set(CODE_FAULTS) <= known
    assert fault_of("init", "port_listen_failed") is CODE_FAULTS["port_listen_failed"]
    assert fault_of("init", "EI0004") is None
    assert fault_of("device_oom", "npu_oom") is not None and fault_of("exec_timeout", "EI0002") is None
    assert category_hint("no_such_category") == category_hint("other")
