"""``npuwatch diagnose [--json] [--probes]``: HCCL-timeout triage of this node.

Reads npu-smi, hccn_tool and the recent CANN/HCCL logs once (``agent.health.quick``), runs the one
check set ``npuwatch check`` runs (``agent.health.checks``: the same checks, windows, thresholds and
hints) and ends with the one verdict (``agent.health.verdict``): the lead cause, every device it was
found on, what to do next and the runbook. When nothing local is wrong, the triage engine's best
culprit off this node is where the verdict points (``agent.diagnose.evidence``).

Exit status: the one policy of ``agent.health.status`` (0 ok, 1 warn, 2 fail, 3 could not check).
The text is rendered by ``agent.diagnose.render`` (colour on a terminal); while the node is read,
a progress line goes to stderr when it is a terminal.

Example (tests/fixtures/diagnose/ holds whole outputs)::

    $ npuwatch diagnose
    CHECK        STATUS  DEVICE   EVIDENCE
    hccl_errors  WARN    -        1 incident in the last 2 h: exec_timeout x1 (code task_exec_timeout)
    roce_link    FAIL    NPU 1,3  NPU 1: hccn_tool -i 1 -link -g says DOWN; NPU 3: hccn_tool -i 3 ...
                                  hint: check the cable or optical module and the switch port of this NPU ...
    ...

    FAIL: RoCE link down on NPU 1 (hccn_tool -i 1 -link -g says DOWN) and on NPU 3
      also     HBM double-bit ECC errors on NPU 2
      next     check the cable or optical module and the switch port of this NPU ...
      runbook  https://github.com/npuwatch/npuwatch/blob/main/alerts/runbooks/NPURoCELinkDown.md
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from agent.core.config_values import parse_duration
from agent.core.humanize import plural, size
from agent.core.terminal import Progress, Style, use_color
from agent.diagnose.evidence import culprit_text, remote_culprit, triage_node
from agent.diagnose.logs import scan_recent_logs
from agent.diagnose.render import render_text
from agent.diagnose.report import Report
from agent.health.checks import run_checks
from agent.health.node import read_history
from agent.health.quick import read_quick
from agent.health.reader import ToolReader, open_reader
from agent.health.readings import LogScan
from agent.health.results import CheckResult, Result
from agent.health.settings import JudgeSettings
from agent.health.status import FAIL, PASS, UNKNOWN, WARN
from agent.health.thresholds import fault_kind
from agent.health.verdict import lead

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["DEFAULT_SAMPLE_GAP_S", "PROBE_CHECKS", "DiagnoseOptions", "Report", "diagnose", "main", "probe_checks",
           "render_text"]

DEFAULT_SAMPLE_GAP_S = 3.0

SAMPLE_GAP_ENV = "NPUWATCH_DIAGNOSE_SAMPLE_GAP"
Say = Callable[[str], None]


def _quiet(_text: str) -> None:
    """Progress nobody watches."""


def _seconds(value: Any) -> float:
    """``7200``, ``2h``, ``90m``, ``0.5s``: a number of seconds or a duration as the config writes it."""
    return parse_duration(value.strip() if isinstance(value, str) else float(value))


@dataclass(frozen=True)
class DiagnoseOptions:
    window_s: float | None = None  # --window: how far back logs count (None: check.hccl_window, else the table's)
    flap_window_s: float | None = None  # --flap-window (None: check.flap_window, else the table's)
    sample_gap_s: float = DEFAULT_SAMPLE_GAP_S  # between the two optics/counter samples
    probes: bool = False

    @classmethod
    def from_args(cls, args: Any) -> DiagnoseOptions:
        """From the CLI namespace; ``window`` and ``sample_gap`` (seconds or ``2h``-style) are optional there.

        ``NPUWATCH_DIAGNOSE_SAMPLE_GAP`` sets the gap when the namespace has none.
        """
        window = getattr(args, "window", None)
        flap_window = getattr(args, "flap_window", None)
        gap = getattr(args, "sample_gap", None)
        if gap is None and os.environ.get(SAMPLE_GAP_ENV):
            gap = os.environ[SAMPLE_GAP_ENV]
        return cls(
            window_s=_seconds(window) if window is not None else None,
            flap_window_s=_seconds(flap_window) if flap_window is not None else None,
            sample_gap_s=_seconds(gap) if gap is not None else DEFAULT_SAMPLE_GAP_S,
            probes=bool(getattr(args, "probes", False)),
        )


# ----------------------------------------------------------------------------- probes


PROBE_CHECKS = ("probe_gemm", "probe_allreduce")  # diagnose --probes


def _probe_summary(result: Any) -> str:
    if result.allreduce is not None:
        measured = result.allreduce
        return (f"busbw {measured.busbw_bytes_per_second / 1e9:.1f} GB/s at {size(measured.size_bytes)} "
                f"over {plural(measured.world_size, 'rank')}")
    if result.gemm:
        slowest = min(result.gemm, key=lambda m: (m.efficiency if m.efficiency is not None else 1.0, m.flops))
        ratio = f", {slowest.efficiency:.0%} of peak" if slowest.efficiency is not None else ""
        devices = len({m.device for m in result.gemm})
        return f"{plural(devices, 'device')}, slowest {slowest.flops / 1e12:.1f} TFLOPS ({slowest.dtype}{ratio})"
    return result.message or result.outcome


def _probe_check(name: str, result: Any) -> CheckResult:
    """pass -> PASS (WARN probe_slow with warnings), fail/timeout -> FAIL probe_failed, skipped/error -> UNKNOWN."""
    if result.outcome == "pass":
        if result.warnings:
            text = f"{_probe_summary(result)}; {'; '.join(result.warnings)}"
            return CheckResult(name, WARN, text, (Result(WARN, text, kind="probe_slow"),),
                               fault_kind("probe_slow").hint)
        text = _probe_summary(result)
        return CheckResult(name, PASS, text, (Result(PASS, text),))
    if result.outcome in ("fail", "timeout"):
        stage = f" at {result.stage}" if result.stage else ""
        text = f"{name} {result.outcome}{stage}: {result.message or _probe_summary(result)}"
        return CheckResult(name, FAIL, text, (Result(FAIL, text, kind="probe_failed"),),
                           fault_kind("probe_failed").hint)
    text = f"{result.outcome}: {result.message or 'no reason given'}"
    return CheckResult(name, UNKNOWN, text, (Result(UNKNOWN, text),),
                       "a probe that could not run says nothing about the hardware; see `npuwatch probe --help`")


def _probe_events(name: str, say: Say) -> Callable[[dict[str, Any]], None]:
    """A probe runner's events as progress: the stage each of its workers has reached."""
    stages: dict[int, str] = {}
    workers = [0]

    def on_event(event: dict[str, Any]) -> None:
        if event.get("kind") == "start":
            workers[0] = int(event.get("workers", 0))
        elif event.get("kind") == "stage":
            stages[int(event.get("worker", 0))] = str(event.get("stage"))
        reached = sorted(set(stages.values()))
        counts = ", ".join(f"{stage} {sum(1 for s in stages.values() if s == stage)}/{workers[0]}"
                           for stage in reached)
        say(f"{name}: {counts or 'starting'}")

    return on_event


def probe_checks(config: Config, say: Say = _quiet) -> list[CheckResult]:
    """GEMM and node all-reduce baselines through ``agent.probes.runner`` (children, with deadlines)."""
    names = PROBE_CHECKS
    try:
        from agent.probes import runner as probe_runner
        from agent.probes.records import settings_from_config

        settings = settings_from_config(config)
    except Exception as exc:  # a missing or incompatible runner must not break the triage
        return [CheckResult(name, UNKNOWN, f"probe runner unavailable: {exc}",
                            (Result(UNKNOWN, f"probe runner unavailable: {exc}"),)) for name in names]
    runs: dict[str, Callable[[], Any]] = {
        "probe_gemm": lambda: probe_runner.run_gemm(settings, on_event=_probe_events("probe_gemm", say)),
        "probe_allreduce": lambda: probe_runner.run_allreduce(
            settings, scope="node", on_event=_probe_events("probe_allreduce", say)),
    }
    checks: list[CheckResult] = []
    for name in names:
        say(f"{name}: starting")
        try:
            checks.append(_probe_check(name, runs[name]()))
        except Exception as exc:
            text = f"probe runner raised {type(exc).__name__}: {exc}"
            checks.append(CheckResult(name, UNKNOWN, text, (Result(UNKNOWN, text),)))
    return checks


# ----------------------------------------------------------------------------- run


def diagnose(config: Config, options: DiagnoseOptions | None = None,
             tool_env: dict[str, str] | None = None, say: Say = _quiet) -> Report:
    """Read the node, run every check and decide; never raises for tool or log problems.

    ``say`` hears what is going on now (for a progress line): tool calls, the log scan, the probes.
    """
    options = options or DiagnoseOptions()
    with open_reader(config, tool_env) as tools:  # DCMI first where the agent would; the helper ends here
        return _diagnose(config, options, tools, say)


def _diagnose(config: Config, options: DiagnoseOptions, tools: ToolReader, say: Say) -> Report:
    logs = config.collectors.hccl_logs
    settings = JudgeSettings.from_config(config).with_windows(options.window_s, options.flap_window_s)
    node = str(config.labels.get("node") or "") or socket.gethostname()

    def scan() -> LogScan:
        return scan_recent_logs(list(logs.paths), list(logs.globs), logs.kernel_log,
                                window_s=settings.window_s, byte_budget=int(logs.byte_budget), node=node)

    readings = read_quick(tools, scan=scan, gap_s=options.sample_gap_s, say=say)
    readings.node.node = node
    read_history(readings.node, settings.fault_history)
    checks = run_checks(readings, settings)
    if options.probes:
        checks.extend(probe_checks(config, say))
    say("judging")
    table = readings.node.table
    remote = None
    if readings.node.logs is not None and readings.node.logs.events:
        culprit = remote_culprit(triage_node(readings.node, checks, settings.window_s), node)
        remote = culprit_text(culprit) if culprit is not None else None
    verdict = lead(checks, chip_list_error=None if table.ok else table.error, remote=remote)
    return Report(tuple(checks), verdict, len(readings.node.chips))


def main(args: Any, config: Config, demo_dir: Path | None, out: IO[str] | None = None,
         err: IO[str] | None = None) -> int:
    """CLI entry: run the checks (progress on a terminal's stderr), print the table (or ``--json``).

    Returns the exit status. Colour follows ``args.color`` (``auto`` when absent) and ``NO_COLOR``.
    """
    stream = out if out is not None else sys.stdout
    errors = err if err is not None else sys.stderr
    tool_env = None
    if demo_dir is not None:
        from agent.core.config import apply_overrides
        from agent.demo.node import open_demo

        overrides, tool_env = open_demo(config, Path(demo_dir), int(getattr(args, "demo_chips", 8) or 8))
        config = apply_overrides(config, overrides)
    with Progress("diagnose", errors) as progress:
        report = diagnose(config, DiagnoseOptions.from_args(args), tool_env, progress)
    if getattr(args, "json", False):
        json.dump(report.to_dict(), stream, indent=2)
        stream.write("\n")
    else:
        stream.write(render_text(report, Style(use_color(getattr(args, "color", None), stream))))
    stream.flush()
    return report.exit_code
