"""``npu-smi info -t temp -i N [-c C]`` (and 950 ``-t sensors``): temperatures (parser only).

The chip key drifts across drivers: ``Temperature(C)``, ``Temperature (C)``
(950), ``NPU Temperature (C)`` (910B 25.5.1). Board sensors (``LM75A_TE (C)``)
live in the MCU block; ``-t sensors`` adds ``Soc Max``/``NDIE``/``HBM``/``SFP
Temperature (C)``. Every ``... (C)`` key is kept, chip and board separately.
No Source: ``npu_temperature_celsius`` is owned by the info table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from collectors.base import ParseError
from collectors.bounds import Rejection, Rejects
from collectors.npu_smi_kv import KvBlock, find_block, find_mcu_block, parse_blocks

__all__ = ["TempRecord", "parse"]

_CHIP_TEMPERATURE = r"(?:NPU\s*)?Temperature\s*\(C\)"
_ANY_CELSIUS = r".*\(C\)"
_CHIP_KEY_RE = re.compile(_CHIP_TEMPERATURE, re.IGNORECASE)

SensorReadings = tuple[tuple[str, Optional[float]], ...]  # evaluated at run time: no `X | None` on 3.9


@dataclass(frozen=True)
class TempRecord:
    """``temperature_celsius`` is the chip key; ``*_sensors_celsius`` keep every (key, value) as printed.

    Readings outside -40..150 C (``collectors.bounds``) are None and listed in ``rejected``.
    """

    temperature_celsius: float | None = None
    chip_sensors_celsius: SensorReadings = ()
    board_sensors_celsius: SensorReadings = ()
    rejected: tuple[Rejection, ...] = ()


def _readings(block: KvBlock | None, rejects: Rejects) -> SensorReadings:
    return tuple(block.checked_all(_ANY_CELSIUS, "temperature_celsius", rejects)) if block else ()


def parse(text: str, chip: int | None = None) -> TempRecord:
    """Parse ``-t temp``/``-t sensors`` output; raises ParseError when no ``(C)`` key is printed."""
    rejects = Rejects()
    blocks = parse_blocks(text, rejects)
    block = find_block(blocks, (_ANY_CELSIUS,), chip)
    mcu = find_mcu_block(blocks)
    if block is None and (mcu is None or not mcu.has(_ANY_CELSIUS)):
        raise ParseError("no temperature keys in npu-smi output", blocks[0].line_no,
                         ": ".join(blocks[0].pairs[0]))
    chip_readings = _readings(block, rejects)
    board_readings = _readings(mcu, rejects)
    return TempRecord(
        temperature_celsius=next((value for key, value in chip_readings if _is_chip_key(key)), None),
        chip_sensors_celsius=chip_readings,
        board_sensors_celsius=board_readings,
        rejected=rejects.freeze(),
    )


def _is_chip_key(key: str) -> bool:
    return _CHIP_KEY_RE.fullmatch(key) is not None
