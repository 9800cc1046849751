"""The node-wide checks every command runs: the tools answer, and the recent logs hold no HCCL error.

A log blame (a peer address, a lost device) that resolves to one of this node's own NPUs becomes a result on
that NPU, so the lead cause (``agent.health.verdict``) joins it to that NPU's fault.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from agent.core.humanize import duration, plural, size
from agent.health import faults
from agent.health.log_categories import category_hint
from agent.health.readings import LogScan, NodeReadings, QuickReadings, Reading
from agent.health.results import CheckResult, Result, fold
from agent.health.settings import JudgeSettings
from agent.health.status import FAIL, PASS, UNKNOWN, WARN
from collectors.hccl.codes import DIAGNOSE_TIMEOUT_CATEGORIES as TIMEOUT_CATEGORIES
from collectors.hccl.codes import PROGRAM_CATEGORIES

__all__ = ["BLAMED", "NOT_COLLECTED", "TOOLS_HINT", "check_hccl_errors", "check_tools", "local_blame",
           "tool_error_kind"]

BLAMED = "blamed by the HCCL logs"  # the basis of a log result on a local NPU
# A reading of a collector the config turns off (the agent's own readings): no call was made, none failed.
NOT_COLLECTED = "not collected: disabled in the config"
TOOLS_HINT = ("check the tool paths (collectors.npu_smi.path, collectors.hccn_tool.path) and the log directory "
              "($ASCEND_PROCESS_LOG_PATH)")


def tool_error_kind(error: str) -> str:
    """What went wrong in a ToolBox reading, from its message: missing, hung, skipped, unreadable or failed."""
    if ": not found" in error or error.endswith(" not found"):  # not found, or skipped since it was not found
        return "missing"
    if "no answer within" in error:
        return "hung"
    if ": skipped," in error:
        return "skipped"
    if "unreadable output" in error:
        return "unreadable"
    return "failed"


def _tool_result(tool: str, readings: Iterable[Reading]) -> Result:
    read = [reading for reading in readings if not (reading.error or "").endswith(NOT_COLLECTED)]
    errors = [r.error for r in read if r.error is not None]
    if not read:
        return Result(UNKNOWN, f"{tool}: not called")
    if not errors:
        return Result(PASS, f"{tool}: {len(read)} calls answered", value=len(read), unit="calls")
    kinds = {tool_error_kind(error): error for error in errors}
    for kind in ("hung", "failed", "unreadable"):
        if kind in kinds:
            return Result(FAIL, f"{tool}: {kinds[kind]}", value=len(errors), threshold=0, unit="failed calls",
                          kind="tool_hung")
    if "missing" in kinds:
        # A missing tool is a node that cannot be checked, never a fault of the node.
        setting = {"npu-smi": "collectors.npu_smi.path", "hccn_tool": "collectors.hccn_tool.path"}[tool]
        return Result(UNKNOWN, f"{tool}: not found (set {setting} to where it is installed)", basis=setting)
    return Result(FAIL, f"{tool}: {errors[0]}", value=len(errors), threshold=0, unit="failed calls",
                  kind="tool_hung")


def check_tools(readings: QuickReadings, settings: JudgeSettings, *, roce: bool) -> CheckResult:
    """npu-smi (and hccn_tool, when a RoCE check runs) answered every call: no hang, crash or garbage."""
    node = readings.node
    npu_smi = [node.table, *node.health.values(), *node.ecc.values(), *readings.boards.values(),
               *readings.hccs.values()]
    # A missing npu-smi is no problem where DCMI answered in its place (a container with only the driver
    # library), as in the agent: the chip readings came, the board and HCCS readings are unknown.
    direct = [reading for reading in npu_smi if reading.ok and reading.by != "tool"]
    tool_read = [reading for reading in npu_smi if reading not in direct]
    results = [_tool_result("npu-smi", tool_read)] if tool_read or not direct else []
    if direct:
        results.append(Result(PASS, f"{direct[0].by}: {len(direct)} chip readings answered", value=len(direct),
                              unit="calls"))
    if roce and node.table.ok:
        hccn = [reading for port in node.roce.values()
                for reading in (port.link, port.link_stat, port.net_health, port.ip, *port.optical, *port.stat)]
        results.append(_tool_result("hccn_tool", hccn))
    return fold("tools", results, "every tool call answered", TOOLS_HINT)


_LOG_PATH_HINT = ("set $ASCEND_PROCESS_LOG_PATH (or collectors.hccl_logs.paths in the config) to where CANN "
                  "writes its logs; without either, ~/ascend/log is read")


def _nothing_read(scan: LogScan, window: str) -> str:
    """Why the scan read no file: nothing recent, or the files it found could not be read."""
    roots = ", ".join(root for root in scan.roots if root not in scan.missing_roots) or "the configured globs"
    if scan.errors:
        return f"no log file could be read under {roots}: {scan.errors[0]}"
    notes = [f"{plural(scan.older_files, 'older file')} not read"] if scan.older_files else []
    notes += [f"no directory at {root}" for root in scan.missing_roots]
    return f"no log file under {roots} was written in the last {window}" + (f" ({'; '.join(notes)})" if notes else "")


def local_blame(node: NodeReadings) -> dict[int, list[str]]:
    """NPU -> the log hints that name one of its own RoCE addresses or its device (``29.1.7.17/7``)."""
    owners = {roce.ip.value.address: ref.npu for ref, roce in node.roce.items() if roce.ip.ok}
    blamed: dict[int, list[str]] = {}
    if node.logs is None:
        return blamed
    for (kind, value), _count in node.logs.hints.most_common():
        address = value.split("/", 1)[0].split(":", 1)[0]
        if address in owners:
            blamed.setdefault(owners[address], []).append(f"{kind} {value}")
    return blamed


def _program_failed(scan: LogScan, window: str, fields: dict[str, Any]) -> list[Result]:
    """A PASS result for the incidents where the program or its configuration failed (``program_error``,
    ``config_error``): they are reported, and they never mark the node."""
    seen = [e for e in scan.events if e.category in PROGRAM_CATEGORIES]
    if not seen:
        return []
    kinds = Counter(event.category for event in seen)
    codes = list(dict.fromkeys(event.code for event in seen))[:4]
    first = f"{seen[0].source}:{seen[0].line_no}"
    text = (f"the program failed, the node is fine: {plural(len(seen), 'incident')} in the last {window}: "
            f"{', '.join(f'{c} x{n}' for c, n in kinds.most_common())} "
            f"({'code' if len(codes) == 1 else 'codes'} {', '.join(codes)}, first at {first})")
    return [Result(PASS, text, **{**fields, "value": len(seen)})]


def check_hccl_errors(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """HCCL/CANN errors of the look-back window, by category, with the peers they blame.

    No log directory is UNKNOWN; a directory where nothing was written in the window is PASS (an idle node
    writes no log); files that could not be read, with nothing else read, are UNKNOWN; incidents warn, a
    device's lost heartbeat fails; a blamed address of a local NPU is a result on that NPU. A program or
    configuration error (``PROGRAM_CATEGORIES``) is reported as such and passes: the node is fine.
    """
    name = "hccl_errors"
    scan: LogScan | None = readings.node.logs
    window = duration(settings.window_s)
    fields: dict[str, Any] = {"threshold": 0, "unit": "incidents",
                              "basis": f"{settings.window_basis} ({window})"}
    if scan is None:
        return CheckResult(name, UNKNOWN, "logs not read", (Result(UNKNOWN, "logs not read"),))
    if not scan.roots_exist:
        text = f"no CANN log directory at {', '.join(scan.roots) or '(none configured)'}"
        return CheckResult(name, UNKNOWN, text, (Result(UNKNOWN, text),), _LOG_PATH_HINT)
    if not scan.events:
        if scan.files == 0:
            text = _nothing_read(scan, window)
            status = UNKNOWN if scan.errors else PASS
            return CheckResult(name, status, text, (Result(status, text, value=0, **fields),),
                               _LOG_PATH_HINT if scan.errors else "")
        suffix = f"; {scan.errors[0]}" if scan.errors else ""
        read = f"{plural(scan.files, 'file')} read, {size(scan.bytes_read)}"
        text = f"no HCCL errors in the last {window} ({read}){suffix}"
        return CheckResult(name, PASS, text, (Result(PASS, text, value=0, **fields),))
    events = [e for e in scan.events if e.category not in PROGRAM_CATEGORIES]
    program = _program_failed(scan, window, fields)
    if not events:
        # the program or its configuration failed: said so, and the node passes
        return CheckResult(name, PASS, program[0].evidence, tuple(program),
                           category_hint(scan.events[0].category))
    categories = Counter(event.category for event in events)
    codes = [code for code, _ in Counter(event.code for event in events).most_common(4)]
    parts = [f"{category} x{count}" for category, count in categories.most_common()]
    evidence = (f"{plural(len(events), 'incident')} in the last {window}: {', '.join(parts)}"
                f" ({'code' if len(codes) == 1 else 'codes'} {', '.join(codes)})")
    if scan.hints:
        evidence += "; blamed: " + ", ".join(f"{kind} {value} x{count}"
                                             for (kind, value), count in scan.hints.most_common(3))
    lost = sorted({int(value) for (kind, value), _ in scan.hints.items() if kind == "device" and value.isdigit()})
    results = [faults.device_lost(npu, f"NPU {npu}: the kernel log says", value=len(events), **fields)
               for npu in lost]
    results += faults.log_faults(events, fields)
    results.append(Result(WARN, evidence, value=len(events), **fields))
    results += program
    for npu, named in sorted(local_blame(readings.node).items()):
        results.append(Result(WARN, f"NPU {npu}: the HCCL logs blame its address ({', '.join(named[:2])})", npu=npu,
                              value=len(named), threshold=0, unit="hints", basis=BLAMED))
    timeouts = sum(count for category, count in categories.items() if category in TIMEOUT_CATEGORIES)
    hint = ("a job on this node hit HCCL timeouts: the lead cause below names the fault behind them; for the whole "
            "job, `npuwatch bundle` on every node and `npuwatch triage` over the bundles" if timeouts else
            "read the first error: `npuwatch scan-logs` on the log directory")
    return fold(name, results, "", hint)


