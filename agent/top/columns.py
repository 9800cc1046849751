"""The NPU table of ``npuwatch top``: its columns, each with a priority, and what a cell shows.

As the terminal narrows, the column of lowest priority goes first (the sparklines, HBM used, HBM bandwidth,
processes, power, then the codes), so the readings that say a chip is broken stay longest: Health, then Link
(a DOWN link), AI Core, HBM and Temp. The codes, the last column, take what room is left: each code with its
level and what to do, else with its level, else the codes alone. top judges nothing: a cell's colour is the
status of the agent's own finding on that reading (``npu_chip_status``, ``npu_fault_since_timestamp_seconds``),
so a red cell here is a failing check there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.health.faults import LEVEL_ACTIONS, LEVEL_KINDS
from agent.health.status import FAIL
from agent.health.thresholds import FAULT_KINDS, fault_kind
from agent.top.freshness import STALE_MARK
from agent.top.history import History, sparkline
from agent.top.lines import Line
from agent.top.model import Finding, NpuRow
from agent.top.state import TopState

__all__ = ["CODES", "Column", "bar", "columns", "finding_style", "gib", "level_style", "short", "stale_cell",
           "status_style"]

_STYLES = {"fail": "bad", "warn": "warn", "unknown": "dim", "ok": "ok"}
_LINK_KINDS = ("link_down", "link_flap", "link_down_once")

CODES = "Codes"
_SPARK_W = 16
_BAR_FULL = ("█", "░")
_BAR_ASCII = ("#", ".")


@dataclass(frozen=True)
class Column:
    title: str
    width: int
    keep: int  # the lowest goes first when the terminal is too narrow for every column
    cell: Callable[[NpuRow], Line]
    metric: str | None = None  # the series it shows (its collector says whether the cell is stale)


def status_style(kind: str | None) -> str:
    if kind is None:
        return "ok"
    entry = FAULT_KINDS.get(kind)
    return "bad" if entry is not None and entry.status == FAIL else "warn"


def finding_style(finding: Finding | None) -> str:
    """The colour of the agent's finding: red for fail, yellow for warn, green with none."""
    return _STYLES.get(finding.status, "warn") if finding is not None else "ok"


def short(cause: str) -> str:
    """A cause in at most 8 characters: the fault kind's short name, else the check's name cut."""
    return fault_kind(cause).short if cause in FAULT_KINDS else cause[:8]


def level_style(level: str) -> str:
    return status_style(LEVEL_KINDS.get(level)) if LEVEL_KINDS.get(level) else "dim"


def bar(ratio: float | None, width: int, ascii_only: bool) -> Line:
    """A bar of ``width`` characters, its percentage included; one colour however full (a busy chip is no fault:
    only the agent's findings colour a cell)."""
    if ratio is None:
        return [("-".rjust(width), "dim")]
    inner = max(1, width - 5)
    filled = min(inner, round(max(0.0, min(1.0, ratio)) * inner))
    full, empty = _BAR_ASCII if ascii_only else _BAR_FULL
    return [(full * filled, "ok"), (empty * (inner - filled), "dim"), (f"{ratio * 100:4.0f}%", "")]


def gib(value: float) -> str:
    return f"{value / 2**30:.1f}"


def _hbm_ratio(row: NpuRow) -> float | None:
    return row.hbm_used / row.hbm_total if row.hbm_used is not None and row.hbm_total else None


def _spark(series: dict[tuple[int, int], deque[float]], low: float, high: float,
           ascii_only: bool) -> Callable[[NpuRow], Line]:
    def cell(row: NpuRow) -> Line:
        values = series.get((row.npu, row.chip))
        text = sparkline(values, _SPARK_W, low, high, ascii_only) if values is not None else ""
        return [(text.rjust(_SPARK_W) + " ", "dim")]
    return cell


def _code_forms(row: NpuRow) -> list[Line]:
    """The codes of a row, longest form first."""
    if not row.codes:
        return [[("-", "dim")] if row.handling is None else [(f"held: {row.handling}", level_style(row.handling))]]
    full: Line = []
    short: Line = []
    bare: Line = []
    for code, level in sorted(row.codes.items()):
        full += [(f"{code} ", level_style(level)), (f"{level}: {LEVEL_ACTIONS.get(level, '?')}  ", "")]
        short += [(f"{code} ", level_style(level)), (f"{level}  ", "")]
        bare += [(f"{code} ", level_style(level))]
    return [full, short, bare]


def _text_width(line: Line) -> int:
    return len("".join(text for text, _ in line).rstrip())


def _codes_cell(room: int) -> Callable[[NpuRow], Line]:
    def cell(row: NpuRow) -> Line:
        forms = _code_forms(row)
        return next((form for form in forms if _text_width(form) <= room), forms[-1])
    return cell


def _fixed(width: int, history: History, state: TopState) -> list[Column]:
    ascii_only = state.ascii_only
    bar_w = 17 if width >= 100 else 11

    def health(row: NpuRow) -> Line:
        """The agent's status of the chip and the cause that leads on it; ``-`` when it exports none."""
        if row.status is None:
            return [(f"{'-':<8} ", "dim")]
        word = short(row.cause) if row.cause else row.status
        return [(f"{word:<8} ", _STYLES.get(row.status, "dim"))]

    def link(row: NpuRow) -> Line:
        if row.link_up is None:
            return [("-".ljust(9), "dim")]
        judged = row.finding(*_LINK_KINDS)
        said = "flapping" if judged is not None and judged.kind == "link_flap" else ("up" if row.link_up else "DOWN")
        return [(said, finding_style(judged)), (" " * max(1, 9 - len(said)), "")]

    def temperature(row: NpuRow) -> Line:
        if row.temperature is None:
            return [("-".rjust(5) + " ", "dim")]
        return [(f"{row.temperature:3.0f}°C" if not ascii_only else f"{row.temperature:3.0f} C",
                 finding_style(row.finding("chip_too_hot", "chip_hot"))), (" ", "")]

    def hbm_used(row: NpuRow) -> Line:
        if row.hbm_used is None or not row.hbm_total:
            return [("-".rjust(9) + " ", "dim")]
        return [(f"{gib(row.hbm_used)}/{row.hbm_total / 2**30:.0f}G".rjust(9) + " ", "")]

    def number(value: float | None, text: str, width: int) -> Line:
        return [((text if value is not None else "-").rjust(width - 1) + " ", "" if value is not None else "dim")]

    hot = float(fault_kind("chip_too_hot").threshold or 100.0)
    return [
        Column("NPU", 5, 99, lambda r: [(f"{r.name:>4} ", "bold")]),
        Column("AI Core", bar_w + 1, 8, lambda r: [*bar(r.aicore, bar_w, ascii_only), (" ", "")],
               "npu_aicore_utilization_ratio"),
        Column("HBM", bar_w + 1, 6, lambda r: [*bar(_hbm_ratio(r), bar_w, ascii_only), (" ", "")],
               "npu_hbm_used_bytes"),
        Column("HBM used", 10, 1, hbm_used, "npu_hbm_used_bytes"),
        Column("HBM BW", 7, 2, lambda r: number(r.hbm_bandwidth, f"{(r.hbm_bandwidth or 0) * 100:3.0f}%", 7),
               "npu_hbm_bandwidth_utilization_ratio"),
        Column("Temp", 6, 5, temperature, "npu_temperature_celsius"),
        Column("Power", 6, 3, lambda r: number(r.power, f"{r.power or 0:.0f}W", 6), "npu_power_watts"),
        Column("Health", 9, 10, health, "npu_chip_status"),
        Column("Link", 9, 9, link, "npu_roce_link_up"),
        Column("Proc", 5, 2, lambda r: number(r.processes, f"{r.processes or 0:.0f}", 5), "npu_processes"),
        Column("AI Core history", _SPARK_W + 1, 0, _spark(history.aicore, 0.0, 1.0, ascii_only)),
        Column("Temp history", _SPARK_W + 1, 0, _spark(history.temperature, 30.0, hot, ascii_only)),
    ]


_CODES_KEEP = 4


def columns(rows: Sequence[NpuRow], width: int, history: History, state: TopState) -> list[Column]:
    """The columns that fit ``width``, in screen order, the codes last with the room left."""
    shown = _fixed(width, history, state)
    forms = [_code_forms(row) for row in rows]
    shortest = max([len(CODES)] + [_text_width(f[-2] if len(f) > 1 else f[0]) for f in forms])
    longest = max([len(CODES)] + [_text_width(f[0]) for f in forms])
    with_codes = True
    while True:
        used = sum(c.width for c in shown)
        sparks = [c for c in shown if c.keep == 0]
        if sparks and width - used < longest:  # the codes' advice before the sparklines
            shown = [c for c in shown if c.keep != 0]
            continue
        need = shortest if with_codes else 0
        if used + need <= width:
            break
        lowest = min([c.keep for c in shown if c.title != "NPU"], default=None)
        if with_codes and (lowest is None or lowest > _CODES_KEEP):
            with_codes = False
            continue
        if lowest is None:
            break
        drop = next(c for c in shown if c.keep == lowest)
        shown = [c for c in shown if c is not drop]
    if with_codes:
        room = width - sum(c.width for c in shown)
        shown.append(Column(CODES, room, _CODES_KEEP, _codes_cell(room), "npu_error_code_active"))
    return shown


def stale_cell(cell: Line) -> Line:
    """A cell whose reading is stale: dimmed, the stale mark right after its text, in its width when it has a
    blank to spare (the column's gap), else one character wider (the last column)."""
    text = "".join(t for t, _ in cell)
    content = text.rstrip()
    if content.strip() in ("", "-"):  # no reading to mark
        return cell
    pad = max(0, len(text) - len(content) - 1)
    return [(content, "dim"), (STALE_MARK, "warn"), (" " * pad, "")]
