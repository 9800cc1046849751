"""Classify CANN / HCCL log lines into error events (pure: text in, events out).

What it reads (one line at a time, any of these mixed in one stream):

- plog / slog: ``[ERROR] HCCL(123,python):2024-03-28-10:25:50.589.610 [file.cc:872][123]...``
  (also ``[ERROR]HCCL(...)`` without the space, ``[ERROR] 2025-06-25-10:45:23 (PID:..)`` PTA lines);
- Ascend error-code blocks ``EI0002: [PID: 7277] 2024-11-28-11:59:30.645.648 ...``,
  ``EI0006: 2024-08-05-18:15:21.270.506 ...``, ``[PID: n] <ts> Execution Error ROCE CQE(EI0013): ...``,
  a code glued to another line (``...Ascend Error Message:EI0002: ...``,
  ``...error code is 507048[Error]:``) and their indented continuation lines;
- torch_npu watchdog lines ``[rank1]:[E324 13:00:25.428029551 file:574] ... Watchdog caught
  collective operation timeout: WorkHCCL(...)`` (glog time: the year comes from ``ref_time``);
- Ray / torchrun prefixes ``(RayWorker pid=123) ``, ``[default0]:``, ``[rank1]:`` (stripped first);
- kernel log / dmesg ``[ascend] [ERROR] [drv_soft_fault] ... Heartbeat lost! (device=1; ...)``;
- device logs (``debug/device-N/*.log``), which use the plog line format.

Every recognised error is an :class:`Event` with a ``code`` (the Ascend code when the line prints
one, ``EI0002``/``EE1002``/``507048``; else a stable synthetic code such as ``notify_wait``,
``socket_timeout``, ``watchdog``, ``heartbeat_lost``, ``cqe_error``), a ``category`` from
``catalogue.HCCL_CATEGORIES``, a ``timestamp`` (epoch seconds, local time as the node prints it;
``None`` for dmesg relative times and for lines with no time near them) and culprit hints
(:class:`Hint`: ``remote_rank``, ``crimer_rank``, ``exception_location``, ``dst_rank``,
``link_peer``, ``peer``, ``device``).

Speed: plog ``[INFO]``/``[DEBUG]``/``[EVENT]`` lines are rejected by one ``startswith`` and one
substring test; every other line must contain one of a few tokens (``rror``, ``imeout``, ``EI``...)
before any regular expression runs.

Incident dedup (``StreamClassifier``; one instance per file or stream):

1. A line without a timestamp of its own takes the timestamp of the latest timestamped line seen
   in the same stream if that line is at most ``block_lines`` (64) lines above it; these are the
   continuation lines of one block. Only lines that pass the token pre-filter update it.
2. The dedup key of an event is its Ascend code when it has one (EIxxxx/EJxxxx/EExxxx/5070xx);
   for a synthetic code it is its category, so the several plog phrasings of one incident
   (``[TaskExecStage][Timeout]`` x3, ``taskType[Notify Wait]``) count once.
3. An event is a duplicate, and not counted, when the previous counted event with the same key
   in the same stream is "near": both have timestamps and they are at most ``window_s`` (60 s)
   apart, or one of them has none and they are at most ``block_lines`` lines apart.
4. A synthetic event is also a duplicate when a counted Ascend-coded event of the same category is
   near it (an ``EI0002`` block followed by its plog lines counts as ``EI0002`` once). The reverse
   is not undone: a counter never goes down, so plog lines printed *before* their EI block count
   once under their synthetic code and the block counts once under its code.
5. Different codes are different incidents: an ``EI0002`` block with a ``507048`` wrapper counts
   ``EI0002`` once and ``507048`` once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ASCEND_CODE_CATEGORIES",
    "Event",
    "Hint",
    "LineResult",
    "StreamClassifier",
    "category_of_code",
    "classify_line",
    "parse_timestamp",
]

MAX_TEXT = 300
DEFAULT_WINDOW_S = 60.0
DEFAULT_BLOCK_LINES = 64

# Ascend codes whose category is known; any other E[IJE]dddd code is "other".
ASCEND_CODE_CATEGORIES: dict[str, str] = {
    "EI0002": "exec_timeout",
    "EI0006": "connect_timeout",
    "EI0015": "rendezvous_timeout",
    "EI0013": "roce_cqe",
    "EI0012": "sdma",
    "EE1002": "stream_sync_timeout",
    "507046": "stream_sync_timeout",
    "507048": "stream_sync_timeout",
    "EJ0001": "init",
    "EJ0002": "init",
    "EJ0003": "init",  # bind IP/port failed
    "EJ0004": "init",  # check ip
    "EI0009": "init",
    "EI0005": "desync",
    "EI0008": "desync",
}


def category_of_code(code: str) -> str:
    """Category of an Ascend code; unknown E[IJE]dddd codes are ``other``."""
    return ASCEND_CODE_CATEGORIES.get(code, "other")


@dataclass(frozen=True, slots=True)
class Hint:
    """A culprit hint: which peer, rank or device the log blames."""

    kind: str
    value: str
    timestamp: float | None = None
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "timestamp": self.timestamp, "source": self.source}


@dataclass(frozen=True, slots=True)
class Event:
    """One counted error incident."""

    code: str
    category: str
    timestamp: float | None
    text: str
    source: str = ""
    line_no: int = 0
    hints: tuple[Hint, ...] = ()

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


@dataclass(frozen=True, slots=True)
class LineResult:
    """What one line says: its own timestamp, (code, category) matches and (kind, value) hints."""

    timestamp: float | None
    matches: tuple[tuple[str, str], ...]
    hints: tuple[tuple[str, str], ...]
    text: str


# ---------------------------------------------------------------- pre-filter

_QUIET_LEVELS = ("[INFO]", "[DEBUG]", "[EVENT]", "[TRACE]")
# Every rule below needs one of these tokens somewhere in the line.
_TOKENS = ("rror", "RROR", "imeout", "IMEOUT", "ime out", "imes out", "EI", "EJ", "EE", "50704",
           "eartbeat", "otify", "OTIFY", "cqe", "CQE", "tuck", "ail", "nconsistent", "crimer",
           "dstRank", "emoteRank", "Cluster Exception")


_INTERESTING_RE = re.compile("|".join(re.escape(token) for token in _TOKENS))


def _interesting(line: str) -> bool:
    return _INTERESTING_RE.search(line) is not None


# ---------------------------------------------------------------- timestamps

_PREFIX_RE = re.compile(r"(?:\([\w.:-]+ pid=\d+[^)]*\)\s?|\[(?:default|rank)\d+\]:\s?)")
_PLOG_TS_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)-(\d\d):(\d\d):(\d\d)(?:\.(\d{3})\.(\d{3}))?")
_GLOG_TS_RE = re.compile(r"^\[?[EWIF](\d{3,4}) (\d\d):(\d\d):(\d\d)(?:\.(\d+))?")
_SYSLOG_TS_RE = re.compile(r"^([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) ")
_DMESG_T_RE = re.compile(r"^\[[A-Z][a-z]{2} ([A-Z][a-z]{2}) +(\d{1,2}) (\d\d):(\d\d):(\d\d) (\d{4})\]")
_MONTHS = {m: i for i, m in enumerate(
    ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), start=1)}


def _local_epoch(year: int, month: int, day: int, clock: tuple[int, int, int]) -> float | None:
    hh, mm, ss = clock
    if not (1 <= month <= 12 and 1 <= day <= 31 and hh < 24 and mm < 60 and ss < 62):
        return None
    try:
        return time.mktime((year, month, day, hh, mm, ss, 0, 0, -1))
    except (OverflowError, ValueError):
        return None


def _with_year(month: int, day: int, clock: tuple[int, int, int], ref_time: float | None) -> float | None:
    """A month/day time stamped with the year of ``ref_time`` (a file's mtime)."""
    if ref_time is None:
        return None
    year = time.localtime(ref_time).tm_year
    value = _local_epoch(year, month, day, clock)
    # A December line in a file last written in January belongs to the year before.
    if value is not None and value > ref_time + 2 * 86400:
        value = _local_epoch(year - 1, month, day, clock)
    return value


def parse_timestamp(text: str, ref_time: float | None = None) -> float | None:
    """Epoch seconds of the time printed on a line (prefixes already stripped), or None.

    plog ``YYYY-MM-DD-HH:MM:SS.mmm.uuu`` anywhere on the line (the first one: later ones are
    payload such as ``timeStamp:[...]``); glog ``E0324 13:00:25.428`` / ``[E324 13:00:25...``,
    syslog ``Aug  1 08:38:31`` and ``dmesg -T`` at the start. Year-less forms need ``ref_time``.
    dmesg relative ``[ 1197.584409]`` times give None.
    """
    match = _PLOG_TS_RE.search(text)
    if match is not None:
        y, mo, d, hh, mi, ss, ms, us = match.groups()
        value = _local_epoch(int(y), int(mo), int(d), (int(hh), int(mi), int(ss)))
        if value is not None and ms is not None:
            value += int(ms) / 1e3 + int(us) / 1e6
        return value
    match = _GLOG_TS_RE.match(text)
    if match is not None:
        digits, hh, mi, ss, frac = match.groups()
        month, day = (int(digits[0]), int(digits[1:])) if len(digits) == 3 else (int(digits[:2]),
                                                                                  int(digits[2:]))
        value = _with_year(month, day, (int(hh), int(mi), int(ss)), ref_time)
        if value is not None and frac:
            value += float("0." + frac)
        return value
    match = _SYSLOG_TS_RE.match(text)
    if match is not None and match.group(1) in _MONTHS:
        mon, d, hh, mi, ss = match.groups()
        return _with_year(_MONTHS[mon], int(d), (int(hh), int(mi), int(ss)), ref_time)
    match = _DMESG_T_RE.match(text)
    if match is not None and match.group(1) in _MONTHS:
        mon, d, hh, mi, ss, y = match.groups()
        return _local_epoch(int(y), _MONTHS[mon], int(d), (int(hh), int(mi), int(ss)))
    return None


# ---------------------------------------------------------------- rules

_ASCEND_CODE_RE = re.compile(r"(?<![A-Za-z0-9])(E[IJE]\d{4})(?=\s*[:)\]])")
_RUNTIME_CODE_RE = re.compile(r"(?:error code is|runtime result =|error code[:=])\s*(50704[68])(?!\d)")

# (compiled pattern, synthetic code, category); the first match per category wins.
_SYNTHETIC_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = tuple(
    (re.compile(pattern), code, category)
    for pattern, code, category in (
        # exec_timeout
        (r"fftsplus task timeout|reason=\[fftsplus timeout\]", "fftsplus_timeout", "exec_timeout"),
        (r"stuck notify", "stuck_notify", "exec_timeout"),
        (r"\[TaskExecStage\]\[Timeout\]", "task_exec_timeout", "exec_timeout"),
        (r"Notify Wait|NOTIFY WAIT|[Nn]otify wait (?:execute failed|time ?out)"
         r"|wait execution of the Notify register times out", "notify_wait", "exec_timeout"),
        (r"(?i)dispatch\w*\s+time ?out", "dispatch_timeout", "exec_timeout"),
        # rendezvous_timeout (before the generic socket timeouts)
        (r"topo\w*\s*exchange\w*.*?time ?out", "topo_exchange_timeout", "rendezvous_timeout"),
        # connect_timeout
        (r"socket establish timeout|[Gg]et(?:ting)? socket time(?:s)? ?out|Wait timeout for sockets"
         r"|socket time ?out", "socket_timeout", "connect_timeout"),
        (r"(?i)p2p (?:connect\w* )?time ?out|connected p2p timeout", "p2p_connect_timeout",
         "connect_timeout"),
        (r"LINK_ERROR_INFO", "link_error", "connect_timeout"),
        (r"Transport init error|\[InitChannelStage\]\[Timeout\]", "transport_init_timeout",
         "connect_timeout"),
        # roce_cqe
        (r"(?i)error cqe|cqe error|CQE status", "cqe_error", "roce_cqe"),
        # sdma
        (r"(?i)sdma error|SDMA memory copy task exception", "sdma_error", "sdma"),
        # watchdog_timeout
        (r"Watchdog caught collective operation timeout", "watchdog", "watchdog_timeout"),
        # stream_sync_timeout (texts of EE1002 / 507046 / 507048 printed without the code)
        (r"Stream synchronize timeout|stream sync timeout"
         r"|all tasks in the specified stream are not completed", "stream_sync_timeout",
         "stream_sync_timeout"),
        (r"execution of the internal task times out", "internal_task_timeout", "stream_sync_timeout"),
        # heartbeat
        (r"Heartbeat lost!", "device_heartbeat_lost", "heartbeat"),
        (r"Heartbeat Lost Occurred|crimer rank.*status\[LOST\]", "heartbeat_lost", "heartbeat"),
        (r"Stuck Occurred", "rank_stuck", "heartbeat"),
        # init
        (r"listen on ip\[.*\bfail|(?i:port\[\d+\]\s*(?:listen|bind)\w* fail)", "port_listen_failed", "init"),
        (r"Failed to initialize the HCCP process", "hccp_init_failed", "init"),
        (r"rdma init fail", "rdma_init_failed", "init"),
        (r"error in init_hcclComm", "comm_init_failed", "init"),
        # desync
        (r"(?i)tls\b.*inconsistent|inconsistent.*\btls", "tls_inconsistent", "desync"),
    )
)

_SKIP_VALUES = frozenset({"", "unknown", "local", "4294967295", "-1", "null", "none", "NA"})
_HINT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[Rr]emote ?[Rr]ank(?:\s*:\s*\[?|\s*\[)\s*([^\]\s,;)]+)"), "remote_rank"),
    (re.compile(r"crimer rank \[([^\]]+)\]"), "crimer_rank"),
    (re.compile(r"Cluster Exception Location\[IP/ID\]:\[([^\]]*)\]"), "exception_location"),
    (re.compile(r"dstRank \(server ([\d.]+), device ID (\d+)\)"), "dst_rank"),
    (re.compile(r"dstRank\s*[\[:=]\s*(\d+)"), "dst_rank"),
    (re.compile(r"\|\s+(\d{1,3}(?:\.\d{1,3}){3})\((\d+)\)\s+\|"), "link_peer"),
    (re.compile(r"Peer information: server ([\d.]+), device ID (\d+)"), "peer"),
    (re.compile(r"remoteIP\{server\[[^\]]*\],deviceId\[[^\]]*\],deviceIp\[([^\]]+)\]"), "peer"),
    (re.compile(r"remoteIpAddr\[([^\]]+)\]"), "peer"),
    (re.compile(r"serverId\[([^\]]+)\], deviceId\[(\d+)\]"), "exception_location"),
    (re.compile(r"Heartbeat lost! \(device=(\d+)"), "device"),
)
_HINT_TRIGGERS = ("emote", "crimer", "Cluster Exception", "dstRank", "|", "Peer information",
                  "serverId[", "(device=")


def _strip_prefixes(line: str) -> str:
    text = line.strip()
    for _ in range(3):
        if not text or text[0] not in "([":
            break
        match = _PREFIX_RE.match(text)
        if match is None:
            break
        text = text[match.end():].lstrip()
    return text


def _hints(text: str) -> tuple[tuple[str, str], ...]:
    if not any(trigger in text for trigger in _HINT_TRIGGERS):
        return ()
    found: list[tuple[str, str]] = []
    for pattern, kind in _HINT_RULES:
        for match in pattern.finditer(text):
            value = "/".join(match.groups())
            if value.strip() not in _SKIP_VALUES and (kind, value) not in found:
                found.append((kind, value))
            if kind == "link_peer":
                break  # a LINK_ERROR_INFO row names the destination first
    return tuple(found)


def _is_advice(text: str) -> bool:
    return text.startswith(("Possible Cause", "Solution", "(Please search"))


def _analyse(line: str, ref_time: float | None) -> LineResult | None:
    """None when the pre-filter rejects the line; else its timestamp, matches and hints."""
    if line.startswith(_QUIET_LEVELS) and "crimer" not in line:
        return None
    if not _interesting(line):
        return None
    text = _strip_prefixes(line)
    if (text.startswith(_QUIET_LEVELS) and "crimer" not in text) or _is_advice(text):
        return None
    matches: list[tuple[str, str]] = []
    for match in _ASCEND_CODE_RE.finditer(text):
        code = match.group(1)
        entry = (code, category_of_code(code))
        if entry not in matches:
            matches.append(entry)
    for match in _RUNTIME_CODE_RE.finditer(text):
        entry = (match.group(1), ASCEND_CODE_CATEGORIES[match.group(1)])
        if entry not in matches:
            matches.append(entry)
    seen_categories = {category for _, category in matches}
    for pattern, code, category in _SYNTHETIC_RULES:
        if category not in seen_categories and pattern.search(text):
            matches.append((code, category))
            seen_categories.add(category)
    if "rendezvous_timeout" in seen_categories:
        # "topo exchange ... get socket timeout" is the rendezvous, not a link setup timeout.
        matches = [m for m in matches if m[1] != "connect_timeout" or _is_ascend_code(m[0])]
    return LineResult(parse_timestamp(text, ref_time), tuple(matches), _hints(text), text[:MAX_TEXT])


def classify_line(line: str, ref_time: float | None = None) -> LineResult | None:
    """Classify one line; None when it says nothing about an error (the common, fast case).

    ``ref_time`` (the file's mtime) supplies the year for glog and syslog timestamps.
    """
    result = _analyse(line, ref_time)
    if result is None or (not result.matches and not result.hints):
        return None
    return result


def _is_ascend_code(code: str) -> bool:
    return code[:1] == "E" or code[:1].isdigit()


# ---------------------------------------------------------------- stream state

_LOCATION_START = "Cluster Exception Location"
_MAX_PENDING_LINES = 8


@dataclass(slots=True)
class StreamClassifier:
    """Classifies the lines of one file or stream in order, joining blocks and deduplicating.

    ``feed(line)`` returns the newly counted events and the hints found on that line (hints are
    not deduplicated; callers aggregate them). ``state()`` / ``from_state()`` carry the dedup
    memory across agent restarts.
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
    _pending: str = ""
    _pending_lines: int = 0

    def feed(self, line: str) -> tuple[list[Event], list[Hint]]:
        self.line_no += 1
        extra_hints: list[Hint] = []
        if self._pending:
            extra_hints = self._continue_pending(line)
        result = _analyse(line, self.ref_time)
        if result is None:
            return [], extra_hints
        line_no = self.line_no
        ts = result.timestamp
        if ts is not None:
            self._last_ts, self._last_ts_line = ts, line_no
        elif self._last_ts is not None and line_no - self._last_ts_line <= self.block_lines:
            ts = self._last_ts
        if _LOCATION_START in result.text and not any(k == "exception_location" for k, _ in result.hints):
            self._pending = result.text[result.text.index(_LOCATION_START):]
            self._pending_lines = 0
        if not result.matches and not result.hints:
            return [], extra_hints
        hints = extra_hints + [Hint(kind, value, ts, self.source) for kind, value in result.hints]
        events = []
        for code, category in result.matches:
            if self._count(code, category, ts, line_no):
                events.append(Event(code, category, ts, result.text, self.source, line_no, tuple(hints)))
            else:
                self.duplicates += 1
        return events, hints

    def feed_lines(self, lines: Iterable[str]) -> tuple[list[Event], list[Hint]]:
        events: list[Event] = []
        hints: list[Hint] = []
        for line in lines:
            new_events, new_hints = self.feed(line)
            if new_events:
                events.extend(new_events)
            if new_hints:
                hints.extend(new_hints)
        return events, hints

    def _continue_pending(self, line: str) -> list[Hint]:
        """A ``Cluster Exception Location[IP/ID]:[...]`` value broken over lines."""
        self._pending += line.strip()  # a value wrapped mid-token: join without a space
        self._pending_lines += 1
        found = _hints(self._pending)
        located = [Hint(k, v, self._last_ts, self.source) for k, v in found if k == "exception_location"]
        if located or self._pending_lines >= _MAX_PENDING_LINES:
            self._pending, self._pending_lines = "", 0
        return located

    def _near(self, prev: tuple[float | None, int] | None, ts: float | None, line_no: int) -> bool:
        if prev is None:
            return False
        prev_ts, prev_line = prev
        if ts is not None and prev_ts is not None:
            return abs(ts - prev_ts) <= self.window_s
        return 0 <= line_no - prev_line <= self.block_lines

    def _count(self, code: str, category: str, ts: float | None, line_no: int) -> bool:
        ascend = _is_ascend_code(code)
        key = code if ascend else "~" + category
        if self._near(self._counted.get(key), ts, line_no):
            return False
        if not ascend and self._near(self._counted.get("!" + category), ts, line_no):
            return False
        self._counted[key] = (ts, line_no)
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
