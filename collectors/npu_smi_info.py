"""Parser and samples for the default ``npu-smi info`` table (device box and process box).

Reproduce by hand: ``npu-smi info``. Sample (910B4, driver 25.0)::

    | npu-smi 25.0.rc1.1               Version: 25.0.rc1.1                                           |
    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    +===========================+===============+====================================================+
    | 3     910B4               | OK            | 89.1        34                0    / 0             |
    | 0                         | 0000:82:00.0  | 0           0    / 0          2654 / 32768         |
    ...
    | NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
    | 0       0                 | 124528        | python3.8                | 17400                   |
    | No running processes found in NPU 1                                                            |

Exposition (abridged)::

    npu_power_watts{npu="3",chip="0"} 89.1
    npu_hbm_used_bytes{npu="3",chip="0"} 2.782920704e+09

Every chip takes two lines: the NPU line (NPU id, name, health, power, temp,
hugepages) and the chip line (chip id [device or phy id], bus id, AI Core %,
DDR, [HBM]). Layouts differ by driver and product (310 old/21.x, 310P/310B,
310P Duo, 910A/910B, A3 dies with ``Phy-ID``, the 26.x wide layout, 950 with
``NPU ID | Name``), and publishers alter whitespace. The parser therefore
splits cells on ``|`` and whitespace, maps the value cell from the header's
column names (defaulting to the usual order when the header is missing),
pairs NPU and chip lines by their content rather than by separator lines, and
parses partial captures as far as they go.

Hostile or broken output (``collectors.bounds`` holds the limits):

- A row off the layout (NPU ID or chip id not an integer, a Name or Health cell
  that is not a printable ASCII word, a Bus-Id that is neither a PCI address nor
  ``NA``, a value that is not a number, more values than columns, control
  characters, a line over 1024 characters) is dropped with its chip and listed in
  ``InfoTable.rejected`` with its line number and line. A value outside its
  physical range (power, temperature, AI Core %, memory, used above total) is
  dropped alone: the chip keeps its other readings. A whole-table ParseError for
  one bad row would blank every healthy chip of the node, so the parser only
  raises when no valid chip row is left or the table lists more than
  ``max_chips`` chips (a table that large is not npu-smi's; it would otherwise
  become hundreds of thousands of series).
- Parsing is linear in the output size: lines are length-capped before any
  pattern runs and no step rescans earlier rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors._text import MIB, column_labels, number, raise_unparsed
from collectors.base import ChipRef, CollectContext, ParseError, Sample, Source, label_pairs
from collectors.bounds import (
    BOUNDS,
    LIMITS,
    USED_OVER_TOTAL_SLACK,
    Rejection,
    Rejects,
    has_control_chars,
    is_label_text,
)
from collectors.npu_smi_mapping import MappingRow

__all__ = [
    "BOARD_ANSWERED",
    "BOARD_PENDING",
    "DEFAULT_MAX_CHIPS",
    "EVERY_CHIP",
    "HEALTH_STATES",
    "SOURCE",
    "ChipStatus",
    "InfoTable",
    "NpuProcess",
    "chip_refs",
    "health_state",
    "make_source",
    "parse",
    "samples",
]

HEALTH_STATES: tuple[str, ...] = ("ok", "warning", "alarm", "critical", "unknown")
DEFAULT_MAX_CHIPS = LIMITS["max_chips"]

_INT_RE = re.compile(r"[0-9]{1,12}")
_BUS_ID_RE = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_ABSENT_CELLS = frozenset({"", "NA", "N/A", "-", "--"})
_BANNER_RE = re.compile(r"npu-smi\s+(\S+)(?:\s+Version:\s*(\S+))?", re.IGNORECASE)
_NO_PROCESSES_RE = re.compile(r"No running processes found in NPU\s+([0-9]{1,12})", re.IGNORECASE)
_PAIR_GAP_RE = re.compile(r"\s*/\s*")
_SLASHED_NA_RE = re.compile(r"(?<!\S)N/A(?!\S)", re.IGNORECASE)
# What the layout allows in the text cells (all three end up in labels or logs).
_NAME_RE = re.compile(r"[A-Za-z0-9][\x21-\x7e]{0,31}")  # 910B3, Ascend910, 310Pvir01, xxx
_HEALTH_RE = re.compile(r"[A-Za-z][A-Za-z_\-]{0,31}")  # OK, Warning, Alarm, Critical, UNKNOWN
_VERSION_RE = re.compile(r"[\x21-\x7e]{1,32}")

# Value-cell columns: scalars and "used / total" pairs are matched to header
# columns separately, so a header column npuwatch does not know keeps its slot.
_PAIR_COLUMNS = frozenset({"hugepages", "memory", "hbm", "other-pair"})
_NPU_LINE_DEFAULT = ("power", "temp", "hugepages")
_CHIP_LINE_DEFAULT = ("aicore", "memory", "hbm")


@dataclass(frozen=True)
class ChipStatus:
    """One chip (die) of the device box. Absent values (``NA``, ``-``, out of range) are None."""

    npu: int
    chip: int
    has_chip_id: bool
    phy_id: int | None
    device_id: int | None
    name: str
    health: str
    bus_id: str | None
    power_watts: float | None
    temperature_celsius: float | None
    aicore_ratio: float | None
    hugepages_used: float | None
    hugepages_total: float | None
    memory_used_bytes: float | None
    memory_total_bytes: float | None
    hbm_used_bytes: float | None
    hbm_total_bytes: float | None


@dataclass(frozen=True)
class NpuProcess:
    """One row of the process box; ``name`` is empty for pids of another PID namespace."""

    npu: int
    chip: int
    pid: int
    name: str
    memory_bytes: float | None
    container_pid: int | None


@dataclass(frozen=True)
class InfoTable:
    """The parsed table. ``process_section`` tells "no processes" apart from "not printed".

    ``rejected`` lists the rows and values the parser refused (see the module docstring).
    """

    version: str | None
    chips: tuple[ChipStatus, ...]
    processes: tuple[NpuProcess, ...]
    process_section: bool
    rejected: tuple[Rejection, ...] = ()


class _RowRejected(Exception):
    """A row that does not follow the layout; the reason becomes a Rejection."""


@dataclass
class _Line:
    number: int
    text: str


@dataclass
class _NpuLine:
    npu: int
    name: str
    health: str
    values: dict[str, str]
    where: _Line


@dataclass
class _State:
    max_chips: int
    rejects: Rejects = field(default_factory=Rejects)
    version: str | None = None
    npu_columns: tuple[str, ...] = _NPU_LINE_DEFAULT
    chip_columns: tuple[str, ...] = _CHIP_LINE_DEFAULT
    second_id: str | None = None  # "device" or "phy" from the chip header; None when no header seen
    in_processes: bool = False
    process_section: bool = False
    pending: _NpuLine | None = None
    chips: dict[tuple[int, int], ChipStatus] = field(default_factory=dict)
    next_free_chip: dict[int, int] = field(default_factory=dict)  # npu -> lowest chip index not taken
    first_over_cap: _Line | None = None
    processes: list[NpuProcess] = field(default_factory=list)


def _int_or_none(token: str | None) -> int | None:
    if token is None or not _INT_RE.fullmatch(token):
        return None
    return int(token)


def _checked_id(token: str, what: str) -> int:
    value = _int_or_none(token)
    if value is None:
        raise _RowRejected(f"{what} {token!r} is not an integer")
    if not BOUNDS["id"].contains(value):
        raise _RowRejected(f"{what} {value} is beyond any id npu-smi prints")
    return value


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body.removeprefix("|").removesuffix("|")
    # Whitespace runs are squeezed first: the regexes below then never see long runs.
    return [" ".join(cell.split()) for cell in body.split("|")]


def _column_keys(value_cell: str, default: tuple[str, ...]) -> tuple[str, ...]:
    keys: list[str] = []
    for label in column_labels(value_cell):
        low = label.strip().lower()
        if low.startswith("power"):
            keys.append("power")
        elif low.startswith("temp"):
            keys.append("temp")
        elif low.startswith("hugepages"):
            keys.append("hugepages")
        elif low.startswith(("aicore", "npu util")):
            keys.append("aicore")
        elif low.startswith("memory"):
            keys.append("memory")
        elif low.startswith("hbm"):
            keys.append("hbm")
        elif "/" in low or "usage" in low:
            keys.append("other-pair")
        else:
            keys.append("other")
    return tuple(keys) or default


def _value_tokens(value_cell: str) -> list[str]:
    """``87.2  33  0    / 0`` -> ``["87.2", "33", "0/0"]``; a lone ``N/A`` stays one scalar (``NA``)."""
    return _PAIR_GAP_RE.sub("/", _SLASHED_NA_RE.sub("NA", value_cell.strip())).split()


def _is_number_or_absent(token: str) -> bool:
    return token in _ABSENT_CELLS or number(token) is not None


def _split_values(value_cell: str, columns: tuple[str, ...]) -> dict[str, str]:
    """Map a value cell onto column keys (scalars and ``used/total`` pairs separately, in order).

    Raises ``_RowRejected`` for a token that is neither a number, ``NA``/``-`` nor a
    pair of those, and for more values than the header has columns.
    """
    scalars: list[str] = []
    pairs: list[str] = []
    for token in _value_tokens(value_cell):
        if "/" in token:
            used, _, total = token.partition("/")
            if not (_is_number_or_absent(used) and _is_number_or_absent(total)):
                raise _RowRejected(f"{token!r} is not a 'used / total' pair of numbers")
            pairs.append(token)
        elif _is_number_or_absent(token):
            scalars.append(token)
        else:
            raise _RowRejected(f"{token!r} is not a number")
    scalar_keys = [key for key in columns if key not in _PAIR_COLUMNS]
    pair_keys = [key for key in columns if key in _PAIR_COLUMNS]
    if len(scalars) > len(scalar_keys) or len(pairs) > len(pair_keys):
        raise _RowRejected(f"{len(scalars) + len(pairs)} values for {len(columns)} columns")
    values = dict(zip(scalar_keys, scalars))
    values.update(zip(pair_keys, pairs))
    return values


def _is_bus_cell(cell: str) -> bool:
    return cell in _ABSENT_CELLS or _BUS_ID_RE.fullmatch(cell) is not None


def _id_and_rest(cells: list[str]) -> tuple[list[str], str, str]:
    """(id tokens, middle cell, value cell); 950's ``NPU ID | Name`` split is joined back."""
    if len(cells) >= 3:
        return " ".join(cells[:-2]).split(), cells[-2], cells[-1]
    if len(cells) == 2:
        return cells[0].split(), cells[1], ""
    return cells[0].split() if cells else [], "", ""


def _handle_device_row(state: _State, cells: list[str], where: _Line) -> None:
    ids, middle, values = _id_and_rest(cells)
    ints = [_int_or_none(token) for token in ids]
    # An NPU line has an id, a name and a health cell, and two scalars (power,
    # temp); a chip line has up to two ids, a bus id (or NA) and one scalar.
    chip_shape = len(ids) <= 2 and None not in ints and _is_bus_cell(middle)
    npu_shape = len(ids) >= 2 and ints[0] is not None and _BUS_ID_RE.fullmatch(middle) is None
    scalars = sum("/" not in token for token in _value_tokens(values))
    try:
        if chip_shape and (state.pending is not None or not npu_shape or scalars < 2):
            if state.pending is None:
                return  # a chip line whose NPU line was cut off (partial capture): nothing to file it under
            pending, state.pending = state.pending, None
            chip_ids = [_checked_id(token, "chip id") for token in ids]
            _finish_chip(state, pending, chip_ids, middle, chip_values=_split_values(values, state.chip_columns),
                         where=where)
        elif npu_shape:
            _flush_pending(state)  # an NPU line without its chip line (cut capture) keeps its values
            state.pending = _npu_line(state, ids, middle, values, where)
        elif any(char.isalnum() for char in "".join(cells)):
            if ids and ints[0] is None:
                raise _RowRejected(f"NPU ID {ids[0]!r} is not an integer")
            if len(ids) <= 2 and None not in ints:
                state.pending = None  # its chip line is broken: the chip's identity is unknown
                raise _RowRejected(f"Bus-Id {middle!r} is neither a PCI address nor NA")
            raise _RowRejected("neither an NPU line nor a chip line")
    except _RowRejected as exc:
        state.rejects.add(f"npu-smi info row rejected: {exc}", where.number, where.text)


def _npu_line(state: _State, ids: list[str], middle: str, values: str, where: _Line) -> _NpuLine:
    npu = _checked_id(ids[0], "NPU ID")
    name = " ".join(ids[1:])
    if not _NAME_RE.fullmatch(name):
        raise _RowRejected(f"Name {name!r} is not a chip name (printable ASCII, at most 32 characters)")
    if not _HEALTH_RE.fullmatch(middle):
        raise _RowRejected(f"Health {middle!r} is not a health word")
    return _NpuLine(npu=npu, name=name, health=middle, values=_split_values(values, state.npu_columns), where=where)


def _pair(state: _State, token: str | None, bound: str, what: str, where: _Line) -> tuple[float | None, float | None]:
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
    state: _State, npu_line: _NpuLine, chip_ids: list[int] | None, bus: str | None,
    *, chip_values: dict[str, str], where: _Line | None,
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
        bus_id=None if bus is None or bus in _ABSENT_CELLS else bus,
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


def _handle_process_row(state: _State, cells: list[str], where: _Line) -> None:
    if not any(char.isalnum() for char in "".join(cells)):
        return  # an empty box row
    try:
        state.processes.append(_process(state, cells, where))
    except _RowRejected as exc:
        state.rejects.add(f"npu-smi info process row rejected: {exc}", where.number, where.text)
    if len(state.processes) > LIMITS["processes"]:
        raise ParseError(f"more than {LIMITS['processes']} process rows", where.number, where.text)


def _process(state: _State, cells: list[str], where: _Line) -> NpuProcess:
    if len(cells) < 4:
        raise _RowRejected(f"{len(cells)} cells where a process row has at least 4")
    ids = cells[0].split()
    if not 1 <= len(ids) <= 2:
        raise _RowRejected(f"{cells[0]!r} is not 'NPU [Chip]'")
    npu_chip = [_checked_id(token, "NPU/chip id") for token in ids]
    pid = _int_or_none(cells[1])
    if pid is None or not BOUNDS["pid"].contains(pid):
        raise _RowRejected(f"Process id {cells[1]!r} is not a pid")
    if not _is_number_or_absent(cells[3]):
        raise _RowRejected(f"Process memory {cells[3]!r} is not a number")
    name = cells[2]
    if not is_label_text(name):
        state.rejects.add("process name is not printable ASCII of at most 64 characters; exported empty",
                          where.number, where.text)
        name = ""
    memory = state.rejects.value("memory_mib", number(cells[3]), where.number, where.text, "Process memory(MB)")
    container_pid: int | None = None
    if len(cells) >= 5 and cells[4] not in _ABSENT_CELLS:
        container_pid = _int_or_none(cells[4])
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


def _handle_line(state: _State, line_no: int, line: str) -> None:
    stripped = line.strip()
    if not stripped.startswith("|"):
        return  # separators, blank lines, prompts, stray text
    where = _Line(line_no, stripped)
    problem = None
    if len(stripped) > LIMITS["line_chars"]:
        problem = f"line longer than {LIMITS['line_chars']} characters"
    elif has_control_chars(stripped):
        problem = "control characters in a table row"
    if problem is not None:
        state.rejects.add(problem, line_no, stripped)
        state.pending = None  # this may have been its chip line: the chip's identity is unknown
        return
    text = " ".join(stripped.split())
    lowered = text.lower()
    cells = _cells(stripped)
    banner = _BANNER_RE.search(text) if len(cells) == 1 else None
    if banner is not None:
        version = banner.group(2) or banner.group(1)
        if _VERSION_RE.fullmatch(version):
            state.version = version
        else:
            state.rejects.add("npu-smi version is not printable ASCII", line_no, stripped)
    elif "process id" in lowered or _NO_PROCESSES_RE.search(text):
        state.in_processes = state.process_section = True
        _flush_pending(state)
    elif "health" in lowered and "name" in lowered:
        state.in_processes = False
        state.npu_columns = _column_keys(cells[-1], _NPU_LINE_DEFAULT)
    elif "bus-id" in lowered:
        state.in_processes = False
        state.chip_columns = _column_keys(cells[-1], _CHIP_LINE_DEFAULT)
        first = cells[0].lower() if len(cells) >= 3 else ""
        state.second_id = "phy" if "phy" in first else "device" if "device" in first else "none"
    elif state.in_processes:
        _handle_process_row(state, cells, where)
    else:
        _handle_device_row(state, cells, where)


def _flush_pending(state: _State) -> None:
    if state.pending is not None:
        pending, state.pending = state.pending, None
        _finish_chip(state, pending, None, None, chip_values={}, where=None)


def parse(text: str, max_chips: int = DEFAULT_MAX_CHIPS) -> InfoTable:
    """Parse ``npu-smi info`` output, in time linear in its size.

    Rows that break the layout and values outside ``collectors.bounds.BOUNDS`` are
    dropped and listed in ``InfoTable.rejected``. Raises ``ToolError`` when npu-smi
    printed an error/usage text instead of the table, and ``ParseError`` when no chip
    row is left or when the table lists more than ``max_chips`` chips.
    """
    state = _State(max_chips=max_chips)
    for line_no, line in enumerate(text.splitlines(), start=1):
        _handle_line(state, line_no, line)
    _flush_pending(state)
    if not state.chips:
        raise_unparsed(text, "npu-smi info", "no valid chip row in npu-smi info output", state.rejects)
    if state.first_over_cap is not None:
        over = state.first_over_cap
        raise ParseError(f"{len(state.chips)} chips, more than max_chips={max_chips}", over.number, over.text)
    return InfoTable(
        version=state.version,
        chips=tuple(state.chips.values()),
        processes=tuple(state.processes),
        process_section=state.process_section,
        rejected=state.rejects.freeze(),
    )


def health_state(health: str) -> str:
    """The catalogue's state for a printed Health value (anything unexpected is ``unknown``)."""
    low = health.strip().lower()
    return low if low in HEALTH_STATES else "unknown"


def samples(table: InfoTable, _chip: ChipRef | None, ctx: CollectContext) -> list[Sample]:
    """Catalogue samples for one parsed table (``_chip`` is unused: this is a node-scope source)."""
    out: list[Sample] = [Sample("npu_chips", (), float(len(table.chips)))]
    for status in table.chips:
        out.extend(_chip_samples(status, ctx))
    if table.process_section:
        out.extend(_process_samples(table, ctx))
    return out


# Keys of CollectContext.inventory that are not labels (collectors.sources.inventory sets them):
# under EVERY_CHIP, BOARD_PENDING holds back npu_info of each chip whose facts lack BOARD_ANSWERED.
EVERY_CHIP = (-1, -1)
BOARD_PENDING = "board_pending"
BOARD_ANSWERED = "board_answered"


def _board_pending(inventory: Any, key: tuple[int, int]) -> bool:
    if BOARD_ANSWERED in inventory.get(key, {}):
        return False
    return BOARD_PENDING in inventory.get(EVERY_CHIP, {})


def _label(value: str | None) -> str:
    """A label value from another source or from psutil, or "" when it is not printable ASCII of bounded length."""
    return value if value is not None and is_label_text(value) else ""


def _chip_samples(status: ChipStatus, ctx: CollectContext) -> list[Sample]:
    chip_labels = label_pairs(npu=status.npu, chip=status.chip)
    facts = ctx.inventory.get((status.npu, status.chip), {})
    info_labels = label_pairs(
        npu=status.npu,
        chip=status.chip,
        model=status.name,
        bus_id=status.bus_id or _label(facts.get("bus_id")),
        logic_id=_label(facts.get("logic_id")),
        serial=_label(facts.get("serial")),
        firmware=_label(facts.get("firmware")),
        driver=_label(facts.get("driver")),
    )
    state = health_state(status.health)
    out = [] if _board_pending(ctx.inventory, (status.npu, status.chip)) else [Sample("npu_info", info_labels, 1.0)]
    out.append(Sample("npu_healthy", chip_labels, 1.0 if state == "ok" else 0.0))
    out.extend(
        Sample("npu_health_state", (*chip_labels, ("state", each)), 1.0 if each == state else 0.0)
        for each in HEALTH_STATES
    )
    for metric, value in (
        ("npu_power_watts", status.power_watts),
        ("npu_temperature_celsius", status.temperature_celsius),
        ("npu_aicore_utilization_ratio", status.aicore_ratio),
    ):
        if value is not None:
            out.append(Sample(metric, chip_labels, value))
    for prefix, used, total in (
        ("npu_hbm", status.hbm_used_bytes, status.hbm_total_bytes),
        ("npu_memory", status.memory_used_bytes, status.memory_total_bytes),
    ):
        if total == 0:
            continue  # e.g. DDR "0 / 0" on 910B: the chip has no such memory
        if used is not None:
            out.append(Sample(f"{prefix}_used_bytes", chip_labels, used))
        if total is not None:
            out.append(Sample(f"{prefix}_total_bytes", chip_labels, total))
    return out


def _process_samples(table: InfoTable, ctx: CollectContext) -> list[Sample]:
    counts: dict[tuple[int, int], int] = {(status.npu, status.chip): 0 for status in table.chips}
    memory: dict[tuple[int, int, int], tuple[str, float]] = {}
    for process in table.processes:
        key = (process.npu, process.chip)
        if key not in counts:
            continue  # a chip the table does not list (a cut capture): no series for it
        counts[key] += 1
        if process.memory_bytes is not None:
            slot = (key[0], key[1], process.pid)
            previous = memory.get(slot, (process.name, 0.0))
            memory[slot] = (previous[0], previous[1] + process.memory_bytes)
    out = [
        Sample("npu_processes", label_pairs(npu=npu, chip=chip), float(count))
        for (npu, chip), count in counts.items()
    ]
    if not ctx.per_process_metrics:
        return out
    for (npu, chip, pid), (printed_name, used) in memory.items():
        name, user = printed_name, ""
        if ctx.process_owner is not None:
            owner_name, owner_user = ctx.process_owner(pid)
            name, user = _label(owner_name) or printed_name, _label(owner_user)
        labels = label_pairs(npu=npu, chip=chip, pid=pid, process=name, user=user)
        out.append(Sample("npu_process_memory_bytes", labels, used))
    return out


def chip_refs(table: InfoTable, mapping: Iterable[MappingRow] | None = None) -> list[ChipRef]:
    """The chips to address in per-chip calls (``-i npu [-c chip]``), with logic/phy ids when known."""
    by_chip = {(row.npu, row.chip): row for row in mapping or () if not row.is_mcu}
    refs: list[ChipRef] = []
    for status in table.chips:
        row = by_chip.get((status.npu, status.chip))
        refs.append(
            ChipRef(
                npu=status.npu,
                chip=status.chip,
                has_chip_id=status.has_chip_id,
                logic_id=row.logic_id if row is not None else None,
                phy_id=status.phy_id if status.phy_id is not None else (row.phy_id if row else None),
            )
        )
    return refs




def _source_samples(records: Sequence[Any], chip: ChipRef | None, ctx: CollectContext) -> list[Sample]:
    out: list[Sample] = []
    for table in records:
        out.extend(samples(table, chip, ctx))
    return out


def make_source(max_chips: int = DEFAULT_MAX_CHIPS) -> Source:
    """The ``npu-smi info`` Source refusing tables of more than ``max_chips`` chips.

    ``parse()`` returns one InfoTable; the Source contract wants a sequence of
    records, so the agent stores a 1-tuple and samples() is applied to its element.
    """

    def parse_records(text: str) -> tuple[InfoTable]:
        return (parse(text, max_chips),)

    return Source(
        name="npu_smi_info",
        tool="npu-smi",
        group="info",
        scope="node",
        argv=lambda _chip: ["info"],
        parse=parse_records,
        samples=_source_samples,
    )


SOURCE = make_source()
