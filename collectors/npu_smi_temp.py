"""``npu-smi info -t temp -i N [-c C]`` (and 950 ``-t sensors``): temperatures (parser only).

The chip key drifts across drivers: ``Temperature(C)``, ``Temperature (C)``
(950), ``NPU Temperature (C)`` (910B 25.5.1). Board sensors (``LM75A_TE (C)``)
live in the MCU block; ``-t sensors`` adds ``Soc Max``/``NDIE``/``HBM``/``SFP
Temperature (C)``. Every ``... (C)`` key is kept, chip and board separately.
No Source: ``npu_temperature_celsius`` is owned by the info table.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors._text import number
from collectors.base import ParseError
from collectors.npu_smi_kv import find_block, find_mcu_block, parse_blocks

__all__ = ["TempRecord", "parse"]

_CHIP_TEMPERATURE = r"(?:NPU\s*)?Temperature\s*\(C\)"
_ANY_CELSIUS = r".*\(C\)"

SensorReadings = tuple[tuple[str, float | None], ...]


@dataclass(frozen=True, slots=True)
class TempRecord:
    """``temperature_celsius`` is the chip key; ``*_sensors_celsius`` keep every (key, value) as printed."""

    temperature_celsius: float | None = None
    chip_sensors_celsius: SensorReadings = ()
    board_sensors_celsius: SensorReadings = ()


def parse(text: str, chip: int | None = None) -> TempRecord:
    """Parse ``-t temp``/``-t sensors`` output; raises ParseError when no ``(C)`` key is printed."""
    blocks = parse_blocks(text)
    block = find_block(blocks, (_ANY_CELSIUS,), chip)
    mcu = find_mcu_block(blocks)
    if block is None and (mcu is None or not mcu.has(_ANY_CELSIUS)):
        raise ParseError("no temperature keys in npu-smi output", blocks[0].line_no,
                         ": ".join(blocks[0].pairs[0]))
    chip_readings = tuple((k, number(v)) for k, v in block.get_all(_ANY_CELSIUS)) if block else ()
    board_readings = tuple((k, number(v)) for k, v in mcu.get_all(_ANY_CELSIUS)) if mcu else ()
    return TempRecord(
        temperature_celsius=block.number(_CHIP_TEMPERATURE) if block else None,
        chip_sensors_celsius=chip_readings,
        board_sensors_celsius=board_readings,
    )
