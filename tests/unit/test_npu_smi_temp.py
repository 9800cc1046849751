"""``npu-smi info -t temp`` / ``-t power``: parsers only (the info table owns these metrics)."""

from __future__ import annotations

import pytest

from collectors.base import ParseError
from collectors.npu_smi_power import PowerRecord
from collectors.npu_smi_power import parse as parse_power
from collectors.npu_smi_temp import TempRecord, parse
from tests.support import paths

FIXTURES = paths.FIXTURES / "npu_smi_kv"


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_temp_golden_npu_key_and_board_sensors_in_mcu_block() -> None:
    assert parse(read("temp_910b_npu_key_and_board_sensors.txt")) == TempRecord(
        temperature_celsius=48.0,
        chip_sensors_celsius=(("NPU Temperature (C)", 48.0),),
        board_sensors_celsius=(("LM75A_TE (C)", 31.0), ("LM75B_TE (C)", None)),
    )


@pytest.mark.parametrize("key", ["Temperature(C)", "Temperature (C)", "NPU Temperature (C)"])
def test_temp_key_drift(key: str) -> None:
    assert parse(f"NPU ID : 0\n{key} : 53\n").temperature_celsius == 53.0


def test_temp_mcu_only_output_still_parses() -> None:
    record = parse("Chip Name : mcu\nLM75A_TE (C) : 30\n")
    assert record.temperature_celsius is None and record.board_sensors_celsius == (("LM75A_TE (C)", 30.0),)


def test_power_old_keys() -> None:
    assert parse_power(read("power_old_dissipation.txt")) == PowerRecord(
        power_watts=67.5, rated_power_watts=310.0)


def test_power_na_is_none_but_no_power_key_is_an_error() -> None:
    assert parse_power(read("power_na.txt")) == PowerRecord()
    with pytest.raises(ParseError):
        parse_power("NPU ID : 0\nChip Count : 1\n")


def test_power_card_level_value_in_mcu_block() -> None:
    record = parse_power(read("common_mcu_first_chip_id_last.txt"))
    assert record == PowerRecord(mcu_power_watts=55.2)
