"""Conformance: every real ``npu-smi info -t <type>`` capture in the shared corpus parses.

The corpus lives in ``../shared/corpus`` (or ``$NPUWATCH_CORPUS``); without it this
module is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from collectors import (
    npu_smi_board,
    npu_smi_common,
    npu_smi_ecc,
    npu_smi_hccs,
    npu_smi_health,
    npu_smi_memory,
    npu_smi_power,
    npu_smi_temp,
    npu_smi_usages,
)
from collectors._text import MIB
from collectors.base import ChipRef, CollectContext, ToolError
from tests.support.paths import CORPUS

TOOLS = CORPUS / "tools"
if not TOOLS.is_dir():
    pytest.skip(f"shared corpus not found at {CORPUS}", allow_module_level=True)

PARSERS: dict[str, tuple[Callable[[str], Any], ...]] = {
    "usages": (npu_smi_usages.parse,),
    "common": (npu_smi_common.parse,),
    "power": (npu_smi_power.parse,),
    "temp": (npu_smi_temp.parse,),
    "sensors": (npu_smi_memory.parse, npu_smi_temp.parse),  # 950: HBM temperature lives here
    "memory": (npu_smi_memory.parse,),
    "ecc": (npu_smi_ecc.parse,),
    "health": (npu_smi_health.parse,),
    "board": (npu_smi_board.parse,),
    "hccs": (npu_smi_hccs.parse,),
}
# Types in the corpus that this module does not parse, and why.
UNSUPPORTED = {
    "template-info": "vNPU template table (box drawing), not key : value; no metric needs it",
    "proc-mem": "per-process lines with several pairs each; processes come from the info table",
    "topo": "NPU x NPU matrix, not key : value; parsed by the topology source",
}
ERROR_CAPTURES = {"npu-smi_info_-t_board__error-invalid-card-id__src-mindcluster-faultdiag-kgparse.txt"}


def _type_of(path: Path) -> str:
    return path.name.split("_-t_", 1)[1].split("_", 1)[0]


ALL_FILES = sorted(TOOLS.glob("npu-smi_info_-t_*"))
FILES = [p for p in ALL_FILES if _type_of(p) not in UNSUPPORTED]


def read(name: str) -> str:
    return (TOOLS / name).read_text(encoding="utf-8")


def test_corpus_has_key_value_captures() -> None:
    assert len(FILES) >= 20
    assert {_type_of(p) for p in ALL_FILES} <= set(PARSERS) | set(UNSUPPORTED)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name[:70])
def test_every_capture_parses_or_is_a_declared_error(path: Path) -> None:
    kind = _type_of(path)
    text = path.read_text(encoding="utf-8")
    for parse in PARSERS[kind]:
        if path.name in ERROR_CAPTURES:
            with pytest.raises(ToolError):
                parse(text)
        else:
            record = parse(text)
            assert record is not None
            assert record.rejected == ()  # a real capture never trips a bound or a line check


def test_910b1_common_frequencies_and_mcu_block() -> None:
    record = npu_smi_common.parse(read(
        "npu-smi_info_-t_common__910B1-with-mcu__drv23.0.rc2__src-arthurchiao-blog.txt"))
    assert record.aicore_frequency_hertz == 8e8 and record.aicore_max_frequency_hertz == 1.8e9
    assert record.temperature_celsius == 46.0 and record.mcu_temperature_celsius == 38.0
    assert record.power_watts == 93.4 and record.aicore_count == 24.0
    out = npu_smi_common.samples([record], ChipRef(1, 0), CollectContext())
    assert {s.metric: s.value for s in out}["npu_aicore_frequency_hertz"] == 8e8


def test_950_common_without_chip_blocks() -> None:
    record = npu_smi_common.parse(read("npu-smi_info_-t_common__950__src-Ascend-driver-docs-950.txt"))
    assert (record.aicore_frequency_hertz, record.aicore_max_frequency_hertz) == (1e8, 1.65e9)
    assert record.power_watts == 298.6


@pytest.mark.parametrize("name", [
    "npu-smi_info_-t_health__910A-Alarm-errcodes__src-mindcluster-faultdiag-kgparse.txt",
    "../logs/24_mc_fixture_npu_smi_health_alarm.txt",
])
def test_910a_health_alarm_codes(name: str) -> None:
    record = npu_smi_health.parse(read(name))
    assert record.health == "Alarm"
    assert record.error_codes == ("A4025021", "8C03A000", "8C084E00")
    assert record.error_information is not None
    lines = record.error_information.splitlines()
    assert lines[0] == "ascend_monitor adda heart beat lost error"
    assert lines[-1].startswith("node type=adda, sensor type=Heartbeat Sensor")
    out = npu_smi_health.samples([record], ChipRef(0, 0), CollectContext())
    assert [(s.metric, dict(s.labels).get("code"), dict(s.labels)["handling"]) for s in out] == [
        ("npu_error_code_active", "A4025021", "NotHandleFault"), ("npu_error_code_active", "8C03A000", "RestartNPU"),
        ("npu_error_code_active", "8C084E00", "FreeRestartNPU"), ("npu_fault_handling", None, "RestartNPU")]


@pytest.mark.parametrize("name", [
    "npu-smi_info_-t_health__910A-OK__src-mindcluster-faultdiag-kgparse.txt",
    "npu-smi_info_-t_health__950-OK__src-Ascend-driver-docs-950.txt",
])
def test_health_ok_both_key_spellings(name: str) -> None:
    record = npu_smi_health.parse(read(name))
    assert (record.health, record.error_codes, record.error_information) == ("OK", (), None)


def test_950_power() -> None:
    record = npu_smi_power.parse(read("npu-smi_info_-t_power__950__src-Ascend-driver-docs-950.txt"))
    assert record.power_watts == 296.5


def test_950_temp_key_drift_and_sensors() -> None:
    assert npu_smi_temp.parse(read(
        "npu-smi_info_-t_temp__950__src-Ascend-driver-docs-950.txt")).temperature_celsius == 53.0
    sensors = read("npu-smi_info_-t_sensors__950__src-Ascend-driver-docs-950.txt")
    temp = npu_smi_temp.parse(sensors)
    assert dict(temp.chip_sensors_celsius) == {
        "Soc Max Temperature (C)": 67.0, "SFP Temperature (C)": None,
        "NDIE Temperature (C)": 65.0, "HBM Temperature (C)": 63.0}
    assert npu_smi_memory.parse(sensors).hbm_temperature_celsius == 63.0


def test_950_memory() -> None:
    record = npu_smi_memory.parse(read("npu-smi_info_-t_memory__950__src-Ascend-driver-docs-950.txt"))
    assert record.hbm_capacity_bytes == 131072 * MIB and record.hbm_clock_hertz == 3.2e9
    assert record.hbm_temperature_celsius == 63.0 and record.hbm_manufacturer_id == "0x5A"


def test_usages_hbm_bandwidth_and_910a_has_no_aivector() -> None:
    b1 = npu_smi_usages.parse(read("npu-smi_info_-t_usages__910B1__drv23.0.rc2__src-arthurchiao-blog.txt"))
    assert b1.hbm_capacity_bytes == 65536 * MIB and b1.hbm_usage_ratio == 0.04
    assert b1.hbm_bandwidth_usage_ratio == 0.0 and b1.aivector_usage_ratio == 0.0
    a = npu_smi_usages.parse(read(
        "npu-smi_info_-t_usages__910A__drv23.0.5__src-mindcluster-faultdiag-kgparse.txt"))
    assert a.aivector_usage_ratio is None and a.hbm_capacity_bytes == 31129 * MIB
    n950 = npu_smi_usages.parse(read("npu-smi_info_-t_usages__950__src-Ascend-driver-docs-950.txt"))
    assert n950.hbm_bandwidth_usage_ratio == 0.03 and n950.ctrlcpu_usage_ratio == 0.4
    assert n950.npu_utilization_ratio == 0.0
    out = npu_smi_usages.samples(n950, ChipRef(0, 0, has_chip_id=False), CollectContext())
    assert {s.metric: s.value for s in out}["npu_hbm_bandwidth_utilization_ratio"] == 0.03


def test_310p_duo_usages_second_chip() -> None:
    text = read("npu-smi_info_-t_usages__310P-Duo-2chips-DVPP__src-gpustack-test.txt")
    assert npu_smi_usages.parse(text).ddr_capacity_bytes == 44280 * MIB
    second = npu_smi_usages.parse(text, chip=1)
    assert second.ddr_capacity_bytes == 43693 * MIB and second.ctrlcpu_usage_ratio == 0.03


def test_ecc_all_zero_ddr_and_hbm() -> None:
    record = npu_smi_ecc.parse(read(
        "npu-smi_info_-t_ecc__910-DDR+HBM__drv23.0.5__src-mindcluster-doc-collecting_logs.txt"))
    for counts in (record.ddr, record.hbm):
        assert counts.single_bit_errors == 0.0 and counts.double_bit_total_errors == 0.0
        assert counts.double_bit_isolated_pages == 0.0 and counts.single_bit_next_isolated_pages is None
    out = npu_smi_ecc.samples([record], ChipRef(1, 0), CollectContext())
    assert len(out) == 6 and all(s.value == 0.0 for s in out)


def test_hccs_partial_capture() -> None:
    record = npu_smi_hccs.parse(read(
        "npu-smi_info_-t_hccs__910-series-PARTIAL__src-rust-collector-test-parse_real_hccs_block.txt"))
    assert record.healthy is True
    assert record.tx_packets == (1993002168.0, 1434439505.0, 1588783520.0)
    assert record.rx_bytes[2] == 82529134440.0 and record.error_counts == (0.0, 0.0, 0.0)


def test_board_inventory_from_card_level_910b() -> None:
    record = npu_smi_board.parse(read(
        "npu-smi_info_-t_board__910B-0xD802-card-level__drv25.5.1__src-yunionio-telegraf-npu_smi-test.txt"))
    assert npu_smi_board.inventory_labels(record) == {
        "firmware": "7.8.0.6.201", "driver": "25.5.1", "serial": "1025C9048791"}
    assert record.model is None and record.pci_device_id == "0xD802" and record.chip_count == 1


def test_board_chip_level_910a() -> None:
    record = npu_smi_board.parse(read(
        "npu-smi_info_-t_board_-c0__910A__src-mindcluster-faultdiag-kgparse.txt"))
    assert record.chip_name == "910A" and record.firmware_version == "7.1.0.7.220"
    assert record.software_version is None and record.pcb_id is None
