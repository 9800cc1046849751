"""alerts/alertmanager.hccl-routing.example.yml: a valid Alertmanager config that puts the victims'
HCCLTimeout and the culprit's HCCLCulpritSuspected into one group, and waits for the culprit."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "alerts" / "alertmanager.hccl-routing.example.yml"
RULES = REPO / "alerts" / "triage.rules.yml"


@pytest.fixture(scope="module")
def amtool() -> str:
    found = shutil.which("amtool")
    if found is None:
        pytest.fail("amtool not found on PATH: install it (Debian/Ubuntu: apt-get install prometheus-alertmanager)")
    return found


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_the_example_is_a_valid_alertmanager_config(amtool: str) -> None:
    result = _run([amtool, "check-config", str(EXAMPLE)])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(("labels", "receiver"), [
    (["alertname=HCCLTimeout", "node=node-1", "code=EI0002"], "hccl-incident"),
    (["alertname=HCCLCulpritSuspected", "node=node-3", "npu=1", "comm=g"], "hccl-incident"),
    (["alertname=NPURoCELinkDown", "node=node-3", "npu=1"], "default"),
])
def test_hccl_alerts_take_the_incident_route(amtool: str, labels: list[str], receiver: str) -> None:
    result = _run([amtool, "config", "routes", "test", f"--config.file={EXAMPLE}", *labels])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == receiver


def _seconds(duration: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    return sum(float(n) * units[u] for n, u in re.findall(r"(\d+)([smh])", duration))


def test_the_first_notification_waits_for_the_culprit() -> None:
    route = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))["route"]["routes"][0]
    rule = next(r for g in yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"] for r in g["rules"]
                if r.get("alert") == "HCCLCulpritSuspected")
    # the culprit alert needs its `for:` plus a log scan (15 s), a scrape and an evaluation (30 s each
    # at most, as commonly configured) after the victims'
    assert _seconds(route["group_wait"]) > _seconds(rule["for"]) + 15 + 30 + 30
    assert route["group_by"] == ["job"]
