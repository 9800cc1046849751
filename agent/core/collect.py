"""Runs tool-backed sources: tool -> parser -> samples -> snapshot store.

Per-chip sources fan out through a small bounded pool per tool, so a 16-chip node
never has dozens of npu-smi processes at once, and a slow hccn_tool pass never
delays npu-smi. The first timeout in a run stops the
remaining calls of that run: a hung npu-smi would hang every other call too.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, wait
from dataclasses import dataclass
from typing import Any

from agent.core.backend import TOOL, Fallback, RecordReader
from agent.core.snapshot import SnapshotStore
from agent.core.tool_runner import ToolFailed, ToolMissing, ToolOutputTooLarge, ToolTimeout, resolve_tool, run_tool
from collectors.base import ChipRef, CollectContext, NoData, ParseError, Sample, Source
from collectors.bounds import rejections

__all__ = ["SourceRunner", "ToolSettings"]

log = logging.getLogger(__name__)

RUN_SLACK_S = 10.0  # beyond the run's calls one after another: the pool's queue, the parse, a slow machine

# Tools whose absence means "this node has no such hardware", not a failure.
OPTIONAL_TOOLS = frozenset({"hccn_tool", "ascend-dmi"})


@dataclass(frozen=True)
class ToolSettings:
    path: str | None
    timeout_s: float


@dataclass(frozen=True)
class _Failure:
    reason: str
    message: str


_WHY = {"timeout": "timeout", "missing": "tool missing", "exit": "the tool failed", "parse": "unreadable output",
        "missing_tool": "tool missing"}


class _Abort(Exception):
    """Stop the remaining calls of this run (after a timeout)."""


class SourceRunner:
    def __init__(
        self,
        store: SnapshotStore,
        tools: dict[str, ToolSettings],
        pools: Mapping[str, Executor],
        context: Callable[[], CollectContext],
        tool_env: dict[str, str] | None = None,
        *,
        max_series: int = 20_000,
        reader: RecordReader | None = None,
    ) -> None:
        self._store = store
        self._tools = tools
        self._pools = pools
        self._context = context
        self._env = tool_env
        self._max_series = max_series
        self._reader = reader
        self._warned: set[str] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()

    def stop(self) -> None:
        """No new tool call from now on (the agent is shutting down); calls under way are killed elsewhere."""
        self._stopped.set()

    def run(self, source: Source, chips: Sequence[ChipRef] | None) -> None:
        """One collection of ``source``; the outcome lands in the store, never raises."""
        if self._stopped.is_set():
            return
        started_wall = self._store.clock()
        started = time.monotonic()
        settings = self._tools.get(source.tool, ToolSettings(None, 10.0))
        reader = self._reader if self._reader is not None and self._reader.serves(source) else None
        executable: str | None = None
        missing = ""
        try:
            executable = resolve_tool(source.tool, settings.path)
        except ToolMissing as exc:
            missing = str(exc)
            if reader is None:
                self._missing(source, missing, started_wall, time.monotonic() - started)
                return
        if source.scope == "chip":
            if not chips:
                self._store.put_no_data(source.name, "no chip list yet: npu-smi info has not answered since start",
                                        started_wall, 0.0, reason="no_inventory")
                return
            targets: list[ChipRef | None] = list(chips)
        else:
            targets = [None]
        context = self._context()
        abort = threading.Event()

        def one(chip: ChipRef | None) -> tuple[list[Sample], Any, str] | _Failure:
            if abort.is_set() or self._stopped.is_set():
                raise _Abort
            fallback = ""
            if reader is not None:
                try:
                    records = reader.read(source, chip)
                    return source.samples(records, chip, context), records, reader.name
                except Fallback as exc:
                    if executable is None:
                        return _Failure(exc.reason, f"{source.name}: {reader.name}: {exc}; {missing}")
                    fallback = f" (after {reader.name}: {exc})"
                except ParseError as exc:  # an impossible value where the parser would have refused it too
                    return _Failure("parse", f"{source.name}: {reader.name}: {exc}")
            assert executable is not None
            try:
                result = run_tool([executable, *source.argv(chip)], settings.timeout_s, env=self._env)
                records = source.parse(result.stdout)
                return source.samples(records, chip, context), records, TOOL
            except ToolTimeout as exc:
                abort.set()
                return _Failure("timeout", f"{exc}{fallback}")
            except ToolOutputTooLarge as exc:  # a cut-off table parses as fewer chips: never parse it
                return _Failure("parse", f"{exc}{fallback}")
            except ToolFailed as exc:
                return _Failure("exit", f"{exc}{fallback}")
            except ParseError as exc:
                return _Failure("parse", f"{source.name}: {exc}{fallback}")
            except ToolMissing as exc:
                return _Failure("missing_tool", f"{exc}{fallback}")
            except NoData as exc:
                return _Failure("no_data", str(exc))

        outcomes: list[tuple[ChipRef | None, tuple[list[Sample], Any, str] | _Failure]] = []
        if len(targets) == 1:
            try:
                outcomes.append((targets[0], one(targets[0])))
            except _Abort:
                return
        else:
            pool = self._pools[source.tool]
            futures = [(chip, pool.submit(one, chip)) for chip in targets]
            # Woken once for the run, not once per chip. Bounded: every call is (its tool's timeout), so the
            # run cannot outlast them one after another; a call the pool never starts (its workers gone at
            # the interpreter's exit) would otherwise hold this thread, and the exit that joins it, for good.
            wait([future for _, future in futures], timeout=settings.timeout_s * len(targets) + RUN_SLACK_S)
            for chip, future in futures:
                if not future.done():
                    future.cancel()
                    outcomes.append((chip, _Failure("timeout", "no answer within the run's deadline")))
                    continue
                try:
                    outcomes.append((chip, future.result()))
                except _Abort:
                    outcomes.append((chip, _Failure("timeout", "skipped after an earlier timeout")))
        if self._stopped.is_set():
            return  # killed for the shutdown: not a tool failure worth recording
        duration = time.monotonic() - started
        self._record(source, outcomes, started_wall, duration)

    def _record(
        self,
        source: Source,
        outcomes: list[tuple[ChipRef | None, tuple[list[Sample], Any, str] | _Failure]],
        started_wall: float,
        duration: float,
    ) -> None:
        samples: list[Sample] = []
        records: dict[ChipRef | None, Any] = {}
        failures: list[_Failure] = []
        served: dict[str, int] = {}
        for chip, outcome in outcomes:
            if isinstance(outcome, _Failure):
                failures.append(outcome)
            else:
                samples.extend(outcome[0])
                records[chip] = outcome[1]
                served[outcome[2]] = served.get(outcome[2], 0) + 1
        if self._reader is not None and self._reader.serves(source):
            self._reader.ran(source.name, served)
        if len(samples) > self._max_series:
            # Broken or hostile output: exporting it would cost the agent (and Prometheus) dearly.
            failures.append(_Failure("parse", f"{source.name}: {len(samples)} series from one run, more than "
                                              f"max_series_per_source={self._max_series}; nothing exported"))
            records, samples = {}, []
        stored_records: Any = records.get(None) if source.scope == "node" else records
        refused = rejections(list(records.values()))
        if refused:
            self._store.count_rejections(source.name, len(refused))
            self._log_once(f"{source.name}:rejected", f"{source.name}: {len(refused)} line(s) or value(s) refused "
                                                       f"as impossible, first: {refused[0]}")
        # A whole output refused (cut short, unparsable, too many series) is a rejection too.
        refused_outputs = sum(failure.reason == "parse" for failure in failures)
        if refused_outputs:
            self._store.count_rejections(source.name, refused_outputs)
        real_failures = [f for f in failures if f.reason != "no_data"]
        if not records and failures and not real_failures:
            self._store.put_no_data(source.name, failures[0].message, started_wall, duration)
            return
        if records:
            # Partial success keeps the chips that answered; the failure below still sets up=0.
            self._store.put_success(source.name, samples, stored_records, started_wall, duration)
        if real_failures:
            first = real_failures[0]
            extra = f" (+{len(real_failures) - 1} more)" if len(real_failures) > 1 else ""
            self._store.put_failure(source.name, first.reason, first.message + extra, started_wall, duration)
            # A hung or crashing tool is one cause however many sources call it; bad output is per source.
            key = f"{source.tool}:{first.reason}" if first.reason == "timeout" else f"{source.name}:{first.reason}"
            self._log_once(key, f"{source.name}: {first.message}{extra}")
        else:
            self._recovered(source)

    def _recovered(self, source: Source) -> None:
        """Forget the warnings about ``source`` (and its tool), logging once that it collects again."""
        with self._lock:
            cleared = {key for key in self._warned if key.startswith((f"{source.name}:", f"{source.tool}:"))}
            self._warned -= cleared
        for key in sorted(cleared):
            subject, reason = key.rsplit(":", 1)
            if reason == "rejected":
                continue  # refused values are not down, so nothing recovered
            why = _WHY.get(reason, reason)
            if subject == source.tool:
                log.info("%s answers again (%s collected; was down: %s)", subject, source.name, why)
            else:
                log.info("%s: collecting again (was down: %s)", subject, why)

    def _missing(self, source: Source, message: str, started_wall: float, duration: float) -> None:
        if self._reader is not None and self._reader.active() and source.tool not in OPTIONAL_TOOLS:
            # A container that mounts only the driver library: the chips are read, this source has no data.
            self._store.put_no_data(source.name, f"{message}; {self._reader.name} serves the chip readings",
                                    started_wall, duration)
            self._log_once(f"{source.tool}:missing", f"{message}; {self._reader.name} serves the chip readings, "
                                                     f"the sources it does not serve report no data")
            return
        if source.tool in OPTIONAL_TOOLS:
            self._store.put_no_data(source.name, message, started_wall, duration)
            if source.tool not in self._warned:
                self._warned.add(source.tool)
                log.info("%s; its collectors report no data", message)
            return
        self._store.put_failure(source.name, "missing_tool", message, started_wall, duration)
        self._log_once(f"{source.tool}:missing", message)  # one warning per tool, not per source

    def _log_once(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._warned:
                log.debug("%s", message)
                return
            self._warned.add(key)
        log.warning("%s", message)
