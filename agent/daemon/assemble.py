"""Builds a ready-to-start Agent from a Config: internal jobs, demo overrides, state paths."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.check.live import log_scan_of
from agent.check.report import LevelReport
from agent.core.config import Config, apply_overrides
from agent.core.jobs import InternalJob
from agent.daemon.service import Agent
from agent.health.thresholds import log_window_s
from agent.k8s.attribution import attribution_job
from collectors.base import ChipRef
from collectors.cpu_ranks_reader import JOB_NAME as CPU_RANKS
from collectors.cpu_ranks_reader import CpuRanksCollector
from collectors.host import HostCollector
from collectors.job_env import JOB_NAME as JOB_INFO
from collectors.job_env import JobInfoCollector

__all__ = ["AgentBundle", "build_agent", "internal_jobs"]

log = logging.getLogger(__name__)


@dataclass
class AgentBundle:
    agent: Agent
    demo: Any | None  # agent.demo.node.DemoNode when --demo


def _state_dir(config: Config) -> Path:
    """The state directory, created when missing; an unusable one is warned about, not fatal."""
    path = Path(os.path.expanduser(config.state_dir))
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.warning("state directory %s unusable (%s); log positions are kept in memory only", path, exc)
    return path


def internal_jobs(config: Config, chips: Callable[[], Sequence[ChipRef]] = tuple,
                  kept: dict[str, Any] | None = None, quick: Callable[[], LevelReport] | None = None,
                  info_table: Callable[[], Any] = lambda: None) -> list[InternalJob]:
    """The config's tool-less jobs; ``chips`` is the agent's chip list (for pod attribution and rank tables),
    ``info_table`` the latest fresh records of ``npu-smi info`` (its processes, for job info). ``kept`` carries
    the collectors whose counters must survive a reload from one call to the next (the agent's own dict);
    ``quick`` is the agent's own judgement, which the scheduled quick level reports instead of reading the
    tools again."""
    kept = {} if kept is None else kept
    jobs: list[InternalJob] = []
    collectors = config.collectors
    if collectors.host.enabled:
        host = HostCollector(collectors.host.mountpoints)
        jobs.append(InternalJob("host", collectors.host.interval, host.collect))
    if collectors.hccl_logs.enabled:
        from collectors.hccl.collector import HcclLogCollector
        from collectors.hccl.tail import DEFAULT_GLOBS

        logs = collectors.hccl_logs
        state_file = _state_dir(config) / "hccl_logs.json"
        settings = (logs.paths, logs.globs, logs.kernel_log, state_file, logs.first_start_window, logs.byte_budget,
                    logs.incident_window)
        before: tuple[Any, HcclLogCollector] | None = kept.get("hccl_logs")
        if before is not None and before[0] == settings:
            scanner = before[1]  # a reload that leaves the scanner's settings alone keeps it, counts and all
        else:
            scanner = HcclLogCollector(
                paths=list(logs.paths),
                # The CANN layout under each path, plus the operator's job-log globs.
                globs=[*DEFAULT_GLOBS, *logs.globs],
                kernel_log=logs.kernel_log,
                # Always the real path: an unusable one is reported as the scanner's problem.
                state_file=state_file,
                first_start_window_s=logs.first_start_window,
                byte_budget=logs.byte_budget,
                incident_window_s=logs.incident_window,
                replaces=None if before is None else before[1],
            )
            kept["hccl_logs"] = (settings, scanner)
        # Counters never expire: an error counted once stays counted.
        window = log_window_s(config)
        jobs.append(InternalJob("hccl_logs", logs.interval, scanner.collect, max_age_s=None,
                                problem=lambda: scanner.problem, records=lambda: log_scan_of(scanner, window)))
    from agent.check.job import check_job

    scheduled_checks = check_job(config, quick)  # check.schedule: the levels `npuwatch check` runs, on a timer
    if scheduled_checks is not None:
        jobs.append(scheduled_checks)
    pods = attribution_job(config, chips)
    if pods is not None:
        jobs.append(pods)
    if collectors.npu_smi.job_info:
        job_info: JobInfoCollector | None = kept.get(JOB_INFO)  # a reload keeps its cache and failure counts
        if job_info is None:
            job_info = kept[JOB_INFO] = JobInfoCollector(info_table, chips)
        job_info.reader.job_variables = collectors.npu_smi.job_variables
        jobs.append(InternalJob(JOB_INFO, collectors.npu_smi.interval, job_info.collect))
    if collectors.cpu_ranks.enabled:  # the config refuses it beside the NPU collectors (agent.core.config)
        cpu_ranks: CpuRanksCollector | None = kept.get(CPU_RANKS)  # a reload keeps its last readings
        if cpu_ranks is None:
            cpu_ranks = kept[CPU_RANKS] = CpuRanksCollector()
        cpu_ranks.job_variables = collectors.npu_smi.job_variables
        jobs.append(InternalJob(CPU_RANKS, collectors.cpu_ranks.interval, cpu_ranks.collect))
    return jobs


def build_agent(config: Config, demo_dir: Path | None = None, demo_chips: int = 8,
                clock: Callable[[], float] = time.time) -> AgentBundle:
    demo = None
    tool_env: dict[str, str] | None = None
    if demo_dir is not None:
        from agent.demo.node import DemoNode, demo_overrides

        # An existing node keeps its faults and counters' history (an agent restart is not a reboot).
        demo = DemoNode(demo_dir).open(chips=demo_chips)
        config = apply_overrides(config, demo_overrides(demo_dir, demo.bin_dir, config))
        tool_env = demo.env()
    built: list[Agent] = []  # the jobs ask the agent for its chips; they first run after it is built

    def chips() -> Sequence[ChipRef]:
        return built[0].chips() if built else ()

    def quick() -> LevelReport:
        return built[0].judge.level_report()

    def info_table() -> Any:
        return built[0].store.records("npu_smi_info") if built else None

    kept: dict[str, Any] = {}  # collectors a reload keeps (their counters never go down)
    agent = Agent(config, tool_env=tool_env,
                  jobs_factory=lambda config: internal_jobs(config, chips, kept, quick, info_table), clock=clock)
    built.append(agent)
    return AgentBundle(agent, demo)

