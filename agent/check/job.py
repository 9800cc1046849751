"""The agent's scheduled levels (``check.schedule``, all off by default): one internal job that runs what is due
and exports it.

The job ticks every ``TICK_S``; a level is due at its interval (the first run ``first_run`` after the
agent starts) or at its cron time. One level runs per tick, the longest due first. A medium or long
level that finds the NPUs busy, or the probe lock held, is tried again ``BUSY_RETRY_S`` later and
leaves the last results in place. Every level's latest results stay exported until the next run
(``npu_check_last_run_timestamp_seconds`` says how old they are), also across a config reload
(SIGHUP builds a new job): the new schedule takes over the old one's results, and the due time of
every level whose schedule did not change, from the ``ScheduleState`` of the agent's state directory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agent.check.levels import LEVELS
from agent.check.metrics import report_samples
from agent.check.report import LevelReport
from agent.core.config import Config
from collectors.base import NoData, Sample

if TYPE_CHECKING:
    from agent.check.runner import RunOptions
    from agent.core.jobs import InternalJob

__all__ = ["BUSY_RETRY_S", "JOB_NAME", "TICK_S", "CheckSchedule", "ScheduleState", "agent_state", "check_job"]

log = logging.getLogger(__name__)

JOB_NAME = "check"
TICK_S = 30.0
BUSY_RETRY_S = 600.0

Runner = Callable[[Config, "RunOptions"], LevelReport]


def _run_level(config: Config, options: RunOptions) -> LevelReport:
    """``agent.check.runner.run_level``, imported when a level first runs through it: the runner brings the tool
    readers, diagnose and the log scan (about 0.7 MB), which an agent with no medium or long level never uses."""
    from agent.check.runner import run_level

    return run_level(config, options)


@dataclass
class ScheduleState:
    """What one agent's schedule knows, kept when a reload replaces the schedule."""

    latest: dict[str, LevelReport] = field(default_factory=dict)
    due: dict[str, float] = field(default_factory=dict)
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)  # level -> its check.schedule section
    lock: threading.Lock = field(default_factory=threading.Lock)


_AGENT_STATES: dict[str, ScheduleState] = {}  # state_dir -> the state of that agent's schedule
_AGENT_STATES_LOCK = threading.Lock()


def agent_state(config: Config) -> ScheduleState:
    """The schedule state of the agent with this config's state directory (one per running agent)."""
    with _AGENT_STATES_LOCK:
        return _AGENT_STATES.setdefault(str(config.state_dir), ScheduleState())


class CheckSchedule:
    """Which levels are due and their latest reports; ``collect`` is the internal job's body."""

    def __init__(self, config: Config, clock: Callable[[], float] = time.time, runner: Runner = _run_level,
                 state: ScheduleState | None = None, quick: Callable[[], LevelReport] | None = None) -> None:
        self._config = config
        self._quick = quick  # the agent's own judgement: the quick level without running a tool
        self._clock = clock
        self._runner = runner
        self._state = state if state is not None else ScheduleState()
        self._lock = self._state.lock
        self._latest = self._state.latest
        self._due = self._state.due
        self._triggers: dict[str, Any] = {}
        now = clock()
        with self._lock:
            for level in LEVELS:
                section = config.check.schedule.level(level)
                settings = section.to_dict()
                if not section.enabled:
                    self._due.pop(level, None)
                    self._latest.pop(level, None)
                    self._state.sections.pop(level, None)
                    continue
                if section.cron:
                    from agent.core.cron import cron_trigger

                    self._triggers[level] = cron_trigger(section.cron)
                if self._state.sections.get(level) == settings and level in self._due:
                    continue  # a reload that left this level's schedule as it was
                self._state.sections[level] = settings
                self._due[level] = self._next_cron(level, now) if section.cron else now + float(section.first_run)

    @property
    def levels(self) -> list[str]:
        return [level for level in LEVELS if level in self._due]

    def due(self, now: float) -> list[str]:
        with self._lock:
            return [level for level in LEVELS if level in self._due and now >= self._due[level]]

    def _next_cron(self, level: str, now: float) -> float:
        from datetime import datetime, timezone

        current = datetime.fromtimestamp(now, tz=timezone.utc)
        fire = self._triggers[level].get_next_fire_time(None, current)
        return fire.timestamp() if fire is not None else float("inf")

    def _reschedule(self, level: str, now: float) -> None:
        with self._lock:
            if level in self._triggers:
                self._due[level] = self._next_cron(level, now + 1.0)
            else:
                self._due[level] = now + float(self._config.check.schedule.level(level).interval)

    def collect(self) -> list[Sample]:
        """Run the longest due level (at most one per tick), then export every level's latest report."""
        now = self._clock()
        due = self.due(now)
        if due:
            self._run(due[-1], now)
        with self._lock:
            reports = [self._latest[level] for level in LEVELS if level in self._latest]
        return [sample for report in reports for sample in report_samples(report)]

    def _run(self, level: str, now: float) -> None:
        if level == "quick" and self._quick is not None:
            try:
                report = self._quick()
            except NoData as exc:  # the agent's first round is not in yet: the next tick tries again
                log.info("check quick not run yet: %s", exc)
                return
            with self._lock:
                self._latest[level] = report
            self._reschedule(level, self._clock())
            return
        from agent.check.baseline import BaselineError
        from agent.check.runner import RunOptions

        try:
            report = self._runner(self._config, RunOptions(level=level))
        except BaselineError as exc:
            log.warning("check %s: fleet baseline unusable (%s); judging by the fixed references", level, exc)
            report = self._runner(self._config, RunOptions(level=level, use_baseline=False))
            report.baseline_error = str(exc)
        if report.skipped is not None and level != "quick":
            log.info("check %s not run: %s; trying again in %.0fs", level, report.skipped, BUSY_RETRY_S)
            with self._lock:
                self._due[level] = now + BUSY_RETRY_S
            return
        with self._lock:
            self._latest[level] = report
        self._reschedule(level, self._clock())
        log.log(logging.WARNING if report.verdict == "fail" else logging.INFO, "check %s: %s", level,
                report.message())


def check_job(config: Config, quick: Callable[[], LevelReport] | None = None) -> InternalJob | None:
    """The internal job for ``agent.daemon.assemble.internal_jobs``; None when no level is scheduled. ``quick``: the
    agent's own judgement (``agent.check.live``), which the quick level reports instead of reading the tools again."""
    from agent.core.jobs import InternalJob

    schedule = CheckSchedule(config, state=agent_state(config), quick=quick)
    if not schedule.levels:
        return None
    # Results never expire: a level run weekly stays exported for the week (its timestamp ages).
    return InternalJob(JOB_NAME, TICK_S, schedule.collect, max_age_s=None)
