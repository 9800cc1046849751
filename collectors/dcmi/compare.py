"""DCMI against npu-smi, field by field, for one chip: the trust check's judgement (pure).

The fields both backends read, with how far apart they may be: readings that move between the two
reads (power, temperature) get room for that; sizes must agree within 2 %, which settles the HBM
unit (MB or KB: a factor of 1024) on a real node; the health word must be the same word.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors.base import ChipRef

__all__ = ["FIELDS", "Field", "Row", "compare"]


@dataclass(frozen=True)
class Field:
    name: str  # the record's attribute
    absolute: float = 0.0  # allowed difference
    relative: float = 0.0  # ... or this share of the npu-smi value, whichever is larger


@dataclass(frozen=True)
class Row:
    """One field of one source: both values, and whether they agree (None: a side did not read it)."""

    source: str
    field: str
    dcmi: Any
    tool: Any
    agree: bool | None


_SIZE = 0.02
FIELDS: dict[str, tuple[Field, ...]] = {
    "npu_smi_info": (Field("health"), Field("power_watts", 5.0, 0.1), Field("temperature_celsius", 3.0),
                     Field("hbm_total_bytes", relative=_SIZE), Field("hbm_used_bytes", 64 * 2**20, 0.05),
                     Field("memory_total_bytes", relative=_SIZE)),
    "npu_smi_health": (Field("health"), Field("error_codes")),
    "npu_smi_common": (Field("power_watts", 5.0, 0.1), Field("temperature_celsius", 3.0),
                       Field("aicore_max_frequency_hertz", relative=0.01), Field("aicore_count")),
    "npu_smi_usages": (Field("hbm_capacity_bytes", relative=_SIZE), Field("ddr_capacity_bytes", relative=_SIZE)),
    "npu_smi_memory": (Field("hbm_capacity_bytes", relative=_SIZE), Field("ddr_capacity_bytes", relative=_SIZE),
                       Field("hbm_clock_hertz", relative=0.01), Field("hbm_temperature_celsius", 3.0)),
}


def _record(source: str, records: Any, chip: ChipRef) -> Any:
    """The chip's record: its row of the info table, else the one record of a per-chip source."""
    if records is None:
        return None
    if source == "npu_smi_info":
        table = records[0] if isinstance(records, (list, tuple)) else records
        return next((row for row in table.chips if (row.npu, row.chip) == (chip.npu, chip.chip)), None)
    if isinstance(records, (list, tuple)):
        return records[0] if records else None
    return records


def _agree(field: Field, dcmi: Any, tool: Any) -> bool | None:
    if dcmi is None or tool is None:
        return None
    if isinstance(dcmi, (int, float)) and isinstance(tool, (int, float)):
        return abs(dcmi - tool) <= max(field.absolute, field.relative * abs(tool))
    if isinstance(dcmi, str) and isinstance(tool, str):
        return dcmi.strip().lower() == tool.strip().lower()
    if isinstance(dcmi, (tuple, list)) and isinstance(tool, (tuple, list)):
        return sorted(str(v).upper() for v in dcmi) == sorted(str(v).upper() for v in tool)
    return dcmi == tool


def compare(source: str, dcmi_records: Any, tool_records: Any, chip: ChipRef) -> Sequence[Row]:
    """Every shared field of ``source`` for ``chip``."""
    dcmi, tool = _record(source, dcmi_records, chip), _record(source, tool_records, chip)
    rows = []
    for field in FIELDS.get(source, ()):
        left = getattr(dcmi, field.name, None) if dcmi is not None else None
        right = getattr(tool, field.name, None) if tool is not None else None
        rows.append(Row(source, field.name, left, right, _agree(field, left, right)))
    return rows
