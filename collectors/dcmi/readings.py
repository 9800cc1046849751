"""What one DCMI call returns, in the library's own units, and its JSON form on the worker's pipe.

Values are kept as the library gives them (power in 0.1 W, sizes in the library's MB, rates in
percent, clocks in MHz): converting is ``records``' job, in one place that the unit tests pin. Each
reading is a frozen dataclass whose JSON form is its fields (``to_json``); ``from_json`` rebuilds it
on the agent's side and refuses a payload whose fields differ, so a worker of another version is
caught, not misread.

The worker runs on Python 3.8: nothing here may need a newer interpreter.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = [
    "READINGS",
    "BoardReading",
    "ChipId",
    "ChipInfoReading",
    "EccReading",
    "HbmReading",
    "MemoryReading",
    "PcieReading",
    "ProcessReading",
    "from_json",
    "to_json",
]

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class ChipId:
    """One chip: its logical id (what ``dcmiv2_*`` and the runtime use), the card/device pair of the
    v1 API (npu-smi's ``-i``/``-c``: NPU ID and Chip ID), and its physical id, where the library says."""

    logic_id: int
    card_id: int | None
    device_id: int | None
    phy_id: int | None


@dataclasses.dataclass(frozen=True)
class ChipInfoReading:
    chip_type: str  # e.g. "Ascend"
    chip_name: str  # e.g. "910B3"
    chip_ver: str  # e.g. "V1"
    aicore_count: int
    npu_name: str | None  # only from the v2 struct


@dataclasses.dataclass(frozen=True)
class PcieReading:
    vendor_id: int
    subvendor_id: int
    device_id: int
    subdevice_id: int
    domain: int
    bus: int
    device: int
    function: int


@dataclasses.dataclass(frozen=True)
class HbmReading:
    """``dcmi_hbm_info``. Sizes in the library's unit: MB per npu-exporter, KB per an older header
    comment (docs/dcmi.md, "Units"); ``records`` assumes MB (2^20 bytes), as npu-smi prints."""

    memory_size: int
    memory_usage: int
    freq_mhz: int
    temperature_celsius: int
    bandwidth_util_percent: int


@dataclasses.dataclass(frozen=True)
class MemoryReading:
    """``dcmi_get_memory_info_stru`` (DDR): sizes in MB, ``hugepage_size_kb`` in KB, pages counted."""

    memory_size_mb: int
    memory_available_mb: int
    freq_mhz: int
    hugepage_size_kb: int
    hugepages_total: int
    hugepages_free: int
    utilization_percent: int


@dataclasses.dataclass(frozen=True)
class EccReading:
    """``dcmi_ecc_info`` of one memory (DDR or HBM)."""

    enabled: bool
    single_bit_errors: int
    double_bit_errors: int
    single_bit_total_errors: int
    double_bit_total_errors: int
    single_bit_isolated_pages: int
    double_bit_isolated_pages: int
    single_bit_next_isolated_pages: int
    double_bit_next_isolated_pages: int


@dataclasses.dataclass(frozen=True)
class BoardReading:
    board_id: int
    pcb_id: int
    bom_id: int
    slot_id: int


@dataclasses.dataclass(frozen=True)
class ProcessReading:
    """A process using the chip; ``memory_bytes`` in bytes (the header says so)."""

    pid: int
    memory_bytes: int


READINGS: dict[str, type] = {
    cls.__name__: cls
    for cls in (ChipId, ChipInfoReading, PcieReading, HbmReading, MemoryReading, EccReading, BoardReading,
                ProcessReading)
}


def to_json(value: Any) -> Any:
    """A reading (or a list of them, or a plain value) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    return value


def from_json(cls: type[T], data: Any) -> T:
    """Rebuild a reading; ValueError when the fields differ from the dataclass's."""
    if not isinstance(data, dict):
        raise ValueError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    names = {field.name for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
    if set(data) != names:
        raise ValueError(f"{cls.__name__}: fields {sorted(data)} differ from {sorted(names)}")
    return cls(**data)
