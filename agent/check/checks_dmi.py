"""Long checks through ``ascend-dmi``: the fault diagnosis (``-dg``, one check per item) and ``--bw``.

ascend-dmi runs through the one tool runner (argv list, hard timeout, process-group kill); its
timeout is ``collectors.ascend_dmi.timeout`` cut to what is left of the level's budget.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from agent.check.references import judge, references_for
from agent.core.tool_runner import ToolFailed, ToolMissing, ToolTimeout, resolve_tool, run_tool
from agent.health.results import CheckResult, Result, fold
from agent.health.status import FAIL, PASS, UNKNOWN, WARN
from collectors import ascend_dmi, ascend_dmi_diag
from collectors.base import ParseError

if TYPE_CHECKING:
    from agent.check.device import DeviceRun

__all__ = ["DIAG_ARGV", "bandwidth", "diag"]

DIAG_ARGV = ["--dg", "-q"]
BANDWIDTH_ARGV = ["--bw", "-q"]
_VERDICT_STATUS = {"pass": PASS, "info": PASS, "warn": WARN, "fail": FAIL, "skip": UNKNOWN, "unknown": UNKNOWN,
                   "incomplete": UNKNOWN}
_G = 1e9


def _run(run: DeviceRun, args: list[str], parse: Any) -> tuple[Any, str | None]:
    """(parsed output, None) or (None, why not)."""
    settings = run.config.collectors.ascend_dmi
    shown = " ".join(["ascend-dmi", *args])
    timeout = max(1.0, min(float(settings.timeout), run.remaining()))
    try:
        path = resolve_tool("ascend-dmi", settings.path)
        result = run_tool([path, *args], timeout, env=dict(run.tool_env) if run.tool_env else None)
        return parse(result.stdout), None
    except ToolMissing:
        return None, "ascend-dmi: not found (set collectors.ascend_dmi.path)"
    except ToolTimeout:
        return None, f"{shown}: no answer within {timeout:.0f}s (killed)"
    except ToolFailed as exc:
        return None, f"{shown}: {exc}"
    except (ParseError, ValueError) as exc:
        return None, f"{shown}: unreadable output: {exc}"


def diag(run: DeviceRun) -> list[CheckResult]:
    """``ascend-dmi --dg``: each item it reports becomes check ``dmi_diag_<item>``."""
    parsed, error = _run(run, DIAG_ARGV, ascend_dmi_diag.parse)
    if error is not None:
        return [CheckResult("dmi_diag", UNKNOWN, error, (Result(UNKNOWN, error),),
                            "install the Ascend toolbox (ascend-dmi) or skip the check (check.skip: [dmi_diag])")]
    checks = []
    for item in parsed.items:
        if (run.dmi_only is not None and item.name not in run.dmi_only) or item.name in run.dmi_skip:
            continue
        status = _VERDICT_STATUS.get(item.verdict, UNKNOWN)
        said = item.status or "no status (output cut)"
        details = f": {'; '.join(item.details)}" if item.details else ""
        text = f"ascend-dmi --dg {item.section.lower()} item {item.name}: {said}{details}"
        devices = _devices(item.details)
        results = [Result(status, text, npu=npu, value=said, threshold="PASS/HEALTH", basis="ascend-dmi --dg")
                   for npu in devices] or [Result(status, text, value=said, threshold="PASS/HEALTH",
                                                  basis="ascend-dmi --dg")]
        hint = "" if status == PASS else f"rerun `ascend-dmi --dg -i {item.name}` and read its details"
        checks.append(CheckResult(f"dmi_diag_{item.name}", status, text, tuple(results), hint))
    if not checks:
        text = "ascend-dmi --dg reported no item" + (" of those selected" if run.dmi_only else "")
        checks.append(CheckResult("dmi_diag", UNKNOWN, text, (Result(UNKNOWN, text),)))
    return checks


def _devices(details: tuple[str, ...]) -> list[int]:
    """Device ids named in ``*** Device 4: ...`` detail lines."""
    import re

    found = []
    for line in details:
        for match in re.finditer(r"\bDevice\s+(\d+)\b", line, re.IGNORECASE):
            if int(match.group(1)) not in found:
                found.append(int(match.group(1)))
    return found


def bandwidth(run: DeviceRun) -> list[CheckResult]:
    """``ascend-dmi --bw``: every device's h2d, d2h, d2d and p2p figure against its references."""
    name = "dmi_bandwidth"
    parsed, error = _run(run, BANDWIDTH_ARGV, ascend_dmi.parse_bandwidth)
    if error is not None:
        return [CheckResult(name, UNKNOWN, error, (Result(UNKNOWN, error),),
                            "install the Ascend toolbox (ascend-dmi) or skip the check (check.skip: [dmi_bandwidth])")]
    model = run.model()
    results = []
    by_path: dict[str, int] = defaultdict(int)
    for cell in parsed:
        measure = f"dmi_bandwidth:{cell.path}"
        by_path[cell.path] += 1
        refs = references_for(model, measure, configured=run.settings.references, peaks=run.settings.peaks,
                              fleet=run.baseline.reference(model, measure, run.settings.thresholds.fleet_min_nodes)
                              if run.baseline is not None else None)
        verdict = judge(cell.bytes_per_second, refs, run.settings.thresholds)
        results.append(Result(verdict.status, f"NPU {cell.device} {cell.path}: {cell.bytes_per_second / _G:.2f} GB/s",
                              npu=cell.device, value=cell.bytes_per_second, threshold=verdict.threshold,
                              unit="bytes_per_second", basis=verdict.basis, measure=measure, model=model))
    paths = ", ".join(f"{path} x{count}" for path, count in sorted(by_path.items()))
    return [fold(name, results, f"ascend-dmi --bw at the reference ({paths})",
                 "compare with `ascend-dmi --bw` on a healthy node of the same model",
                 empty="ascend-dmi --bw printed no measurement")]
