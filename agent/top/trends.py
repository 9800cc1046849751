"""The history panel of ``npuwatch top``: a line per NPU with its AI Core and temperature over the last refreshes,
as wide as the terminal allows. It fills the rows a 100-160 column terminal leaves free under the table, where the
table has no room for its own 16-mark history columns."""

from __future__ import annotations

from collections.abc import Sequence

from agent.health.thresholds import fault_kind
from agent.top.history import History, sparkline
from agent.top.lines import Line, fit
from agent.top.model import NpuRow

__all__ = ["MIN_MARKS", "trends"]

MIN_MARKS = 12  # narrower than this, a sparkline says too little to be worth its rows
_INDENT = 10
_VALUE_W = 6  # " 100%" or " 97°C"


def trends(rows: Sequence[NpuRow], history: History, width: int, room: int, ascii_only: bool) -> list[Line]:
    """The panel in at most ``room`` lines (its title, then a line per NPU, ``N more`` when they do not all fit);
    nothing when the width gives less than ``MIN_MARKS`` marks or top has seen one refresh only."""
    marks = (width - _INDENT - 5 - 2 * (2 + _VALUE_W)) // 2
    refreshes = max((len(v) for v in (*history.aicore.values(), *history.temperature.values())), default=0)
    if room < 2 or marks < MIN_MARKS or refreshes < 2:  # one refresh (``--once``) is no history
        return []
    hot = float(fault_kind("chip_too_hot").threshold or 100.0)  # the scale's top, as the table's history column
    said = "AI Core, a mark per refresh"
    lines: list[Line] = [[("History".ljust(_INDENT), "head"), (" " * 7, ""),
                          (said.ljust(marks + _VALUE_W) + "  ", "head"), ("Temp", "head")]]
    shown = list(rows) if len(rows) <= room - 1 else list(rows)[:max(0, room - 2)]
    for row in shown:
        key = (row.npu, row.chip)
        aicore = history.aicore.get(key)
        temperature = history.temperature.get(key)
        line: Line = [(" " * _INDENT, ""), (f"{row.name:>5}  ", "bold")]
        line += [(sparkline(aicore or [], marks, 0.0, 1.0, ascii_only), "dim"),
                 (f"{aicore[-1] * 100:5.0f}%" if aicore else " " * _VALUE_W, ""), ("  ", "")]
        line += [(sparkline(temperature or [], marks, 30.0, hot, ascii_only), "dim")]
        if temperature:
            line.append((f"{temperature[-1]:4.0f}{' C' if ascii_only else '°C'}", ""))
        lines.append(fit(line, width))
    if len(shown) < len(rows):
        lines.append([(" " * _INDENT + f"{len(rows) - len(shown)} more NPUs", "dim")])
    return lines[:room]
