"""Quick checks of the node as a whole: the tools answer, the recent logs hold no HCCL error, the agent is up."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent.check.local_agent import FAULT_REASONS, AgentReading
from agent.check.settings import CheckSettings
from agent.core.humanize import duration, plural
from agent.health.readings import LogScan, QuickReadings, Reading
from agent.health.results import CheckResult, Result, fold
from agent.health.status import FAIL, PASS, UNKNOWN, WARN
from collectors.hccl.codes import DIAGNOSE_TIMEOUT_CATEGORIES as TIMEOUT_CATEGORIES

__all__ = ["check_agent", "check_hccl_errors", "check_tools", "tool_error_kind"]


def tool_error_kind(error: str) -> str:
    """What went wrong in a ToolBox reading, from its message: missing, hung, skipped, unreadable or failed."""
    if ": not found" in error:
        return "missing"
    if "no answer within" in error:
        return "hung"
    if ": skipped," in error:
        return "skipped"
    if "unreadable output" in error:
        return "unreadable"
    return "failed"


def _tool_result(tool: str, readings: Iterable[Reading], *, missing_is_fault: bool) -> Result:
    read = list(readings)
    errors = [r.error for r in read if r.error is not None]
    if not read:
        return Result(UNKNOWN, f"{tool}: not called")
    if not errors:
        return Result(PASS, f"{tool}: {len(read)} calls answered", value=len(read), unit="calls")
    kinds = {tool_error_kind(error): error for error in errors}
    for kind in ("hung", "failed", "unreadable"):
        if kind in kinds:
            return Result(FAIL, f"{tool}: {kinds[kind]}", value=len(errors), threshold=0, unit="failed calls")
    if "missing" in kinds:
        return Result(FAIL if missing_is_fault else UNKNOWN, kinds["missing"])
    return Result(FAIL, f"{tool}: {errors[0]}", value=len(errors), threshold=0, unit="failed calls")


def check_tools(readings: QuickReadings, settings: CheckSettings, *, roce: bool) -> CheckResult:
    """npu-smi (and hccn_tool, when a RoCE check runs) answered every call: no hang, crash or garbage."""
    node = readings.node
    npu_smi = [node.table, *node.health.values(), *node.ecc.values(), *readings.boards.values(),
               *readings.hccs.values()]
    # A missing npu-smi is not a fault where DCMI answered in its place (a container with only the driver
    # library), as in the agent: the chip readings came, the board and HCCS readings are unknown.
    direct = [reading for reading in npu_smi if reading.ok and reading.by != "tool"]
    results = [_tool_result("npu-smi", [reading for reading in npu_smi if reading not in direct],
                            missing_is_fault=not direct)]
    if direct:
        results.append(Result(PASS, f"{direct[0].by}: {len(direct)} chip readings answered", value=len(direct),
                              unit="calls"))
    if roce and node.table.ok:
        hccn = [reading for port in node.roce.values()
                for reading in (port.link, port.link_stat, port.net_health, port.ip, *port.optical, *port.stat)]
        results.append(_tool_result("hccn_tool", hccn, missing_is_fault=False))
    return fold("tools", results, "every tool call answered",
                "run the failing call by hand; a hang or crash points at the driver (dmesg, npu-smi info)")


def check_hccl_errors(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    """HCCL/CANN errors in the logs of the last ``check.hccl_window``; a lost device heartbeat fails."""
    name = "hccl_errors"
    scan: LogScan | None = readings.node.logs
    window = settings.hccl_window_s
    if scan is None:
        return CheckResult(name, UNKNOWN, "logs not read", (Result(UNKNOWN, "logs not read"),))
    if not scan.roots_exist:
        text = f"no log directory at {', '.join(scan.roots) or '(none configured)'}"
        return CheckResult(name, UNKNOWN, text, (Result(UNKNOWN, text),),
                           "set collectors.hccl_logs.paths to where CANN writes plogs ($ASCEND_PROCESS_LOG_PATH)")
    fields: dict[str, Any] = {"value": len(scan.events), "threshold": 0, "unit": "incidents",
              "basis": f"config check.hccl_window ({window:g}s)"}
    if not scan.events:
        # An idle node writes no log: no error in the window is still no error (a gate must not block it).
        read = plural(scan.files, "file") + " read" if scan.files else "no log written in that window"
        text = f"no HCCL error in the last {duration(window)} ({read})"
        return CheckResult(name, PASS, text, (Result(PASS, text, **fields),))
    categories = scan.by_category()
    parts = ", ".join(f"{category} x{count}" for category, count in categories.most_common())
    lost = sorted({value for (kind, value), _ in scan.hints.items() if kind == "device" and value.isdigit()})
    timeouts = sum(count for category, count in categories.items() if category in TIMEOUT_CATEGORIES)
    results = [Result(FAIL, f"NPU {device}: kernel log says its heartbeat was lost", npu=int(device),
                      **fields) for device in lost]
    text = f"{plural(len(scan.events), 'HCCL incident')} in the last {duration(window)}: {parts}"
    results.append(Result(WARN, text, **fields))
    hint = ("a job on this node hit HCCL errors recently (`npuwatch diagnose` names the cause); clear the "
            "logs' window or wait it out once the cause is fixed" if timeouts else
            "read the first error: `npuwatch scan-logs` on the log directory")
    return fold(name, results, "", hint)


def check_agent(readings: QuickReadings, settings: CheckSettings) -> CheckResult:
    """The local agent answers, and none of its collectors is down for a fault."""
    name = "agent"
    reading: AgentReading | None = readings.agent
    if reading is None:
        return CheckResult(name, UNKNOWN, "agent not read", (Result(UNKNOWN, "agent not read"),))
    if reading.error is not None:
        return CheckResult(name, UNKNOWN, reading.error, (Result(UNKNOWN, reading.error),),
                           "start the agent (systemctl start npuwatch) or skip this check (check.skip: [agent])")
    results = []
    for collector, up in sorted(reading.up.items()):
        reason = reading.reasons.get(collector, "")
        if up == 1:
            continue
        if reason in FAULT_REASONS:
            results.append(Result(FAIL, f"collector {collector} down ({reason})", value=reason))
        elif reason == "degraded":
            results.append(Result(WARN, f"collector {collector} degraded", value=reason))
    if not results:
        results.append(Result(PASS, f"{len(reading.up)} collectors, none down for a fault", value=0, threshold=0,
                              unit="collectors down", basis=reading.where))
    return fold(name, results, f"{len(reading.up)} collectors up ({reading.where})",
                "see npuwatch_collector_down_reason and the agent's log (journalctl -u npuwatch)")
