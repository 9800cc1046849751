"""The probe limits (agent/health/probe_limits.py) against everything that holds a probe's measurement to a number:
the config's defaults, the probe and check settings, triage, and the alert rules.

An alert is found by its name and, where same-named rules differ, its static labels. What it compares is looked up
through the series it reads: a recorded series is followed to its recording rules in any alerts/*.rules.yml (a held
alert's condition, a fleet median, a per-shard record), so a comparison may sit in the alert or in a record it reads.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest

from agent.check.references import Thresholds
from agent.check.settings import CheckSettings
from agent.core.config import build_config
from agent.health.probe_limits import FLEET_MIN_NODES, PROBE_LIMITS, REFERENCE_FAIL, LimitAlert, ProbeLimit
from agent.health.status import FAIL, WARN
from agent.health.thresholds import fault_kind
from agent.probes.records import ProbeSettings
from tests.support.rule_files import RULE_FILES, rules

_SELECTOR = r'\{(?:[^{}"]|"[^"]*")*\}'  # a label selector; a quoted regex may hold braces: size_bytes=~"[0-9]{7,}"
_RECORDED = re.compile(r"\b[a-zA-Z_][a-zA-Z0-9_]*:[a-zA-Z0-9_:]+")
_NUMBER = r"([0-9][0-9.]*(?:[eE][+-]?[0-9]+)?)"
USES = [(limit, use) for limit in PROBE_LIMITS.values() for use in limit.alerts]


@dataclasses.dataclass(frozen=True)
class Rules:
    alerts: dict[str, list[dict[str, Any]]]
    records: dict[str, list[dict[str, Any]]]


def read_rules(files: list[Any] = RULE_FILES) -> Rules:
    alerts: dict[str, list[dict[str, Any]]] = {}
    records: dict[str, list[dict[str, Any]]] = {}
    for _, rule in rules(files):
        if "alert" in rule:
            alerts.setdefault(rule["alert"], []).append(rule)
        else:
            records.setdefault(rule["record"], []).append(rule)
    return Rules(alerts, records)


RULES = read_rules()


def _labels(selector: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', selector))


def _records_named(rules_: Rules, name: str, selector: str) -> list[dict[str, Any]]:
    """The recording rules behind ``name{selector}``: those whose static labels the selector does not contradict."""
    wanted = _labels(selector)
    return [rule for rule in rules_.records.get(name, [])
            if all((rule.get("labels") or {}).get(k, v) == v for k, v in wanted.items())]


def expressions_read(rules_: Rules, expr: str) -> Iterator[str]:
    """``expr`` and the expression of every recording rule it reads, and of those they read."""
    seen: set[str] = set()
    work = [expr]
    while work:
        text = " ".join(work.pop().split())
        if text in seen:
            continue
        seen.add(text)
        yield text
        for match in re.finditer(rf"({_RECORDED.pattern})({_SELECTOR})?", text):
            work.extend(str(rule["expr"]) for rule in _records_named(rules_, match.group(1), match.group(2) or ""))


def derives_from(rules_: Rules, series: str, metric: str) -> bool:
    """Whether ``series`` is ``metric`` or recorded from it."""
    return series == metric or any(
        re.search(rf"(?<![:\w]){re.escape(metric)}(?![:\w])", text)
        for rule in rules_.records.get(series, []) for text in expressions_read(rules_, str(rule["expr"])))


def left_operand(text: str, at: int) -> str:
    """The left side of the comparison at ``text[at]``: back to the ``(`` that encloses it, or to the nearest
    ``and``/``or``/``unless`` outside parentheses, whichever comes first."""
    depth = 0
    for index in range(at - 1, -1, -1):
        char = text[index]
        if char == ")":
            depth += 1
        elif char == "(":
            if depth == 0:
                return text[index + 1:at]
            depth -= 1
        elif depth == 0 and re.match(r"\s(?:and|or|unless)\s", text[index:index + 8]):
            return text[index:at]
    return text[:at]


def compared_values(rules_: Rules, limit: ProbeLimit, use: LimitAlert) -> list[float]:
    """Every number the alert's rules compare ``use.metric`` (or a series recorded from it, alone or in an
    expression) with by the limit's op."""
    labels = dict(use.labels)
    mine = [rule for rule in rules_.alerts.get(use.alert, [])
            if all((rule.get("labels") or {}).get(k) == v for k, v in labels.items())]
    found = []
    comparison = re.compile(rf"(?<![<>=!]){re.escape(limit.op)}(?!=)\s*{_NUMBER}")
    series_in = re.compile(rf"({_RECORDED.pattern}|\b[a-zA-Z_][a-zA-Z0-9_]*)({_SELECTOR})?")
    for rule in mine:
        for text in expressions_read(rules_, str(rule["expr"])):
            for match in comparison.finditer(text):
                left = left_operand(text, match.start())
                if any(derives_from(rules_, named.group(1), use.metric)
                       and (not use.selector or use.selector in (named.group(2) or ""))
                       for named in series_in.finditer(left)):
                    found.append(float(match.group(1)))
    return found


@pytest.mark.parametrize(("limit", "use"), USES, ids=[f"{limit.name}-{use.alert}" for limit, use in USES])
def test_the_alert_compares_with_the_limit(limit: ProbeLimit, use: LimitAlert) -> None:
    assert use.alert in RULES.alerts, f"{limit.name}: no alert rule named {use.alert}"
    values = compared_values(RULES, limit, use)
    assert values, f"{use.alert}{dict(use.labels)} compares no {use.metric} {use.selector} with {limit.op}"
    assert set(values) == {limit.value}, (
        f"{use.alert}{dict(use.labels)} holds {use.metric} {limit.op} {values}, the registry's {limit.name} "
        f"{limit.value:g}")


@pytest.mark.parametrize(("limit", "use"), [(limit, use) for limit, use in USES if limit.value <= 1],
                         ids=[f"{limit.name}-{use.alert}" for limit, use in USES if limit.value <= 1])
def test_the_alert_says_the_limit_in_words(limit: ProbeLimit, use: LimitAlert) -> None:
    labels = dict(use.labels)
    for rule in RULES.alerts[use.alert]:
        if all(rule["labels"].get(k) == v for k, v in labels.items()):
            assert f"{limit.value:.0%}" in rule["annotations"]["summary"], rule["annotations"]["summary"]


def test_a_rule_that_holds_another_number_is_caught() -> None:
    for limit, use in USES:
        moved = dataclasses.replace(limit, value=limit.value * 0.5)
        assert moved.value not in compared_values(RULES, moved, use), (limit.name, use.alert)
    # a comparison recorded in another file and read through two records is still found
    shard = Rules({"A": [{"alert": "A", "labels": {"severity": "warning", "reference": "x"},
                          "expr": 'c:A{reference="x"} or c:A{reference="x"}'}]},
                  {"c:A": [{"record": "c:A", "labels": {"reference": "x"}, "expr": "m:with_model < 0.8"},
                           {"record": "c:A", "labels": {"reference": "y"}, "expr": "m:with_model < 0.5"}],
                   "m:with_model": [{"record": "m:with_model", "expr": 'npu_m{job="npuwatch"} * on () npu_info'}]})
    use = LimitAlert("A", "npu_m", (("reference", "x"),))
    assert compared_values(shard, dataclasses.replace(REFERENCE_FAIL, op="<"), use) == [0.8]
    assert compared_values(shard, dataclasses.replace(REFERENCE_FAIL, op=">"), use) == []


def test_each_limit_is_a_probe_fault_and_says_why_an_alert_differs() -> None:
    for limit in PROBE_LIMITS.values():
        kind = fault_kind(limit.kind)
        assert kind.check == "probes" and kind.status == (FAIL if limit.kind == "probe_failed" else WARN), limit
        assert limit.op in ("<", ">") and limit.held, limit
        if not limit.alerts or kind.status == FAIL:  # the probe alerts page warnings
            assert limit.note, f"{limit.name}: say why no alert, or a warning, pages it"


def _config_value(config: Any, key: str) -> Any:
    for part in key.split("."):
        config = getattr(config, part)
    return config


def test_the_config_defaults_are_the_limits() -> None:
    config = build_config({})
    keys = [(limit, key) for limit in PROBE_LIMITS.values() for key in limit.config]
    assert {key for _, key in keys} >= {"probes.gemm.min_efficiency", "check.fail_ratio", "check.warn_ratio",
                                        "check.fleet_fail_ratio", "check.fleet_warn_ratio", "check.min_peer_ratio",
                                        "check.max_throttle_drop", "check.warn_throttle_drop"}
    for limit, key in keys:
        assert _config_value(config, key) == limit.value, key
    assert config.check.fleet_min_nodes == FLEET_MIN_NODES


def test_the_settings_defaults_are_the_limits() -> None:
    probe, check, thresholds = ProbeSettings(), CheckSettings(), Thresholds()
    from_config = CheckSettings.from_config(build_config({}))
    assert (probe.min_efficiency, probe.warn_efficiency) == (REFERENCE_FAIL.value, PROBE_LIMITS["reference_warn"].value)
    for settings in (probe, check, from_config):
        assert settings.min_peer_ratio == PROBE_LIMITS["peer_fail"].value
        assert settings.max_throttle_drop == PROBE_LIMITS["throttle_fail"].value
        assert settings.warn_throttle_drop == PROBE_LIMITS["throttle_warn"].value
    expected = (REFERENCE_FAIL.value, PROBE_LIMITS["reference_warn"].value, PROBE_LIMITS["fleet_fail"].value,
                PROBE_LIMITS["fleet_warn"].value, FLEET_MIN_NODES)
    for held in (thresholds, from_config.thresholds):
        assert (held.fail_ratio, held.warn_ratio, held.fleet_fail_ratio, held.fleet_warn_ratio,
                held.fleet_min_nodes) == expected
