"""``npuwatch dcmi``: which library the agent would load, and one chip read through DCMI and npu-smi side by
side (the trust check's table). Exit 0 when every shared field agrees, 1 when one disagrees, 2 when there is
no DCMI to read (disabled, or no library found and vetted), 3 when there is no npu-smi to compare with."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, TextIO

from agent.core.backend import Fallback
from agent.dcmi.locate import locate_library
from agent.dcmi.setup import open_backend
from agent.dcmi.trust import TrustCheck, side_by_side
from collectors.base import ChipRef
from collectors.dcmi.library import LibraryNotFound

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["main"]


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (tuple, list)):
        return " ".join(str(item) for item in value) or "(none)"
    return str(value)


def _why_none(config: Config) -> str:
    """Why there is no DCMI to read, in words (the agent logs it at INFO only, which a command hides)."""
    if config.collectors.dcmi.enabled is False:
        return "collectors.dcmi.enabled is false"
    try:
        locate_library(config.collectors.dcmi.library)
    except LibraryNotFound as exc:  # its message lists every candidate refused
        return str(exc)
    return "no libdcmi.so found and vetted (-v shows the search)"


def main(config: Config, out: TextIO = sys.stdout, chip_index: int = 0) -> int:
    backend = open_backend(config)
    if backend is None:
        print(f"npuwatch dcmi: no DCMI here: {_why_none(config)}", file=out)
        return 2
    try:
        try:
            listed = [chip for chip in backend.chips(refresh=True) if chip.card_id is not None]
        except Exception as exc:  # the helper failed: say so and stop
            print(f"npuwatch dcmi: {backend.client.library}: {exc}", file=out)
            return 2
        print(f"library: {backend.client.library} ({', '.join(backend.client.ready.get('apis', []))}; "
              f"version {backend.client.ready.get('version')}); {len(listed)} chip(s) with card/device ids", file=out)
        if not listed:
            return 2
        chip = listed[min(chip_index, len(listed) - 1)]
        ref = ChipRef(npu=chip.card_id or 0, chip=chip.device_id or 0, logic_id=chip.logic_id, phy_id=chip.phy_id)
        trust = TrustCheck(backend, config.collectors.npu_smi.path, float(config.collectors.npu_smi.timeout),
                           float(config.collectors.dcmi.verify_interval))
        rows = side_by_side(backend, ref, trust.npu_smi)
    except Fallback as exc:
        print(f"npuwatch dcmi: {exc}", file=out)
        return 2
    finally:
        backend.client.close()
    print(f"npu {ref.npu} chip {ref.chip} (logic id {ref.logic_id}):", file=out)
    header = ("collector", "field", "dcmi", "npu-smi", "")
    table = [header, *((row.source, row.field, _show(row.dcmi), _show(row.tool),
                        {True: "agree", False: "DISAGREE", None: "?"}[row.agree]) for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    for line in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip(), file=out)
    if any(row.agree is False for row in rows):
        return 1
    return 0 if any(row.agree is not None for row in rows) else 3
