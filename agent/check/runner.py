"""Run one level: read the node once, judge every selected check, then the device checks within budget.

The quick checks read the node through ``agent.health`` (``read_node`` over ``open_reader``'s reader: DCMI
first where the agent would use it, each DCMI call and each tool call with a timeout of at most
``check.tool_timeout``, a tool or DCMI helper that hangs is given up after one timeout; the helper is
ended before the level returns).
The medium and long checks load the devices: they run only when npu-smi shows the NPUs idle, under
the probe lock (held for the whole level, so no scheduled probe runs in between), and each gets
what is left of the level's time budget as its deadline; a check that no longer fits is UNKNOWN.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agent.check import checks_dmi, checks_probe
from agent.check.baseline import Baseline, BaselineError, from_prometheus, load_baseline
from agent.check.checks_agent import check_agent
from agent.check.device import DeviceRun, Runner
from agent.check.levels import BUDGET_S, dmi_items_wanted, select, spec
from agent.check.report import LevelReport
from agent.check.settings import CheckSettings
from agent.diagnose.logs import scan_recent_logs
from agent.health.checks import ROCE_CHECKS, judge
from agent.health.node import read_history
from agent.health.quick import read_quick
from agent.health.reader import NodeReader, open_reader
from agent.health.readings import LogScan, QuickReadings
from agent.health.results import CheckResult

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["RunOptions", "run_level"]

_DEVICE_CHECKS: dict[str, Runner] = {
    "gemm": checks_probe.gemm,
    "hbm_bandwidth": checks_probe.hbm_bandwidth,
    "h2d_bandwidth": checks_probe.host_bandwidth,  # and d2h_bandwidth: one run measures both directions
    "dmi_diag": checks_dmi.diag,
    "dmi_bandwidth": checks_dmi.bandwidth,
    "allreduce": checks_probe.allreduce,
    "p2p_bandwidth": checks_probe.p2p_bandwidth,
    "sustained_gemm": checks_probe.sustained_gemm,
}


@dataclass
class RunOptions:
    level: str = "quick"
    only: Sequence[str] = ()
    condition: str | None = None
    baseline_file: str | None = None  # overrides check.baseline_file
    prometheus_url: str | Sequence[str] | None = None  # overrides check.prometheus_url (several: shards)
    tool_env: Mapping[str, str] | None = None
    use_baseline: bool = True  # False: judge by the fixed references only
    node: str | None = None  # the node's name in the report (default: the `node` label, else the host name)
    window_s: float | None = None  # --window: the logs' look-back (default check.hccl_window, else the table's)
    flap_window_s: float | None = None  # --flap-window (default check.flap_window, else the table's)
    extra: dict[str, Any] = field(default_factory=dict)


def _tool_config(config: Config, timeout_s: float, parallel: int) -> Config:
    """The config with each tool's timeout cut to the check's (quick must answer in seconds) and npu-smi
    allowed ``parallel`` calls at once (a one-off check may use more than the collectors' steady share)."""
    from agent.core.config import apply_overrides

    overrides: dict[str, Any] = {}
    for tool, timeout in (("npu_smi", config.collectors.npu_smi.timeout),
                          ("hccn_tool", config.collectors.hccn_tool.timeout)):
        if timeout > timeout_s:
            overrides[f"collectors.{tool}.timeout"] = timeout_s
    if parallel > int(config.collectors.npu_smi.max_parallel):
        overrides["collectors.npu_smi.max_parallel"] = parallel
    return apply_overrides(config, overrides) if overrides else config


def resolve_baseline(config: Config, options: RunOptions, compared: bool = True) -> tuple[Baseline | None, str | None]:
    """The fleet baseline (file first, then Prometheus); a file that cannot be used raises BaselineError,
    an unreachable Prometheus is only noted (the fixed references still judge). ``compared`` False (only
    quick checks run, and they compare nothing with a fleet): a baseline given is named as not used."""
    if not options.use_baseline:
        return None, None
    path = options.baseline_file or config.check.baseline_file
    url = options.prometheus_url or config.check.prometheus_url
    if not compared:  # named when given on the command line; a configured one waits for the levels that use it
        flag, given = ("--baseline", options.baseline_file) if options.baseline_file else \
            ("--prometheus", options.prometheus_url)
        if not given:
            return None, None
        shown = given if isinstance(given, str) else " ".join(given)
        missing = f"; {given} does not exist" if flag == "--baseline" and not os.path.exists(shown) else ""
        return None, (f"{flag} {shown} is not used: no check run here compares with a fleet baseline (the "
                      f"medium and long levels do){missing}")
    if path:
        return load_baseline(path), None
    if url:
        try:
            return from_prometheus(url), None
        except BaselineError as exc:
            return None, str(exc)
    return None, None


def run_level(config: Config, options: RunOptions, clock: Callable[[], float] = time.time) -> LevelReport:
    """Run ``options.level`` and return its report; never raises for tool, log or probe problems
    (a baseline file that cannot be used raises BaselineError, a bad selection SelectionError)."""
    started_wall, started = clock(), time.monotonic()
    settings = CheckSettings.from_config(config)
    settings = replace(settings, judging=settings.judging.with_windows(options.window_s, options.flap_window_s))
    names = select(options.level, options.only, options.condition, settings.skip)
    device_names = [name for name in names if spec(name).level != "quick"]
    baseline, baseline_error = resolve_baseline(config, options, compared=bool(device_names))

    with open_reader(_tool_config(config, settings.tool_timeout_s, settings.max_parallel),
                     dict(options.tool_env or {}) or None, call_timeout=settings.tool_timeout_s) as tools:
        return _run_level(config, options, tools, settings=settings, names=names,
                          started_at=(started_wall, started), baseline=baseline, baseline_error=baseline_error)


def _run_level(config: Config, options: RunOptions, tools: NodeReader, *, settings: CheckSettings, names: list[str],
               started_at: tuple[float, float], baseline: Baseline | None, baseline_error: str | None
               ) -> LevelReport:
    started_wall, started = started_at
    budget = BUDGET_S[options.level]
    deadline = started + budget
    device_names = [name for name in names if spec(name).level != "quick"]
    logs = config.collectors.hccl_logs
    node = options.node or _node_name(config)

    def scan() -> LogScan:
        return scan_recent_logs(list(logs.paths), list(logs.globs), logs.kernel_log,
                                window_s=settings.judging.window_s, byte_budget=int(logs.byte_budget), node=node)

    def agent() -> Any:
        from agent.check.local_agent import read_agent

        return read_agent(config, timeout_s=min(3.0, settings.tool_timeout_s))

    roce = any(name in ROCE_CHECKS for name in names)
    readings = read_quick(tools, want_hccs="hccs" in names, want_boards="versions" in names, want_roce=roce,
                          scan=scan if "hccl_errors" in names else None, agent=agent if "agent" in names else None)
    readings.node.node = node
    read_history(readings.node, settings.judging.fault_history)
    checks: list[CheckResult] = []
    for name in names:
        if spec(name).level != "quick":
            continue
        judged_at = time.monotonic()
        if name == "agent":
            result = check_agent(readings, settings.judging)
        else:
            result = judge(name, readings, settings.judging, roce=roce)
        checks.append(result.with_duration(time.monotonic() - judged_at))
    report = LevelReport(
        level=options.level, checks=checks, started_at=started_wall, duration_s=0.0, budget_s=budget,
        node=node, model=_model(readings), chips=len(readings.node.chips),
        read_s=readings.read_s, baseline_source=baseline.source if baseline is not None else None,
        baseline_error=baseline_error, extra=dict(options.extra),
        chip_list_error=None if readings.node.table.ok else readings.node.table.error)
    if device_names:
        dmi_only, dmi_skip = dmi_items_wanted(options.only, settings.skip)
        run = DeviceRun(config=config, settings=settings, readings=readings, baseline=baseline, tools=tools,
                        deadline=deadline, tool_env=options.tool_env, dmi_only=dmi_only, dmi_skip=dmi_skip)
        report.skipped = run.run(device_names, checks, _DEVICE_CHECKS)
    report.checks = _in_catalogue_order(checks, names)
    report.duration_s = time.monotonic() - started
    return report


def _in_catalogue_order(checks: list[CheckResult], names: Sequence[str]) -> list[CheckResult]:
    position = {name: index for index, name in enumerate(names)}
    return sorted(checks, key=lambda check: position.get(spec(check.name).name, len(position)))  # stable


def _node_name(config: Config) -> str:
    labels = config.labels or {}
    return str(labels.get("node") or socket.gethostname())


def _model(readings: QuickReadings) -> str | None:
    table = readings.node.table
    if not table.ok:
        return None
    names = sorted({status.name for status in table.value.chips if status.name})
    return names[0] if names else None
