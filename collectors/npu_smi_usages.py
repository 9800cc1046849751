"""``npu-smi info -t usages -i N [-c C]``: utilisation rates of one chip.

Sample output (910B, driver 23.0.rc2)::

    HBM Capacity(MB)               : 65536
    HBM Usage Rate(%)              : 4
    Aicore Usage Rate(%)           : 0
    Aivector Usage Rate(%)         : 0
    Aicpu Usage Rate(%)            : 0
    Ctrlcpu Usage Rate(%)          : 0
    HBM Bandwidth Usage Rate(%)    : 0
    Chip ID                        : 0

Exported: ``npu_aivector_utilization_ratio`` (310P prints ``Vectorcore Usage
Rate(%)`` instead; it is used when no Aivector key exists),
``npu_aicpu_utilization_ratio``, ``npu_ctrlcpu_utilization_ratio``,
``npu_hbm_bandwidth_utilization_ratio``. AI Core and HBM usage are parsed but
exported by the info table, which prints exact values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors._text import MIB
from collectors.base import ChipRef, CollectContext, Sample, Source
from collectors.bounds import Rejection, Rejects
from collectors.npu_smi_kv import KvBlock, chip_argv, chip_sample, one_record, parse_blocks, require_block

__all__ = ["SOURCE", "UsagesRecord", "parse", "samples"]

_KEYS = {
    "ddr_capacity_bytes": r"DDR\s*Capacity\s*\(MB\)",
    "ddr_usage_ratio": r"DDR\s*Usage\s*Rate\s*\(%\)",
    "ddr_hugepages_total_pages": r"DDR\s*Hugepages\s*Total\s*\(page\)",
    "ddr_hugepages_usage_ratio": r"DDR\s*Hugepages\s*Usage\s*Rate\s*\(%\)",
    "hbm_capacity_bytes": r"HBM\s*Capacity\s*\(MB\)",
    "hbm_usage_ratio": r"HBM\s*Usage\s*Rate\s*\(%\)",
    "aicore_usage_ratio": r"Aicore\s*Usage\s*Rate\s*\(%\)",
    "aivector_usage_ratio": r"Aivector\s*Usage\s*Rate\s*\(%\)",
    "aicube_usage_ratio": r"Aicube\s*Usage\s*Rate\s*\(%\)",
    "vectorcore_usage_ratio": r"Vectorcore\s*Usage\s*Rate\s*\(%\)",
    "aicpu_usage_ratio": r"Aicpu\s*Usage\s*Rate\s*\(%\)",
    "ctrlcpu_usage_ratio": r"Ctrlcpu\s*Usage\s*Rate\s*\(%\)",
    "ddr_bandwidth_usage_ratio": r"DDR\s*Bandwidth\s*Usage\s*Rate\s*\(%\)",
    "hbm_bandwidth_usage_ratio": r"HBM\s*Bandwidth\s*Usage\s*Rate\s*\(%\)",
    "npu_utilization_ratio": r"NPU\s*Utilization\s*\(%\)",
}


@dataclass(frozen=True)
class UsagesRecord:
    """One chip's ``-t usages`` values; None where the key is absent or NA."""

    ddr_capacity_bytes: float | None = None
    ddr_usage_ratio: float | None = None
    ddr_hugepages_total_pages: float | None = None
    ddr_hugepages_usage_ratio: float | None = None
    hbm_capacity_bytes: float | None = None
    hbm_usage_ratio: float | None = None
    aicore_usage_ratio: float | None = None
    aivector_usage_ratio: float | None = None
    aicube_usage_ratio: float | None = None
    vectorcore_usage_ratio: float | None = None
    aicpu_usage_ratio: float | None = None
    ctrlcpu_usage_ratio: float | None = None
    ddr_bandwidth_usage_ratio: float | None = None
    hbm_bandwidth_usage_ratio: float | None = None
    npu_utilization_ratio: float | None = None
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def _value(block: KvBlock, field: str, rejects: Rejects) -> float | None:
    pattern = _KEYS[field]
    if field.endswith("_ratio"):
        percent = block.checked(pattern, "percent", rejects)
        return None if percent is None else percent / 100.0
    if field.endswith("_bytes"):
        return block.checked(pattern, "memory_bytes", rejects, MIB)
    return block.checked(pattern, "hugepages", rejects)


def parse(text: str, chip: int | None = None) -> UsagesRecord:
    """Parse ``-t usages`` output; ``chip`` picks a block when several chips are printed.

    Values that are not numbers or lie outside ``collectors.bounds.BOUNDS`` are None
    and listed in ``rejected``.
    """
    rejects = Rejects()
    block = require_block(parse_blocks(text, rejects), tuple(_KEYS.values()), "usages", chip)
    values = {field: _value(block, field, rejects) for field in _KEYS}
    return UsagesRecord(**values, rejected=rejects.freeze())


def parse_records(text: str) -> list[UsagesRecord]:
    """The Source's parser: a one-element list, as ``Source.parse`` returns a sequence."""
    return [parse(text)]


def samples(records: Sequence[Any] | UsagesRecord, chip: ChipRef | None,
            ctx: CollectContext | None = None) -> list[Sample]:
    record = one_record(records, UsagesRecord)
    if record is None or chip is None:
        return []
    aivector = record.aivector_usage_ratio
    if aivector is None:
        aivector = record.vectorcore_usage_ratio
    values = (
        ("npu_aivector_utilization_ratio", aivector),
        ("npu_aicpu_utilization_ratio", record.aicpu_usage_ratio),
        ("npu_ctrlcpu_utilization_ratio", record.ctrlcpu_usage_ratio),
        ("npu_hbm_bandwidth_utilization_ratio", record.hbm_bandwidth_usage_ratio),
    )
    return [chip_sample(metric, chip, value) for metric, value in values if value is not None]


SOURCE = Source(
    name="npu_smi_usages",
    tool="npu-smi",
    group="usages",
    scope="chip",
    argv=lambda chip: chip_argv("usages", chip),
    parse=parse_records,
    samples=samples,
)
