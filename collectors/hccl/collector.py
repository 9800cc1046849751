"""The HCCL / CANN log scanner as a scheduled collector: tail, classify, count, export.

Each ``collect()`` reads what was appended to the watched logs (``tail.LogTailer``, at most
``byte_budget`` bytes), classifies it line by line with one ``classify.StreamClassifier`` per
file (incident dedup per file, see that module), adds the counted incidents to cumulative counters
and commits the counters together with the file offsets in one atomic state-file write, so a
restart neither loses nor double-counts an incident.

Manual equivalent: ``npuwatch scan-logs ~/ascend/log``. Sample exposition::

    npu_hccl_errors_total{code="EI0002",category="exec_timeout"} 1.0
    npu_hccl_errors_total{code="notify_wait",category="exec_timeout"} 3.0
    npu_hccl_last_error_timestamp_seconds{category="exec_timeout"} 1.7327951706e+09
    npuwatch_log_bytes_read_total 1.048576e+06

The same chunks feed a ``comm.CommFactParser`` per file (its substring pre-filter rejects
almost every line), whose rank / failure facts and the classifier's hints make the incident-window
series of ``collectors.hccl.incident_window`` (which local ranks timed out in which communicator,
and which peers the hints blame, over the last ``incident_window_s``)::

    npu_hccl_rank_timeout_timestamp_seconds{comm="29.1.0.10%enp_60000_0_17",rank="3",npu="1"} 1.7e9

One zero series per category (its usual Ascend code) exists from the start so that ``increase()``
sees the first incident. A category's last-error time is the newest event time; an event whose line
carries no time counts at the time it was read.

Faults keep the counters: when the state file cannot be written (read-only, disk full) counting goes
on in memory, and when every watched log location vanishes the counts stay exported. Either is logged
once (a warning when it starts, info when it ends) and is the collector's ``problem`` meanwhile. A reload
(SIGHUP) keeps the collector when its settings are unchanged, and otherwise hands its counts and offsets in
memory to the new one, so a reload during such a fault never sets a counter back to the stale file's.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any

from collectors.base import NoData, Sample, label_pairs
from collectors.catalogue import HCCL_CATEGORIES
from collectors.hccl.classify import DEFAULT_WINDOW_S, Event, StreamClassifier
from collectors.hccl.comm import CommFactParser
from collectors.hccl.hints import Hint
from collectors.hccl.incident_window import IncidentWindow
from collectors.hccl.tail import DEFAULT_BYTE_BUDGET, LogTailer

__all__ = ["PRIMARY_CODES", "HcclLogCollector", "HintSummary", "samples_from_counts"]

log = logging.getLogger(__name__)

COLLECTOR_NAME = "hccl_logs"
RING_SIZE = 1000
DEFAULT_INCIDENT_WINDOW_S = 3600.0

# The code each category is usually reported under: pre-created at zero.
PRIMARY_CODES: dict[str, str] = {
    "exec_timeout": "EI0002",
    "connect_timeout": "EI0006",
    "rendezvous_timeout": "EI0015",
    "roce_cqe": "EI0013",
    "sdma": "EI0012",
    "dispatch": "task_dispatch_failed",
    "watchdog_timeout": "watchdog",
    "stream_sync_timeout": "EE1002",
    "heartbeat": "heartbeat_lost",
    "init": "EJ0001",
    "desync": "EI0005",
    "watchdog_exception": "watchdog_exception",
    "device_oom": "EL0004",
    "aicore": "507035",
    "operator": "operator_error",
    "device_lost": "507010",
    "tcp_store": "tcp_store_error",
    "link": "507056",
    "hbm_ecc": "507053",
    "program_error": "EL0003",
    "config_error": "E13001",
    "other": "EI9999",
}


@dataclass(frozen=True)
class HintSummary:
    """A culprit hint seen in recent events, with how often and when last."""

    kind: str
    value: str
    count: int
    last_timestamp: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "count": self.count,
                "last_timestamp": self.last_timestamp}


def samples_from_counts(counts: dict[tuple[str, str], int], last_seen: dict[str, float],
                        bytes_read: int) -> list[Sample]:
    """Catalogue samples for cumulative counts; pure."""
    totals = dict.fromkeys(((code, cat) for cat, code in PRIMARY_CODES.items()), 0)
    totals.update(counts)
    samples = [
        Sample("npu_hccl_errors_total", label_pairs(code=code, category=category), float(value))
        for (code, category), value in sorted(totals.items(), key=lambda item: (item[0][1], item[0][0]))
    ]
    samples.extend(
        Sample("npu_hccl_last_error_timestamp_seconds", label_pairs(category=category), float(ts))
        for category, ts in sorted(last_seen.items())
    )
    samples.append(Sample("npuwatch_log_bytes_read_total", (), float(bytes_read)))
    return samples


class HcclLogCollector:
    """Scheduled by the agent (not a tool ``Source``): ``collect()`` every interval."""

    name = COLLECTOR_NAME

    def __init__(
        self,
        paths: Sequence[str | PathLike[str]] | None = None,
        globs: Sequence[str] | None = None,
        kernel_log: str | PathLike[str] | None = None,
        state_file: str | PathLike[str] | None = None,
        *,
        first_start_window_s: float = 3600.0,
        byte_budget: int = DEFAULT_BYTE_BUDGET,
        clock: Callable[[], float] = time.time,
        dedup_window_s: float = DEFAULT_WINDOW_S,
        ring_size: int = RING_SIZE,
        incident_window_s: float = DEFAULT_INCIDENT_WINDOW_S,
        replaces: HcclLogCollector | None = None,
    ) -> None:
        """``replaces``: the collector of the config before a reload; its counts and offsets in memory are
        taken over, not the state file's, which is stale while it cannot be written (counters never go down)."""
        self.clock = clock
        self.dedup_window_s = dedup_window_s
        carried = None if replaces is None else replaces.tailer.snapshot()
        self.tailer: LogTailer = LogTailer(paths, globs, kernel_log, state_file,
                                           first_start_window_s=first_start_window_s, byte_budget=byte_budget,
                                           clock=clock, carried=carried)
        self._streams: dict[str, StreamClassifier] = {}
        self._comm_parsers: dict[str, CommFactParser] = {}
        self.incidents = IncidentWindow(incident_window_s)
        self._events: deque[tuple[float, Event]] = deque(maxlen=ring_size)
        self._hints: deque[tuple[float, Hint]] = deque(maxlen=ring_size)
        self.counts: dict[tuple[str, str], int] = {}
        self.last_seen: dict[str, float] = {}
        self._locations_missing: str | None = None
        self._state_warned = False
        self._unreadable_warned: set[str] = set()
        if self.tailer.state_error:
            log.warning("%s", self.tailer.state_error)
        self._restore(self.tailer.extra)

    # ------------------------------------------------------------ state

    def _restore(self, extra: dict[str, Any]) -> None:
        try:
            for code, category, value in extra.get("counts", []):
                if category in HCCL_CATEGORIES:
                    self.counts[(str(code), str(category))] = int(value)
            for category, ts in dict(extra.get("last_seen", {})).items():
                if category in HCCL_CATEGORIES:
                    self.last_seen[str(category)] = float(ts)
        except (TypeError, ValueError, AttributeError):
            self.counts, self.last_seen = {}, {}
        self.incidents.restore(extra.get("incidents") or {})

    def _save_extra(self) -> None:
        self.tailer.extra = {
            "counts": [[code, category, value] for (code, category), value in sorted(self.counts.items())],
            "last_seen": dict(sorted(self.last_seen.items())),
            "incidents": self.incidents.state(),
        }
        for key, stream in self._streams.items():
            self.tailer.file_meta(key)["classifier"] = stream.state()

    @property
    def state_error(self) -> str | None:
        """Why the state file could not be used (counts then live in memory only)."""
        return self.tailer.state_error

    @property
    def errors(self) -> list[str]:
        """Problems of the last cycle worth reporting: state file, unreadable logs."""
        problems = list(self.tailer.read_errors)
        if self._locations_missing:
            problems.insert(0, self._locations_missing)
        if self.tailer.state_error:
            problems.insert(0, self.tailer.state_error)
        return problems

    @property
    def problem(self) -> str | None:
        """Why this collector is degraded now while its counters stay exported (None: all well):
        the state file is unusable, or no watched log location exists any more."""
        problems = [p for p in (self.tailer.state_error, self._locations_missing, self.tailer.discovery_capped) if p]
        unreadable = self.tailer.read_errors
        if unreadable:
            more = f" (+{len(unreadable) - 1} more)" if len(unreadable) > 1 else ""
            problems.append(f"cannot read {unreadable[0]}{more}: HCCL errors there are not counted")
        return "; ".join(problems) or None

    # ------------------------------------------------------------ collecting

    def _stream(self, key: str, source: str, ref_time: float, restarted: bool) -> StreamClassifier:
        stream = self._streams.get(key)
        if stream is None or restarted:
            saved = None if restarted else self.tailer.file_meta(key).get("classifier")
            stream = StreamClassifier.from_state(saved, source=source, window_s=self.dedup_window_s)
            self._streams[key] = stream
        stream.source = source
        stream.ref_time = ref_time
        return stream

    def _comm_parser(self, key: str, ref_time: float, restarted: bool) -> CommFactParser:
        parser = self._comm_parsers.get(key)
        if parser is None or restarted:
            parser = self._comm_parsers[key] = CommFactParser(ref_time)
        parser.ref_time = ref_time
        return parser

    def collect(self) -> list[Sample]:
        """Read, classify and count new log lines; the catalogue samples of the running totals
        and of the incident window.

        Raises ``NoData`` when no configured log location exists and nothing was ever counted.
        """
        now = self.clock()
        for chunk in self.tailer.poll():
            stream = self._stream(chunk.key, chunk.path, chunk.ref_time, chunk.restarted)
            events: list[Event] = []
            hints: list[tuple[Hint, str]] = []  # with the line that printed each: it says how it blames
            feed = stream.feed
            for line in chunk.lines:
                new_events, new_hints = feed(line)
                if new_events:
                    events.extend(new_events)
                if new_hints:
                    hints.extend((hint, line) for hint in new_hints)
            events.extend(stream.flush())
            for event in events:
                self._record(event, now)
            self._hints.extend((now, hint) for hint, _ in hints)
            # Blocks are joined within a chunk, as the classifier flushes its own at a chunk's end.
            parser = self._comm_parser(chunk.key, chunk.ref_time, chunk.restarted)
            facts = parser.feed_lines(chunk.lines)
            facts.extend(parser.finish())
            self.incidents.feed(chunk.key, facts, hints, now)
        live = self.tailer.tracked_keys()
        for key in [k for k in self._streams if k not in live]:
            del self._streams[key]
        for key in [k for k in self._comm_parsers if k not in live]:
            del self._comm_parsers[key]
        for key in [k for k in self.incidents.stream_keys() if k not in live]:
            self.incidents.forget_stream(key)
        self._save_extra()
        self.tailer.commit()
        self._report_state()
        self._report_unreadable()
        roots_exist = self.tailer.files_seen > 0 or self.tailer.roots_exist()
        if not roots_exist and not self.counts:
            self._locations_missing = None
            raise NoData("no CANN/HCCL log directory on this node")
        self._report_locations(roots_exist)
        return [*samples_from_counts(self.counts, self.last_seen, self.tailer.bytes_read_total),
                *self.incidents.samples(now)]

    def _report_state(self) -> None:
        """Log once when the state file becomes unusable and once when it works again."""
        error = self.tailer.state_error
        if error and not self._state_warned:
            log.warning("%s; HCCL error counts and log offsets are kept in memory only "
                        "(a restart would count recent errors again)", error)
        elif not error and self._state_warned:
            log.info("state file %s is written again", self.tailer.state_path)
        self._state_warned = bool(error)

    def _report_unreadable(self) -> None:
        """Warn once per path that cannot be read (or a walk that was cut short); info when it reads again."""
        now_bad = set(self.tailer.read_errors)
        if self.tailer.discovery_capped:
            now_bad.add(self.tailer.discovery_capped)
        for problem in sorted(now_bad - self._unreadable_warned):
            log.warning("HCCL log scan: %s", problem)
        for problem in sorted(self._unreadable_warned - now_bad):
            log.info("HCCL log scan: no longer failing: %s", problem)
        self._unreadable_warned = now_bad

    def _report_locations(self, roots_exist: bool) -> None:
        """Log once when every watched log location has vanished (counters stay) and when one is back."""
        if not roots_exist and self._locations_missing is None:
            where = ", ".join(str(p) for p in self.tailer.paths) or "(none configured)"
            self._locations_missing = f"no watched log location exists any more: {where}"
            log.warning("%s; keeping the %d HCCL errors counted so far", self._locations_missing,
                        sum(self.counts.values()))
        elif roots_exist and self._locations_missing is not None:
            log.info("watched log location back: %s", ", ".join(str(p) for p in self.tailer.paths))
            self._locations_missing = None

    def _record(self, event: Event, now: float) -> None:
        key = (event.code, event.category)
        self.counts[key] = self.counts.get(key, 0) + 1
        when = event.timestamp if event.timestamp is not None else now
        if when > self.last_seen.get(event.category, float("-inf")):
            self.last_seen[event.category] = when
        self._events.append((now, event))

    # ------------------------------------------------------------ for diagnose

    def recent_events(self, window_s: float) -> list[Event]:
        """Counted events of the last ``window_s`` seconds (by their own time, else read time)."""
        cutoff = self.clock() - window_s
        return [event for read_at, event in self._events
                if (event.timestamp if event.timestamp is not None else read_at) >= cutoff]

    def hints(self, window_s: float | None = None) -> list[HintSummary]:
        """Culprit hints from recent lines, most frequent first."""
        cutoff = None if window_s is None else self.clock() - window_s
        counter: Counter[tuple[str, str]] = Counter()
        last: dict[tuple[str, str], float | None] = {}
        for read_at, hint in self._hints:
            when = hint.timestamp if hint.timestamp is not None else read_at
            if cutoff is not None and when < cutoff:
                continue
            key = (hint.kind, hint.value)
            counter[key] += 1
            previous = last.get(key)
            if hint.timestamp is not None and (previous is None or hint.timestamp > previous):
                last[key] = hint.timestamp
            else:
                last.setdefault(key, None)
        return [HintSummary(kind, value, count, last[(kind, value)])
                for (kind, value), count in counter.most_common()]
