"""``npu-smi info -t power -i N [-c C]``: chip power (parser only).

Sample output (950)::

    NPU ID                         : 0
    NPU Real-time Power(W)         : 296.5

Older 910A/310 drivers print ``Power Dissipation(W)`` and ``Rated Power
Dissipation(W)``. On 310P Duo the card-level power sits in the MCU block. No
Source: ``npu_power_watts`` is owned by the info table; this parser serves
diagnostics and cross-checks.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors.base import ParseError
from collectors.bounds import Rejection, Rejects
from collectors.npu_smi_kv import find_block, find_mcu_block, parse_blocks

__all__ = ["PowerRecord", "parse"]

_POWER = r"NPU\s*Real-time\s*Power\s*\(W\)|Power\s*Dissipation\s*\(W\)"
_RATED = r"Rated\s*Power\s*Dissipation\s*\(W\)"


@dataclass(frozen=True)
class PowerRecord:
    power_watts: float | None = None
    rated_power_watts: float | None = None
    mcu_power_watts: float | None = None
    rejected: tuple[Rejection, ...] = ()  # lines and values refused (collectors.bounds)


def parse(text: str, chip: int | None = None) -> PowerRecord:
    """Parse ``-t power`` output; raises ParseError when no power key is printed at all.

    Readings outside 0..2000 W (``collectors.bounds``) are None and listed in ``rejected``.
    """
    rejects = Rejects()
    blocks = parse_blocks(text, rejects)
    block = find_block(blocks, (_POWER, _RATED), chip)
    mcu = find_mcu_block(blocks)
    if block is None and (mcu is None or not mcu.has(_POWER)):
        raise ParseError("no power keys in npu-smi output", blocks[0].line_no, ": ".join(blocks[0].pairs[0]))
    return PowerRecord(
        power_watts=block.checked(_POWER, "power_watts", rejects) if block else None,
        rated_power_watts=block.checked(_RATED, "power_watts", rejects) if block else None,
        mcu_power_watts=mcu.checked(_POWER, "power_watts", rejects) if mcu else None,
        rejected=rejects.freeze(),
    )
