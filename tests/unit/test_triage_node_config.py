"""A bundle carries its node's config (secrets redacted), and triage judges that node's saved readings with its
limits, as ``check`` judged them there (``agent.triage.node_config``, ``agent.triage.snapshots``)."""

from __future__ import annotations

import json

import pytest

from agent.core.config import build_config
from agent.triage.node_config import REDACTED, NodeLimits, config_document, redacted
from agent.triage.snapshots import ToolReadings, recognise
from tests.support.paths import REPO

INFO = (REPO / "tests/fixtures/npu_smi_tables/info_910b3_x2_procs.txt").read_text()


def hot_info(celsius: int) -> str:
    """Two chips; NPU 1 at ``celsius`` (its health word made OK, so only the heat is judged)."""
    lines = INFO.splitlines(keepends=True)
    lines[9] = lines[9].replace("Alarm", "OK   ").replace("96.0        44", f"96.0        {celsius}")
    return "".join(lines)


def kinds(readings: ToolReadings) -> set[tuple[int | None, str]]:
    found, _ = readings.judge()
    return {(fault.npu, fault.kind) for fault in found}


def test_the_document_keeps_every_setting_and_redacts_the_secrets() -> None:
    config = build_config({"expected_chips": 8, "check": {"max_temperature": 90,
                                                          "prometheus_url": "https://ops:hunter2@prom:9090"}})
    document = json.loads(config_document(config))["npuwatch_config"]
    assert document["expected_chips"] == 8 and document["check"]["max_temperature"] == 90
    assert document["check"]["prometheus_url"] == f"https://{REDACTED}@prom:9090"
    assert "hunter2" not in config_document(config).decode()
    assert redacted({"basic_auth_users": {"admin": "$2y$hash"}, "password": "x", "tls_key": "k", "cert_file": "/c",
                     "keys": [1]}) == {"basic_auth_users": REDACTED, "password": REDACTED, "tls_key": REDACTED,
                                       "cert_file": "/c", "keys": [1]}


def test_the_limits_come_back_from_the_document() -> None:
    config = build_config({"expected_chips": 4, "check": {"max_temperature": 90, "max_isolated_pages": 10}})
    limits = NodeLimits.from_document(config_document(config))
    assert (limits.expected_chips, limits.max_temperature, limits.max_isolated_pages) == (4, 90.0, 10)
    assert limits.max_temperature_basis == "config check.max_temperature"
    assert NodeLimits.from_document(config_document(build_config({}))) == NodeLimits()
    with pytest.raises(ValueError):
        NodeLimits.from_document(b'{"something": "else"}')
    with pytest.raises(ValueError):
        NodeLimits.from_document(b'{"npuwatch_config": {"check": {"max_temperature": "hot"}}}')


def test_a_chip_at_92_c_is_too_hot_on_a_node_whose_config_says_90_and_only_hot_on_one_without() -> None:
    default = ToolReadings("node-a")
    default.add("info", None, hot_info(92), 1.0)
    assert kinds(default) == {(1, "chip_hot")}
    node = ToolReadings("node-a", limits=NodeLimits(max_temperature=90.0,
                                                    max_temperature_basis="config check.max_temperature"))
    node.add("info", None, hot_info(92), 1.0)
    assert kinds(node) == {(1, "chip_too_hot")}


def test_a_chip_missing_from_the_table_is_judged_against_the_nodes_expected_chips() -> None:
    unset = ToolReadings("node-a")
    unset.add("info", None, hot_info(44), 1.0)
    assert kinds(unset) == set()
    expecting = ToolReadings("node-a", limits=NodeLimits(expected_chips=3))
    expecting.add("info", None, hot_info(44), 1.0)
    assert kinds(expecting) == {(None, "chip_missing")}


def test_a_saved_hccs_reading_is_recognised_and_judged_as_check_judges_it() -> None:
    text = (REPO / "tests/fixtures/npu_smi_kv/hccs_nok_full.txt").read_text()
    assert recognise(text) == "hccs"
    readings = ToolReadings("node-a")
    readings.add("hccs", 5, text, 1.0)
    readings.add("hccs", 6, text.replace(": NOK", ": OK"), 1.0)
    assert kinds(readings) == {(5, "hccs_unhealthy")}
