"""Which chip a device-plugin device ID names: pure functions, no I/O.

The Ascend device plugin (MindCluster) advertises one device ID per chip, ending in the chip's
physical id, under resource names like ``huawei.com/Ascend910``:

| resource | device ID | chip |
|---|---|---|
| ``huawei.com/Ascend910`` (910, 910B, A3) | ``Ascend910-3`` | physical id 3 |
| ``huawei.com/Ascend310P`` | ``Ascend310P-1`` | physical id 1 |
| ``huawei.com/Ascend910-2c`` (vNPU: template, vNPU id, physical id) | ``Ascend910-2c-100-3`` | physical id 3 |
| ``huawei.com/Ascend310P-4c.3cpu`` (vNPU) | ``Ascend310P-4c.3cpu-101-0`` | physical id 0 |
| ``huawei.com/npu`` (Atlas 350) | ``npu-5`` | physical id 5 |
| any configured resource | ``7`` | physical id 7 |

npu-smi addresses chips by NPU and chip id; ``npu-smi info -m`` gives each chip's logic id and,
on newer drivers, its physical id (``collectors.npu_smi_mapping``). A device ID maps to the chip
with that physical id; when npu-smi prints no physical ids at all, to the chip with that logic id
(on a host they are the same unless a chip is missing or hidden).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from collectors.base import ChipRef

__all__ = ["ChipIndex", "physical_id", "resource_matches"]

_TRAILING_ID_RE = re.compile(r"(?:^|-)([0-9]{1,5})$")
MAX_DEVICE_ID_CHARS = 64  # the plugin's longest, "Ascend310P-4c.3cpu-100-0", is 24


def physical_id(device_id: str) -> int | None:
    """The physical chip id a device ID ends in (``Ascend910-2c-100-3`` -> 3); None when it names none."""
    if len(device_id) > MAX_DEVICE_ID_CHARS:
        return None
    match = _TRAILING_ID_RE.search(device_id)
    return int(match.group(1)) if match else None


def resource_matches(resource: str, patterns: Iterable[str]) -> bool:
    """Whether a resource name matches one of the configured names (``*``, ``?`` globs, case-sensitive)."""
    return any(fnmatchcase(resource, pattern) for pattern in patterns)


@dataclass(frozen=True)
class ChipIndex:
    """Chips by the id a device ID carries: physical ids when npu-smi prints them, else logic ids."""

    by_id: dict[int, ChipRef]
    basis: str  # "phy_id", "logic_id" or "none"

    @classmethod
    def of(cls, chips: Sequence[ChipRef]) -> ChipIndex:
        if any(chip.phy_id is not None for chip in chips):
            return cls({chip.phy_id: chip for chip in chips if chip.phy_id is not None}, "phy_id")
        if any(chip.logic_id is not None for chip in chips):
            return cls({chip.logic_id: chip for chip in chips if chip.logic_id is not None}, "logic_id")
        return cls({}, "none")

    def chip(self, device_id: str) -> ChipRef | None:
        number = physical_id(device_id)
        return self.by_id.get(number) if number is not None else None
