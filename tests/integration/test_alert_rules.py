"""Checks on alerts/: promtool validation and unit tests, plus our own contract checks.

promtool and amtool come from the Debian/Ubuntu ``prometheus`` and ``prometheus-alertmanager``
packages (CI installs both), so a missing one is a failure, not a skip. That every part of every
rule is needed by a promtool case is tests/integration/test_alert_coverage.py's subject.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.paths import REPO
from tests.support.rule_files import alert_rules, load_yaml

ALERTS_DIR = REPO / "alerts"
RULE_FILES = sorted(ALERTS_DIR.glob("*.rules.yml"))
TEST_FILES = sorted((ALERTS_DIR / "tests").glob("*-test.yml"))
ALERTMANAGER_EXAMPLE = ALERTS_DIR / "alertmanager.example.yml"
README = REPO / "README.md"






def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO, check=False)


def test_promtool_check_rules(promtool: str) -> None:
    result = _run([promtool, "check", "rules", *map(str, RULE_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests(promtool: str) -> None:
    result = _run([promtool, "test", "rules", *map(str, TEST_FILES)])
    assert result.returncode == 0, result.stdout + result.stderr


# ----------------------------------------------------------------------------- generated node-fault alerts


def test_generated_rules_for_another_job_pass_their_own_cases(promtool: str, tmp_path: Path) -> None:
    """``python -m alerts.generate --selector ...``: the rules and the cases written for another scrape job agree."""
    from alerts import generate

    assert generate.main(["--selector", 'job="npu-agents"', "-o", str(tmp_path)]) == 0
    result = _run([promtool, "test", "rules", str(tmp_path / "tests" / "faults-test.yml")])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_every_rule_file_retargeted_to_another_job_passes_its_own_cases(promtool: str, tmp_path: Path) -> None:
    """``python -m alerts.retarget``: every shipped rule file (hand-written ones too) and its cases, for a scrape
    job that is not called npuwatch; no rule is left selecting the old job."""
    from alerts import retarget

    assert retarget.main(["--selector", 'job="npu-agents"', "-o", str(tmp_path)]) == 0
    rules = sorted(tmp_path.glob("*.rules.yml"))
    assert [path.name for path in rules] == [path.name for path in RULE_FILES]
    assert [path for path in rules if retarget.MATCHER in path.read_text(encoding="utf-8")] == []
    result = _run([promtool, "test", "rules", *map(str, sorted((tmp_path / "tests").glob("*-test.yml")))])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_a_selector_with_more_matchers_retargets_the_rules_only(promtool: str, tmp_path: Path) -> None:
    from alerts import retarget

    assert retarget.main(["--selector", 'job="npu-agents",cluster="a"', "-o", str(tmp_path)]) == 0
    assert not (tmp_path / "tests").exists()
    hccl = (tmp_path / "hccl.rules.yml").read_text(encoding="utf-8")
    assert 'npu_hccl_errors_total{job="npu-agents", cluster="a", category=~' in hccl
    result = _run([promtool, "check", "rules", *map(str, sorted(tmp_path.glob("*.rules.yml")))])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr


def test_the_generated_cases_catch_a_rule_that_reads_the_wrong_finding(promtool: str, tmp_path: Path) -> None:
    """Both sides of each case bite: a rule over another kind's finding fails its firing case, and one that lost
    its kind matcher fails the silent case."""
    from alerts import generate

    made = generate.generate()
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "faults-test.yml").write_text(made.tests, encoding="utf-8")
    for planted in (', kind="chip_hot"}', "}"):
        (tmp_path / "faults.rules.yml").write_text(
            made.rules.replace(', kind="chip_too_hot"}\n', planted + "\n", 1), encoding="utf-8")
        result = _run([promtool, "test", "rules", str(tmp_path / "tests" / "faults-test.yml")])
        assert result.returncode != 0, planted
        assert "NPUTemperatureHigh" in result.stdout + result.stderr, planted


# ----------------------------------------------------------------------------- stable annotations


def test_template_lists_come_out_in_the_same_order_every_time(promtool: str, tmp_path: Path) -> None:
    """The cases of alerts whose annotations list query results (error codes, collectors,
    states), run many times: query order is not stable, so an unsorted list fails some runs."""
    listing = {rule["alert"] for _, rule in alert_rules()
               if any("range" in text and "query" in text for text in rule.get("annotations", {}).values())}
    assert {"NPUUnhealthy", "NPUCollectorFailing"} <= listing, listing
    files = []
    for path in TEST_FILES:
        document = load_yaml(path)
        cases = [case for case in document["tests"]
                 if any(check["alertname"] in listing for check in case.get("alert_rule_test", []))]
        if not cases:
            continue
        document["tests"] = cases
        document["rule_files"] = [str((path.parent / rules).resolve()) for rules in document["rule_files"]]
        target = tmp_path / path.name
        target.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
        files.append(target)
    runs = 10
    result = _run([promtool, "test", "rules", *map(str, files * runs)])
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr
    assert result.stdout.count("SUCCESS") == runs * len(files), result.stdout[-2000:]


# ----------------------------------------------------------------------------- scrape gaps


# ----------------------------------------------------------------------------- Alertmanager

@pytest.fixture(scope="module")
def amtool() -> str:
    found = shutil.which("amtool")
    if found is None:
        pytest.fail("amtool not found on PATH: install it (Debian/Ubuntu: apt-get install prometheus-alertmanager)")
    return found


def test_alertmanager_example_is_valid(amtool: str) -> None:
    result = _run([amtool, "check-config", str(ALERTMANAGER_EXAMPLE)])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout


@pytest.mark.parametrize(("labels", "receiver"), [
    ({"alertname": "HCCLTimeout", "severity": "critical", "node": "n1"}, "npu-pager"),
    ({"alertname": "NPUCollectorFailing", "severity": "warning", "node": "n1"}, "npu-team"),
])
def test_alertmanager_example_routes_critical_alerts_to_the_pager(
    amtool: str, labels: dict[str, str], receiver: str
) -> None:
    result = _run([amtool, "config", "routes", "test", f"--config.file={ALERTMANAGER_EXAMPLE}",
                   *(f"{k}={v}" for k, v in labels.items())])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver, result.stdout


# ----------------------------------------------------------------------------- README scrape config

def _readme_scrape_config() -> dict[str, Any]:
    section = README.read_text(encoding="utf-8").split("## Prometheus scrape config", 1)[1]
    block = section.split("```yaml", 1)[1].split("```", 1)[0]
    config = yaml.safe_load(block)
    assert isinstance(config, dict)
    return config


def test_readme_scrape_config_is_valid(promtool: str, tmp_path: Path) -> None:
    config = _readme_scrape_config()
    config.pop("rule_files")  # a path on the Prometheus host
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    result = _run([promtool, "check", "config", str(path)])
    assert result.returncode == 0, result.stdout + result.stderr
