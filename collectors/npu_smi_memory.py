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
from collectors.bounds import Rejection, Rejects, is_label_text
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


@dataclass(frozen=True)
class MemoryRecord:
    ddr_capacity_bytes: float | None = None
    ddr_clock_hertz: float | None = None
    hbm_capacity_bytes: float | None = None
    hbm_clock_hertz: float | None = None
    hbm_temperature_celsius: float | None = None
    hbm_manufacturer_id: str | None = None
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def parse(text: str, chip: int | None = None) -> MemoryRecord:
    """Parse ``-t memory`` (or 950 ``-t sensors``) output.

    Values that are not numbers or lie outside ``collectors.bounds.BOUNDS`` are None
    and listed in ``rejected``.
    """
    rejects = Rejects()
    block = require_block(parse_blocks(text, rejects), _KEYS, "memory", chip)
    manufacturer = block.text(_HBM_MANUFACTURER)
    if manufacturer is not None and not is_label_text(manufacturer):
        rejects.add("HBM Manufacturer ID is not printable ASCII of bounded length", *block.where(_HBM_MANUFACTURER))
        manufacturer = None
    return MemoryRecord(
        ddr_capacity_bytes=block.checked(_DDR_CAPACITY, "memory_bytes", rejects, MIB),
        ddr_clock_hertz=block.checked(_DDR_CLOCK, "frequency_hertz", rejects, MHZ),
        hbm_capacity_bytes=block.checked(_HBM_CAPACITY, "memory_bytes", rejects, MIB),
        hbm_clock_hertz=block.checked(_HBM_CLOCK, "frequency_hertz", rejects, MHZ),
        hbm_temperature_celsius=block.checked(_HBM_TEMPERATURE, "temperature_celsius", rejects),
        hbm_manufacturer_id=manufacturer,
        rejected=rejects.freeze(),
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
