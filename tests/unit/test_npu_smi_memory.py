"""``npu-smi info -t memory`` (and 950 ``-t sensors``) and ``-t board``: golden records and samples."""

from __future__ import annotations

from collectors._text import MIB
from collectors.base import ChipRef, CollectContext
from collectors.npu_smi_board import BoardRecord, inventory_labels
from collectors.npu_smi_board import parse as parse_board
from collectors.npu_smi_board import samples as board_samples
from collectors.npu_smi_memory import MemoryRecord, parse, samples
from tests.support import paths

FIXTURES = paths.FIXTURES / "npu_smi_kv"
CHIP = ChipRef(7, 0)


def read(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_memory_golden_tab_indented() -> None:
    assert parse(read("memory_910b_tab.txt")) == MemoryRecord(
        ddr_capacity_bytes=0.0, ddr_clock_hertz=0.0, hbm_capacity_bytes=65536 * MIB,
        hbm_clock_hertz=1.6e9, hbm_temperature_celsius=44.0, hbm_manufacturer_id=None,
    )


def test_memory_accepts_the_950_sensors_key_with_a_space() -> None:
    text = "Soc Max Temperature (C)        : 70\nHBM Temperature (C)            : 52\n"
    assert parse(text) == MemoryRecord(hbm_temperature_celsius=52.0)


def test_memory_samples_hbm_temperature_only_when_known() -> None:
    out = samples([parse(read("memory_910b_tab.txt"))], CHIP, CollectContext())
    assert [(s.metric, s.labels, s.value) for s in out] == [
        ("npu_hbm_temperature_celsius", (("npu", "7"), ("chip", "0")), 44.0)]
    record = parse(read("memory_hbm_temperature_na.txt"))
    assert record.hbm_capacity_bytes == 131072 * MIB and record.hbm_temperature_celsius is None
    assert samples(record, CHIP, CollectContext()) == []


def test_board_golden_card_level() -> None:
    assert parse_board(read("board_card_level.txt")) == BoardRecord(
        product_name="SYNTH_BOARD_A2", model=None, manufacturer="Huawei", serial_number="2102SYNTH0042",
        software_version="24.1.rc3", firmware_version="7.5.0.1.220", compatibility="OK",
        board_id="0x65", pcb_id=None, bom_id="1", pcie_bus_info="0000:82:00.0", slot_id="3",
        pci_vendor_id="0x19E5", pci_device_id="0xD802", subsystem_vendor_id="0x19E5",
        subsystem_device_id="0x3002", chip_count=1,
    )


def test_board_inventory_labels_and_no_samples() -> None:
    record = parse_board(read("board_card_level.txt"))
    assert inventory_labels(record) == {
        "firmware": "7.5.0.1.220", "driver": "24.1.rc3", "serial": "2102SYNTH0042"}
    assert inventory_labels(BoardRecord(firmware_version="7.1")) == {
        "firmware": "7.1", "driver": "", "serial": ""}
    assert board_samples([record], CHIP, CollectContext()) == []
