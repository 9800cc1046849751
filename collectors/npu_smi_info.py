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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors._text import MIB, number, percent_ratio, raise_unparsed
from collectors.base import ChipRef, CollectContext, Sample, Source, label_pairs
from collectors.npu_smi_mapping import MappingRow

__all__ = [
    "BOARD_ANSWERED",
    "BOARD_PENDING",
    "EVERY_CHIP",
    "HEALTH_STATES",
    "SOURCE",
    "ChipStatus",
    "InfoTable",
    "NpuProcess",
    "chip_refs",
    "health_state",
    "parse",
    "samples",
]

HEALTH_STATES: tuple[str, ...] = ("ok", "warning", "alarm", "critical", "unknown")

_INT_RE = re.compile(r"[0-9]{1,12}")
_BUS_ID_RE = re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]")
_ABSENT_CELLS = frozenset({"", "NA", "N/A", "-", "--"})
_BANNER_RE = re.compile(r"npu-smi\s+(\S+)(?:\s+Version:\s*(\S+))?", re.IGNORECASE)
_NO_PROCESSES_RE = re.compile(r"No running processes found in NPU\s+([0-9]{1,12})", re.IGNORECASE)
_COLUMN_LABEL_RE = re.compile(r"[A-Za-z][A-Za-z\- ]*\([^)]*\)")
_PAIR_GAP_RE = re.compile(r"\s*/\s*")
_SLASHED_NA_RE = re.compile(r"(?<!\S)N/A(?!\S)", re.IGNORECASE)

# Value-cell columns: scalars and "used / total" pairs are matched to header
# columns separately, so a header column npuwatch does not know keeps its slot.
_PAIR_COLUMNS = frozenset({"hugepages", "memory", "hbm"})
_NPU_LINE_DEFAULT = ("power", "temp", "hugepages")
_CHIP_LINE_DEFAULT = ("aicore", "memory", "hbm")


@dataclass(frozen=True, slots=True)
class ChipStatus:
    """One chip (die) of the device box. Absent values (``NA``, ``-``, garbled) are None."""

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


@dataclass(frozen=True, slots=True)
class NpuProcess:
    """One row of the process box; ``name`` is empty for pids of another PID namespace."""

    npu: int
    chip: int
    pid: int
    name: str
    memory_bytes: float | None
    container_pid: int | None


@dataclass(frozen=True, slots=True)
class InfoTable:
    """The parsed table. ``process_section`` tells "no processes" apart from "not printed"."""

    version: str | None
    chips: tuple[ChipStatus, ...]
    processes: tuple[NpuProcess, ...]
    process_section: bool


@dataclass(slots=True)
class _NpuLine:
    npu: int
    name: str
    health: str
    values: dict[str, str]


@dataclass(slots=True)
class _State:
    version: str | None = None
    npu_columns: tuple[str, ...] = _NPU_LINE_DEFAULT
    chip_columns: tuple[str, ...] = _CHIP_LINE_DEFAULT
    second_id: str | None = None  # "device" or "phy" from the chip header; None when no header seen
    in_processes: bool = False
    process_section: bool = False
    pending: _NpuLine | None = None
    chips: dict[tuple[int, int], ChipStatus] = field(default_factory=dict)
    processes: list[NpuProcess] = field(default_factory=list)


def _int_or_none(token: str | None) -> int | None:
    if token is None or not _INT_RE.fullmatch(token):
        return None
    return int(token)


def _cells(line: str) -> list[str]:
    body = line.strip()
    body = body.removeprefix("|").removesuffix("|")
    return [cell.strip() for cell in body.split("|")]


def _column_keys(value_cell: str, default: tuple[str, ...]) -> tuple[str, ...]:
    keys: list[str] = []
    for label in _COLUMN_LABEL_RE.findall(value_cell):
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


def _split_values(value_cell: str, columns: tuple[str, ...]) -> dict[str, str]:
    """Map a value cell onto column keys: scalars and ``used/total`` pairs separately, in order."""
    tokens = _value_tokens(value_cell)
    scalars = [token for token in tokens if "/" not in token]
    pairs = [token for token in tokens if "/" in token]
    scalar_keys = [key for key in columns if key not in _PAIR_COLUMNS and key != "other-pair"]
    pair_keys = [key for key in columns if key in _PAIR_COLUMNS or key == "other-pair"]
    values = dict(zip(scalar_keys, scalars, strict=False))
    values.update(zip(pair_keys, pairs, strict=False))
    return values


def _pair(token: str | None, scale: float = 1.0) -> tuple[float | None, float | None]:
    if token is None:
        return None, None
    used, _, total = token.partition("/")
    used_value, total_value = number(used), number(total)
    return (
        None if used_value is None else used_value * scale,
        None if total_value is None else total_value * scale,
    )


def _is_bus_cell(cell: str) -> bool:
    return cell in _ABSENT_CELLS or _BUS_ID_RE.fullmatch(cell) is not None


def _id_and_rest(cells: list[str]) -> tuple[list[str], str, str]:
    """(id tokens, middle cell, value cell); 950's ``NPU ID | Name`` split is joined back."""
    if len(cells) >= 3:
        return " ".join(cells[:-2]).split(), cells[-2], cells[-1]
    if len(cells) == 2:
        return cells[0].split(), cells[1], ""
    return cells[0].split() if cells else [], "", ""


def _handle_device_row(state: _State, cells: list[str]) -> None:
    ids, middle, values = _id_and_rest(cells)
    ints = [_int_or_none(token) for token in ids]
    # An NPU line has an id, a name and a health cell, and two scalars (power,
    # temp); a chip line has up to two ids, a bus id (or NA) and one scalar.
    scalars = sum("/" not in token for token in _value_tokens(values))
    chip_like = len(ids) <= 2 and None not in ints and _is_bus_cell(middle)
    npu_like = len(ids) >= 2 and ints[0] is not None and _BUS_ID_RE.fullmatch(middle) is None
    if state.pending is None and chip_like and scalars < 2:
        npu_like = False  # a chip line whose NPU line was cut off: no NPU id to file it under
    if state.pending is not None and chip_like:
        _finish_chip(state, state.pending, [i for i in ints if i is not None], middle, values)
        state.pending = None
    elif npu_like:
        if state.pending is not None:
            _finish_chip(state, state.pending, None, None, "")
        npu = ints[0]
        assert npu is not None
        state.pending = _NpuLine(
            npu=npu,
            name=" ".join(ids[1:]),
            health=middle,
            values=_split_values(values, state.npu_columns),
        )
    # Anything else (a chip line without its NPU line at the top of a partial
    # capture, stray text) carries no NPU id and is skipped.


def _finish_chip(
    state: _State, npu_line: _NpuLine, chip_ids: list[int] | None, bus: str | None, values: str
) -> None:
    if chip_ids is None:
        # The chip line is missing (cut capture): take the next free chip index.
        taken = {chip for npu, chip in state.chips if npu == npu_line.npu}
        chip, has_chip_id, second = next(i for i in range(len(taken) + 1) if i not in taken), True, None
    elif not chip_ids:
        chip, has_chip_id, second = 0, False, None  # 950 prints no chip id
    else:
        chip, has_chip_id = chip_ids[0], True
        second = chip_ids[1] if len(chip_ids) > 1 else None
    second_kind = state.second_id
    if second_kind is None:
        second_kind = "phy" if npu_line.name.lower().startswith("ascend910") else "device"
    chip_values = _split_values(values, state.chip_columns)
    hugepages_used, hugepages_total = _pair(npu_line.values.get("hugepages"))
    memory_used, memory_total = _pair(chip_values.get("memory"), MIB)
    hbm_used, hbm_total = _pair(chip_values.get("hbm"), MIB)
    status = ChipStatus(
        npu=npu_line.npu,
        chip=chip,
        has_chip_id=has_chip_id,
        phy_id=second if second_kind == "phy" else None,
        device_id=second if second_kind == "device" else None,
        name=npu_line.name,
        health=npu_line.health,
        bus_id=None if bus is None or bus in _ABSENT_CELLS else bus,
        power_watts=number(npu_line.values.get("power")),
        temperature_celsius=number(npu_line.values.get("temp")),
        aicore_ratio=percent_ratio(chip_values.get("aicore")),
        hugepages_used=hugepages_used,
        hugepages_total=hugepages_total,
        memory_used_bytes=memory_used,
        memory_total_bytes=memory_total,
        hbm_used_bytes=hbm_used,
        hbm_total_bytes=hbm_total,
    )
    state.chips.setdefault((status.npu, status.chip), status)


def _handle_process_row(state: _State, cells: list[str]) -> None:
    if len(cells) < 4:
        return
    ids = [_int_or_none(token) for token in cells[0].split()]
    pid = _int_or_none(cells[1])
    if not 1 <= len(ids) <= 2 or None in ids or pid is None:
        return
    memory = number(cells[3])
    state.processes.append(
        NpuProcess(
            npu=ids[0] or 0,
            chip=(ids[1] or 0) if len(ids) == 2 else 0,
            pid=pid,
            name=cells[2],
            memory_bytes=None if memory is None else memory * MIB,
            container_pid=_int_or_none(cells[4]) if len(cells) >= 5 else None,
        )
    )


def _handle_line(state: _State, line: str) -> None:
    stripped = line.strip()
    if not stripped.startswith("|"):
        return  # separators, blank lines, prompts, stray text
    text = " ".join(stripped.split())
    lowered = text.lower()
    cells = _cells(stripped)
    banner = _BANNER_RE.search(text) if len(cells) == 1 else None
    if banner is not None:
        state.version = banner.group(2) or banner.group(1)
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
        _handle_process_row(state, cells)
    else:
        _handle_device_row(state, cells)


def _flush_pending(state: _State) -> None:
    if state.pending is not None:
        _finish_chip(state, state.pending, None, None, "")
        state.pending = None


def parse(text: str) -> InfoTable:
    """Parse ``npu-smi info`` output.

    Raises ``ToolError`` when npu-smi printed an error/usage text instead of the
    table and ``ParseError`` for anything else that holds no chip row.
    """
    state = _State()
    for line in text.splitlines():
        _handle_line(state, line)
    _flush_pending(state)
    if not state.chips:
        raise_unparsed(text, "npu-smi info", "no chip rows in npu-smi info output")
    return InfoTable(
        version=state.version,
        chips=tuple(state.chips.values()),
        processes=tuple(state.processes),
        process_section=state.process_section,
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


def _chip_samples(status: ChipStatus, ctx: CollectContext) -> list[Sample]:
    chip_labels = label_pairs(npu=status.npu, chip=status.chip)
    facts = ctx.inventory.get((status.npu, status.chip), {})
    info_labels = label_pairs(
        npu=status.npu,
        chip=status.chip,
        model=status.name,
        bus_id=status.bus_id or facts.get("bus_id", ""),
        logic_id=facts.get("logic_id", ""),
        serial=facts.get("serial", ""),
        firmware=facts.get("firmware", ""),
        driver=facts.get("driver", ""),
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
        counts[key] = counts.get(key, 0) + 1
        if process.memory_bytes is not None:
            previous = memory.get((*key, process.pid), (process.name, 0.0))
            memory[(*key, process.pid)] = (previous[0], previous[1] + process.memory_bytes)
    out = [
        Sample("npu_processes", label_pairs(npu=npu, chip=chip), float(count))
        for (npu, chip), count in counts.items()
    ]
    if not ctx.per_process_metrics:
        return out
    for (npu, chip, pid), (printed_name, used) in memory.items():
        name, user = printed_name, ""
        if ctx.process_owner is not None:
            owner_name, user = ctx.process_owner(pid)
            name = owner_name or printed_name
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


def _parse_records(text: str) -> tuple[InfoTable]:
    return (parse(text),)


def _source_samples(records: Sequence[Any], chip: ChipRef | None, ctx: CollectContext) -> list[Sample]:
    out: list[Sample] = []
    for table in records:
        out.extend(samples(table, chip, ctx))
    return out


# parse() returns one InfoTable; the Source contract wants a sequence of records,
# so the agent stores a 1-tuple and samples() is applied to its element.
SOURCE = Source(
    name="npu_smi_info",
    tool="npu-smi",
    group="info",
    scope="node",
    argv=lambda _chip: ["info"],
    parse=_parse_records,
    samples=_source_samples,
)
