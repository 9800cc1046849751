"""The HCCL category table (``collectors.hccl.codes``) is the one place that says what a category is for:
the alerts page from its ``pages`` column, triage opens incidents from its ``triage`` column, diagnose
and check count its ``diagnose`` column, and the metric catalogue lists its names."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from agent.triage.engine import analyze
from agent.triage.evidence import Evidence, RankFailure
from collectors.catalogue import HCCL_CATEGORIES
from collectors.hccl.codes import (
    ASCEND_CODE_CATEGORIES,
    CATEGORIES,
    DIAGNOSE_TIMEOUT_CATEGORIES,
    TRIAGE_FAILURE_CATEGORIES,
    category_matcher,
    paged_by,
)
from tests.support.paths import REPO

RULES = REPO / "alerts" / "hccl.rules.yml"
PROMTOOL_CASES = REPO / "alerts" / "tests" / "hccl-test.yml"
ALERTS = sorted({c.pages for c in CATEGORIES if c.pages})
_SELECTOR_RE = re.compile(r"npu_hccl_errors_total\{([^}]*)\}")
_CATEGORY_RE = re.compile(r'category=~?"[^"]*"')


def _rule(alert: str) -> dict[str, Any]:
    for group in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]:
        for rule in group["rules"]:
            # a held alert reads its condition from the record just before it (alerts/README.md)
            if rule.get("record") == f"npuwatch:alert_condition:{alert}" or rule.get("alert") == alert:
                return rule
    raise AssertionError(f"{alert} not in {RULES}")


def test_every_category_is_in_the_table_once_and_the_catalogue_lists_them() -> None:
    names = [c.name for c in CATEGORIES]
    assert len(names) == len(set(names))
    assert set(ASCEND_CODE_CATEGORIES.values()) <= set(names)
    assert tuple(names) == HCCL_CATEGORIES
    assert ALERTS == ["HCCLRoCECQEError", "HCCLTimeout"]


@pytest.mark.parametrize("alert", ALERTS)
def test_the_alert_selects_the_categories_the_table_says_it_pages_on(alert: str) -> None:
    selectors = _SELECTOR_RE.findall(_rule(alert)["expr"])
    assert selectors, f"{alert} reads no npu_hccl_errors_total"
    for labels in selectors:
        assert _CATEGORY_RE.findall(labels) == [category_matcher(alert)], (
            f"{alert}: {labels!r} drifted from the category table; use {category_matcher(alert)}")


def test_the_matcher_is_a_regex_for_several_categories_and_an_equality_for_one() -> None:
    assert category_matcher("HCCLTimeout") == (
        'category=~"exec_timeout|connect_timeout|rendezvous_timeout|watchdog_timeout"')
    assert category_matcher("HCCLRoCECQEError") == 'category="roce_cqe"'


def _promtool_cases(alert: str) -> tuple[set[str], set[str]]:
    """(categories a case expects ``alert`` to fire for, categories fed to a case where it never fires)."""
    fired: set[str] = set()
    silent: set[str] = set()
    for case in yaml.safe_load(PROMTOOL_CASES.read_text(encoding="utf-8"))["tests"]:
        checks = [c for c in case["alert_rule_test"] if c["alertname"] == alert]
        if not checks:
            continue
        fed = {m.group(1) for s in case["input_series"]
               if s["series"].startswith("npu_hccl_errors_total")
               for m in [re.search(r'category="([^"]+)"', s["series"])] if m}
        alerts = [a for c in checks for a in c.get("exp_alerts") or []]
        fired |= {a["exp_labels"]["category"] for a in alerts if "category" in a["exp_labels"]}
        if not alerts:
            silent |= fed
    return fired, silent


@pytest.mark.parametrize("alert", ALERTS)
def test_promtool_cases_cover_both_sides_of_the_pages_column(alert: str) -> None:
    fired, silent = _promtool_cases(alert)
    assert fired == set(paged_by(alert))
    assert {c.name for c in CATEGORIES if c.pages != alert} <= silent


@pytest.mark.parametrize("category", [c.name for c in CATEGORIES])
def test_triage_opens_an_incident_exactly_for_the_triage_column(category: str) -> None:
    evidence = Evidence()
    evidence.failures.append(RankFailure("node-a", 1_740_902_400.0, "code", category, "g1", 0, 2))
    report = analyze(evidence)
    assert (len(report.incidents) == 1) == (category in TRIAGE_FAILURE_CATEGORIES)


def test_the_columns_differ_where_the_table_says_why() -> None:
    # a RoCE CQE error pages its own alert and counts for diagnose; triage scores it as a local fault
    roce = next(c for c in CATEGORIES if c.name == "roce_cqe")
    assert (roce.pages, roce.triage, roce.diagnose) == ("HCCLRoCECQEError", False, True)
    assert "roce_cqe" not in TRIAGE_FAILURE_CATEGORIES and "roce_cqe" in DIAGNOSE_TIMEOUT_CATEGORIES


def test_check_counts_the_diagnose_column() -> None:
    from agent.health import checks_node

    assert checks_node.TIMEOUT_CATEGORIES is DIAGNOSE_TIMEOUT_CATEGORIES
