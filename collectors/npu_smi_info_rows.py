"""The rows of the ``npu-smi info`` table: NPU and chip lines paired into chips, and process rows.

Each function takes the parse state and one row already cut into cells
(``collectors.npu_smi_info_layout``); a row off the layout is listed in the state's rejects, a
value outside its range is dropped alone (``collectors.bounds``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from collectors._text import MIB, number
from collectors.base import ParseError
from collectors.bounds import BOUNDS, LIMITS, USED_OVER_TOTAL_SLACK, Rejects, is_label_text
from collectors.npu_smi_info_layout import (
    ABSENT_CELLS,
    BUS_ID_RE,
    CHIP_LINE_DEFAULT,
    NPU_LINE_DEFAULT,
    Line,
    RowRejected,
    checked_id,
    id_and_rest,
    int_or_none,
    is_bus_cell,
    is_number_or_absent,
    split_values,
    value_tokens,
)
from collectors.npu_smi_info_records import ChipStatus, NpuProcess

__all__ = ["ParseState", "flush_pending", "handle_device_row", "handle_process_row"]

# What the layout allows in the Name and Health cells (both end up in labels or logs).
_NAME_RE = re.compile(r"[A-Za-z0-9][\x21-\x7e]{0,31}")  # 910B3, Ascend910, 310Pvir01, xxx
_HEALTH_RE = re.compile(r"[A-Za-z][A-Za-z_\-]{0,31}")  # OK, Warning, Alarm, Critical, UNKNOWN


@dataclass
class _NpuLine:
    npu: int
    name: str
    health: str
    values: dict[str, str]
    where: Line


@dataclass
class ParseState:
    """What ``npu_smi_info.parse`` has read so far: columns from the headers, the chips, the rejects."""

    max_chips: int
    rejects: Rejects = field(default_factory=Rejects)
    version: str | None = None
    npu_columns: tuple[str, ...] = NPU_LINE_DEFAULT
    chip_columns: tuple[str, ...] = CHIP_LINE_DEFAULT
    second_id: str | None = None  # "device" or "phy" from the chip header; None when no header seen
    in_processes: bool = False
    process_section: bool = False
    pending: _NpuLine | None = None
    chips: dict[tuple[int, int], ChipStatus] = field(default_factory=dict)
    next_free_chip: dict[int, int] = field(default_factory=dict)  # npu -> lowest chip index not taken
    first_over_cap: Line | None = None
    processes: list[NpuProcess] = field(default_factory=list)
    open_row: int | None = None  # line number of the last box row no +---+ line has closed yet
    process_npus: set[int] = field(default_factory=set)  # NPUs the process box speaks of, rows refused or not


def handle_device_row(state: ParseState, cells: list[str], where: Line) -> None:
    ids, middle, values = id_and_rest(cells)
    ints = [int_or_none(token) for token in ids]
    # An NPU line has an id, a name and a health cell, and two scalars (power,
    # temp); a chip line has up to two ids, a bus id (or NA) and one scalar.
    chip_shape = len(ids) <= 2 and None not in ints and is_bus_cell(middle)
    npu_shape = len(ids) >= 2 and ints[0] is not None and BUS_ID_RE.fullmatch(middle) is None
    scalars = sum("/" not in token for token in value_tokens(values))
    try:
        if chip_shape and (state.pending is not None or not npu_shape or scalars < 2):
            if state.pending is None:
                return  # a chip line whose NPU line was cut off (partial capture): nothing to file it under
            pending, state.pending = state.pending, None
            chip_ids = [checked_id(token, "chip id") for token in ids]
            _finish_chip(state, pending, chip_ids, middle, chip_values=split_values(values, state.chip_columns),
                         where=where)
        elif npu_shape:
            flush_pending(state)  # an NPU line without its chip line (cut capture) keeps its values
            state.pending = _npu_line(state, ids, middle, values, where)
        elif any(char.isalnum() for char in "".join(cells)):
            if ids and ints[0] is None:
                raise RowRejected(f"NPU ID {ids[0]!r} is not an integer")
            if len(ids) <= 2 and None not in ints:
                state.pending = None  # its chip line is broken: the chip's identity is unknown
                raise RowRejected(f"Bus-Id {middle!r} is neither a PCI address nor NA")
            raise RowRejected("neither an NPU line nor a chip line")
    except RowRejected as exc:
        state.rejects.add(f"npu-smi info row rejected: {exc}", where.number, where.text)


def _npu_line(state: ParseState, ids: list[str], middle: str, values: str, where: Line) -> _NpuLine:
    npu = checked_id(ids[0], "NPU ID")
    name = " ".join(ids[1:])
    if not _NAME_RE.fullmatch(name):
        raise RowRejected(f"Name {name!r} is not a chip name (printable ASCII, at most 32 characters)")
    if not _HEALTH_RE.fullmatch(middle):
        raise RowRejected(f"Health {middle!r} is not a health word")
    return _NpuLine(npu=npu, name=name, health=middle, values=split_values(values, state.npu_columns), where=where)


def _pair(state: ParseState, token: str | None, bound: str, what: str,
          where: Line) -> tuple[float | None, float | None]:
    """A ``used/total`` pair, each side range-checked; both dropped when used exceeds total."""
    if token is None:
        return None, None
    used_text, _, total_text = token.partition("/")
    reject = state.rejects
    used = reject.value(bound, number(used_text), where.number, where.text, f"{what} used")
    total = reject.value(bound, number(total_text), where.number, where.text, f"{what} total")
    if used is not None and total is not None and used > total + USED_OVER_TOTAL_SLACK:
        reject.add(f"{what} used {used:g} exceeds total {total:g}", where.number, where.text)
        return None, None
    return used, total


def _scaled(value: float | None, scale: float) -> float | None:
    return None if value is None else value * scale


def _finish_chip(
    state: ParseState, npu_line: _NpuLine, chip_ids: list[int] | None, bus: str | None,
    *, chip_values: dict[str, str], where: Line | None,
) -> None:
    if chip_ids is None:
        # The chip line is missing (cut capture): take the next free chip index.
        chip = state.next_free_chip.get(npu_line.npu, 0)
        while (npu_line.npu, chip) in state.chips:
            chip += 1
        has_chip_id, second = True, None
    elif not chip_ids:
        chip, has_chip_id, second = 0, False, None  # 950 prints no chip id
    else:
        chip, has_chip_id = chip_ids[0], True
        second = chip_ids[1] if len(chip_ids) > 1 else None
    if (npu_line.npu, chip) in state.chips:
        state.rejects.add(f"npu {npu_line.npu} chip {chip} is listed twice; the first row is kept",
                          (where or npu_line.where).number, (where or npu_line.where).text)
        return
    second_kind = state.second_id
    if second_kind is None:
        second_kind = "phy" if npu_line.name.lower().startswith("ascend910") else "device"
    npu_where, chip_where = npu_line.where, where or npu_line.where
    reject = state.rejects
    hugepages_used, hugepages_total = _pair(state, npu_line.values.get("hugepages"), "hugepages",
                                            "Hugepages-Usage(page)", npu_where)
    memory_used, memory_total = _pair(state, chip_values.get("memory"), "memory_mib", "Memory-Usage(MB)", chip_where)
    hbm_used, hbm_total = _pair(state, chip_values.get("hbm"), "memory_mib", "HBM-Usage(MB)", chip_where)
    aicore = reject.value("percent", number(chip_values.get("aicore")), chip_where.number, chip_where.text,
                          "AICore(%)")
    status = ChipStatus(
        npu=npu_line.npu,
        chip=chip,
        has_chip_id=has_chip_id,
        phy_id=second if second_kind == "phy" else None,
        device_id=second if second_kind == "device" else None,
        name=npu_line.name,
        health=npu_line.health,
        bus_id=None if bus is None or bus in ABSENT_CELLS else bus,
        power_watts=reject.value("power_watts", number(npu_line.values.get("power")), npu_where.number,
                                 npu_where.text, "Power(W)"),
        temperature_celsius=reject.value("temperature_celsius", number(npu_line.values.get("temp")),
                                         npu_where.number, npu_where.text, "Temp(C)"),
        aicore_ratio=None if aicore is None else aicore / 100,
        hugepages_used=hugepages_used,
        hugepages_total=hugepages_total,
        memory_used_bytes=_scaled(memory_used, MIB),
        memory_total_bytes=_scaled(memory_total, MIB),
        hbm_used_bytes=_scaled(hbm_used, MIB),
        hbm_total_bytes=_scaled(hbm_total, MIB),
    )
    state.chips[(status.npu, status.chip)] = status
    if chip_ids is None:
        state.next_free_chip[status.npu] = chip + 1
    if len(state.chips) == state.max_chips + 1:
        state.first_over_cap = npu_where


def handle_process_row(state: ParseState, cells: list[str], where: Line) -> None:
    if not any(char.isalnum() for char in "".join(cells)):
        return  # an empty box row
    try:
        state.processes.append(_process(state, cells, where))
    except RowRejected as exc:
        state.rejects.add(f"npu-smi info process row rejected: {exc}", where.number, where.text)
    if len(state.processes) > LIMITS["processes"]:
        raise ParseError(f"more than {LIMITS['processes']} process rows", where.number, where.text)


def _process(state: ParseState, cells: list[str], where: Line) -> NpuProcess:
    if len(cells) < 4:
        raise RowRejected(f"{len(cells)} cells where a process row has at least 4")
    ids = cells[0].split()
    if not 1 <= len(ids) <= 2:
        raise RowRejected(f"{cells[0]!r} is not 'NPU [Chip]'")
    npu_chip = [checked_id(token, "NPU/chip id") for token in ids]
    pid = int_or_none(cells[1])
    if pid is None or not BOUNDS["pid"].contains(pid):
        raise RowRejected(f"Process id {cells[1]!r} is not a pid")
    if not is_number_or_absent(cells[3]):
        raise RowRejected(f"Process memory {cells[3]!r} is not a number")
    name = cells[2]
    if not is_label_text(name):
        state.rejects.add("process name is not printable ASCII of at most 64 characters; exported empty",
                          where.number, where.text)
        name = ""
    memory = state.rejects.value("memory_mib", number(cells[3]), where.number, where.text, "Process memory(MB)")
    container_pid: int | None = None
    if len(cells) >= 5 and cells[4] not in ABSENT_CELLS:
        container_pid = int_or_none(cells[4])
        if container_pid is None or not BOUNDS["pid"].contains(container_pid):
            state.rejects.add(f"Process id in container {cells[4]!r} is not a pid", where.number, where.text)
            container_pid = None
    return NpuProcess(
        npu=npu_chip[0],
        chip=npu_chip[1] if len(npu_chip) == 2 else 0,
        pid=pid,
        name=name,
        memory_bytes=_scaled(memory, MIB),
        container_pid=container_pid,
    )


def flush_pending(state: ParseState) -> None:
    if state.pending is not None:
        pending, state.pending = state.pending, None
        _finish_chip(state, pending, None, None, chip_values={}, where=None)
