"""The agent's judgement: every collection round, ``check``'s quick level over what the agent already read.

No tool runs here. The readings come from the snapshot store (``agent.health.store_reader.StoreReader``), the
logs from the agent's own HCCL log scanner, the fault history from its handling levels, and the agent check
from its own collectors' states; the checks, their settings (every ``check.*`` override, ``check.skip``) and
the lead cause are ``check``'s. ``agent.health.verdict_metrics`` exports the result, which every surface reads.

A check whose collector is not configured on this node (a source disabled in the config, hccn_tool absent
on a node without RoCE ports) is not run, rather than reported as one that could not judge.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agent.check.checks_agent import check_agent
from agent.check.levels import BUDGET_S, select
from agent.check.local_agent import AgentReading
from agent.check.report import LevelReport
from agent.check.settings import CheckSettings
from agent.core.config import Config
from agent.core.snapshot import SnapshotStore
from agent.handling.escalation import ChipHistory
from agent.handling.history import chip_key
from agent.health import faults
from agent.health.checks import ROCE_CHECKS, judge
from agent.health.quick import read_quick
from agent.health.readings import LogScan, QuickReadings
from agent.health.results import CheckResult, Result, fold
from agent.health.store_reader import StoreReader, TwoRounds
from agent.health.verdict import Verdict, lead
from agent.health.verdict_metrics import finding_keys, verdict_samples
from collectors.base import NoData, Sample

__all__ = ["JOB_NAME", "LiveJudge", "LogSource", "NodeJudgement", "log_scan_of", "verdict_interval"]

log = logging.getLogger(__name__)

JOB_NAME = "verdict"
# The collector each check reads; a check whose collector is turned off is not run.
_CHECK_SOURCES = {"hccs": "npu_smi_hccs", "versions": "npu_smi_board", "chip_health": "npu_smi_health",
                  "hbm_ecc": "npu_smi_ecc", "roce_link": "hccn_link", "roce_flaps": "hccn_link_stat",
                  "net_health": "hccn_net_health", "optics": "hccn_optical", "roce_errors": "hccn_stat",
                  "roce_ip": "hccn_ip", "hccl_errors": "hccl_logs"}


def verdict_interval(config: Config) -> float:
    """Judged as often as the chip table is read: the fastest collection round."""
    return float(config.collectors.npu_smi.interval)


class LogSource(Protocol):
    """What the agent's HCCL log scanner (``collectors.hccl.collector.HcclLogCollector``) tells the judgement."""

    def recent_events(self, window_s: float) -> list[Any]: ...

    def hints(self, window_s: float | None = None) -> list[Any]: ...

    @property
    def tailer(self) -> Any: ...


def log_scan_of(scanner: LogSource, window_s: float) -> LogScan:
    """The scanner's events and culprit hints of the look-back window, as ``check``'s log scan holds them."""
    tailer = scanner.tailer
    roots = [str(path) for path in tailer.paths]
    exists = bool(tailer.files_seen) or bool(tailer.roots_exist())
    hints: Counter[tuple[str, str]] = Counter()
    for hint in scanner.hints(window_s):
        hints[(hint.kind, hint.value)] += hint.count
    return LogScan(window_s=window_s, roots=roots, roots_exist=exists, files=int(tailer.files_seen),
                   bytes_read=int(tailer.bytes_read_total), events=list(scanner.recent_events(window_s)),
                   hints=hints, errors=list(tailer.read_errors))


@dataclass(frozen=True)
class NodeJudgement:
    """One round's judgement: the checks, the lead cause, and since when each finding has been seen."""

    checks: tuple[CheckResult, ...]
    verdict: Verdict
    readings: QuickReadings
    at: float
    since: dict[tuple[str, str, str], float]  # (npu, chip, kind) -> first seen (epoch seconds)


class LiveJudge:
    """Judges the agent's latest readings; ``samples`` is the ``verdict`` job's body."""

    def __init__(self, store: SnapshotStore, config: Config, *, history: Callable[[], dict[str, ChipHistory]],
                 logs: Callable[[float], LogScan | None] = lambda _window: None,
                 clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self._history = history
        self._logs = logs
        self._clock = clock
        self._rounds = TwoRounds()
        self._since: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()
        self.latest: NodeJudgement | None = None
        self.configure(config)

    def configure(self, config: Config, logs: Callable[[float], LogScan | None] | None = None) -> None:
        """A reloaded config (and the new log scanner): the next round judges with its settings."""
        self._config = config
        self._settings = CheckSettings.from_config(config)
        if logs is not None:
            self._logs = logs

    def _present(self, source: str) -> bool:
        """The source is collected on this node: configured, and not absent (an optional tool that is not here)."""
        snap = self._store.get(source)
        return snap is not None and snap.down_reason != "no_data"

    def names(self) -> list[str]:
        """The quick checks this node's collectors can feed, less ``check.skip``."""
        wanted = []
        for name in select("quick", skip=self._settings.skip):
            if name in ROCE_CHECKS and not self._present("hccn_link"):
                continue
            if name in _CHECK_SOURCES and self._store.get(_CHECK_SOURCES[name]) is None:
                continue
            wanted.append(name)
        return wanted

    def _agent_reading(self) -> AgentReading:
        reading = AgentReading("this agent")
        for snap in self._store.all():
            if snap.source == JOB_NAME:
                continue
            reading.up[snap.source] = 1.0 if snap.ok else 0.0
            if snap.down_reason:
                reading.reasons[snap.source] = snap.down_reason
        return reading

    def evaluate(self) -> NodeJudgement:
        """This round's judgement; ``NoData`` until every collector it reads has run once (at start). One at a time:
        the round's job, a fault event's judgement (``agent.dcmi.events``) and ``check``'s level may ask at once."""
        with self._lock:
            return self._evaluate()

    def _evaluate(self) -> NodeJudgement:
        settings = self._settings
        judging = settings.judging
        names = self.names()
        reader = StoreReader(self._store, max_chips=int(self._config.collectors.npu_smi.max_chips),
                             clock=self._clock, rounds=self._rounds)
        roce = any(name in ROCE_CHECKS for name in names)
        scan = self._logs(judging.window_s) if "hccl_errors" in names else None
        readings = read_quick(reader, want_hccs="hccs" in names, want_boards="versions" in names, want_roce=roce,
                              scan=(lambda: scan) if scan is not None else None)
        readings.node.node = str((self._config.labels or {}).get("node") or socket.gethostname())
        histories = self._history()
        readings.node.histories = {ref: histories[chip_key(ref.npu, ref.chip)] for ref in readings.node.chips
                                   if chip_key(ref.npu, ref.chip) in histories}
        readings.node.held = {ref: {code: mark.since for code, mark in history.held.items()}
                              for ref, history in readings.node.histories.items() if history.held}
        readings.node.history_note = "with the agent's fault history"
        readings.agent = self._agent_reading()
        for source, read in (("npu_smi_health", readings.node.health), ("npu_smi_ecc", readings.node.ecc)):
            if self._store.get(source) is None:  # disabled here: not a call that failed
                read.clear()
        if reader.waiting:  # judging now would call a collector that has not run yet a failed tool
            raise NoData(f"waiting for the first run of {', '.join(sorted(reader.waiting))}")
        checks = [check_agent(readings, judging) if name == "agent" else judge(name, readings, judging, roce=roce)
                  for name in names]
        probes = self._probe_check()
        if probes is not None:
            checks.append(probes)
        verdict = lead(checks, chip_list_error=None if readings.node.table.ok else readings.node.table.error)
        now = self._clock()
        since = _since(checks, self._since, now)
        self._since = since
        judgement = NodeJudgement(tuple(checks), verdict, readings, now, dict(since))
        self.latest = judgement
        return judgement

    def _probe_check(self) -> CheckResult | None:
        """The agent's last GEMM probe of each chip held to the probe limits (None: no probe result yet)."""
        snap = self._store.get("probes")
        if snap is None or "probes" in self._settings.skip:
            return None
        seen: dict[tuple[str, str, str], dict[str, float]] = {}
        for sample in snap.samples:
            if sample.metric in ("npu_probe_gemm_correct", "npu_probe_gemm_efficiency_ratio"):
                labels = dict(sample.labels)
                key = (labels.get("npu", ""), labels.get("chip", "0"), labels.get("dtype", "?"))
                seen.setdefault(key, {})[sample.metric] = sample.value
        results: list[Result] = []
        for (npu, chip, dtype), values in sorted(seen.items()):
            if not npu.isdigit() or "npu_probe_gemm_correct" not in values:
                continue
            results.append(faults.gemm_probe(
                values["npu_probe_gemm_correct"] == 1.0, values.get("npu_probe_gemm_efficiency_ratio"), dtype,
                fail_below=float(self._config.probes.gemm.min_efficiency),
                warn_below=float(self._settings.thresholds.warn_ratio),
                npu=int(npu), chip=int(chip) if chip.isdigit() else 0).where(f"NPU {npu}"))
        return fold("probes", results, f"GEMM probes within their limits on {len(results)} chips") if results else None

    def level_report(self) -> LevelReport:
        """This round's judgement as ``check``'s quick level reports it (``check.schedule.quick``)."""
        started = time.monotonic()
        judgement = self.evaluate()
        table = judgement.readings.node.table
        models = sorted({status.name for status in table.value.chips if status.name}) if table.ok else []
        return LevelReport(level="quick", checks=list(judgement.checks), started_at=judgement.at,
                           duration_s=time.monotonic() - started, budget_s=BUDGET_S["quick"],
                           node=judgement.readings.node.node, model=models[0] if models else None,
                           chips=len(judgement.readings.node.chips), read_s=0.0,
                           chip_list_error=None if table.ok else table.error)

    def samples(self) -> list[Sample]:
        judgement = self.evaluate()
        return verdict_samples(judgement.checks, judgement.verdict, judgement.readings.node.chips,
                               judgement.since)


def _since(checks: Sequence[CheckResult], before: dict[tuple[str, str, str], float], now: float
           ) -> dict[tuple[str, str, str], float]:
    """When each active finding started: the tool's own date when it gives one, else the first round that saw it;
    a finding no longer found is forgotten."""
    out: dict[tuple[str, str, str], float] = {}
    for key, at in finding_keys(checks).items():
        out[key] = before.get(key, at if at is not None and at <= now else now)
    return out
