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
- A table cut short (npu-smi exits 0 after printing part of it) is told by its
  shape: npu-smi closes every box with a ``+---+`` line and its process box names
  every NPU of the chip box. ``InfoTable.cut`` says why; ``parse(whole=True)`` (the
  agent's Source) refuses it, and the Source also refuses a table without the
  process box its npu-smi printed before, and one with fewer chips than the node's
  inventory that no whole process box vouches for (``check_inventory``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from collectors._text import raise_unparsed
from collectors.base import ChipRef, CollectContext, ParseError, Sample, Source, label_pairs
from collectors.bounds import LIMITS, has_control_chars, is_label_text
from collectors.npu_smi_info_layout import CHIP_LINE_DEFAULT, NPU_LINE_DEFAULT, Line, column_keys, split_cells
from collectors.npu_smi_info_records import ChipStatus, InfoTable
from collectors.npu_smi_info_rows import ParseState, flush_pending, handle_device_row, handle_process_row
from collectors.npu_smi_mapping import MappingRow

__all__ = [
    "BOARD_ANSWERED",
    "BOARD_PENDING",
    "DEFAULT_MAX_CHIPS",
    "EVERY_CHIP",
    "HEALTH_STATES",
    "SOURCE",
    "chip_refs",
    "health_state",
    "make_source",
    "parse",
    "samples",
]

HEALTH_STATES: tuple[str, ...] = ("ok", "warning", "alarm", "critical", "unknown")
DEFAULT_MAX_CHIPS = LIMITS["max_chips"]

_BANNER_RE = re.compile(r"npu-smi\s+(\S+)(?:\s+Version:\s*(\S+))?", re.IGNORECASE)
_NO_PROCESSES_RE = re.compile(r"No running processes found in NPU\s+([0-9]{1,12})", re.IGNORECASE)
_VERSION_RE = re.compile(r"[\x21-\x7e]{1,32}")  # printable ASCII: it ends up in logs


def _handle_line(state: ParseState, line_no: int, line: str) -> None:
    stripped = line.strip()
    if not stripped.startswith("|"):
        if stripped.startswith("+"):
            state.open_row = None  # a separator closes the rows above it
        return  # separators, blank lines, prompts, stray text
    state.open_row = line_no
    where = Line(line_no, stripped)
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
    cells = split_cells(stripped)
    banner = _BANNER_RE.search(text) if len(cells) == 1 else None
    if banner is not None:
        version = banner.group(2) or banner.group(1)
        if _VERSION_RE.fullmatch(version):
            state.version = version
        else:
            state.rejects.add("npu-smi version is not printable ASCII", line_no, stripped)
    elif "process id" in lowered or _NO_PROCESSES_RE.search(text):
        state.in_processes = state.process_section = True
        flush_pending(state)
        idle = _NO_PROCESSES_RE.search(text)
        if idle is not None:
            state.process_npus.add(int(idle.group(1)))
    elif "health" in lowered and "name" in lowered:
        state.in_processes = False
        state.npu_columns = column_keys(cells[-1], NPU_LINE_DEFAULT)
    elif "bus-id" in lowered:
        state.in_processes = False
        state.chip_columns = column_keys(cells[-1], CHIP_LINE_DEFAULT)
        first = cells[0].lower() if len(cells) >= 3 else ""
        state.second_id = "phy" if "phy" in first else "device" if "device" in first else "none"
    elif state.in_processes:
        words = cells[0].split() if cells else []
        if words and words[0].isdigit():
            state.process_npus.add(int(words[0]))
        handle_process_row(state, cells, where)
    else:
        handle_device_row(state, cells, where)


def _cut(state: ParseState) -> str | None:
    """Why the table is not whole: npu-smi closes every box with a +---+ line, and its process box
    names every NPU of the chip box (a process row or "No running processes found")."""
    if state.open_row is not None:
        return f"the table ends inside a box (line {state.open_row} is not closed by a +---+ line)"
    if state.process_section:
        unnamed = sorted({chip.npu for chip in state.chips.values()} - state.process_npus)
        if unnamed:
            listed = ", ".join(str(npu) for npu in unnamed[:8]) + (", ..." if len(unnamed) > 8 else "")
            return f"the process box ends before NPU {listed} of the chip box"
    return None


def parse(text: str, max_chips: int = DEFAULT_MAX_CHIPS, *, whole: bool = False) -> InfoTable:
    """Parse ``npu-smi info`` output, in time linear in its size.

    Rows that break the layout and values outside ``collectors.bounds.BOUNDS`` are
    dropped and listed in ``InfoTable.rejected``. Raises ``ToolError`` when npu-smi
    printed an error/usage text instead of the table, and ``ParseError`` when no chip
    row is left or when the table lists more than ``max_chips`` chips. A table cut short
    (``InfoTable.cut``) is parsed as far as it goes, or refused with ``ParseError`` when
    ``whole`` (the agent's collector: a cut table would drop chips and processes).
    """
    state = ParseState(max_chips=max_chips)
    for line_no, line in enumerate(text.splitlines(), start=1):
        _handle_line(state, line_no, line)
    flush_pending(state)
    if not state.chips:
        raise_unparsed(text, "npu-smi info", "no valid chip row in npu-smi info output", state.rejects)
    if state.first_over_cap is not None:
        over = state.first_over_cap
        raise ParseError(f"{len(state.chips)} chips, more than max_chips={max_chips}", over.number, over.text)
    cut = _cut(state)
    if cut is not None and whole:
        raise ParseError(f"npu-smi info output cut short: {cut}; {len(state.chips)} chips read, none exported")
    return InfoTable(
        version=state.version,
        chips=tuple(state.chips.values()),
        processes=tuple(state.processes),
        process_section=state.process_section,
        rejected=state.rejects.freeze(),
        cut=cut,
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


COMMAND_CHARS = 120  # npu_process_info's command: enough for the script and its first arguments


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
        usage = ctx.process_usage(pid) if ctx.process_usage is not None else None
        if usage is not None:
            cpu, started, command = usage
            at = label_pairs(npu=npu, chip=chip, pid=pid)
            out += [Sample("npu_process_cpu_seconds_total", at, cpu),
                    Sample("npu_process_start_time_seconds", at, started),
                    Sample("npu_process_info", (*at, ("command", command_label(command))), 1.0)]
    return out


def command_label(command: str) -> str:
    """A command line as a label value: each character that is not printable ASCII a ``?``, cut to
    ``COMMAND_CHARS`` (a cut one ends in ``...``)."""
    text = "".join(c if " " <= c <= "~" else "?" for c in command)
    return text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS - 3] + "..."


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


def check_inventory(table: InfoTable, known: int) -> None:
    """Refuse a table with fewer chips than the node is known to have, unless the table proves itself
    whole: closed, with a process box naming every NPU it lists (then a chip is gone: NPUChipMissing).
    A table cut at a chip-row boundary (and its process box with it) would otherwise pass for a node
    that lost chips, and its busy NPUs would look idle."""
    if known and len(table.chips) < known and not (table.process_section and table.cut is None):
        raise ParseError(f"npu-smi info lists {len(table.chips)} chips where the node has {known} (npu-smi info "
                         f"-m, expected_chips) and no process box shows the table whole: taken as cut short")


def _source_samples(records: Sequence[Any], chip: ChipRef | None, ctx: CollectContext) -> list[Sample]:
    out: list[Sample] = []
    for table in records:
        check_inventory(table, ctx.inventory_chips)
        out.extend(samples(table, chip, ctx))
    return out


def make_source(max_chips: int = DEFAULT_MAX_CHIPS) -> Source:
    """The ``npu-smi info`` Source refusing tables of more than ``max_chips`` chips, tables cut short,
    tables without the process box this npu-smi printed before, and tables with fewer chips than the
    node's inventory (``check_inventory``).

    ``parse()`` returns one InfoTable; the Source contract wants a sequence of
    records, so the agent stores a 1-tuple and samples() is applied to its element.
    """
    printed_processes: list[bool] = []  # this npu-smi prints a process box (22.0.3.1 did not)

    def parse_records(text: str) -> tuple[InfoTable]:
        table = parse(text, max_chips, whole=True)
        if table.process_section:
            printed_processes[:] = [True]
        elif printed_processes:
            raise ParseError("npu-smi info output cut short: no process box, which this npu-smi printed before; "
                             f"{len(table.chips)} chips read, none exported")
        return (table,)

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
