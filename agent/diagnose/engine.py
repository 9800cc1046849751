"""``npuwatch diagnose [--json] [--probes]``: HCCL-timeout triage of this node.

Reads npu-smi, hccn_tool and the recent CANN/HCCL logs once (``agent.diagnose.readings``), judges
each area (PASS / WARN / FAIL / UNKNOWN with evidence and a hint) and ends with one verdict that
names the most likely cause and the device. A local hardware fault explains a timeout better than
the log symptom, in this order: link down, flapping link, optics without light, failing
net_health, HBM double-bit ECC errors, unhealthy chip (``agent.diagnose.results.CAUSES``). When the logs
blame a remote rank and nothing local is wrong, the verdict points there.

Exit status: 0 ok, 1 warn, 2 fail, 3 could not check (npu-smi unusable, nothing checkable).

Example::

    $ npuwatch diagnose
    CHECK        STATUS  DEVICE  EVIDENCE
    hccl_logs    WARN    -       2 incidents in the last 2h: exec_timeout x2 (codes EI0002, ...
    roce_link    FAIL    NPU 3   NPU 3: link DOWN
                                 hint: check the cable or optical module and the switch port ...
    ...
    verdict: RoCE link down on NPU 3 (hccn_tool -i 3 -link -g says DOWN)
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from agent.diagnose.checks_chip import check_chips, check_ecc
from agent.diagnose.checks_logs import check_logs, remote_culprit, scan_recent_logs
from agent.diagnose.checks_roce import (
    check_flaps,
    check_ip_config,
    check_link,
    check_net_health,
    check_optics,
    check_packet_errors,
)
from agent.diagnose.readings import LogScan, NodeReadings, ToolBox, read_node
from agent.diagnose.results import (
    CAUSES,
    DEFAULT_SAMPLE_GAP_S,
    DEFAULT_WINDOW_S,
    FAIL,
    PASS,
    UNKNOWN,
    WARN,
    Check,
    Finding,
)

__all__ = [
    "EXIT_CODES",
    "DiagnoseOptions",
    "Report",
    "Verdict",
    "decide",
    "diagnose",
    "main",
    "probe_checks",
    "render_text",
]

EXIT_CODES = {"ok": 0, "warn": 1, "fail": 2, "unknown": 3}
SAMPLE_GAP_ENV = "NPUWATCH_DIAGNOSE_SAMPLE_GAP"


@dataclass(frozen=True)
class DiagnoseOptions:
    window_s: float = DEFAULT_WINDOW_S  # how far back logs and link flaps count
    sample_gap_s: float = DEFAULT_SAMPLE_GAP_S  # between the two optics/counter samples
    probes: bool = False

    @classmethod
    def from_args(cls, args: Any) -> DiagnoseOptions:
        """From the CLI namespace; ``window`` and ``sample_gap`` (seconds) are optional there.

        ``NPUWATCH_DIAGNOSE_SAMPLE_GAP`` (seconds) sets the gap when the namespace has none.
        """
        window = getattr(args, "window", None)
        gap = getattr(args, "sample_gap", None)
        if gap is None and os.environ.get(SAMPLE_GAP_ENV):
            gap = os.environ[SAMPLE_GAP_ENV]
        return cls(
            window_s=float(window) if window is not None else DEFAULT_WINDOW_S,
            sample_gap_s=float(gap) if gap is not None else DEFAULT_SAMPLE_GAP_S,
            probes=bool(getattr(args, "probes", False)),
        )


@dataclass(frozen=True)
class Verdict:
    status: str  # ok | warn | fail | unknown
    cause: str | None  # a key of CAUSES, remote_peer, log_errors, no_chip_list, tool_hung or None
    device: int | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "cause": self.cause, "device": self.device, "text": self.text}


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]
    verdict: Verdict
    chips: int

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict.status]

    def to_dict(self) -> dict[str, Any]:
        return {"checks": [check.to_dict() for check in self.checks], "verdict": self.verdict.to_dict(),
                "exit_code": self.exit_code}


# ----------------------------------------------------------------------------- verdict


def _finding_text(finding: Finding) -> str:
    return f"{CAUSES[finding.cause][0]} on {finding.label} ({finding.detail})"


def _with_others(best: Finding, others: Sequence[Finding]) -> str:
    text = _finding_text(best)
    rest = [f for f in others if f is not best]
    if rest:
        names = ", ".join(f"{CAUSES[f.cause][0]} on {f.label}" for f in rest[:2])
        more = f" and {len(rest) - 2} more" if len(rest) > 2 else ""
        text += f"; also {names}{more}"
    return text


def decide(checks: Sequence[Check], scan: LogScan | None, local_ips: Sequence[str] = (),
           chip_list_error: str | None = None, hung_tools: Sequence[str] = ()) -> Verdict:
    """The one most likely cause (see the module docstring for the order).

    Any FAIL finding wins; then "could not check" when npu-smi gave no chip list or a tool
    hung (a hung tool may be the symptom itself, so the node is not called ok); then WARN
    findings; then the peers the logs blame; else ok.
    """
    findings = sorted((f for check in checks for f in check.findings), key=lambda f: f.rank)
    fails = [f for f in findings if f.status == FAIL]
    if fails:
        return Verdict("fail", fails[0].cause, fails[0].npu, _with_others(fails[0], fails))
    if chip_list_error is not None:
        return Verdict("unknown", "no_chip_list", None, f"could not check this node: {chip_list_error}")
    if hung_tools:
        return Verdict("unknown", "tool_hung", None, f"could not check this node: {'; '.join(hung_tools)}")
    warns = [f for f in findings if f.status == WARN]
    if warns:
        return Verdict("warn", warns[0].cause, warns[0].npu, _with_others(warns[0], warns))
    if all(check.status == UNKNOWN for check in checks):
        return Verdict("unknown", None, None, "could not check anything on this node")
    unchecked = [check.name for check in checks if check.status == UNKNOWN and check.name != "hccl_logs"]
    caveat = f"; not checked: {', '.join(unchecked)}" if unchecked else ""
    if scan is not None and scan.events:
        codes = ", ".join(f"{code} x{count}" for code, count in scan.by_code().most_common(3))
        window = _window(scan.window_s)
        rank, address = remote_culprit(scan.hints, local_ips)
        if rank is not None or address is not None:
            parts = (f"remote rank {rank}" if rank else "", f"IP {address}" if address else "")
            who = " / ".join(part for part in parts if part)
            return Verdict("warn", "remote_peer", None,
                           f"look at {who}, not this node ({codes} in the last {window}; "
                           f"every local check passes{caveat})")
        return Verdict("warn", "log_errors", None,
                       f"HCCL errors in the logs ({codes} in the last {window}) but no local cause found"
                       f"{caveat}; compare with the other ranks' logs")
    return Verdict("ok", None, None, f"ok: no local cause of HCCL timeouts found{caveat}")


def _window(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g}h"
    return f"{seconds / 60:g}m" if seconds >= 60 else f"{seconds:g}s"


# ----------------------------------------------------------------------------- probes


def _probe_summary(result: Any) -> str:
    if result.allreduce is not None:
        measured = result.allreduce
        return (f"busbw {measured.busbw_bytes_per_second / 1e9:.1f} GB/s at {measured.size_bytes} bytes "
                f"over {measured.world_size} ranks")
    if result.gemm:
        slowest = min(result.gemm, key=lambda m: (m.efficiency if m.efficiency is not None else 1.0, m.flops))
        ratio = f", {slowest.efficiency:.0%} of peak" if slowest.efficiency is not None else ""
        devices = len({m.device for m in result.gemm})
        return f"{devices} devices, slowest {slowest.flops / 1e12:.1f} TFLOPS ({slowest.dtype}{ratio})"
    return result.message or result.outcome


def _probe_check(name: str, result: Any) -> Check:
    """pass -> PASS (WARN with warnings), fail/timeout -> FAIL, skipped/error -> UNKNOWN."""
    label = "this node"
    if result.outcome == "pass":
        if result.warnings:
            text = "; ".join(result.warnings)
            finding = Finding("probe_degraded", WARN, None, label, f"{name}: {text}")
            return Check(name, WARN, f"{_probe_summary(result)}; {text}", CAUSES["probe_degraded"][1],
                         None, (finding,))
        return Check(name, PASS, _probe_summary(result))
    if result.outcome in ("fail", "timeout"):
        stage = f" at {result.stage}" if result.stage else ""
        detail = f"{name} {result.outcome}{stage}: {result.message or _probe_summary(result)}"
        return Check(name, FAIL, detail, CAUSES["probe_failed"][1], None,
                     (Finding("probe_failed", FAIL, None, label, detail),))
    return Check(name, UNKNOWN, f"{result.outcome}: {result.message or 'no reason given'}",
                 "a probe that could not run says nothing about the hardware; see `npuwatch probe --help`")


def probe_checks(config: Any) -> list[Check]:
    """GEMM and node all-reduce baselines through ``agent.probes.runner`` (children, with deadlines)."""
    names = ("probe_gemm", "probe_allreduce")
    try:
        from agent.probes import runner as probe_runner
        from agent.probes.cli import settings_from_config

        settings = settings_from_config(config)
    except Exception as exc:  # a missing or incompatible runner must not break the triage
        return [Check(name, UNKNOWN, f"probe runner unavailable: {exc}") for name in names]
    checks: list[Check] = []
    for name, run in (("probe_gemm", lambda: probe_runner.run_gemm(settings)),
                      ("probe_allreduce", lambda: probe_runner.run_allreduce(settings, scope="node"))):
        try:
            checks.append(_probe_check(name, run()))
        except Exception as exc:
            checks.append(Check(name, UNKNOWN, f"probe runner raised {type(exc).__name__}: {exc}"))
    return checks


# ----------------------------------------------------------------------------- run


def diagnose(config: Any, options: DiagnoseOptions | None = None,
             tool_env: dict[str, str] | None = None) -> Report:
    """Read the node, run every check and decide; never raises for tool or log problems."""
    options = options or DiagnoseOptions()
    logs = config.collectors.hccl_logs
    tools = ToolBox(config, tool_env)

    def scan() -> LogScan:
        return scan_recent_logs(list(logs.paths), list(logs.globs), logs.kernel_log,
                                window_s=options.window_s, byte_budget=int(logs.byte_budget))

    readings: NodeReadings = read_node(tools, options.sample_gap_s, scan)
    assert readings.logs is not None
    checks = [
        check_logs(readings.logs),
        check_chips(readings, int(config.expected_chips)),
        check_link(readings),
        check_flaps(readings, options.window_s),
        check_optics(readings),
        check_packet_errors(readings),
        check_net_health(readings),
        check_ip_config(readings, config.collectors.hccn_tool.hccn_conf),
        check_ecc(readings),
    ]
    if options.probes:
        checks.extend(probe_checks(config))
    local_ips = [roce.ip.value.address for roce in readings.roce.values() if roce.ip.ok]
    verdict = decide(checks, readings.logs, local_ips, None if readings.table.ok else readings.table.error,
                     tools.hung())
    return Report(tuple(checks), verdict, len(readings.chips))


def render_text(report: Report) -> str:
    """Aligned plain-text table, a hint under each check that is not PASS, then the verdict line."""
    header = ("CHECK", "STATUS", "DEVICE", "EVIDENCE")
    rows = [(c.name, c.status, "-" if c.device is None else f"NPU {c.device}", c.evidence)
            for c in report.checks]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    indent = " " * (sum(widths) + 6)
    lines = []
    for row, check in zip([header, *rows], [None, *report.checks]):
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths))
                     + "  " + row[3])
        if check is not None and check.status != PASS and check.hint:
            lines.append(f"{indent}hint: {check.hint}")
    lines.append("")
    lines.append(f"verdict: {report.verdict.text}")
    return "\n".join(lines) + "\n"


def _demo_setup(config: Any, demo_dir: Path, chips: int) -> tuple[Any, dict[str, str]]:
    """Point the tools and the log scan at the demo node (created when absent), as build_agent does."""
    from agent.core.config import apply_overrides
    from agent.demo.node import DemoNode, demo_overrides

    demo = DemoNode(demo_dir).open(chips=chips)  # an existing node keeps its faults and counters
    for sub in ("log", "state"):  # the log scan's root and the probe lock's directory
        (demo_dir / sub).mkdir(parents=True, exist_ok=True)
    return apply_overrides(config, demo_overrides(demo_dir, demo.bin_dir, config)), demo.env()


def main(args: Any, config: Any, demo_dir: Path | None, out: IO[str] | None = None) -> int:
    """CLI entry: run the triage, print the table (or ``--json``), return the exit status."""
    stream = out if out is not None else sys.stdout
    tool_env = None
    if demo_dir is not None:
        config, tool_env = _demo_setup(config, Path(demo_dir), int(getattr(args, "demo_chips", 8) or 8))
    report = diagnose(config, DiagnoseOptions.from_args(args), tool_env)
    if getattr(args, "json", False):
        json.dump(report.to_dict(), stream, indent=2)
        stream.write("\n")
    else:
        stream.write(render_text(report))
    stream.flush()
    return report.exit_code
