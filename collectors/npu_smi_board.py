"""``npu-smi info -t board -i N``: inventory facts of one card.

Sample output (910B, driver 25.5.1, card level)::

    NPU ID                         : 0
    Product Name                   : IT21HMDC_Bin5
    Serial Number                  : 1025C9048791
    Software Version               : 25.5.1
    Firmware Version               : 7.8.0.6.201
    PCI Device ID                  : 0xD802
    Chip Count                     : 1

The Source asks at card level (no ``-c``): the chip-level variant prints chip
name and die ids but no driver version or serial number, which are what the
inventory needs. No samples: ``inventory_labels`` feeds ``npu_info``'s
firmware/driver/serial labels, so every text value must be printable ASCII of
at most 64 characters; any other value is dropped (None) and listed in
``BoardRecord.rejected``, as is a Chip Count outside 0..64.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors.base import ChipRef, CollectContext, Sample, Source
from collectors.bounds import Rejection, Rejects, is_label_text
from collectors.npu_smi_kv import KvBlock, chip_argv, parse_blocks, require_block

__all__ = ["SOURCE", "BoardRecord", "inventory_labels", "parse", "samples"]

_TEXT_KEYS = {
    "product_name": r"Product\s*Name",
    "model": r"Model",
    "manufacturer": r"Manufacturer",
    "serial_number": r"Serial\s*Number",
    "software_version": r"Software\s*Version",
    "firmware_version": r"Firmware\s*Version",
    "compatibility": r"Compatibility",
    "chip_name": r"Chip\s*Name",
    "chip_type": r"Chip\s*Type",
    "board_id": r"Board\s*ID",
    "pcb_id": r"PCB\s*ID",
    "bom_id": r"BOM\s*ID",
    "pcie_bus_info": r"PCIe\s*Bus\s*Info",
    "slot_id": r"Slot\s*ID",
    "pci_vendor_id": r"PCI\s*Vendor\s*ID",
    "pci_device_id": r"PCI\s*Device\s*ID",
    "subsystem_vendor_id": r"Subsystem\s*Vendor\s*ID",
    "subsystem_device_id": r"Subsystem\s*Device\s*ID",
}
_CHIP_COUNT = r"Chip\s*Count"


@dataclass(frozen=True)
class BoardRecord:
    """Card facts as printed (``NA`` -> None)."""

    product_name: str | None = None
    model: str | None = None
    manufacturer: str | None = None
    serial_number: str | None = None
    software_version: str | None = None
    firmware_version: str | None = None
    compatibility: str | None = None
    chip_name: str | None = None
    chip_type: str | None = None
    board_id: str | None = None
    pcb_id: str | None = None
    bom_id: str | None = None
    pcie_bus_info: str | None = None
    slot_id: str | None = None
    pci_vendor_id: str | None = None
    pci_device_id: str | None = None
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    chip_count: int | None = None
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def _text(block: KvBlock, pattern: str, rejects: Rejects) -> str | None:
    value = block.text(pattern)
    if value is not None and not is_label_text(value):
        rejects.add("board value is not printable ASCII of at most 64 characters", *block.where(pattern))
        return None
    return value


def parse(text: str, chip: int | None = None) -> BoardRecord:
    """Parse ``-t board`` output (card or chip level)."""
    rejects = Rejects()
    block = require_block(parse_blocks(text, rejects), (*_TEXT_KEYS.values(), _CHIP_COUNT), "board", chip)
    count = block.checked(_CHIP_COUNT, "chips_per_npu", rejects)
    if count is not None and not count.is_integer():
        rejects.add("Chip Count is not an integer", *block.where(_CHIP_COUNT))
        count = None
    texts = {field: _text(block, pattern, rejects) for field, pattern in _TEXT_KEYS.items()}
    return BoardRecord(**texts, chip_count=None if count is None else int(count), rejected=rejects.freeze())


def parse_records(text: str) -> list[BoardRecord]:
    """The Source's parser: a one-element list, as ``Source.parse`` returns a sequence."""
    return [parse(text)]


def inventory_labels(record: BoardRecord) -> dict[str, str]:
    """``npu_info`` labels from the board: always the keys firmware, driver, serial ("" when unknown)."""
    return {
        "firmware": record.firmware_version or "",
        "driver": record.software_version or "",
        "serial": record.serial_number or "",
    }


def samples(records: Sequence[Any] | BoardRecord, chip: ChipRef | None,
            ctx: CollectContext | None = None) -> list[Sample]:
    """Board facts are labels, not samples (see ``inventory_labels``)."""
    return []


SOURCE = Source(
    name="npu_smi_board",
    tool="npu-smi",
    group="health",
    scope="chip",
    argv=lambda chip: chip_argv("board", chip, card_level=True),
    parse=parse_records,
    samples=samples,
)
