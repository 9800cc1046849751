"""Contract checks on alerts/ read from the rule files themselves: names, labels, annotations, runbooks.

promtool, amtool and the unit tests in alerts/tests run in tests/integration/test_alert_rules.py; a real
Alertmanager and Prometheus in tests/e2e/test_alert_rules.py.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.core.runbooks import DEFAULT_RUNBOOK_BASE
from collectors.catalogue import CATALOGUE
from tests.support import hold_cases
from tests.support.paths import REPO
from tests.support.rule_files import alert_rules, alert_tests, load_yaml, rules

ALERTS_DIR = REPO / "alerts"
RULE_FILES = sorted(ALERTS_DIR.glob("*.rules.yml"))
TEST_FILES = sorted((ALERTS_DIR / "tests").glob("*-test.yml"))
RUNBOOK_DIR = ALERTS_DIR / "runbooks"

# The one place the runbook link base is defined; every rule must use it.
RUNBOOK_BASE = DEFAULT_RUNBOOK_BASE  # the one setting, agent/core/runbooks.py

REQUIRED_ALERTS = frozenset({
    "NPUWatchDown", "NPUCollectorFailing", "NPUChipMissing", "NPUUnhealthy",
    "NPUHBMDoubleBitECC", "NPUHBMSingleBitECCRate", "NPUTemperatureHigh",
    "NPUHCCSLinkUnhealthy", "NPURoCELinkDown", "NPURoCELinkFlapping", "NPURoCENetHealthFailed",
    "NPUOpticalModuleDegraded", "HCCLTimeout", "HCCLRoCECQEError", "NPUAllReduceBandwidthLow",
    "NPUGEMMProbeSlow", "NPUGEMMProbeWrongResult", "NPUAllReduceProbeWrongResult", "NPUProbeStale",
    "NPUProbeCannotRun",
})
RUNBOOK_SECTIONS = ("## Meaning", "## Confirm", "## Act", "## Escalate")

# Series that are not npuwatch's own but that rules may use.
EXTERNAL_METRICS = frozenset({"up", "ALERTS", "node_textfile_mtime_seconds"})  # the last: node_exporter's

PROMQL_WORDS = frozenset({
    # operators and modifiers
    "and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
    "offset", "bool", "atan2", "inf", "nan", "Inf", "NaN",
    # aggregations
    "sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
    "bottomk", "topk", "quantile",
    # functions
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate",
    "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear",
    "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time", "timestamp",
    "vector", "year", "avg_over_time", "min_over_time", "max_over_time", "sum_over_time",
    "count_over_time", "quantile_over_time", "stddev_over_time", "stdvar_over_time",
    "last_over_time", "present_over_time",
})

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_BRACES = re.compile(r"\{[^}]*\}")
_BRACKETS = re.compile(r"\[[^\]]*\]")
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_COMMENT = re.compile(r"#[^\n]*")
_IDENTIFIER = re.compile(r"(?<![\w.:])[A-Za-z_:][A-Za-z0-9_:]*")
_TEMPLATE_QUERY = re.compile(r'printf\s+"((?:[^"\\]|\\.)*)"')


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects, without recording rules (names with ':')."""
    text = _COMMENT.sub("", expr)
    text = _STRING.sub('""', text)
    text = _BRACES.sub("", text)
    text = _BRACKETS.sub("", text)
    text = _LABEL_LIST.sub("", text)
    return {
        name for name in _IDENTIFIER.findall(text)
        if name not in PROMQL_WORDS and ":" not in name
    }


def template_queries(annotation: str) -> list[str]:
    """The PromQL inside ``printf "..." | query`` calls of an annotation template."""
    return [m.encode().decode("unicode_escape") for m in _TEMPLATE_QUERY.findall(annotation)]







def test_rule_and_test_files_exist() -> None:
    assert len(RULE_FILES) >= 5, RULE_FILES
    # each area's cases are in alerts/tests/<area>-test.yml, or, for a file split off an area
    # (probes-fleet.rules.yml from probes), in the test file that loads both
    loaded = {Path(name).name for path in TEST_FILES for name in load_yaml(path).get("rule_files", [])}
    areas = {p.name.removesuffix("-test.yml") for p in TEST_FILES}
    assert {p.name for p in RULE_FILES} <= loaded, "every alerts/<area>.rules.yml needs a promtool test file"
    assert all(p.name.removesuffix(".rules.yml").split("-")[0] in areas for p in RULE_FILES)


def test_required_alerts_exist() -> None:
    names = {rule["alert"] for _, rule in alert_rules()}
    assert names >= REQUIRED_ALERTS, f"missing alerts: {sorted(REQUIRED_ALERTS - names)}"


def _rule_id(path: Path, rule: dict[str, Any]) -> str:
    return f"{path.stem.removesuffix('.rules')}-{rule['alert']}-{rule.get('labels', {}).get('severity')}"


@pytest.mark.parametrize(("path", "rule"), [
    pytest.param(path, rule, id=_rule_id(path, rule)) for path, rule in alert_rules()
])
def test_alert_has_severity_annotations_and_runbook(path: Path, rule: dict[str, Any]) -> None:
    name = rule["alert"]
    assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", name), f"{name} is not CamelCase"
    assert rule.get("labels", {}).get("severity") in {"warning", "critical"}, name
    annotations = rule.get("annotations", {})
    for key in ("summary", "description", "runbook_url"):
        assert annotations.get(key, "").strip(), f"{path.name}: {name} has no {key}"
    assert annotations["runbook_url"] == f"{RUNBOOK_BASE}{name}.md", annotations["runbook_url"]
    runbook = RUNBOOK_DIR / f"{name}.md"
    assert runbook.is_file(), f"{runbook} is missing"
    text = runbook.read_text(encoding="utf-8")
    assert text.startswith(f"# {name}\n"), f"{runbook} must start with '# {name}'"
    missing = [s for s in RUNBOOK_SECTIONS if s not in text]
    assert not missing, f"{runbook} lacks sections {missing}"


def test_no_orphan_runbooks() -> None:
    names = {rule["alert"] for _, rule in alert_rules()}
    orphans = {p.stem for p in RUNBOOK_DIR.glob("*.md")} - names
    assert not orphans, f"runbooks without an alert: {sorted(orphans)}"


def test_metric_name_parser() -> None:
    expr = (
        'sum by (node, npu) (rate(foo_total{a="b", c=~"x|y"}[5m])) > 1e9\n'
        "  # bar_in_comment\n"
        "  and on (job) group_left (model) npu:recorded:ratio * 0.8 offset 5m\n"
        '  or absent(up{job="npuwatch"}) or time() - baz_seconds > 3 * 3600'
    )
    assert metric_names(expr) == {"foo_total", "up", "baz_seconds"}
    query = 'x {{ printf "npu_health_state{npu=%q} == 1" $labels.npu | query }}'
    assert template_queries(query) == ["npu_health_state{npu=%q} == 1"]


def test_every_metric_in_rules_is_in_the_catalogue() -> None:
    unknown: dict[str, set[str]] = {}
    for path, rule in rules():
        name = rule.get("alert") or rule["record"]
        used = metric_names(rule["expr"])
        for text in rule.get("annotations", {}).values():
            for query in template_queries(text):
                used |= metric_names(query)
        bad = used - set(CATALOGUE) - EXTERNAL_METRICS
        if bad:
            unknown[f"{path.name}:{name}"] = bad
    assert not unknown, f"metric names not in collectors/catalogue.py: {unknown}"


def test_every_alert_has_a_firing_and_a_silent_test_case() -> None:
    names = {rule["alert"] for _, rule in alert_rules()}
    fired: set[str] = set()
    silent: set[str] = set()
    for path, check in alert_tests():
        alerts = check.get("exp_alerts") or []
        (fired if alerts else silent).add(check["alertname"])
        for alert in alerts:
            runbook = alert.get("exp_annotations", {}).get("runbook_url")
            assert runbook == f"{RUNBOOK_BASE}{check['alertname']}.md", (
                f"{path.name}: a firing case of {check['alertname']} must check its runbook_url"
            )
            assert alert.get("exp_labels", {}).get("severity"), f"{path.name}: check severity too"
    assert names <= fired, f"alerts never fired by a test: {sorted(names - fired)}"
    assert names <= silent, f"alerts with no silent test case: {sorted(names - silent)}"


def _rule_variant(rule: dict[str, Any]) -> tuple[str, tuple[tuple[str, str], ...]]:
    labels = rule.get("labels", {})
    return rule["alert"], tuple(sorted((k, str(v)) for k, v in labels.items()))


def test_every_alert_rule_has_its_own_firing_case() -> None:
    """Per rule, not only per alert name: each variant (its static labels, e.g. severity or
    reason) fires in some case whose expected labels include all of them."""
    fired: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for _path, check in alert_tests():
        for alert in check.get("exp_alerts") or []:
            fired.add((check["alertname"], tuple(sorted((k, str(v)) for k, v in alert["exp_labels"].items()))))
    missing = []
    for _path, rule in alert_rules():
        name, labels = _rule_variant(rule)
        if not any(n == name and set(labels) <= set(got) for n, got in fired):
            missing.append(f"{name}{dict(labels)}")
    assert not missing, f"alert rules never fired by a test case: {missing}"


# ----------------------------------------------------------------------------- stable annotations

_VALUE = re.compile(r"\$value\b|\.Value\b|\$\.Value\b")
_QUERY_PIPE = re.compile(r"\|\s*query\b(?P<rest>[^}]*)\}\}")


@pytest.mark.parametrize(("path", "rule"), [
    pytest.param(path, rule, id=_rule_id(path, rule)) for path, rule in alert_rules()
])
def test_annotations_are_stable_for_the_life_of_an_alert(path: Path, rule: dict[str, Any]) -> None:
    """No annotation prints the alert's value (it changes at every evaluation for counts, rates,
    temperatures and ages) and every template query is sorted, so an annotation changes only
    when the fault itself does, and promtool's expectations are deterministic."""
    for key, text in rule.get("annotations", {}).items():
        assert not _VALUE.search(text), f"{path.name} {rule['alert']}: {key} prints the alert value"
        for match in _QUERY_PIPE.finditer(text):
            assert re.match(r"\s*\|\s*sortByLabel\s+\"\w+\"", match.group("rest")), (
                f"{path.name} {rule['alert']}: {key} uses a query result unsorted: "
                f"pipe it through sortByLabel: {match.group(0)}"
            )
        assert text.count("query") == len(_QUERY_PIPE.findall(text)), (
            f"{path.name} {rule['alert']}: {key}: write template queries as `... | query | sortByLabel \"l\"`"
        )


# ----------------------------------------------------------------------------- scrape gaps

def _duration_s(text: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"(\d+)([smh])", text)
    assert "".join(n + u for n, u in parts) == text, text
    return sum(int(n) * units[u] for n, u in parts)


def test_node_alerts_hold_through_a_scrape_gap_until_npuwatchdown_takes_over() -> None:
    """A killed or restarting agent makes its series stale; its node's alerts must not resolve
    (and page again on return) before NPUWatchDown fires and inhibits them. vmalert 1.79 has no
    keep_firing_for, so the hold is the canonical expression of tests/support/hold_cases.py."""
    down = next(rule for _, rule in alert_rules()
                if rule["alert"] == "NPUWatchDown" and rule["labels"]["severity"] == "warning")
    handover_s = _duration_s(down["for"]) + 60  # + the first failed scrape and one evaluation
    short = []
    for _, rule in alert_rules():
        if rule["alert"] == "NPUWatchDown" or rule["labels"].get("node") == "all":
            continue
        parsed = hold_cases.parse_hold(rule["expr"])
        if parsed is None or _duration_s(parsed[1]) < handover_s:
            short.append(rule["alert"])
    assert not short, f"no hold of at least {handover_s}s in the expression: {short}"


def test_no_rule_uses_keep_firing_for() -> None:
    """vmalert 1.79 (Debian 12) refuses a rule file with keep_firing_for (learned in 1.92)."""
    assert not [rule.get("alert") for _, rule in rules() if "keep_firing_for" in rule]


def test_each_held_condition_is_recorded_just_before_its_alert_with_its_telling_labels() -> None:
    """``npuwatch:alert_condition:<alert>`` is recorded in the alert's group, right before it (so the
    alert reads this evaluation's value in Prometheus), labelled like the alert's selector; or, for a
    fleet alert over per-chip conditions, by the per-node half of its file (``<area>-shard.rules.yml``)."""
    on_shards = {(rule["record"], tuple(sorted((rule.get("labels") or {}).items())))
                 for path, rule in rules() if path.name.endswith("-shard.rules.yml") and "record" in rule}
    for path in RULE_FILES:
        for group in load_yaml(path)["groups"]:
            previous: dict[str, Any] | None = None
            for rule in group["rules"]:
                parsed = hold_cases.parse_hold(str(rule.get("expr", ""))) if "alert" in rule else None
                if parsed is not None and parsed[0].startswith(hold_cases.CONDITION_PREFIX):
                    series = parsed[0]
                    name = series.split("{", 1)[0]
                    assert name == hold_cases.CONDITION_PREFIX + rule["alert"], (path.name, rule["alert"])
                    want = dict(re.findall(r'(\w+)="([^"]*)"', series.split("{", 1)[1])) if "{" in series else {}
                    if (name, tuple(sorted(want.items()))) not in on_shards:
                        assert previous is not None and previous.get("record") == name, (path.name, rule["alert"])
                        assert (previous.get("labels") or {}) == want, (path.name, rule["alert"])
                    assert all(rule["labels"].get(k) == v for k, v in want.items()), (path.name, rule["alert"])
                if parsed is not None:
                    # held only while this very rule fires: its name and every static label
                    gate = hold_cases.alerts_gate(rule["alert"], rule["labels"])
                    assert parsed.gate == gate, (path.name, rule["alert"])
                previous = rule
    used = {rule["record"] for _, rule in rules() if rule.get("record", "").startswith(hold_cases.CONDITION_PREFIX)}
    held = {h.name for h in hold_cases.held_alerts()}
    assert used <= held, sorted(used - held)


def test_the_hold_cases_are_current() -> None:
    """alerts/tests/hold-test.yml is what ``python -m tests.support.hold_cases`` writes."""
    assert hold_cases.HOLD_TEST.read_text(encoding="utf-8") == hold_cases.document(), (
        "alerts/tests/hold-test.yml is stale: run python -m tests.support.hold_cases")


# ----------------------------------------------------------------------------- Alertmanager

@pytest.fixture(scope="module")
def amtool() -> str:
    found = shutil.which("amtool")
    if found is None:
        pytest.fail("amtool not found on PATH: install it (Debian/Ubuntu: apt-get install prometheus-alertmanager)")
    return found


# ----------------------------------------------------------------------------- README scrape config
