"""The npu-exporter names of alerts/npu-exporter-compat.rules.yml are the ones docs/coming-from-npu-exporter.md
says are recorded, each from the npuwatch series the page names, on the chip's labels.

Their values and labels are held by promtool (alerts/tests/npu-exporter-compat-test.yml, run by
tests/integration/test_alert_rules.py); these tests hold the page and the rule file to each other and to
the catalogue.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from collectors.catalogue import CATALOGUE
from tests.support.paths import REPO

RULES = REPO / "alerts" / "npu-exporter-compat.rules.yml"
PAGE = REPO / "docs" / "coming-from-npu-exporter.md"
HELPER = "npuwatch:npu_exporter_compat:chip_labels"
NODE_NAMES = {"machine_npu_nums", "machine_healthy_npu_nums", "machine_unhealthy_npu_nums"}


def _rules() -> dict[str, dict[str, Any]]:
    (group,) = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    assert all("alert" not in rule for rule in group["rules"])
    return {rule["record"]: rule for rule in group["rules"]}


def _expand(cell: str) -> list[str]:
    """The names of a table cell: `a`, `b` and `x_0` .. `_3` (x_0, x_1, x_2, x_3)."""
    names = []
    for first, last in re.findall(r"`(\w+)`(?: \.\. `_(\d+)`)?", cell):
        if last:
            stem, start = first.rsplit("_", 1)
            names += [f"{stem}_{i}" for i in range(int(start), int(last) + 1)]
        else:
            names.append(first)
    return names


def _recorded_rows() -> list[tuple[list[str], str]]:
    """(npu-exporter names, npuwatch cell) of every page row marked recorded."""
    section = PAGE.read_text(encoding="utf-8").split("## npu-exporter names", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[3] == "recorded":
            rows.append((_expand(cells[0]), cells[2]))
    return rows


def test_the_page_marks_recorded_exactly_the_names_the_rule_file_records() -> None:
    documented = [name for names, _ in _recorded_rows() for name in names]
    assert len(documented) == len(set(documented))
    assert set(documented) == set(_rules()) - {HELPER}


def test_each_recorded_name_reads_the_series_the_page_names() -> None:
    rules = _rules()
    for names, ours in _recorded_rows():
        family = re.match(r"`(?:sum without \([^)]*\) \((?:1 - )?)?(\w+)", ours)
        assert family and family.group(1) in CATALOGUE, ours
        for name in names:
            expr = rules[name]["expr"]
            assert re.search(rf"\b{family.group(1)}\{{", expr), (name, expr)
            for matcher in re.findall(r'\{(\w+="\w+")\}', ours):
                if name.endswith(("_0", "_1", "_2", "_3")) and matcher.startswith("lane="):
                    matcher = f'lane="{name[-1]}"'
                if "(and" not in ours:
                    assert matcher in expr, (name, matcher)


def test_every_chip_name_joins_the_chip_labels_and_no_node_name_does() -> None:
    for name, rule in _rules().items():
        if name == HELPER:
            continue
        joined = f"group_left (id, model_name, pcie_bus_info)\n{HELPER}" in re.sub(r"\n\s+", "\n", rule["expr"])
        assert joined == (name not in NODE_NAMES), name


def test_the_chip_labels_keep_npuwatchs_labels_and_drop_every_other_npu_info_label() -> None:
    dropped = re.search(r"max without \(([^)]*)\)", _rules()[HELPER]["expr"])
    assert dropped
    labels = {label.strip() for label in dropped.group(1).split(",")}
    assert labels == set(CATALOGUE["npu_info"].labels) - {"npu", "chip"}
