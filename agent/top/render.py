"""One frame of ``npuwatch top`` as lines of styled segments, for any terminal size: the curses screen paints
them, ``--once`` prints them as plain text. Pure: the view, the history and the screen state in, lines out.

Columns drop from the right as the terminal narrows (codes, sparklines, processes, link, power), and the
panels below the table (HCCL, probes, checks) from the bottom as it gets shorter; what does not fit is cut,
never wrapped. A colour judgement reads the thresholds table (``agent.health.thresholds``), the one the checks
and alerts use, so a red cell here is a failing check there.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.core.humanize import duration
from agent.health import faults
from agent.health.faults import LEVEL_ACTIONS, LEVEL_KINDS
from agent.health.series import as_checks, worst
from agent.health.status import FAIL
from agent.health.thresholds import FAULT_KINDS, fault_kind
from agent.health.verdict import lead
from agent.top.history import History, sparkline
from agent.top.model import Fetched, NodeView, NpuRow

__all__ = ["SORT_KEYS", "Line", "TopState", "frame", "plain"]

Segment = tuple[str, str]  # (text, style): "", "ok", "warn", "bad", "dim", "bold", "head", "sel"
Line = list[Segment]

_HEALTH_ORDER = {"critical": 0, "alarm": 1, "unknown": 2, "warning": 3, "ok": 4}
SORT_KEYS: dict[str, Callable[[NpuRow], tuple[float, ...]]] = {
    "npu": lambda r: (r.npu, r.chip),
    "aicore": lambda r: (-(r.aicore if r.aicore is not None else -1.0), r.npu),
    "hbm": lambda r: (-((r.hbm_used or 0.0) / r.hbm_total if r.hbm_total else -1.0), r.npu),
    "temp": lambda r: (-(r.temperature if r.temperature is not None else -1e9), r.npu),
    "power": lambda r: (-(r.power if r.power is not None else -1e9), r.npu),
    "health": lambda r: (_health_rank(r), r.npu),
}


def _health_rank(row: NpuRow) -> float:
    """Worst first: a failing finding, a warning, then npu-smi's word."""
    found = worst(row.findings())
    if found is not None and found.kind is not None:
        return -20.0 if fault_kind(found.kind).status == FAIL else -10.0
    return float(_HEALTH_ORDER.get(row.health or "unknown", 2))


@dataclass
class TopState:
    sort: str = "npu"
    reverse: bool = False
    selected: int = 0  # index into the sorted rows
    detail: bool = False
    help: bool = False
    ascii_only: bool = False


def plain(lines: Sequence[Line]) -> str:
    return "\n".join("".join(text for text, _ in line).rstrip() for line in lines) + "\n"


def _fit(line: Line, width: int) -> Line:
    out: Line = []
    left = width
    for text, style in line:
        if left <= 0:
            break
        out.append((text[:left], style))
        left -= len(text[:left])
    return out


def _status_style(kind: str | None) -> str:
    if kind is None:
        return "ok"
    entry = FAULT_KINDS.get(kind)
    return "bad" if entry is not None and entry.status == FAIL else "warn"


def _level_style(level: str) -> str:
    return _status_style(LEVEL_KINDS.get(level)) if LEVEL_KINDS.get(level) else "dim"


def _temperature_style(celsius: float) -> str:
    return _status_style(faults.temperature(celsius).kind)


def _bar(ratio: float | None, width: int, ascii_only: bool) -> Line:
    if ratio is None:
        return [(" " * width, "")]
    inner = max(1, width - 5)
    filled = min(inner, round(max(0.0, min(1.0, ratio)) * inner))
    full, empty = ("#", ".") if ascii_only else ("█", "░")
    style = "bad" if ratio >= 0.95 else "ok"
    return [(full * filled, style), (empty * (inner - filled), "dim"), (f"{ratio * 100:4.0f}%", "")]


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f}"


_CODES_MIN = 22
_DROPPED_FIRST = ("Proc", "HBM BW", "Power", "HBM used", "Link", "Health", "Temp", "AI Core")


@dataclass(frozen=True)
class _Column:
    title: str
    width: int
    cell: Callable[[NpuRow], Line]


def _spark(series: dict[tuple[int, int], deque[float]], width: int, low: float, high: float,
           ascii_only: bool) -> Callable[[NpuRow], Line]:
    def cell(row: NpuRow) -> Line:
        values = series.get((row.npu, row.chip))
        text = sparkline(values, width, low, high, ascii_only) if values is not None else ""
        return [(text.rjust(width) + " ", "dim")]
    return cell


def _columns(width: int, history: History, state: TopState) -> list[_Column]:
    ascii_only = state.ascii_only

    def health(row: NpuRow) -> Line:
        """The worst finding of the one judgement (agent.health.series), by its kind; ok only when none."""
        found = worst(row.findings(history.flaps(row.npu, row.chip, row.link_transitions)))
        if found is not None and found.kind is not None:
            return [(f"{fault_kind(found.kind).short:<8}", _status_style(found.kind))]
        word = row.health or "-"
        return [(f"{word:<8}", "ok" if row.health == "ok" else "dim")]

    def link(row: NpuRow) -> Line:
        if row.link_up is None:
            return [("-".ljust(8), "dim")]
        flaps = history.flaps(row.npu, row.chip, row.link_transitions)
        extra = f" +{flaps}" if flaps else ""
        judged = worst([r for r in row.findings(flaps) if r.kind is not None and fault_kind(r.kind).cause
                        in ("link_down", "link_flap")])
        style = _status_style(judged.kind) if judged is not None else "ok"
        return [(("up" if row.link_up else "DOWN") + extra, style),
                (" " * max(0, 8 - len(("up" if row.link_up else "DOWN") + extra)), "")]

    def codes(row: NpuRow) -> Line:
        if not row.codes:
            return [("-", "dim")] if row.handling is None else [(f"held: {row.handling}", _level_style(row.handling))]
        room = width - sum(c.width for c in columns[:-1])  # the codes column is last
        full: Line = []
        short: Line = []
        for code, level in sorted(row.codes.items()):
            full += [(f"{code} ", _level_style(level)), (f"{level}: {LEVEL_ACTIONS.get(level, '?')}  ", "")]
            short += [(f"{code} ", _level_style(level)), (f"{level}  ", "")]
        return full if sum(len(text) for text, _ in full) <= room + 2 else short

    def temperature(row: NpuRow) -> Line:
        if row.temperature is None:
            return [("-".rjust(5), "dim")]
        return [(f"{row.temperature:3.0f}°C" if not ascii_only else f"{row.temperature:3.0f} C",
                 _temperature_style(row.temperature)), (" ", "")]

    def hbm(row: NpuRow) -> Line:
        if row.hbm_used is None or not row.hbm_total:
            return [("-".rjust(9), "dim")]
        return [(f"{_gib(row.hbm_used)}/{row.hbm_total / 2**30:.0f}G".rjust(9), "")]

    spark_w = 16
    bar_w = 17 if width >= 100 else 12
    columns = [
        _Column("NPU", 5, lambda r: [(f"{r.name:>4} ", "bold")]),
        _Column("AI Core", bar_w + 1, lambda r: [*_bar(r.aicore, bar_w, ascii_only), (" ", "")]),
        _Column("HBM BW", 7, lambda r: [((f"{r.hbm_bandwidth * 100:3.0f}%" if r.hbm_bandwidth is not None
                                            else "-").rjust(5) + "  ", "")]),
        _Column("HBM used", 10, lambda r: [*hbm(r), (" ", "")]),
        _Column("Temp", 6, temperature),
        _Column("Power", 6, lambda r: [((f"{r.power:.0f}W" if r.power is not None else "-").rjust(5) + " ", "")]),
        _Column("Health", 9, lambda r: [*health(r), (" ", "")]),
        _Column("Link", 9, lambda r: [*link(r), (" ", "")]),
        _Column("Proc", 5, lambda r: [((f"{r.processes:.0f}" if r.processes is not None else "-").rjust(4) + " ",
                                       "")]),
    ]
    used = sum(c.width for c in columns)
    if width - used >= 2 * (spark_w + 1) + 30:
        hot = float(fault_kind("chip_too_hot").threshold or 100.0)
        columns += [_Column("AI Core history", spark_w + 1, _spark(history.aicore, spark_w, 0.0, 1.0, ascii_only)),
                    _Column("Temp history", spark_w + 1, _spark(history.temperature, spark_w, 30.0, hot, ascii_only))]
    for title in _DROPPED_FIRST:  # the codes say what to do: they keep room before these
        if width - sum(c.width for c in columns) >= _CODES_MIN:
            break
        columns = [c for c in columns if c.title != title]
    columns.append(_Column("Codes", max(0, width - sum(c.width for c in columns)), codes))
    return columns


def sorted_rows(view: NodeView, state: TopState) -> list[NpuRow]:
    key = SORT_KEYS.get(state.sort, SORT_KEYS["npu"])
    return sorted(view.rows, key=key, reverse=state.reverse)


def _lead(view: NodeView, history: History) -> Line:
    """The one lead cause (agent.health.verdict) of what the rows show, as check and diagnose would lead."""
    results = [r for row in view.rows
               for r in row.findings(history.flaps(row.npu, row.chip, row.link_transitions))]
    verdict = lead(as_checks(results)) if any(r.kind for r in results) else None
    if verdict is None or verdict.status == "ok":
        return [("no fault in the agent's readings", "ok")]
    more = f" (+{len(verdict.also)} more)" if verdict.also else ""
    return [(f"{verdict.word}: {verdict.summary}{more}", "bad" if verdict.status == "fail" else "warn")]


def _header(fetched: Fetched, node: str, now: float, history: History | None = None) -> list[Line]:
    view = fetched.view
    assert view is not None
    parts: Line = [("npuwatch top", "head"), (f"  {node}", "bold")]
    age = max(0.0, now - fetched.at) if fetched.at is not None else None
    if age is not None:  # first after the node: the one thing that must show on a narrow terminal
        parts.append((f"  data {duration(age)} old", "warn" if fetched.error else "dim"))
    models = view.models
    if models:
        parts.append((f"  {'/'.join(models)} x{len(view.rows)}", ""))
    if view.drivers:
        parts.append((f"  driver {'/'.join(view.drivers)}", ""))
    if view.version:
        parts.append((f"  agent {view.version}", ""))
    if view.started_at is not None:
        parts.append((f" up {duration(max(0.0, now - view.started_at))}", ""))
    lines = [parts]
    down = view.down
    if fetched.error:
        lines.append([(f"the agent stopped answering: {fetched.error}", "bad")])
    if view.collectors:
        text = f"collectors {len(view.collectors) - len(down)} up"
        if down:
            text += f", {len(down)} down: " + ", ".join(f"{c.name} ({c.reason or 'down'})" for c in down)
        lines.append([(text, "bad" if down else "dim")])
    if history is not None and view.rows:
        lines.append(_lead(view, history))
    return lines


def _panels(view: NodeView, history: History, now: float) -> list[Line]:
    lines: list[Line] = []
    if view.timeouts:
        by_comm: dict[str, list[str]] = {}
        for timeout in sorted(view.timeouts, key=lambda t: (t.comm, t.rank)):
            by_comm.setdefault(timeout.comm, []).append(timeout.rank)
        for comm, ranks in by_comm.items():
            latest = max(t.timed_out_at for t in view.timeouts if t.comm == comm)
            size = view.comm_sizes.get(comm)
            blamed = sorted({f"{who} ({how})" for c, how, who in view.blamed if c == comm})
            text = (f"HCCL      local rank{'s' if len(ranks) > 1 else ''} {', '.join(ranks)} timed out "
                    f"{duration(max(0.0, now - latest))} ago")
            if blamed:
                text += "; blamed: " + ", ".join(blamed[:6])
            text += f"; communicator {comm}{f' ({size} ranks)' if size else ''}"
            lines.append([(text, "bad")])
    else:
        lines.append([("HCCL      no incident in the agent's window", "dim")])
    new_errors = history.new_hccl_errors(view)
    if new_errors:
        lines.append([("          new log errors while watching: "
                       + ", ".join(f"{category} {count}" for category, count in new_errors.items()), "warn")])
    probes: Line = []
    for probe in sorted(view.probes, key=lambda p: p.name):
        probes.append((f"{probe.name} ok {duration(max(0.0, now - probe.last_success))} ago  ", ""))
    wrong = sorted(f"{row.name}/{dtype}" for row in view.rows for dtype, ok in row.gemm_correct.items() if not ok)
    efficiencies = [e for row in view.rows for e in row.gemm_efficiency.values()]
    if efficiencies:
        probes.append((f"gemm lowest {min(efficiencies) * 100:.0f}% of peak  ", ""))
    if wrong:
        probes.append((f"gemm WRONG on {', '.join(wrong)}", "bad"))
    if probes:
        lines.append([("Probes    ", ""), *probes])
    if view.check_verdicts:
        checks: Line = [("Checks    ", "")]
        for level, verdict in sorted(view.check_verdicts.items()):
            ran = view.check_runs.get(level)
            when = f" {duration(max(0.0, now - ran))} ago" if ran is not None else ""
            style = {"ok": "ok", "warn": "warn", "fail": "bad"}.get(verdict, "dim")
            checks.append((f"{level} {verdict}{when}  ", style))
        lines.append(checks)
    return lines


def _detail(row: NpuRow, now: float) -> list[Line]:
    lines: list[Line] = [[(f"NPU {row.name}", "head"), (f"  {row.model or ''}", "")]]
    if row.codes or row.handling:
        for code, level in sorted(row.codes.items()):
            lines.append([(f"  code {code}", _level_style(level)), (f"  {level}: {LEVEL_ACTIONS.get(level, '?')}", "")])
        if row.handling and row.handling not in row.codes.values():
            lines.append([(f"  held  {row.handling}: {LEVEL_ACTIONS.get(row.handling, '?')}",
                           _level_style(row.handling))])
    if row.link_up is not None:
        changed = (f", last change {duration(max(0.0, now - row.link_changed_at))} ago"
                   if row.link_changed_at else "")
        lines.append([(f"  RoCE link {'up' if row.link_up else 'DOWN'}{changed}; net health {row.net_health or '-'}",
                       "ok" if row.link_up else "bad")])
    if row.optics_rx:
        rx = " ".join(f"{v * 1000:.2f}" for _, v in sorted(row.optics_rx.items()))
        tx = " ".join(f"{v * 1000:.2f}" for _, v in sorted(row.optics_tx.items()))
        lines.append([(f"  optics rx {rx} mW; tx {tx} mW{'; SIGNAL LOST' if row.optics_lost else ''}",
                       "bad" if row.optics_lost else "")])
    if row.ecc_current or row.ecc_isolated:
        lines.append([("  HBM ECC now " + ", ".join(f"{b} {v:.0f}" for b, v in sorted(row.ecc_current.items()))
                       + "; isolated pages " + ", ".join(f"{b} {v:.0f}" for b, v in sorted(row.ecc_isolated.items())),
                       "bad" if row.ecc_current.get("double") else "")])
    if row.hccs_healthy is not None:
        lines.append([("  HCCS " + ("healthy" if row.hccs_healthy else "unhealthy (npu-smi info -t hccs: not OK)"),
                       "ok" if row.hccs_healthy else "bad")])
    found = [r for r in row.findings() if r.kind is not None and r.status != "PASS"]
    for result in sorted(found, key=lambda r: -fault_kind(r.kind or "").weight):
        lines.append([(f"  {fault_kind(result.kind or '').label}: {result.evidence}", _status_style(result.kind))])
    if row.processes is not None:
        lines.append([(f"  processes {row.processes:.0f}", "")])
        for name, memory in sorted(row.process_memory.items()):
            lines.append([(f"    {name}  {_gib(memory)} GiB", "")])
    if row.gemm_efficiency:
        lines.append([("  GEMM probe " + ", ".join(f"{d} {e * 100:.0f}% of peak"
                                                   for d, e in sorted(row.gemm_efficiency.items())), "")])
    lines.append([("  (esc or enter: back to the table)", "dim")])
    return lines


HELP = [
    "npuwatch top: the node as the local agent sees it (a client of its /metrics: it runs no tool)",
    "",
    "  q          quit",
    "  ? or h     this help (any key closes it)",
    "  s / S      sort by the next / previous column: npu, aicore, hbm, temp, power, health",
    "  r          reverse the order",
    "  up / down  select an NPU (also k / j)",
    "  enter      the selected NPU's detail: codes, link, optics, ECC, HCCS, processes",
    "  esc        back to the table",
    "",
    "Colours follow the checks' thresholds; set NO_COLOR (or --no-color) for none.",
]


def frame(fetched: Fetched, history: History, state: TopState, *, width: int, height: int, node: str,
          now: float | None = None) -> list[Line]:
    """The screen's lines (at most ``height``, each at most ``width`` characters)."""
    now = time.time() if now is None else now
    if width < 10 or height < 2:
        return [[("npuwatch top"[:max(0, width)], "head")]][:max(0, height)]
    if state.help:
        return [_fit([(text, "head" if i == 0 else "")], width) for i, text in enumerate(HELP)][:height]
    if fetched.view is None:
        text = f"no data from {fetched.where}: {fetched.error or 'waiting for the first read'}"
        return [_fit([("npuwatch top", "head")], width), _fit([(text, "bad")], width)]
    view = fetched.view
    lines = _header(fetched, node, now, history)
    rows = sorted_rows(view, state)
    state.selected = max(0, min(state.selected, len(rows) - 1))
    if state.detail and rows:
        lines += _detail(rows[state.selected], now)
        return [_fit(line, width) for line in lines[:height]]
    columns = _columns(width, history, state)
    title: Line = []
    for column in columns:
        label = column.title + ("*" if _sort_column(state.sort) == column.title else "")
        title.append((label[:column.width - 1].ljust(column.width) if column.title != "Codes" else label, "head"))
    lines.append(title)
    table: list[Line] = []
    for index, row in enumerate(rows):
        line: Line = []
        for column in columns:
            line += column.cell(row)
        if index == state.selected:
            line = [(text, "sel" if style in ("", "dim") else style) for text, style in line]
        table.append(line)
    panels = _panels(view, history, now)
    footer: Line = [(f"q quit  ? help  s sort ({state.sort}{', reversed' if state.reverse else ''})  "
                     "enter detail", "dim")]
    room = height - len(lines) - 1  # the footer
    if len(table) > room:
        start = max(0, min(state.selected - room + 1, len(table) - room)) if room > 0 else 0
        table = table[start:start + max(0, room)]
    lines += table
    room = height - len(lines) - 1
    lines += panels[:max(0, room)]
    if len(lines) < height:
        lines.append(footer)
    return [_fit(line, width) for line in lines[:height]]


def _sort_column(sort: str) -> str:
    return {"npu": "NPU", "aicore": "AI Core", "hbm": "HBM used", "temp": "Temp", "power": "Power",
            "health": "Health"}.get(sort, "")
