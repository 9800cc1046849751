"""Probes inside the agent: idle-gated, scheduled with jitter, counted, and killable on shutdown.

The probe runs themselves happen in child processes (agent.probes.runner); this module
decides when a probe may run, turns outcomes into the ``probes`` snapshot, and kills any
worker that is still running when the agent stops.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import signal
import threading
from collections.abc import Callable
from typing import Any, Protocol

import psutil

from agent.core.config import Config
from agent.core.snapshot import SnapshotStore
from agent.probes.lock import idle_check
from agent.probes.metrics import ProbeMetrics
from agent.probes.records import ProbeResult, ProbeSettings, settings_from_config, skipped_result
from agent.probes.runner import run_allreduce, run_gemm
from collectors.base import ChipRef

__all__ = ["ProbeController", "ProbeHost", "idle_reason", "run_all_probes_now", "schedule_probes"]

log = logging.getLogger(__name__)

PROBE_SNAPSHOT = "probes"


class ProbeHost(Protocol):
    """What probes need from the running agent (``agent.daemon.service.Agent`` is one)."""

    config: Config
    store: SnapshotStore
    probe_controller: ProbeController

    def chips(self) -> list[ChipRef]: ...

    def add_timed_job(self, name: str, func: Callable[[], Any], interval_s: float, jitter_s: float,
                      cron: str | None, *, first_run_s: float | None = None) -> None: ...

    def run_internal_by_name(self, name: str) -> None: ...


def idle_reason(agent: ProbeHost) -> str | None:
    """Why the node is not idle (an NPU process, busy AI Cores, no fresh npu-smi data); None when idle."""
    if not agent.config.collectors.npu_smi.enabled:
        return None
    snap = agent.store.get("npu_smi_info")
    if snap is None or not snap.fresh(agent.store.clock()):
        return "no fresh npu-smi data to prove the NPUs idle"
    return idle_check(snap.samples, agent.config.probes.idle_aicore_threshold)


class ProbeController:
    """Runs probes for one agent; ``kill_running`` ends every worker it started."""

    def __init__(self, agent: ProbeHost, metrics: ProbeMetrics) -> None:
        self._agent = agent
        self._metrics = metrics
        self._tag = f"npuwatch-agent-{os.getpid()}-{id(self):x}"
        self._running = threading.Event()

    def settings(self) -> ProbeSettings:
        settings = settings_from_config(self._agent.config)
        chip_map: dict[int, tuple[int, int]] = {}
        for index, chip in enumerate(sorted(self._agent.chips(), key=lambda c: (c.logic_id or 0, c.npu))):
            device = chip.logic_id if chip.logic_id is not None else index
            chip_map[device] = (chip.npu, chip.chip)
        # The model for the peak table comes from the device the worker ran on (torch_npu's
        # device name on NPU nodes) unless probes.model pins it: npu-smi's model would be
        # wrong for a cpu or cuda run.
        return dataclasses.replace(settings, chip_map=chip_map, tag=self._tag)

    def run(self, probe: str) -> ProbeResult:
        reason = idle_reason(self._agent)
        if reason is not None:
            result = skipped_result(probe, reason)
        else:
            self._running.set()
            try:
                settings = self.settings()
                result = run_gemm(settings) if probe == "gemm" else run_allreduce(settings, "node")
            finally:
                self._running.clear()
        self._metrics.record(result)
        self._agent.run_internal_by_name(PROBE_SNAPSHOT)  # on /metrics now, not at the snapshot's next turn
        log.log(logging.WARNING if result.outcome in ("fail", "timeout") else logging.INFO,
                "probe %s: %s%s", probe, result.outcome, f" ({result.message})" if result.message else "")
        return result

    def kill_running(self) -> int:
        """SIGKILL the process group of every worker carrying this agent's tag; returns how many."""
        killed = 0
        for proc in psutil.process_iter(["cmdline"]):
            try:
                if self._tag in (proc.info["cmdline"] or []):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(os.getpgid(proc.pid), signal.SIGKILL)
                    killed += 1
            except (psutil.Error, ProcessLookupError):
                continue
        return killed


def schedule_probes(agent: ProbeHost) -> None:
    """Add the GEMM and all-reduce jobs (interval or cron, with jitter) to a started agent."""
    probes = agent.config.probes
    if not probes.enabled:
        return
    for name in ("gemm", "allreduce"):
        section = getattr(probes, name)
        if not section.enabled:
            continue
        agent.add_timed_job(f"probe:{name}", functools.partial(agent.probe_controller.run, name),
                            section.interval, section.jitter, section.cron, first_run_s=section.first_run)


def run_all_probes_now(agent: ProbeHost) -> list[ProbeResult]:
    """`npuwatch once --probes`: each enabled probe once, now, then refresh the snapshot."""
    results = []
    for name in ("gemm", "allreduce"):
        if getattr(agent.config.probes, name).enabled:
            results.append(agent.probe_controller.run(name))
    agent.run_internal_by_name(PROBE_SNAPSHOT)
    return results
