"""The dashboards colour a reading as the agent judges it: every step that stands for a judgement comes from the
registry (agent.health.thresholds, agent.health.probe_limits), and only dashboards/thresholds.py holds steps.

Three holds: each judgement's steps give a reading the colour of the agent's own judgement of it (the judgement
functions of agent.health.faults, with the default config); every committed panel or table column that shows a
judged reading carries those steps; and no dashboard module but dashboards/thresholds.py builds a step.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.core.config import default_config
from agent.health import faults
from agent.health.status import VERDICT_OF
from agent.health.thresholds import FAULT_KINDS, HOT_OPTICS_C, WEAK_RX_POWER_W
from collectors.npu_smi_ecc import EccCounts, EccRecord
from dashboards import thresholds
from dashboards.queries import iter_panels
from tests.support.paths import REPO

JSON_DIR = REPO / "dashboards" / "json"
CONFIG = default_config()

# The metric a panel or column shows -> the steps of the judgement that stands behind it.
JUDGED: dict[str, Callable[[], Any]] = {
    "npu_temperature_celsius": thresholds.chip_temperature,
    "npu_hbm_ecc_isolated_pages": thresholds.isolated_pages,
    "npu_roce_link_up_transitions_total": thresholds.link_downs,
    "npu_probe_gemm_efficiency_ratio": thresholds.gemm_efficiency,
    "npu_optical_rx_power_watts": thresholds.optical_rx_power,
    "npu_optical_temperature_celsius": thresholds.optical_temperature,
}
# Columns that show a judged metric but not the judged quantity, and why.
NOT_THE_JUDGED_QUANTITY = {
    ("Culprit hints", "RoCE link flaps"): "a node's flaps summed over its ports: any is a hint",
}


def colour_of(config: Any, value: float) -> str:
    """The colour Grafana gives ``value``: the last step at or under it (the first has no value)."""
    found = config["steps"][0]["color"]
    for step in config["steps"][1:]:
        if value >= step["value"]:
            found = step["color"]
    return found


def judged_colour(result: Any) -> str:
    return thresholds.STATUS_COLOURS[VERDICT_OF[result.status]]


def _steps(builder: Callable[[], Any]) -> dict[str, Any]:
    return json.loads(json.dumps(builder().build(), default=lambda o: o.to_json()))


# --- each judgement's steps colour a reading as the agent judges it ----------------------------------------------


def test_temperature_steps_are_the_agents_judgement() -> None:
    steps = _steps(thresholds.chip_temperature)
    for celsius in range(0, 131):  # npu-smi prints whole degrees
        judged = faults.temperature(float(celsius), max_celsius=CONFIG.check.max_temperature, npu=0)
        assert colour_of(steps, celsius) == judged_colour(judged), celsius


def test_isolated_page_steps_are_the_agents_judgement() -> None:
    steps = _steps(thresholds.isolated_pages)
    for pages in range(0, 200):
        record = EccRecord(hbm=EccCounts(double_bit_errors=0, single_bit_isolated_pages=pages))
        judged = faults.hbm_ecc(record, max_pages=CONFIG.check.max_isolated_pages, npu=0)
        assert colour_of(steps, pages) == judged_colour(judged), pages


def test_link_down_steps_are_the_agents_judgement() -> None:
    steps = _steps(thresholds.link_downs)
    for downs in range(0, 30):
        judged = faults.link_downs(downs, 0, window_s=900.0, up_now=True, npu=0)
        assert colour_of(steps, downs) == judged_colour(judged), downs


def test_gemm_efficiency_steps_are_the_agents_judgement() -> None:
    steps = _steps(thresholds.gemm_efficiency)
    for hundredths in range(0, 131):
        efficiency = hundredths / 100
        judged = faults.gemm_probe(True, efficiency, "fp16", fail_below=CONFIG.probes.gemm.min_efficiency,
                                   warn_below=CONFIG.check.warn_ratio, npu=0)
        assert colour_of(steps, efficiency) == judged_colour(judged), efficiency


def test_steps_without_a_judgement_function_are_the_registrys_numbers() -> None:
    dark = FAULT_KINDS["optics_dark"]
    rx = _steps(thresholds.optical_rx_power)["steps"]
    assert [s["value"] for s in rx[1:]] == [dark.threshold, WEAK_RX_POWER_W]
    assert [s["color"] for s in rx] == ["red", "yellow", "green"]
    module = _steps(thresholds.optical_temperature)["steps"]
    assert [(s["value"], s["color"]) for s in module[1:]] == [(HOT_OPTICS_C, "yellow")]
    from agent.health.probe_limits import CLOCK_WARN
    assert [(s["value"], s["color"]) for s in _steps(thresholds.clock_ratio)["steps"]] == [
        (None, "yellow"), (CLOCK_WARN.value, "green")]


def test_status_colours_follow_the_exit_codes() -> None:
    assert thresholds.STATUS_MAPPING == {"0": ("ok", "green"), "1": ("warn", "yellow"), "2": ("FAIL", "red"),
                                         "3": ("unknown", "purple")}
    steps = _steps(lambda: thresholds.STATUS_STEPS)
    assert [colour_of(steps, code) for code in range(4)] == ["green", "yellow", "red", "purple"]


# --- the committed dashboards carry those steps ------------------------------------------------------------------


def _first_metric(expr: str) -> str | None:
    match = re.search(r"([a-zA-Z_:][\w:]*)\{", expr)
    return match.group(1) if match else None


def judged_places(document: dict[str, Any]) -> Iterator[tuple[str, str, str, dict[str, Any]]]:
    """(panel, column, metric, thresholds) of each panel or table column that shows a judged metric."""
    for panel in iter_panels(document):
        if panel["type"] == "row":
            continue
        targets = {t["refId"]: t["expr"] for t in panel["targets"]}
        if panel["type"] != "table":
            metric = _first_metric(next(iter(targets.values())))
            if metric in JUDGED:
                yield panel["title"], "", metric, panel["fieldConfig"]["defaults"]["thresholds"]
            continue
        for override in panel["fieldConfig"]["overrides"]:
            field = override["matcher"]["options"]
            if not field.startswith("Value"):
                continue
            expr = targets[field.removeprefix("Value #")] if "#" in field else next(iter(targets.values()))
            metric = _first_metric(expr)
            if metric not in JUDGED:
                continue
            props = {p["id"]: p["value"] for p in override["properties"]}
            column = props.get("displayName", field)
            yield panel["title"], column, metric, props.get("thresholds", {"steps": []})


def wrong_steps(documents: dict[str, dict[str, Any]]) -> list[str]:
    wrong = []
    for name, document in documents.items():
        for panel, column, metric, config in judged_places(document):
            if (panel, column) in NOT_THE_JUDGED_QUANTITY:
                continue
            want = _steps(JUDGED[metric])["steps"]
            if config["steps"] != want:
                wrong.append(f"{name}: {panel!r} {column!r} ({metric}) has {config['steps']}, the registry {want}")
    return wrong


def _committed() -> dict[str, dict[str, Any]]:
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in sorted(JSON_DIR.glob("*.json"))}


def test_every_judged_reading_on_the_dashboards_has_the_registrys_steps() -> None:
    documents = _committed()
    found = {(panel, column) for doc in documents.values() for panel, column, _, _ in judged_places(doc)}
    assert len(found) >= 12, found  # temperature, pages, flaps, GEMM efficiency and optics on three dashboards
    assert set(NOT_THE_JUDGED_QUANTITY) <= found
    assert wrong_steps(documents) == []


def test_a_registry_change_shows_on_the_committed_dashboards(monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    monkeypatch.setitem(FAULT_KINDS, "chip_hot", replace(FAULT_KINDS["chip_hot"], threshold=80.0))
    wrong = wrong_steps(_committed())
    assert wrong and all("npu_temperature_celsius" in line for line in wrong), wrong


# --- only dashboards/thresholds.py builds a step -------------------------------------------------------------------


def test_no_dashboard_module_but_thresholds_builds_steps() -> None:
    callers = []
    for path in sorted((REPO / "dashboards").glob("*.py")):
        if path.name in ("thresholds.py", "panels.py"):  # panels.py defines steps() and builds none
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "steps":
                callers.append(f"{path.name}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "dashboards.panels":
                assert "steps" not in {alias.name for alias in node.names}, path.name
    assert callers == []
