"""Classify the lines of one CANN / HCCL log stream into counted error incidents (pure: text in, events out).

Each line is judged by ``rules.classify_line``; this module dates lines that print no time from the
block around them, joins hints broken over lines and the EI0015 root's rank lists, and counts one
incident once (dedup by code, by category for two codes of one category and for synthetic codes, within ``window_s`` or
``block_lines``). How dating and dedup decide: docs/hccl-log-formats.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from collectors.hccl.codes import is_ascend_code
from collectors.hccl.hints import Hint, line_hints
from collectors.hccl.lines import BLOCK_LINES, line_rank_device
from collectors.hccl.rendezvous import ROOT_TRIGGERS, absent_ranks, parse_rendezvous
from collectors.hccl.rules import analyse_line

__all__ = ["DEFAULT_BLOCK_LINES", "DEFAULT_WINDOW_S", "Event", "StreamClassifier"]

DEFAULT_WINDOW_S = 60.0
DEFAULT_BLOCK_LINES = BLOCK_LINES


@dataclass(frozen=True)
class Event:
    """One counted error incident."""

    code: str
    category: str
    timestamp: float | None
    text: str
    source: str = ""
    line_no: int = 0
    hints: tuple[Hint, ...] = ()
    rank: int | None = None  # the rank that printed it, where the line says (``[rank9]:``, ``RankID:9``)
    device: int | None = None  # its device, where the line says (``Device:3``, ``device(chipId:3, ...)``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "category": self.category,
            "timestamp": self.timestamp,
            "text": self.text,
            "source": self.source,
            "line_no": self.line_no,
            "hints": [{"kind": h.kind, "value": h.value} for h in self.hints],
        }


# ---------------------------------------------------------------- stream state

_LOCATION_START = "Cluster Exception Location"
# A stream synchronize that fails after one of these in the same failure is its symptom: the device error leads.
_SYNC_CAUSES = tuple(prefix + category for category in ("aicore", "device_oom", "operator", "sdma", "device_lost",
                                                        "link", "hbm_ecc") for prefix in "!~")
_MAX_PENDING_LINES = 8
_RECENT_COUNTED = 64


@dataclass
class _Held:
    """A matched line whose event is not final yet: its time is unknown or it is provisional."""

    line_no: int
    matches: tuple[tuple[str, str], ...]
    text: str
    hints: tuple[Hint, ...]
    provisional: bool
    indented: bool
    timestamp: float | None = None
    line: str = ""  # the line as read, prefixes and all: the rank and device it names are read when it counts


@dataclass
class _RootConnections:
    """EI0015 root side: the connected-rank lines printed after a topo exchange timeout."""

    started_line: int
    lines_expected: int
    need: int | None = None
    lines_seen: int = 0
    connected: set[int] = field(default_factory=set)

    def missing(self) -> list[int] | None:
        """The ranks that never connected, once every list line and the rank count are known."""
        if self.need is None or self.lines_seen < self.lines_expected:
            return None
        absent = absent_ranks(self.need, self.connected)
        return None if absent is None else list(absent)


@dataclass
class StreamClassifier:
    """Classifies the lines of one file or stream in order, joining blocks and deduplicating.

    ``feed(line)`` returns the events that became final with that line (a line's own events may
    come back with a later line, see docs/hccl-log-formats.md) and the hints found on that line (hints
    are not deduplicated; callers aggregate them). ``flush()`` finishes every held event; it ends
    ``feed_lines`` by default. ``state()`` / ``from_state()`` carry the dedup memory across agent
    restarts (held events are not part of it: flush first).
    """

    source: str = ""
    ref_time: float | None = None
    window_s: float = DEFAULT_WINDOW_S
    block_lines: int = DEFAULT_BLOCK_LINES
    line_no: int = 0
    duplicates: int = 0
    _last_ts: float | None = None
    _last_ts_line: int = -(10**9)
    _counted: dict[str, tuple[float | None, int]] = field(default_factory=dict)
    _recent: deque[tuple[float | None, int]] = field(default_factory=lambda: deque(maxlen=_RECENT_COUNTED))
    _untimed: list[_Held] = field(default_factory=list)
    _provisional: list[_Held] = field(default_factory=list)
    _pending: str = ""
    _pending_lines: int = 0
    _root: _RootConnections | None = None

    def feed(self, line: str) -> tuple[list[Event], list[Hint]]:
        self.line_no += 1
        extra_hints: list[Hint] = []
        if self._pending:
            extra_hints = self._continue_pending(line)
        result = analyse_line(line, self.ref_time)
        if result is None:
            return [], extra_hints
        line_no = self.line_no
        events: list[Event] = []
        ts = result.timestamp
        later: list[_Held] = []
        if ts is not None:
            later = self._settle_untimed(events, (ts, line_no))
            self._close_provisional(events, ts, line_no)
            self._last_ts, self._last_ts_line = ts, line_no
        else:
            self._expire(events, line_no)
        if _LOCATION_START in line and not any(k == "exception_location" for k, _ in result.hints):
            self._pending = line[line.index(_LOCATION_START):].strip()
            self._pending_lines = 0
        hint_ts = ts if ts is not None else self._inherited_ts(line_no)
        hints = extra_hints + [Hint(kind, value, hint_ts, self.source) for kind, value in result.hints]
        hints.extend(self._rendezvous_hints(line, line_no, hint_ts))
        if result.matches:
            held = _Held(line_no, result.matches, result.text, tuple(hints), result.provisional,
                         result.indented, ts, line)
            if ts is None:
                self._untimed.append(held)
            else:
                self._settle(events, held)
        for held in later:
            self._settle(events, held)
        return events, hints

    def feed_lines(self, lines: Iterable[str], flush: bool = True) -> tuple[list[Event], list[Hint]]:
        events: list[Event] = []
        hints: list[Hint] = []
        for line in lines:
            new_events, new_hints = self.feed(line)
            if new_events:
                events.extend(new_events)
            if new_hints:
                hints.extend(new_hints)
        if flush:
            events.extend(self.flush())
        return events, hints

    def flush(self) -> list[Event]:
        """Finish every held event (end of the input): the events that count."""
        events: list[Event] = []
        self._settle_untimed(events, None)
        self._close_provisional(events, None, None)
        return events

    # ------------------------------------------------------------ holding and settling

    def _inherited_ts(self, line_no: int) -> float | None:
        if self._last_ts is not None and line_no - self._last_ts_line <= self.block_lines:
            return self._last_ts
        return None

    def _block_ts(self, held: _Held, after: tuple[float, int] | None) -> tuple[float | None, bool]:
        """(time, whether it is N's) of a held untimed line, from P (the last timestamped line) and
        N (``after``)."""
        before = self._last_ts if held.line_no - self._last_ts_line <= self.block_lines else None
        if after is None or after[1] - held.line_no > self.block_lines:
            return before, False
        if before is None:
            return after[0], True
        if abs(after[0] - before) <= self.window_s or held.indented:
            return before, False
        if after[1] - held.line_no < held.line_no - self._last_ts_line:
            return after[0], True
        return before, False

    def _settle_untimed(self, events: list[Event], after: tuple[float, int] | None) -> list[_Held]:
        """Date and settle the held untimed lines; those dated by ``after`` are returned unsettled,
        to follow the events of the line that carries their time."""
        later: list[_Held] = []
        for held in self._untimed:
            held.timestamp, from_next = self._block_ts(held, after)
            if from_next:
                later.append(held)
            else:
                self._settle(events, held)
        self._untimed.clear()
        return later

    def _expire(self, events: list[Event], line_no: int) -> None:
        """Settle what can no longer change: held lines more than ``block_lines`` back."""
        if self._untimed and line_no - self._untimed[0].line_no > self.block_lines:
            expired = [h for h in self._untimed if line_no - h.line_no > self.block_lines]
            self._untimed = [h for h in self._untimed if line_no - h.line_no <= self.block_lines]
            for held in expired:
                held.timestamp = self._block_ts(held, None)[0]
                self._settle(events, held)
        if self._provisional:
            self._close_provisional(events, None, line_no)

    def _settle(self, events: list[Event], held: _Held) -> None:
        if held.provisional:
            if self._near_counted(held.timestamp, held.line_no):
                self.duplicates += 1
            else:
                self._provisional.append(held)
            return
        for code, category in held.matches:
            if self._count(code, category, held.timestamp, held.line_no):
                events.append(self._event(held, code, category))
            else:
                self.duplicates += 1

    def _close_provisional(self, events: list[Event], ts: float | None, line_no: int | None) -> None:
        """Decide the provisional events whose block is over by ``ts`` / ``line_no`` (None: all)."""
        keep: list[_Held] = []
        for held in self._provisional:
            over = line_no is None or line_no - held.line_no > self.block_lines or (
                ts is not None and held.timestamp is not None and abs(ts - held.timestamp) > self.window_s)
            if not over:
                keep.append(held)
                continue
            code, category = held.matches[0]
            if not self._near_counted(held.timestamp, held.line_no) and self._count(
                    code, category, held.timestamp, held.line_no):
                events.append(self._event(held, code, category))
            else:
                self.duplicates += 1
        self._provisional = keep

    def _event(self, held: _Held, code: str, category: str) -> Event:
        rank, device = line_rank_device(held.line)
        return Event(code, category, held.timestamp, held.text, self.source, held.line_no, held.hints, rank, device)

    # ------------------------------------------------------------ hints spread over lines

    def _continue_pending(self, line: str) -> list[Hint]:
        """A ``Cluster Exception Location[IP/ID]:[...]`` value broken over lines."""
        self._pending += line.strip()  # a value wrapped mid-token: join without a space
        self._pending_lines += 1
        found = line_hints(self._pending)
        located = [Hint(k, v, self._last_ts, self.source) for k, v in found if k == "exception_location"]
        if located or self._pending_lines >= _MAX_PENDING_LINES:
            self._pending, self._pending_lines = "", 0
        return located

    def _rendezvous_hints(self, text: str, line_no: int, ts: float | None) -> list[Hint]:
        """Missing ranks from the EI0015 root-side lines (the agent-side list is a line hint)."""
        if not any(trigger in text for trigger in ROOT_TRIGGERS):
            return []
        root = self._root
        if root is not None and line_no - root.started_line > self.block_lines:
            root = self._root = None
        said = parse_rendezvous(text)
        if root is None or (said.list_lines is not None and root.lines_seen):
            root = self._root = _RootConnections(line_no, 1)
        if said.list_lines is not None:
            root.lines_expected = said.list_lines
        if said.need is not None:
            root.need = said.need
        if said.connected is not None:
            root.lines_seen += 1
            root.connected.update(said.connected)
        missing = root.missing()
        if missing is None:
            return []
        self._root = None
        return [Hint("missing_rank", str(rank), ts, self.source) for rank in missing]

    # ------------------------------------------------------------ dedup

    def _near(self, prev: tuple[float | None, int] | None, ts: float | None, line_no: int) -> bool:
        if prev is None:
            return False
        prev_ts, prev_line = prev
        if ts is not None and prev_ts is not None:
            return abs(ts - prev_ts) <= self.window_s
        return 0 <= line_no - prev_line <= self.block_lines

    def _near_counted(self, ts: float | None, line_no: int) -> bool:
        """Whether any counted event (any code) is near: a provisional line belongs to its incident."""
        return any(self._near(prev, ts, line_no) or self._near((ts, line_no), prev[0], prev[1])
                   for prev in (*self._recent, *self._counted.values()))

    def _count(self, code: str, category: str, ts: float | None, line_no: int) -> bool:
        ascend = is_ascend_code(code)
        key = code if ascend else "~" + category
        if self._near(self._counted.get(key), ts, line_no):
            return False
        if category == "stream_sync_timeout" and any(
                self._near(self._counted.get(cause), ts, line_no) for cause in _SYNC_CAUSES):
            return False
        # One failure printed under two codes of one category (507046 and EE1002) counts once, and a phrasing
        # after its code is part of it; two unknown codes are two unknowns. (A code after a phrasing still
        # counts: triage and the alerts want the code.)
        if (not ascend or category != "other") and self._near(self._counted.get("!" + category), ts, line_no):
            return False
        self._counted[key] = (ts, line_no)
        self._recent.append((ts, line_no))
        if ascend:
            self._counted["!" + category] = (ts, line_no)
        return True

    def state(self) -> dict[str, Any]:
        """JSON-able dedup memory (line numbers, last counted time per key)."""
        return {
            "line_no": self.line_no,
            "last_ts": self._last_ts,
            "last_ts_line": self._last_ts_line,
            "counted": {key: [ts, line] for key, (ts, line) in self._counted.items()},
        }

    @classmethod
    def from_state(cls, state: dict[str, Any] | None, **kwargs: Any) -> StreamClassifier:
        """Rebuild from ``state()``; a missing or malformed state gives a fresh classifier."""
        stream = cls(**kwargs)
        if not isinstance(state, dict):
            return stream
        try:
            stream.line_no = int(state.get("line_no", 0))
            last_ts = state.get("last_ts")
            stream._last_ts = None if last_ts is None else float(last_ts)
            stream._last_ts_line = int(state.get("last_ts_line", -(10**9)))
            counted = state.get("counted", {})
            stream._counted = {
                str(key): (None if value[0] is None else float(value[0]), int(value[1]))
                for key, value in counted.items()
            }
        except (TypeError, ValueError, AttributeError, IndexError, KeyError):
            return cls(**kwargs)
        return stream
