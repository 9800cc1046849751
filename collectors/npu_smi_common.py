"""``npu-smi info -t common -i N [-c C]``: clocks, temperature and power of one chip.

Sample output (910B1, driver 23.0.rc2; ``Chip ID`` first here, last elsewhere)::

    Chip ID                        : 0
    Aicore Freq(MHZ)               : 1800
    Aicore curFreq(MHZ)            : 800
    Temperature(C)                 : 46
    NPU Real-time Power(W)         : 93.4

    Chip Name                      : mcu
    Temperature(C)                 : 38

The AI Core clock is only printed here (there is no ``-t freq``). Exported:
``npu_aicore_frequency_hertz`` (curFreq) and ``npu_aicore_max_frequency_hertz``
(Freq). Temperature and power are parsed but owned by the info table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors.base import ChipRef, CollectContext, Sample, Source
from collectors.bounds import Rejection, Rejects
from collectors.npu_smi_kv import (
    KvBlock,
    chip_argv,
    chip_sample,
    find_mcu_block,
    one_record,
    parse_blocks,
    require_block,
)

__all__ = ["SOURCE", "CommonRecord", "parse", "samples"]

MHZ = 1e6

_MAX_FREQ = r"Aicore\s*Freq\s*\(MHZ\)"
_CUR_FREQ = r"Aicore\s*cur\s*Freq\s*\(MHZ\)"
_TEMPERATURE = r"(?:NPU\s*)?Temperature\s*\(C\)"
_POWER = r"NPU\s*Real-time\s*Power\s*\(W\)|Power\s*Dissipation\s*\(W\)"
_CHIP_KEYS = (
    r"Memory\s*Usage\s*Rate\s*\(%\)", r"HBM\s*Usage\s*Rate\s*\(%\)", r"Aicore\s*Usage\s*Rate\s*\(%\)",
    _MAX_FREQ, _CUR_FREQ, r"Aicore\s*Count", _TEMPERATURE, _POWER,
)


@dataclass(frozen=True)
class CommonRecord:
    """One chip's ``-t common`` values; ``mcu_*`` come from the board MCU block (card level)."""

    memory_usage_ratio: float | None = None
    hbm_usage_ratio: float | None = None
    aicore_usage_ratio: float | None = None
    aicore_max_frequency_hertz: float | None = None
    aicore_frequency_hertz: float | None = None
    aicore_count: float | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    mcu_temperature_celsius: float | None = None
    mcu_power_watts: float | None = None
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def _ratio(block: KvBlock, pattern: str, rejects: Rejects) -> float | None:
    percent = block.checked(pattern, "percent", rejects)
    return None if percent is None else percent / 100.0


def parse(text: str, chip: int | None = None) -> CommonRecord:
    """Parse ``-t common`` output; ``chip`` picks a block when several chips are printed.

    Values that are not numbers or lie outside ``collectors.bounds.BOUNDS`` are None
    and listed in ``rejected``.
    """
    rejects = Rejects()
    blocks = parse_blocks(text, rejects)
    block = require_block(blocks, _CHIP_KEYS, "common", chip)
    mcu = find_mcu_block(blocks)
    return CommonRecord(
        memory_usage_ratio=_ratio(block, _CHIP_KEYS[0], rejects),
        hbm_usage_ratio=_ratio(block, _CHIP_KEYS[1], rejects),
        aicore_usage_ratio=_ratio(block, _CHIP_KEYS[2], rejects),
        aicore_max_frequency_hertz=block.checked(_MAX_FREQ, "frequency_hertz", rejects, MHZ),
        aicore_frequency_hertz=block.checked(_CUR_FREQ, "frequency_hertz", rejects, MHZ),
        aicore_count=block.checked(r"Aicore\s*Count", "aicore_count", rejects),
        temperature_celsius=block.checked(_TEMPERATURE, "temperature_celsius", rejects),
        power_watts=block.checked(_POWER, "power_watts", rejects),
        mcu_temperature_celsius=mcu.checked(_TEMPERATURE, "temperature_celsius", rejects) if mcu else None,
        mcu_power_watts=mcu.checked(_POWER, "power_watts", rejects) if mcu else None,
        rejected=rejects.freeze(),
    )


def parse_records(text: str) -> list[CommonRecord]:
    """The Source's parser: a one-element list, as ``Source.parse`` returns a sequence."""
    return [parse(text)]


def samples(records: Sequence[Any] | CommonRecord, chip: ChipRef | None,
            ctx: CollectContext | None = None) -> list[Sample]:
    record = one_record(records, CommonRecord)
    if record is None or chip is None:
        return []
    values = (
        ("npu_aicore_frequency_hertz", record.aicore_frequency_hertz),
        ("npu_aicore_max_frequency_hertz", record.aicore_max_frequency_hertz),
    )
    return [chip_sample(metric, chip, value) for metric, value in values if value is not None]


SOURCE = Source(
    name="npu_smi_common",
    tool="npu-smi",
    group="usages",
    scope="chip",
    argv=lambda chip: chip_argv("common", chip),
    parse=parse_records,
    samples=samples,
)
