"""The medium and long checks: device load, so only on idle NPUs, under the probe lock, within the budget.

``DeviceRun.run`` decides whether the device checks may run at all (the NPUs idle by npu-smi's
process list and AI Core load, the probe lock free), then runs each selected check with what is
left of the level's budget as its deadline. A check that no longer fits, or that could not run,
is UNKNOWN with the reason.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.check.baseline import Baseline
from agent.check.settings import CheckSettings
from agent.health.reader import NodeReader
from agent.health.readings import QuickReadings
from agent.health.results import CheckResult, Result
from agent.health.status import UNKNOWN
from agent.probes.lock import ProbeBusy, ProbeLock
from agent.probes.records import ProbeSettings

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["MIN_SECONDS", "DeviceRun", "Runner", "busy_reason"]

# Seconds a device check needs at the least (a torch import, a short run); with less left it is not started.
# What a check may use is the level's budget less what the checks after it need at the least, so a
# slow first check (a long ascend-dmi diagnosis) cannot starve the rest.
MIN_SECONDS = {"gemm": 15.0, "hbm_bandwidth": 15.0, "h2d_bandwidth": 15.0, "d2h_bandwidth": 0.0,
               "dmi_diag": 60.0, "dmi_bandwidth": 30.0, "allreduce": 20.0, "p2p_bandwidth": 20.0,
               "sustained_gemm": 45.0}
_RESERVE_S = 5.0  # kept back at the end of the budget for the report

Runner = Callable[["DeviceRun"], "list[CheckResult]"]


def busy_reason(readings: QuickReadings, aicore_threshold: float) -> str | None:
    """Why the NPUs are not idle now (npu-smi lists a process, AI Cores busy); None when idle."""
    table = readings.node.table
    if not table.ok:
        return f"cannot tell whether the NPUs are idle: {table.error}"
    reasons = [f"NPU {p.npu} chip {p.chip}: process {p.pid} ({p.name})" for p in table.value.processes]
    reasons += [f"NPU {c.npu} chip {c.chip}: AI Core {c.aicore_ratio:.0%} busy" for c in table.value.chips
                if c.aicore_ratio is not None and c.aicore_ratio > aicore_threshold]
    return "devices busy: " + "; ".join(reasons[:3]) + (f" (+{len(reasons) - 3} more)" if len(reasons) > 3 else "") \
        if reasons else None


@dataclass
class DeviceRun:
    config: Config
    settings: CheckSettings
    readings: QuickReadings
    baseline: Baseline | None
    tools: NodeReader
    deadline: float  # time.monotonic() by which the level must be done
    tool_env: Mapping[str, str] | None = None
    dmi_only: set[str] | None = None
    dmi_skip: set[str] = dataclasses.field(default_factory=set)
    held_back_s: float = 0.0  # kept for the checks after the one running

    def model(self) -> str | None:
        """The chip model node-level measurements are filed under: probes.model, else npu-smi's."""
        if self.config.probes.model:
            return str(self.config.probes.model)
        table = self.readings.node.table
        names = sorted({c.name for c in table.value.chips if c.name}) if table.ok else []
        return names[0] if names else None

    def remaining(self) -> float:
        """Seconds the running check may use."""
        return self.deadline - _RESERVE_S - self.held_back_s - time.monotonic()

    def probe_settings(self, deadline_s: float) -> ProbeSettings:
        from agent.probes.records import settings_from_config

        base = settings_from_config(self.config)
        chip_map: dict[int, tuple[int, int]] = {}
        for index, ref in enumerate(sorted(self.readings.node.chips, key=lambda c: (c.logic_id or 0, c.npu))):
            chip_map[ref.logic_id if ref.logic_id is not None else index] = (ref.npu, ref.chip)
        env = dict(base.extra_env)
        env.update(self.tool_env or {})
        return dataclasses.replace(base, chip_map=chip_map, use_lock=False, extra_env=env,
                                   min_peer_ratio=self.settings.min_peer_ratio,
                                   deadline_s=max(1.0, min(base.deadline_s, deadline_s)),
                                   tag=f"npuwatch-check-{os.getpid()}")

    def run(self, names: Sequence[str], checks: list[CheckResult], runners: Mapping[str, Runner]) -> str | None:
        """Append the results of the device checks ``names`` to ``checks``, each produced by its entry in
        ``runners`` (``h2d_bandwidth``'s also gives ``d2h_bandwidth``); returns why none ran, or None."""
        reason = busy_reason(self.readings, self.settings.idle_aicore_threshold)
        if reason is None:
            lock = ProbeLock(self.config.probes.lock_file)
            try:
                lock.acquire()
            except ProbeBusy as exc:
                reason = f"{exc} (a probe is running)"
            except OSError as exc:
                reason = f"cannot take the probe lock {lock.path}: {exc}"
            else:
                try:
                    self._run_all(names, checks, runners)
                finally:
                    lock.release()
                return None
        checks.extend(_unknown(name, f"not run: {reason}") for name in names)
        return reason

    def _run_all(self, names: Sequence[str], checks: list[CheckResult], runners: Mapping[str, Runner]) -> None:
        wanted = list(names)
        if "d2h_bandwidth" in wanted and "h2d_bandwidth" not in wanted:
            wanted[wanted.index("d2h_bandwidth")] = "h2d_bandwidth"  # one run measures both directions
        for index, name in enumerate(wanted):
            if name == "d2h_bandwidth":
                continue
            self.held_back_s = sum(MIN_SECONDS[later] for later in wanted[index + 1:])
            started = time.monotonic()
            if self.remaining() < MIN_SECONDS[name]:
                produced = [_unknown(name, f"not run: {self.remaining():.0f}s of the level's budget left")]
            else:
                try:
                    produced = runners[name](self)
                except Exception as exc:  # a check bug must not lose the other checks' results
                    produced = [_unknown(name, f"check failed: {type(exc).__name__}: {exc}")]
            seconds = time.monotonic() - started
            for result in produced:
                if result.name in ("h2d_bandwidth", "d2h_bandwidth") and result.name not in names:
                    continue
                checks.append(result.with_duration(seconds))


def _unknown(name: str, why: str) -> CheckResult:
    return CheckResult(name, UNKNOWN, why, (Result(UNKNOWN, why),))
