"""The parts of ``npuwatch top`` around the NPU table: the header, the panels below it (HCCL, probes, checks),
the process list and one NPU's detail. Each returns lines that fit the width: a long one is folded at its
spaces, and the header leaves out its least needed parts whole rather than cut one."""

from __future__ import annotations

import time

from agent.core.humanize import duration
from agent.health.faults import LEVEL_ACTIONS
from agent.health.thresholds import FAULT_KINDS, fault_kind
from agent.health.verdict import SEVERITY_WORDS, VERDICT_CAUSES
from agent.top.columns import finding_style, gib, level_style
from agent.top.freshness import STALE_MARK, Freshness
from agent.top.history import History
from agent.top.lines import Line, fit, width_of, wrap
from agent.top.model import Collector, Fetched, NodeView, NpuRow, Process

__all__ = ["PER_PROCESS_KEY", "detail", "header", "panels", "processes", "run_time"]

PER_PROCESS_KEY = "collectors.npu_smi.per_process_metrics"
_INDENT = 10  # the panels' names take this much, their text starts after it


def _label(cause: str) -> str:
    """What a person calls a cause: the fault kind's label, a verdict cause's or check's name in words."""
    if cause in FAULT_KINDS:
        return fault_kind(cause).label
    return cause.replace("_", " ") if cause in VERDICT_CAUSES else f"{cause.replace('_', ' ')} check"


def _lead(view: NodeView, width: int) -> list[Line]:
    """The agent's verdict (npu_node_status): its status, lead cause and where, and how many other causes."""
    if view.status is None:
        return wrap("the agent exports no verdict (npu_node_status): an agent older than 0.2?", width, "dim")
    if view.status == "ok":
        return wrap("ok: the agent finds no fault", width, "ok")
    where = f" on NPU {view.lead_npu}" if view.lead_npu is not None else ""
    text = f"{SEVERITY_WORDS[view.status]}: {_label(view.cause)}{where}" if view.cause else SEVERITY_WORDS[view.status]
    # the other causes at the verdict's severity, as check's verdict names them ("also ...")
    found = [f for row in view.rows for f in row.faults.values()] + list(view.node_faults.values())
    others = {f.kind for f in found if f.status == view.status} - {view.cause or ""}
    more = f" (+{len(others)} more)" if others else ""
    style = {"fail": "bad", "warn": "warn"}.get(view.status, "dim")
    return wrap(text + more, width, style, 2)


def header(fetched: Fetched, node: str, now: float, width: int, history: History | None = None, *,
           fresh: Freshness | None = None) -> list[Line]:
    view = fetched.view
    assert view is not None
    fresh = fresh or Freshness(view, now)
    first: Line = [("npuwatch top", "head"), (f"  {node}", "bold")]
    optional: list[tuple[int, Line]] = []  # (the order it is left out in: highest first, its segments)
    stale = fresh.stale_sources()
    oldest = fresh.oldest()
    # The age of the oldest reading behind the table (the fetch's age with an agent that exports no times).
    age = oldest[0] if oldest is not None else (max(0.0, now - fetched.at) if fetched.at is not None else None)
    if age is not None:  # first after the node: the one thing that must show on a narrow terminal
        said = f"  data {duration(age)} old" + (f", {STALE_MARK} stale" if stale else "")
        optional.append((0, [(said, "warn" if fetched.error or stale else "dim")]))
    if view.models:
        optional.append((1, [(f"  {'/'.join(view.models)} x{len(view.rows)}", "")]))
    if view.drivers:
        optional.append((4, [(f"  driver {'/'.join(view.drivers)}", "")]))
    if view.version:
        optional.append((3, [(f"  agent {view.version}", "")]))
    if view.started_at is not None:
        optional.append((2, [(f"  up {duration(max(0.0, now - view.started_at))}", "")]))
    while optional and width_of(first) + sum(width_of(part) for _, part in optional) > width:
        optional.remove(max(optional, key=lambda item: item[0]))
    lines = [first + [segment for _, part in optional for segment in part]]
    if fetched.mode:  # not an agent's view: say whose it is before anything else
        lines += wrap(fetched.mode, width, "warn", 2)
    if fetched.error:
        lines += wrap(f"the agent stopped answering: {fetched.error}", width, "bad", 2)
    if stale:
        said = "; ".join(f"{c.name} {_last_read(c, now)}" for c in stale)
        lines += wrap(f"{STALE_MARK} marks a stale reading: {said}", width, "warn", 2)
    if view.collectors:
        down = view.down
        text = f"collectors {len(view.collectors) - len(down)} up"
        if down:
            text += f", {len(down)} down: " + ", ".join(f"{c.name} ({c.reason or 'down'})" for c in down)
        lines += wrap(text, width, "bad" if down else "dim", 2)
    if history is not None and view.rows:
        lines += _lead(view, width)
    return lines


def _last_read(collector: Collector, now: float) -> str:
    said = f"last read {duration(max(0.0, now - (collector.last_success or now)))} ago"
    if collector.interval is not None:
        said += f" (every {duration(collector.interval)})"
    return said + ("" if collector.up else f", now {collector.reason or 'down'}")


def _hccl(view: NodeView, history: History, now: float) -> list[tuple[str, str]]:
    said: list[tuple[str, str]] = []
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
            said.append((text, "bad"))
    else:
        said.append(("HCCL      no incident in the agent's window", "dim"))
    new_errors = history.new_hccl_errors(view)
    if new_errors:
        said.append((" " * _INDENT + "new log errors while watching: "
                     + ", ".join(f"{category} {count}" for category, count in new_errors.items()), "warn"))
    return said


def panels(view: NodeView, history: History, now: float, width: int, fresh: Freshness | None = None) -> list[Line]:
    """HCCL (marked when the log scanner is stale), then the probes and the checks when the agent exports them
    (they run only where torch does)."""
    lines: list[Line] = []
    said = _hccl(view, history, now)
    if fresh is not None and fresh.is_stale("npu_hccl_rank_timeout_timestamp_seconds"):
        said[0] = (f"{said[0][0]} {STALE_MARK} stale: the log scanner is down or late", "dim")
    for text, style in said:
        lines += wrap(text, width, style, _INDENT)
    probes: list[tuple[str, str]] = []
    for probe in sorted(view.probes, key=lambda p: p.name):
        probes.append((f"{probe.name} ok {duration(max(0.0, now - probe.last_success))} ago", ""))
    wrong = sorted(f"{row.name}/{dtype}" for row in view.rows for dtype, ok in row.gemm_correct.items() if not ok)
    efficiencies = [e for row in view.rows for e in row.gemm_efficiency.values()]
    if efficiencies:
        probes.append((f"gemm lowest {min(efficiencies) * 100:.0f}% of peak", ""))
    if wrong:
        probes.append((f"gemm WRONG on {', '.join(wrong)}", "bad"))
    checks: list[tuple[str, str]] = []
    for level, verdict in sorted(view.check_verdicts.items()):
        ran = view.check_runs.get(level)
        when = f" {duration(max(0.0, now - ran))} ago" if ran is not None else ""
        checks.append((f"{level} {verdict}{when}", {"ok": "ok", "warn": "warn", "fail": "bad"}.get(verdict, "dim")))
    for name, items in (("Probes", probes), ("Checks", checks)):
        if items:
            lines += _items(name, items, width)
    return lines


def _items(name: str, items: list[tuple[str, str]], width: int) -> list[Line]:
    """``name`` then its items two spaces apart, an item that does not fit starting the next line."""
    lines: list[Line] = []
    line: Line = [(name.ljust(_INDENT), "")]
    for text, style in items:
        if width_of(line) > _INDENT and width_of(line) + 2 + len(text) > width:
            lines.append(line)
            line = [(" " * _INDENT, "")]
        line += [("  " if width_of(line) > _INDENT else "", ""), (text, style)]
    lines.append(line)
    return [fit(line, width) for line in lines]


def run_time(seconds: float) -> str:
    """A process's run time as ps prints it: ``MM:SS``, ``H:MM:SS``, else ``Nd HHh``."""
    whole = int(max(0.0, seconds))
    if whole >= 86400:
        return f"{whole // 86400}d {whole % 86400 // 3600:02d}h"
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60:02d}:{rest % 60:02d}"


_PROC_TITLE = f"{'NPU':>5} {'PID':>7} {'USER':<9}{'HBM':>7} {'CPU%':>5} {'TIME':>8}  COMMAND"


def _process_line(row: NpuRow, process: Process, history: History | None, now: float, width: int) -> Line:
    cpu = history.cpu_of(process) if history is not None else None
    user = process.user[:8] or "-"
    memory = f"{gib(process.memory)}G" if process.memory is not None else "-"
    said = f"{process.pid:>7} {user:<9}{memory:>7} {f'{cpu * 100:.0f}' if cpu is not None else '-':>5} "
    said += f"{run_time(now - process.started_at) if process.started_at is not None else '-':>8}  "
    line: Line = [(" " * _INDENT, ""), (f"{row.name:>5}", "bold"), (" " + said, "")]
    return [*line, (process.command or process.name, "dim")]  # cut at a space by ``fit``, never in a word


def processes(view: NodeView, width: int, room: int, history: History | None = None,
              now: float | None = None) -> list[Line]:
    """The processes on the NPUs, in at most ``room`` lines; without per-process series, how to get them."""
    listed = [(row, process) for row in view.rows for _, process in sorted(row.procs.items())]
    counts = [row.processes for row in view.rows if row.processes is not None]
    if room <= 0 or (not listed and not counts):
        return []
    if not listed:
        total = int(sum(counts))
        said = f"{total}; list them with {PER_PROCESS_KEY}: true" if total else "none on the NPUs"
        return wrap("Processes " + said, width, "dim", _INDENT)[:room]
    now = time.time() if now is None else now
    listed.sort(key=lambda item: (-(item[1].memory or 0.0), item[0].npu, item[0].chip, item[1].pid))
    lines: list[Line] = [fit([("Processes".ljust(_INDENT) + _PROC_TITLE, "head")], width)]
    shown = listed if len(listed) <= room - 1 else listed[:max(0, room - 2)]
    for row, process in shown:
        lines.append(_process_line(row, process, history, now, width))
    if len(shown) < len(listed):
        lines.append([(" " * _INDENT + f"and {len(listed) - len(shown)} more (enter on an NPU lists its own)",
                       "dim")])
    return [fit(line, width) for line in lines[:room]]


def detail(row: NpuRow, now: float, width: int, fresh: Freshness | None = None) -> list[Line]:
    """One NPU's readings and findings, each reading whose collector is stale marked ``? stale``."""
    said: list[tuple[str, str]] = []
    shown: list[str | None] = []  # the metric behind each line of ``said`` (None: not a reading)

    def add(text: str, style: str, metric: str | None = None) -> None:
        said.append((text, style))
        shown.append(metric)
    if row.codes or row.handling:
        for code, level in sorted(row.codes.items()):
            add(f"  code {code}  {level}: {LEVEL_ACTIONS.get(level, '?')}", level_style(level), "npu_error_code_active")
        if row.handling and row.handling not in row.codes.values():
            add(f"  held  {row.handling}: {LEVEL_ACTIONS.get(row.handling, '?')}", level_style(row.handling),
                "npu_fault_handling")
    if row.link_up is not None:
        changed = (f", last change {duration(max(0.0, now - row.link_changed_at))} ago"
                   if row.link_changed_at else "")
        add(f"  RoCE link {'up' if row.link_up else 'DOWN'}{changed}; net health {row.net_health or '-'}",
            "ok" if row.link_up else "bad", "npu_roce_link_up")
    if row.optics_rx:
        rx = " ".join(f"{v * 1000:.2f}" for _, v in sorted(row.optics_rx.items()))
        tx = " ".join(f"{v * 1000:.2f}" for _, v in sorted(row.optics_tx.items()))
        add(f"  optics rx {rx} mW; tx {tx} mW{'; SIGNAL LOST' if row.optics_lost else ''}",
            "bad" if row.optics_lost else "", "npu_optical_rx_power_watts")
    if row.ecc_current or row.ecc_isolated:
        add("  HBM ECC now " + ", ".join(f"{b} {v:.0f}" for b, v in sorted(row.ecc_current.items()))
            + "; isolated pages " + ", ".join(f"{b} {v:.0f}" for b, v in sorted(row.ecc_isolated.items())),
            "bad" if row.ecc_current.get("double") else "", "npu_hbm_ecc_isolated_pages")
    if row.hccs_healthy is not None:
        add("  HCCS " + ("healthy" if row.hccs_healthy else "unhealthy (npu-smi info -t hccs: not OK)"),
            "ok" if row.hccs_healthy else "bad", "npu_hccs_healthy")
    for found in sorted(row.faults.values(), key=lambda f: (-f.rank, f.kind != row.cause, f.kind)):
        add(f"  {SEVERITY_WORDS.get(found.status, found.status)} {_label(found.kind)}, found "
            f"{duration(max(0.0, now - found.since))} ago", finding_style(found), "npu_fault_since_timestamp_seconds")
    if row.processes is not None:
        add(f"  processes {row.processes:.0f}", "", "npu_processes")
        for _, process in sorted(row.procs.items()):
            memory = f"  {gib(process.memory)} GiB" if process.memory is not None else ""
            user = f"  {process.user}" if process.user else ""
            add(f"    {process.label}{user}{memory}  {process.command}".rstrip(), "", "npu_process_memory_bytes")
    if row.gemm_efficiency:
        add("  GEMM probe " + ", ".join(f"{d} {e * 100:.0f}% of peak" for d, e in sorted(row.gemm_efficiency.items())),
            "")
    add("  (esc or enter: back to the table)", "dim")
    lines: list[Line] = [fit([(f"NPU {row.name}", "head"), (f"  {row.model or ''}", "")], width)]
    for (text, style), metric in zip(said, shown):
        stale = fresh is not None and metric is not None and fresh.is_stale(metric)
        lines += wrap(f"{text} {STALE_MARK} stale" if stale else text, width, "dim" if stale else style, 4)
    return lines
