"""``npu-smi info -t memory -i N [-c C]``: DDR/HBM capacity, clock and HBM temperature.

Sample output (950)::

    HBM Capacity(MB)               : 131072
    HBM Clock Speed(MHz)           : 3200
    HBM Temperature(C)             : 63
    HBM Manufacturer ID            : 0x5A

The parser also accepts 950 ``-t sensors`` output, whose key is ``HBM Temperature
(C)`` (with a space). Exported: ``npu_hbm_temperature_celsius``; capacities and
clocks stay in the record (the info table owns HBM capacity).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import MIB
from collectors.base import ChipRef, CollectContext, Sample, Source
from collectors.npu_smi_kv import chip_argv, chip_sample, one_record, parse_blocks, require_block

__all__ = ["SOURCE", "MemoryRecord", "parse", "samples"]

MHZ = 1e6

_DDR_CAPACITY = r"DDR\s*Capacity\s*\(MB\)"
_DDR_CLOCK = r"DDR\s*Clock\s*Speed\s*\(MHz\)"
_HBM_CAPACITY = r"HBM\s*Capacity\s*\(MB\)"
_HBM_CLOCK = r"HBM\s*Clock\s*Speed\s*\(MHz\)"
_HBM_TEMPERATURE = r"HBM\s*Temperature\s*\(C\)"
_HBM_MANUFACTURER = r"HBM\s*Manufacturer\s*ID"
_KEYS = (_DDR_CAPACITY, _DDR_CLOCK, _HBM_CAPACITY, _HBM_CLOCK, _HBM_TEMPERATURE, _HBM_MANUFACTURER)


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    ddr_capacity_bytes: float | None = None
    ddr_clock_hertz: float | None = None
    hbm_capacity_bytes: float | None = None
    hbm_clock_hertz: float | None = None
    hbm_temperature_celsius: float | None = None
    hbm_manufacturer_id: str | None = None


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None or value < 0 else value * scale


def parse(text: str, chip: int | None = None) -> MemoryRecord:
    """Parse ``-t memory`` (or 950 ``-t sensors``) output."""
    block = require_block(parse_blocks(text), _KEYS, "memory", chip)
    return MemoryRecord(
        ddr_capacity_bytes=_scaled(block.number(_DDR_CAPACITY), MIB),
        ddr_clock_hertz=_scaled(block.number(_DDR_CLOCK), MHZ),
        hbm_capacity_bytes=_scaled(block.number(_HBM_CAPACITY), MIB),
        hbm_clock_hertz=_scaled(block.number(_HBM_CLOCK), MHZ),
        hbm_temperature_celsius=block.number(_HBM_TEMPERATURE),
        hbm_manufacturer_id=block.text(_HBM_MANUFACTURER),
    )


def parse_records(text: str) -> list[MemoryRecord]:
    """The Source's parser: a one-element list, as ``Source.parse`` returns a sequence."""
    return [parse(text)]


def samples(records: Sequence[Any] | MemoryRecord, chip: ChipRef | None,
            ctx: CollectContext | None = None) -> list[Sample]:
    record = one_record(records, MemoryRecord)
    if record is None or chip is None or record.hbm_temperature_celsius is None:
        return []
    return [chip_sample("npu_hbm_temperature_celsius", chip, record.hbm_temperature_celsius)]


SOURCE = Source(
    name="npu_smi_memory",
    tool="npu-smi",
    group="health",
    scope="chip",
    argv=lambda chip: chip_argv("memory", chip),
    parse=parse_records,
    samples=samples,
)
