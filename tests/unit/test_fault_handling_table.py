"""The packaged handling-level table (collectors/fault_data) against the reference files it is derived from,
and the table's own rules: the stricter of two levels, the severity order, unknown codes by health word."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from collectors import fault_levels
from collectors.fault_levels import LEVELS, default_table, load_table, most_severe, parse_codes, static_level

REFERENCE = Path(os.environ.get("NPUWATCH_REFERENCE") or Path(__file__).resolve().parents[3] / "shared" / "reference")
FAULTS = REFERENCE / "faults"

needs_reference = pytest.mark.skipif(not (FAULTS / "faultCode.json").is_file(),
                                     reason=f"no reference fault tables at {FAULTS}")


@needs_reference
def test_the_packaged_levels_agree_with_the_device_plugin_table() -> None:
    reference = parse_codes(json.loads((FAULTS / "faultCode.json").read_text(encoding="utf-8")))
    assert dict(default_table().levels) == reference
    assert len(reference) == 802


@needs_reference
def test_the_packaged_escalation_agrees_with_the_device_plugin_customization() -> None:
    reference = load_table(FAULTS / "faultCode.json", FAULTS / "faultCustomization.json")
    assert default_table() == reference


@needs_reference
def test_a_code_listed_twice_takes_the_stricter_level() -> None:
    raw = json.loads((FAULTS / "faultCode.json").read_text(encoding="utf-8"))
    twice = {code for code in {c for codes in raw.values() for c in codes}
             if sum(codes.count(code) for codes in raw.values()) > 1}
    assert twice == {"A2301001", "B4060011"}  # A2301001 under two levels, B4060011 twice in one
    for code in twice:
        listed = [key[: -len("Codes")] for key, codes in raw.items() if code in codes]
        assert default_table().levels[code] == min(listed, key=LEVELS.index)


def test_the_stricter_of_two_listed_levels_wins_whichever_comes_first() -> None:
    assert parse_codes({"NotHandleFaultCodes": ["0xab"], "SeparateNPUCodes": ["AB"]}) == {"AB": "SeparateNPU"}
    assert parse_codes({"SeparateNPUCodes": ["AB"], "NotHandleFaultCodes": ["AB"]}) == {"AB": "SeparateNPU"}


def test_the_levels_order_most_severe_first() -> None:
    assert LEVELS == ("ManuallySeparateNPU", "SeparateNPU", "PreSeparateNPU", "RestartNPU", "FreeRestartNPU",
                      "RestartBusiness", "RestartRequest", "SubHealthFault", "NotHandleFault")
    assert most_severe(["NotHandleFault", "RestartNPU", "SubHealthFault"]) == "RestartNPU"
    assert most_severe([]) is None


def test_a_code_in_no_list_is_separate_while_the_chip_is_alarm_or_critical() -> None:
    table = default_table()
    assert "DEADBEEF" not in table.levels
    assert static_level(table, "DEADBEEF", "Alarm") == "SeparateNPU"
    assert static_level(table, "DEADBEEF", " Critical ") == "SeparateNPU"
    assert static_level(table, "DEADBEEF", "Warning") == "SubHealthFault"
    assert static_level(table, "DEADBEEF", None) == "SubHealthFault"
    assert static_level(table, "0x80e21007", "Alarm") == "NotHandleFault"  # listed: the list decides


def test_an_unknown_level_in_a_newer_file_is_skipped_and_the_rest_kept(tmp_path: Path) -> None:
    bad = tmp_path / "faultCode.json"
    bad.write_text(json.dumps({"RebootTheWorldCodes": ["AB"], "SeparateNPUCodes": ["CD"]}), encoding="utf-8")
    table = load_table(bad)
    assert dict(table.levels) == {"CD": "SeparateNPU"}
    assert [(entry.file, entry.entry) for entry in table.skipped] == [(str(bad), "RebootTheWorldCodes")]


def test_the_table_and_its_notice_are_package_data() -> None:
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8")
    assert '"fault_data/*.json", "fault_data/NOTICE"' in pyproject
    data = fault_levels.DATA_DIR
    assert {path.name for path in data.iterdir()} >= {"fault_codes.json", "fault_escalation.json", "NOTICE"}
    assert "Apache License" in (data / "NOTICE").read_text(encoding="utf-8")
