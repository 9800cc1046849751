"""`npuwatch check`'s and `diagnose`'s chip-health judgement by handling level (agent.health.faults.chip_health):
the level of an active code decides, the health word only without codes; diagnose's advice follows the level."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent.check.settings import CheckSettings
from agent.core.config import build_config
from agent.health import faults
from agent.health.status import FAIL, PASS, UNKNOWN, WARN
from agent.health.thresholds import fault_kind
from collectors.fault_levels import LEVELS, FaultTable, default_table

EXPECTED = {
    "ManuallySeparateNPU": FAIL, "SeparateNPU": FAIL, "RestartNPU": FAIL, "FreeRestartNPU": FAIL,
    "PreSeparateNPU": WARN, "SubHealthFault": WARN, "RestartBusiness": WARN, "RestartRequest": WARN,
    "NotHandleFault": PASS,
}
ALERT_OF_LEVEL = {
    "ManuallySeparateNPU": "NPUFaultIsolate", "SeparateNPU": "NPUFaultIsolate", "RestartNPU": "NPUFaultResetWhenIdle",
    "FreeRestartNPU": "NPUFaultResetWhenIdle", "PreSeparateNPU": "NPUFaultDrainAfterJob",
}
TABLE = FaultTable({f"C{rank}": level for rank, level in enumerate(LEVELS)})


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("word", ["OK", "Warning", "Alarm", "Critical"])
def test_an_active_codes_level_decides_whatever_the_health_word(level: str, word: str) -> None:
    code = f"C{LEVELS.index(level)}"
    result = faults.chip_health(word, [code], said=f"npu-smi says {word} {code}", table=TABLE)
    assert result.status == EXPECTED[level]
    if result.status != PASS:
        assert code in result.evidence and level in result.evidence


def test_the_most_severe_code_decides_and_is_named() -> None:
    codes = ["C8", "C6", "C3"]  # NotHandleFault, RestartRequest, RestartNPU
    result = faults.chip_health("Warning", codes, said="npu-smi says Warning", table=TABLE)
    assert (result.status, result.kind) == (FAIL, "chip_fault_reset")
    assert result.evidence.endswith("C3 is RestartNPU")


@pytest.mark.parametrize(("word", "status"), [("OK", PASS), ("Warning", WARN), ("Alarm", FAIL), ("Critical", FAIL),
                                              ("Bogus", FAIL), (None, UNKNOWN)])
def test_without_codes_the_health_word_decides(word: str | None, status: str) -> None:
    assert faults.chip_health(word, [], said="npu-smi", table=TABLE).status == status


def test_a_code_in_no_list_fails_an_alarm_chip_and_warns_otherwise() -> None:
    assert faults.chip_health("Alarm", ["DEADBEEF"], said="npu-smi", table=TABLE).status == FAIL
    assert faults.chip_health("Warning", ["DEADBEEF"], said="npu-smi", table=TABLE).status == WARN


@pytest.mark.parametrize("level", sorted(ALERT_OF_LEVEL))
def test_diagnose_advises_the_runbook_of_the_alert_that_pages_the_level(level: str) -> None:
    kind = faults.LEVEL_KINDS[level]
    assert kind is not None
    assert fault_kind(kind).runbook_alert == ALERT_OF_LEVEL[level]


def test_the_configured_table_replaces_the_packaged_one_and_a_broken_one_does_not(tmp_path: Path) -> None:
    newer = tmp_path / "faultCode.json"
    newer.write_text(json.dumps({"SeparateNPUCodes": ["80E21007"]}), encoding="utf-8")
    settings = CheckSettings.from_config(build_config({"faults": {"codes_file": str(newer)}}))
    assert settings.judging.fault_table.levels == {"80E21007": "SeparateNPU"}
    assert faults.chip_health("OK", ["80E21007"], said="npu-smi", table=settings.judging.fault_table).status == FAIL
    broken = tmp_path / "broken.json"
    broken.write_text("{", encoding="utf-8")
    assert CheckSettings.from_config(build_config({"faults": {"codes_file": str(broken)}})).judging.fault_table \
        == default_table()


def test_a_separation_the_agent_holds_fails_the_chip_whatever_it_says_now() -> None:
    held = {"80E01801": 1_740_000_000.0, "80E01802": 1_730_000_000.0}
    result = faults.chip_health("OK", [], said="npu-smi says OK", table=TABLE, held=held, npu=3, chip=0)
    assert (result.status, result.kind, result.value) == (FAIL, "chip_fault_isolate", "ManuallySeparateNPU")
    assert "the agent holds 80E01802 as ManuallySeparateNPU since" in result.evidence  # the earliest hold
    assert result.evidence.endswith("then `npuwatch faults clear --npu 3`")
    assert faults.chip_health("OK", [], said="npu-smi says OK", table=TABLE, held={}).status == PASS


def test_every_handling_level_has_one_action_and_one_kind() -> None:
    assert set(faults.LEVEL_ACTIONS) == set(faults.LEVEL_KINDS) == set(LEVELS)


def test_check_and_diagnose_apply_the_agents_escalation_without_writing_it() -> None:
    """A frequency level the agent's history raised stays on the chip in check's judgement (planted: a judgement
    that ignores ``history`` reads the chip as healthy), and the history is only read."""
    from dataclasses import replace

    from agent.handling.escalation import ChipHistory, Raised
    from collectors.fault_levels import FrequencyRule

    now = time.time()
    raised = ChipHistory(raised={"80E18005": Raised("PreSeparateNPU", now - 60, 3600.0)},
                         recovered={"80E18005": now - 30}, cleared={"80E18005": now - 30})
    before = raised
    # the rule that raised it (a level whose rule is gone is released: docs/fault-codes.md, A reload)
    table = replace(TABLE, frequency=(FrequencyRule(frozenset({"80E18005"}), 86400.0, 3, "PreSeparateNPU", 3600.0),))
    result = faults.chip_health("OK", [], said="npu-smi says OK", table=table, history=raised, npu=1, chip=0)
    assert (result.status, result.kind, result.value) == (WARN, "chip_fault_drain", "PreSeparateNPU")
    assert "the agent's history raises the chip to PreSeparateNPU" in result.evidence
    assert raised == before
    # without the history: one reading, and the chip is OK
    assert faults.chip_health("OK", [], said="npu-smi says OK", table=TABLE).status == PASS


def test_without_a_fault_history_the_check_says_it_judged_one_reading(tmp_path: Path) -> None:
    from agent.health.checks_chip import check_chip_health
    from agent.health.node import read_history
    from agent.health.readings import NodeReadings, QuickReadings, Reading
    from agent.health.settings import JudgeSettings
    from collectors.base import ChipRef
    from collectors.npu_smi_info import ChipStatus, InfoTable

    ref = ChipRef(0, 0)
    chip = ChipStatus(0, 0, False, None, None, "910B3", "OK", *(None,) * 10)
    node = NodeReadings(table=Reading(InfoTable(None, (chip,), (), False)), chips=[ref])
    read_history(node, tmp_path / "fault_history.json")
    check = check_chip_health(QuickReadings(node=node), JudgeSettings())
    assert check.status == PASS
    assert f"no fault history at {tmp_path / 'fault_history.json'}" in check.evidence
