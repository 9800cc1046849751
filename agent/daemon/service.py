"""The agent: wires config, sources, the snapshot store, the scheduler and HTTP together."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from agent.check.live import JOB_NAME as VERDICT_JOB
from agent.check.live import LiveJudge, verdict_interval
from agent.core.collect import SourceRunner, ToolSettings
from agent.core.config import Config
from agent.core.cron import cron_trigger
from agent.core.exporter import ExpositionCache
from agent.core.exposition import SnapshotRenderer
from agent.core.history import NodeHistory
from agent.core.jobs import InternalJob, Sampler
from agent.core.reload_status import ReloadStatus
from agent.core.samplers import SamplerThread
from agent.core.snapshot import SnapshotStore
from agent.core.textfile import TextfileWriter
from agent.core.tool_runner import kill_running_tools
from agent.daemon.debounce import Debounced
from agent.dcmi import metrics as dcmi_metrics
from agent.dcmi.events import EVENTS_SOURCE, FaultEvents
from agent.dcmi.fast import JOB_NAME as FAST_JOB
from agent.dcmi.fast import OWNERS, FastReadings, slow_values
from agent.dcmi.fast import SAMPLER_NAME as FAST_SAMPLER
from agent.dcmi.setup import open_backend
from agent.dcmi.trust import TrustCheck
from agent.handling.levels import FaultLevels, history_of, table_of
from agent.handling.metrics import table_samples
from agent.health.readings import LogScan
from agent.probes.job import ProbeController, idle_reason, schedule_probes
from agent.probes.metrics import ProbeMetrics
from agent.web.config import load_web_config
from agent.web.health import Heartbeat, liveness, readiness
from agent.web.page.model import build_view
from agent.web.page.render import render_page
from agent.web.server import AgentHTTPServer, ServerLimits, make_server
from collectors import npu_smi_info
from collectors import sources as source_registry
from collectors.base import ChipRef, CollectContext, NoData, Sample, Source
from collectors.fault_levels import default_table

__all__ = ["Agent", "JobsFactory"]

log = logging.getLogger(__name__)

# Order matters for `once` and at start-up: the chip list and inventory come first.
# "npu_smi_slow": with DCMI in use, the health group's npu-smi sources DCMI does not serve.
# "roce_stat": hccn_tool -stat on an interval of its own (collectors.hccn_tool.stat_interval: the fail-slow counters).
GROUP_ORDER: tuple[str, ...] = ("inventory", "info", "usages", "health", "npu_smi_slow", "roce", "roce_stat", "dmi")

STAT_SOURCE = "hccn_stat"  # the port counters fail-slow reads, on collectors.hccn_tool.stat_interval

# How long after a fault event the agent judges again: the rest of a burst arrives and is applied first.
EVENT_VERDICT_DELAY_S = 0.1

# The config's tool-less jobs (host metrics, log scanner); called again on every reload.
JobsFactory = Callable[[Config], Sequence[InternalJob]]


def group_interval(config: Config, group: str) -> float:
    npu_smi = config.collectors.npu_smi
    return {
        "inventory": npu_smi.inventory_interval,
        "info": npu_smi.interval,
        "usages": npu_smi.usages_interval,
        "health": npu_smi.health_interval,
        "npu_smi_slow": config.collectors.dcmi.npu_smi_interval,
        "roce": config.collectors.hccn_tool.interval,
        "roce_stat": config.collectors.hccn_tool.stat_interval or config.collectors.hccn_tool.interval,
        "dmi": config.collectors.ascend_dmi.interval,
    }[group]


def enabled_sources(config: Config) -> list[Source]:
    collectors = config.collectors
    by_tool = {
        "npu-smi": (collectors.npu_smi.enabled, set(collectors.npu_smi.disable), set(collectors.npu_smi.enable)),
        "hccn_tool": (collectors.hccn_tool.enabled, set(collectors.hccn_tool.disable), set()),
        # ascend-dmi is opt-in as a whole: enabling the tool enables its sources.
        "ascend-dmi": (collectors.ascend_dmi.enabled, set(), {"ascend_dmi_flops", "ascend_dmi_bw"}),
    }
    chosen = []
    for source in source_registry.SOURCES:
        enabled, disabled, opted_in = by_tool.get(source.tool, (False, set(), set()))
        wanted = source.default_enabled or source.name in opted_in
        if enabled and wanted and source.name not in disabled:
            if source.name == "npu_smi_info":
                chosen.append(npu_smi_info.make_source(max_chips=collectors.npu_smi.max_chips))
            elif source.name == STAT_SOURCE and collectors.hccn_tool.stat_interval is not None:
                chosen.append(replace(source, group="roce_stat"))
            else:
                chosen.append(source)
    return chosen


class Agent:
    def __init__(
        self,
        config: Config,
        *,
        tool_env: dict[str, str] | None = None,
        jobs_factory: JobsFactory = lambda _config: (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.store = SnapshotStore(clock)
        self._tool_env = tool_env
        self._jobs_factory = jobs_factory
        self._factory_jobs = list(jobs_factory(config))
        self._internal: list[InternalJob] = []
        self._samplers: list[Sampler] = []
        self._sampler_thread: SamplerThread | None = None
        self._textfile: TextfileWriter | None = None
        # One bounded pool per tool; sized once (a reload keeps the pools).
        self._pools = {
            "npu-smi": ThreadPoolExecutor(config.collectors.npu_smi.max_parallel, thread_name_prefix="npu-smi"),
            "hccn_tool": ThreadPoolExecutor(config.collectors.hccn_tool.max_parallel, thread_name_prefix="hccn"),
            "ascend-dmi": ThreadPoolExecutor(1, thread_name_prefix="ascend-dmi"),
        }
        self._scheduler: BackgroundScheduler | None = None
        self._http: AgentHTTPServer | None = None
        self._group_locks: dict[str, threading.Lock] = {}
        self._stopping = False
        self._chips_lock = threading.Lock()
        self._known_chips: list[ChipRef] = []
        self._last_healthy: dict[tuple[tuple[str, str], ...], float] = {}
        self.heartbeat = Heartbeat()
        # The node page's last hour (docs/node-page.md): appended to by a store listener, read on request only.
        self.history = NodeHistory()
        self.reload_status = ReloadStatus(clock)
        state_dir = Path(os.path.expanduser(config.state_dir))
        with contextlib.suppress(OSError):  # unusable: ProbeMetrics says so once and counts in memory
            state_dir.mkdir(parents=True, exist_ok=True)
        self.probe_metrics = ProbeMetrics(state_dir / "probes.json")
        self.fault_levels = FaultLevels(default_table(), history_of(config), clock)  # _configure sets the table
        # The node's judgement every round, over what the collectors stored (docs/health-checks.md#the-agents-verdict).
        self.judge = LiveJudge(self.store, config, history=self.fault_levels.history.read, logs=self._log_scan,
                               clock=clock)
        self.probe_controller = ProbeController(self, self.probe_metrics)
        # DCMI first, npu-smi as fallback (docs/dcmi.md); chosen once at start, a reload keeps it.
        self.dcmi = open_backend(config, tool_env)
        # The driver's fault events, applied as they arrive (docs/dcmi.md): set before the helper's first start.
        # An event that changed a chip's codes is judged again at once (debounced over a burst), so the exported
        # finding an alert reads (NPUFaultIsolate) follows it within a second, not at the next round.
        self._judge_soon = Debounced(lambda: self.run_internal_by_name(VERDICT_JOB), EVENT_VERDICT_DELAY_S,
                                     "verdict-after-event")
        self.fault_events = None if self.dcmi is None else FaultEvents(
            self.dcmi, self.store, self._context, self.chips, clock, changed=self._judge_soon,
            judge_at=lambda chip, health, codes, at: self.fault_levels(chip, health, codes, exact=True, at=at))
        # The fail-slow readings (collectors.dcmi.failslow_interval): AI Core busy and clock through DCMI, often.
        self.fast = None if self.dcmi is None else FastReadings(self.dcmi, self.chips,
                                                                slow_values(self.store.get, self._fresh), clock=clock)
        self.trust = None if self.dcmi is None else TrustCheck(
            self.dcmi, config.collectors.npu_smi.path, float(config.collectors.npu_smi.timeout),
            float(config.collectors.dcmi.verify_interval), env=tool_env)
        self._configure(config)

    # --- configuration
    def _configure(self, config: Config) -> None:
        self.config = config
        self.fault_levels.table = table_of(config)
        self.sources = enabled_sources(config)
        if self.dcmi is not None:
            # DCMI serves most chip readings: npu-smi's remaining per-chip sources need not run every minute.
            self.sources = [replace(source, group="npu_smi_slow")
                            if source.tool == "npu-smi" and source.group == "health" and not self.dcmi.serves(source)
                            else source for source in self.sources]
        fast_s = config.collectors.dcmi.failslow_interval if self.fast is not None else None
        # Rebuilt whole from the config on every load, so a reload keeps every job a start has.
        self._internal = [*self._factory_jobs,
                          InternalJob("fault_table", 60.0, lambda: table_samples(self.fault_levels.table))]
        self.judge.configure(config)
        self._internal.append(InternalJob(VERDICT_JOB, verdict_interval(config), self.judge.samples))
        if self.dcmi is not None:
            self._internal.append(InternalJob("dcmi", 15.0, self._dcmi_samples))
        self._samplers = []
        if self.fast is not None and fast_s is not None:
            self.fast.configure(config.collectors.dcmi.failslow_reads, fast_s)
            self._internal.append(InternalJob(FAST_JOB, fast_s, self.fast.collect))
            if self.fast.sampled:  # the busy fraction, read between the collects for their mean; nothing stored
                self._samplers.append(Sampler(FAST_SAMPLER, fast_s / self.fast.reads, self.fast.sample))
        if self.fault_events is not None:
            self._internal.append(InternalJob(EVENTS_SOURCE, 15.0, self.fault_events.samples, max_age_s=None))
        if config.probes.enabled:
            # Probe counters never expire; the gauges carry their own last-success timestamps.
            self._internal.append(InternalJob("probes", 15.0, self.probe_metrics.samples, max_age_s=None))
        previous, self._textfile = self._textfile, None
        if config.textfile.enabled:
            self._textfile = TextfileWriter(config.textfile.directory, lambda: self.cache.render().body)
            self._internal.append(InternalJob("textfile", config.textfile.interval, self._textfile.write))
        if previous is not None and (self._textfile is None or previous.path != self._textfile.path):
            previous.close()  # a file no one writes any more must not be served
        collectors = config.collectors
        self.runner = SourceRunner(
            self.store,
            {
                "npu-smi": ToolSettings(collectors.npu_smi.path, collectors.npu_smi.timeout),
                "hccn_tool": ToolSettings(collectors.hccn_tool.path, collectors.hccn_tool.timeout),
                "ascend-dmi": ToolSettings(collectors.ascend_dmi.path, collectors.ascend_dmi.timeout),
            },
            self._pools,
            self._context,
            self._tool_env,
            max_series=config.max_series_per_source,
            reader=self.dcmi,
        )
        wanted = {source.name for source in self.sources} | {job.name for job in self._internal}
        for snap in self.store.all():
            if snap.source not in wanted:
                self.store.unregister(snap.source)
        for source in self.sources:
            self.store.register(source.name, group_interval(config, source.group))
        for job in self._internal:
            self.store.register(job.name, job.interval_s, job.max_age_s)
        renderer = SnapshotRenderer(self.store, config.labels, config.expected_chips, self.reload_status,
                                    owners=OWNERS if fast_s is not None else None)
        self.store.clear_listeners()
        self.store.add_listener(renderer.warm)
        self.store.add_listener(self.history.listen)
        if self.fault_events is not None:
            self.store.add_listener(self.fault_events.polled)
        self.cache: ExpositionCache = ExpositionCache(renderer, self.store)
        if self._http is not None:
            self._http.cache = self.cache

    def _log_scan(self, window_s: float) -> LogScan | None:
        """The HCCL log scanner's window for the judgement (None: no scanner configured)."""
        snap = self.store.get("hccl_logs")
        if snap is None:
            return None
        if snap.no_data or snap.records is None:
            paths = [str(path) for path in self.config.collectors.hccl_logs.paths]
            return LogScan(window_s=window_s, roots=paths, roots_exist=False)
        scan: LogScan = snap.records
        return scan

    def groups(self) -> list[str]:
        present = {source.group for source in self.sources}
        return [group for group in GROUP_ORDER if group in present]

    # --- what per-chip calls and npu_info need from other sources
    def chips(self) -> list[ChipRef]:
        """The chips per-chip calls go to: the latest table's, else the last list npu-smi gave.

        The hardware does not change while npu-smi hangs, and that is when the RoCE collectors'
        link data matters most; a later table that answers replaces the list, chips gone or not.
        """
        current = source_registry.chip_refs(self.store)
        with self._chips_lock:
            if current:
                if self._known_chips and len(current) != len(self._known_chips):
                    _log_chip_change(self._known_chips, current)
                self._known_chips = current
            return list(self._known_chips)

    def _dcmi_samples(self) -> list[Sample]:
        """The ``dcmi`` job: the trust check when due, then the helper's self-metrics (docs/dcmi.md)."""
        assert self.dcmi is not None and self.trust is not None
        self.trust.maybe(self.chips())
        return dcmi_metrics.samples(self.dcmi, self.trust.verified, self.trust.disagreements)

    def _fresh(self, source: str) -> bool:
        snap = self.store.get(source)
        return snap is not None and snap.fresh(self.store.clock())

    def _context(self) -> CollectContext:
        return CollectContext(
            inventory=source_registry.inventory(self.store),
            per_process_metrics=self.config.collectors.npu_smi.per_process_metrics,
            process_owner=source_registry.process_owner
            if self.config.collectors.npu_smi.per_process_metrics
            else None,
            process_usage=source_registry.process_usage
            if self.config.collectors.npu_smi.per_process_metrics
            else None,
            fault_levels=self.fault_levels,
            inventory_chips=max(int(self.config.expected_chips), source_registry.mapped_chips(self.store)),
        )

    # --- collection
    def collect_group(self, group: str) -> None:
        if self._stopping:
            return
        lock = self._group_locks.setdefault(group, threading.Lock())
        if not lock.acquire(blocking=False):
            log.debug("group %s still running; skipping this turn", group)
            return
        try:
            if group == "dmi" and self.config.collectors.ascend_dmi.require_idle:
                reason = idle_reason(self)
                if reason is not None:
                    log.info("ascend-dmi skipped: %s", reason)
                    return
            for source in self.sources:
                if source.group != group or self._stopping:
                    continue
                chips = self.chips() if source.scope == "chip" else None
                self.runner.run(source, chips)
            if group == "info":
                self._refresh_health_after_a_change()
        except Exception:  # a collector bug must never stop the schedule
            if not self._stopping:
                log.exception("collector group %s failed", group)
        finally:
            lock.release()

    def _refresh_health_after_a_change(self) -> None:
        """A chip that left OK in the table gets its health and error codes read now, not at the next
        health interval, so the first page about it already names its codes."""
        snap = self.store.get("npu_smi_info")
        if snap is None or not snap.ok:
            return
        healthy = {s.labels: s.value for s in snap.samples if s.metric == "npu_healthy"}
        first = not self._last_healthy  # at start the health group runs right after the table anyway
        changed = [labels for labels, value in healthy.items()
                   if value == 0.0 and self._last_healthy.get(labels, 1.0) == 1.0]
        self._last_healthy = healthy
        if first:
            return
        health = next((s for s in self.sources if s.name == "npu_smi_health"), None)
        if not changed or health is None or self._stopping:
            return
        log.info("health changed on %s: reading their error codes now",
                 ", ".join("npu " + dict(labels).get("npu", "?") for labels in changed))
        self.runner.run(health, self.chips())

    def run_internal(self, job: InternalJob) -> None:
        started_wall = self.store.clock()
        started = time.monotonic()
        before = self.store.get(job.name)
        try:
            samples = list(job.collect())
        except NoData as exc:
            self.store.put_no_data(job.name, str(exc), started_wall, time.monotonic() - started)
            return
        except Exception as exc:
            if getattr(exc, "logged", False):  # the job has said so itself, once
                log.debug("%s failed: %s", job.name, exc)
            else:
                log.warning("%s failed: %s", job.name, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            self.store.put_failure(job.name, "exit", str(exc), started_wall, time.monotonic() - started)
            return
        records = job.records() if job.records is not None else None
        self.store.put_success(job.name, samples, records, started_wall, time.monotonic() - started)
        if before is not None and before.down_reason == "exit":
            log.info("%s: collecting again (was down: %s)", job.name, before.error)
        problem = job.problem() if job.problem is not None else None
        if problem:
            self.store.put_degraded(job.name, problem)

    def internal_job(self, name: str) -> InternalJob | None:
        return next((job for job in self._internal if job.name == name), None)

    def run_internal_by_name(self, name: str) -> None:
        for job in self._internal:
            if job.name == name:
                self.run_internal(job)

    def collect_once(self) -> None:
        groups = self.groups()
        for group in groups:
            self.collect_group(group)
        if "info" in groups and ("health" in groups or "npu_smi_slow" in groups):
            # npu_info takes firmware/driver/serial from -t board, which runs after the table.
            self.collect_group("info")
        for job in self._internal:
            self.run_internal(job)

    # --- health (agent/web/health.py says what each answer means)
    def health(self) -> tuple[bool, str]:
        """``/healthz``: the agent itself is alive (scheduler heartbeat), whatever the tools do."""
        return liveness(self.heartbeat, self._scheduler is not None, self._stopping)

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """``/readyz``: the chip list was read since start (or is not collected), plus every collector."""
        chip_list = any(source.name == "npu_smi_info" for source in self.sources)
        return readiness(self.store, chip_list)

    def node_page(self) -> bytes:
        """The page at ``/``: this agent's verdict, chips, history and collectors, rendered now."""
        node = str((self.config.labels or {}).get("node") or socket.gethostname())
        view = build_view(self.store, self.judge.latest, self.history, node=node,
                          refresh_s=max(10, int(self.config.collectors.npu_smi.interval)))
        return render_page(view)

    # --- lifecycle
    def start(self, serve_http: bool | None = None) -> None:
        if serve_http is None:
            serve_http = self.config.web.enabled
        if serve_http:
            web = self.config.web
            web_config = load_web_config(web.config_file) if web.config_file else None
            self._http = make_server(
                web.listen_address, web.port, self.cache, self.health, ready=self.readiness, page=self.node_page,
                web_config=web_config, web_config_file=web.config_file,
                limits=ServerLimits(max_connections=web.max_connections,
                                    max_connections_per_client=web.max_connections_per_client),
            )
            self._http.start()
            host = f"[{web.listen_address}]" if ":" in web.listen_address else web.listen_address
            log.info("serving /metrics on %s:%d", host, self._http.port)
        self._scheduler = BackgroundScheduler(
            executors={"default": {"type": "threadpool", "max_workers": 8},
                       # The heartbeat has a thread of its own: collectors stuck on a tool never delay it.
                       "heartbeat": {"type": "threadpool", "max_workers": 1}},
            job_defaults={"coalesce": True, "max_instances": 1},
            timezone="UTC",
        )
        self._schedule_jobs(first_run_now=True)
        self.heartbeat.reset()
        self._scheduler.add_job(self.heartbeat.beat, IntervalTrigger(seconds=self.heartbeat.interval_s),
                                id="heartbeat", name="heartbeat", executor="heartbeat",
                                misfire_grace_time=None)
        self._scheduler.start()

    def _schedule_jobs(self, first_run_now: bool) -> None:
        assert self._scheduler is not None
        now = time.time()
        for offset, group in enumerate(self.groups()):
            interval = group_interval(self.config, group)
            self._scheduler.add_job(
                self.collect_group,
                IntervalTrigger(seconds=interval),
                args=[group],
                id=f"group:{group}",
                name=f"collect {group}",
                replace_existing=True,
                misfire_grace_time=max(1, int(interval)),
                next_run_time=_at(now + 0.2 * offset) if first_run_now else None,
            )
        for job in self._internal:
            self._scheduler.add_job(
                self.run_internal,
                IntervalTrigger(seconds=job.interval_s),
                args=[job],
                id=f"internal:{job.name}",
                name=job.name,
                replace_existing=True,
                misfire_grace_time=max(1, int(job.interval_s)),
                next_run_time=_at(now + 0.5) if first_run_now else None,
            )
        if self._sampler_thread is not None:
            self._sampler_thread.stop()
        # half a read off the jobs' first runs: never at the same moment as its collect
        self._sampler_thread = SamplerThread(self._samplers, lambda sampler: 0.5 + sampler.interval_s / 2)
        self._sampler_thread.start()

    def add_timed_job(
        self, name: str, func: Callable[[], Any], interval_s: float, jitter_s: float, cron: str | None,
        *, first_run_s: float | None = None,
    ) -> None:
        """Schedule a slow job (probes, ascend-dmi): cron or interval, with random jitter.

        An interval job first runs ``first_run_s`` after now when given (the interval counts from
        there), else at a random point within the jitter.
        """
        assert self._scheduler is not None
        now = time.time()
        first = now + (first_run_s if first_run_s is not None else random.uniform(0, max(jitter_s, 1.0)))
        trigger: Any
        if cron:
            trigger = cron_trigger(cron, jitter_s)  # the node's local time, as its crontab reads it
        else:
            trigger = IntervalTrigger(seconds=interval_s, jitter=int(jitter_s) or None, start_date=_at(first))
        self._scheduler.add_job(
            func, trigger, id=f"timed:{name}", name=name, replace_existing=True,
            misfire_grace_time=int(max(60, interval_s)), next_run_time=None if cron else _at(first),
        )

    def reload(self, config: Config) -> bool:
        """Apply a new config without dropping a scrape: the HTTP server keeps serving throughout.

        A config that cannot be applied, for whatever reason, is logged and the running one put back:
        False then, and ``npuwatch_config_last_reload_successful`` says 0."""
        old_config, old_internal = self.config, list(self._internal)
        try:
            self._apply(config)
        except Exception:
            log.exception("SIGHUP: the new config could not be applied; keeping the running one")
            self._internal = old_internal
            try:
                self._apply(old_config)
            except Exception:  # the running config was applied once already: this is not expected
                log.exception("SIGHUP: re-applying the running config failed too")
            self.reload_status.record(False)
            return False
        return True

    def _apply(self, config: Config) -> None:
        if (config.web.listen_address, config.web.port) != (
            self.config.web.listen_address, self.config.web.port
        ):
            log.warning("web.listen_address/web.port changes take effect at the next restart")
        if config.collectors.dcmi != self.config.collectors.dcmi:
            log.warning("collectors.dcmi changes take effect at the next restart")
        if config.state_dir != self.config.state_dir:
            log.warning("state_dir changes take effect at the next restart (probe counters and the fault history "
                        "stay in %s)", self.config.state_dir)
        self._factory_jobs = list(self._jobs_factory(config))
        self._configure(config)
        web_loaded = True
        if self._http is not None:  # a broken web config is logged there and the running one kept
            web_loaded = self._http.reload_web_config(config.web.config_file)
            self._http.set_connection_limits(config.web.max_connections, config.web.max_connections_per_client)
        if self._scheduler is not None:
            for job in self._scheduler.get_jobs():
                if job.id.startswith(("group:", "internal:", "timed:probe:")):
                    job.remove()
            self._schedule_jobs(first_run_now=True)
            schedule_probes(self)  # new probe intervals, cron or an enable/disable take effect
        self.reload_status.record(web_loaded)

    def reload_failed(self) -> None:
        """A reload whose config did not load: the running config stays, and the metrics say so."""
        self.reload_status.record(False)

    def stop(self) -> None:
        self._stopping = True
        self.runner.stop()
        if self._sampler_thread is not None:
            self._sampler_thread.stop()
        if self._scheduler is not None:
            if self._scheduler.running:  # not yet, when start() failed before starting it
                self._scheduler.shutdown(wait=False)
            self._scheduler = None
        killed = self.probe_controller.kill_running()
        if killed:
            log.info("stopped %d running probe worker(s)", killed)
        # A hung tool must not hold the shutdown for its timeout (ascend-dmi's is 15 minutes).
        tools = kill_running_tools()
        if tools:
            log.info("killed %d running tool process(es)", tools)
        if self._http is not None:
            self._http.stop()
            self._http = None
        if self.dcmi is not None:
            self.dcmi.client.close()  # no helper left behind
        if self.fault_events is not None:
            self.fault_events.close()
        self._judge_soon.close()
        if self._textfile is not None:
            self._textfile.close()
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)

    @property
    def http_port(self) -> int | None:
        return self._http.port if self._http is not None else None


def _log_chip_change(before: Sequence[ChipRef], after: Sequence[ChipRef]) -> None:
    """Once per change of the chip list's length: a chip gone is a warning, one back is news."""
    gone = sorted({(ref.npu, ref.chip) for ref in before} - {(ref.npu, ref.chip) for ref in after})
    if len(after) < len(before):
        log.warning("chip count changed: npu-smi lists %d chips, %d before (gone: %s)", len(after), len(before),
                    ", ".join(f"NPU {npu} chip {chip}" for npu, chip in gone) or "renumbered")
    else:
        log.info("chip count changed: npu-smi lists %d chips, %d before", len(after), len(before))


def _at(timestamp: float) -> Any:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(timestamp, tz=timezone.utc)

