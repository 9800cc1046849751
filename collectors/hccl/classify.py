"""Classify CANN / HCCL log lines into error events (pure: text in, events out).

What it reads (one line at a time, any of these mixed in one stream):

- plog / slog: ``[ERROR] HCCL(123,python):2024-03-28-10:25:50.589.610 [file.cc:872][123]...``
  (also ``[ERROR]HCCL(...)`` without the space, ``[ERROR] 2025-06-25-10:45:23 (PID:..)`` PTA lines);
- Ascend error-code blocks ``EI0002: [PID: 7277] 2024-11-28-11:59:30.645.648 ...``,
  ``EI0006: 2024-08-05-18:15:21.270.506 ...``, ``[PID: n] <ts> Execution Error ROCE CQE(EI0013): ...``,
  ``[PID: n] <ts> Communication_Error_Bind_IP_Port(EI0019): ...``, a code glued to another line
  (``...Ascend Error Message:EI0002: ...``, ``...error code is 507048[Error]:``) and their indented
  continuation lines;
- torch_npu watchdog lines ``[rank1]:[E324 13:00:25.428029551 file:574] ... Watchdog caught
  collective operation timeout: WorkHCCL(...)`` (glog time: the year comes from ``ref_time``);
- Ray / torchrun prefixes ``(RayWorker pid=123) ``, ``[default0]:``, ``[rank1]:`` (stripped first);
- kernel log / dmesg ``[ascend] [ERROR] [drv_soft_fault] ... Heartbeat lost! (device=1; ...)``;
- device logs (``debug/device-N/*.log``), which use the plog line format.

Every recognised error is an :class:`Event` with a ``code`` (the Ascend code when the line prints
one, ``EI0002``/``EE1002``/``507048``; else a stable synthetic code such as ``notify_wait``,
``socket_timeout``, ``watchdog``, ``heartbeat_lost``, ``cqe_error``), a ``category`` from
``catalogue.HCCL_CATEGORIES``, a ``timestamp`` (epoch seconds, local time as the node prints it;
``None`` for dmesg relative times and for lines with no time near them) and culprit hints.

Ascend codes map to categories by the HCCL/HCCP fault-code catalogue (``ASCEND_CODE_CATEGORIES``:
EI0002 exec_timeout, EI0006/EI0010 connect_timeout, EI0015 rendezvous_timeout, EI0013/EI0018
roce_cqe, EI0012 sdma, EI0005/EI0008/EI0016 desync, EI0001/EI0004/EI0007/EI0009/EI0011/EI0014/
EI0017/EI0019/EI0020 and EJ0001-EJ0004 init; any other ``E[IJE]dddd`` code is ``other``). The
synthetic rules follow the phrasings HCCL prints (hicann/hccl fault-diagnosis guide, CANN 8.x, and
the corpus), including the CANN 8.5 stage keywords (``[InitGroupStage][RanktableCheck]``,
``[InitChannelStage][ParameterConflict]``, ``[TaskExecStage][Timeout]``...).

**Unknown failures are never silent.** An ``[ERROR]`` plog line of module HCCL, HCCP or ROCE (and
of RUNTIME, ASCENDCL, GE... when it names HCCL/hcom) that no rule knows counts as category
``other`` with the code ``<module>:<source file>`` (``hccl:task_exception_handler`` for
``[task_exception_handler.cc:908]``; the bare module name when no file is printed). Such a
*fallback* is held until its block is over (``block_lines`` lines or ``window_s`` seconds later,
or the end of the input): it is dropped when a recognised incident is near it, before or after (a
40-line HCCL error block counts as its recognised code once), and fallbacks near each other count
once.

Culprit hints (:class:`Hint`, every peer address a line prints; not deduplicated):

- ``remote_rank``: ``remote rank [3]``, ``remote rank:[0]``, ``Remote rank: [7]``, ``remoteRank:6``,
  ``remoteRank[0]``, ``remoteUserrank[7]``;
- ``dst_rank``: ``dstRank (server IP, device ID n)`` as ``IP/n``, ``dstRank[n]``, ``dst_rank[n]``;
- ``crimer_rank``: heartbeat ``crimer rank [IP/ID]``;
- ``exception_location``: ``Cluster Exception Location[IP/ID]:[...]`` (also broken over lines) and
  ``serverId[..], deviceId[..]``;
- ``link_peer``: the destination ``IP(rank)`` of a LINK_ERROR_INFO row, as ``IP/rank``;
- ``peer``: ``Peer information: server IP, device ID n, device IP D`` (``IP/n`` and ``D``),
  ``remoteIP{server[S],deviceId[..],deviceIp[D]}`` (``S`` and ``D``), ``remoteIpAddr[..]``,
  ``remote_ip_addr[..]``;
- ``missing_rank`` (EI0015): agent side ``Failed to connect agent[1,3,5,7,]``; root side
  ``connectFailedAgentIdList[..]``, or the ranks below ``need connect rankNum is [N]`` that the
  ``connected rankinfo[LINE k]`` lines do not list;
- ``root_server``: ``connect server[IP : port] failed`` as ``IP:port``;
- ``remote_device``: ``remote device[6]``; ``device``: kernel ``Heartbeat lost! (device=3``.

Speed: plog ``[INFO]``/``[DEBUG]``/``[EVENT]`` lines are rejected by one ``startswith`` and one
substring test; every other line must contain one of a few tokens (``rror``, ``imeout``, ``EI``...)
before any regular expression runs.

Timestamps (``StreamClassifier``; one instance per file or stream): a line without a time of its
own (a traceback, a torch_npu ``507048`` wrapper, a continuation line) takes the time of the
timestamped line P before it or N after it, whichever its block belongs to, so its event waits
for N (at most ``block_lines`` lines):

1. only P or only N is within ``block_lines`` (64) lines: that one's time;
2. both are, and they are at most ``window_s`` apart: P's time (one block, no gap);
3. both are, but more than ``window_s`` apart, earlier or later (two blocks minutes apart): an
   indented continuation line keeps P's time, any other line takes the time of the nearer of P
   and N (P on a tie), so a wrapper printed just before the second block's ``EI0002`` line never
   borrows the first block's time;
4. neither: no time.

An event dated by N comes back after the events of N's own line (the line that carries the time,
usually the Ascend code, leads its block); otherwise events come back in line order.

Only lines that pass the token pre-filter count as P or N.

Incident dedup:

1. The dedup key of an event is its Ascend code when it has one (EIxxxx/EJxxxx/EExxxx/5070xx);
   for a synthetic code it is its category, so the several plog phrasings of one incident
   (``[TaskExecStage][Timeout]`` x3, ``taskType[Notify Wait]``) count once.
2. An event is a duplicate, and not counted, when the previous counted event with the same key
   in the same stream is "near": both have timestamps and they are at most ``window_s`` (60 s)
   apart, earlier or later (logs of several ranks interleave), or one of them has none and it is
   at most ``block_lines`` lines after the other.
3. A synthetic event is also a duplicate when a counted Ascend-coded event of the same category is
   near it (an ``EI0002`` block followed by its plog lines counts as ``EI0002`` once). The reverse
   is not undone: a counter never goes down, so plog lines printed *before* their EI block count
   once under their synthetic code and the block counts once under its code.
4. Different codes are different incidents: an ``EI0002`` block with a ``507048`` wrapper counts
   ``EI0002`` once and ``507048`` once.
5. A provisional event (a fallback ``other``, or a phrasing HCCL prints in several stages such as
   ``Wait timeout for sockets recv``, which is the client side of a rendezvous when the topo
   exchange lines follow it) waits until its block is over and is dropped when any counted event
   is near it, before or after.

Events are returned when they are final; ``feed_lines`` ends with ``flush()``
unless told not to (pass ``flush=False`` for the pieces of one stream, then call ``flush()`` at
its end, so that a block split between two pieces is still judged as one).
"""

from __future__ import annotations

import functools
import re
import time
from collections import deque
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
    "EI0001": "init",  # invalid environment variable
    "EI0002": "exec_timeout",
    "EI0004": "init",  # rank table could not be loaded
    "EI0005": "desync",
    "EI0006": "connect_timeout",
    "EI0007": "init",  # resource initialisation failed
    "EI0008": "desync",
    "EI0009": "init",
    "EI0010": "connect_timeout",  # P2P link between devices failed
    "EI0011": "init",  # QP memory could not be allocated
    "EI0012": "sdma",
    "EI0013": "roce_cqe",
    "EI0014": "init",  # cluster information check (duplicate superDeviceId, IPs)
    "EI0015": "rendezvous_timeout",
    "EI0016": "desync",  # TLS switch differs between ranks
    "EI0017": "init",  # rank table content
    "EI0018": "roce_cqe",  # UB CQE: the same completion error on the 950 UB fabric
    "EI0019": "init",  # bind IP/port
    "EI0020": "init",  # bind IP/port
    "EE1002": "stream_sync_timeout",
    "507046": "stream_sync_timeout",
    "507048": "stream_sync_timeout",
    "EJ0001": "init",
    "EJ0002": "init",
    "EJ0003": "init",  # bind IP/port failed
    "EJ0004": "init",  # rank table IP differs from the NIC's
}


def category_of_code(code: str) -> str:
    """Category of an Ascend code; unknown E[IJE]dddd codes are ``other``."""
    return ASCEND_CODE_CATEGORIES.get(code, "other")


@dataclass(frozen=True)
class Hint:
    """A culprit hint: which peer, rank or device the log blames."""

    kind: str
    value: str
    timestamp: float | None = None
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "timestamp": self.timestamp, "source": self.source}


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


@dataclass(frozen=True)
class LineResult:
    """What one line says: its own timestamp, (code, category) matches and (kind, value) hints.

    ``provisional`` is True when the only match is the ``other`` code of an ``[ERROR]`` line no
    rule knows, or a phrasing HCCL prints in several stages (``Wait timeout for sockets recv``):
    such a match counts only when no recognised incident is near it. ``indented``: the line (after
    any job prefix) starts with white space.
    """

    timestamp: float | None
    matches: tuple[tuple[str, str], ...]
    hints: tuple[tuple[str, str], ...]
    text: str
    provisional: bool = False
    indented: bool = False


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
    minute = _minute_epoch(year, month, day, hh, mm)
    return None if minute is None else minute + ss


@functools.lru_cache(maxsize=4096)
def _minute_epoch(year: int, month: int, day: int, hh: int, mm: int) -> float | None:
    """``mktime`` of a local minute, cached: log lines come minute after minute, and mktime is slow."""
    try:
        return time.mktime((year, month, day, hh, mm, 0, 0, 0, -1))
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
_ASCEND_CODE_FULL_RE = re.compile(r"E[IJE]\d{4}|\d{6}")

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
        (r"Failed to connect agent\[|rank num\[\d+\]\s*is different with rank list size"
         r"|TopoExchangeAgent: connect server\[|connectFailedAgentIdList|\[Recv\]\[ClusterInfoMsg\]"
         r"|\[DetectClusterTopoInfo\]|setup topo detect error", "topo_detect_failed", "rendezvous_timeout"),
        # connect_timeout
        (r"socket establish timeout|[Gg]et(?:ting)? socket time(?:s)? ?out|socket time ?out", "socket_timeout",
         "connect_timeout"),
        (r"(?i)p2p (?:connect\w* )?time ?out|connected p2p timeout", "p2p_connect_timeout",
         "connect_timeout"),
        (r"LINK_ERROR_INFO", "link_error", "connect_timeout"),
        # "Transport init error." (a period) is the traceback of EI0005 / EI0009, not a timeout
        (r"Transport init error!|\[InitChannelStage\]\[Timeout\]", "transport_init_timeout",
         "connect_timeout"),
        (r"CONNECT TIMEOUT DETECT RESULT|fails to connect to dstRank", "connect_detect", "connect_timeout"),
        # roce_cqe: driver, HCCP and HCCL phrasings of a RoCE completion (retransmission) error
        (r"(?i)error[ _]cqe|cqe[ _]error|cqe status|err_cqe|\bwc[ _]status\b"
         r"|completion (?:queue )?(?:entry )?error|retr\w* (?:count )?exceeded", "cqe_error", "roce_cqe"),
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
        (r"\[init\]\[ra_\w*\].*fail", "ra_init_failed", "init"),
        (r"\[check\]\[ip\]fail|in the ranktable is inconsistent with the IP", "ranktable_ip_mismatch", "init"),
        (r"error in init_hcclComm", "comm_init_failed", "init"),
        (r"\[InitGroupStage\]\[EnvConfig\]|Environment variable \[\w+\] is invalid", "env_config_error", "init"),
        (r"\[InitGroupStage\]\[(?:RanktableConfig|RanktableCheck)\]", "ranktable_check_failed", "init"),
        (r"\[InitGroupStage\]\[Resource\]", "init_resource_error", "init"),
        # desync
        (r"(?i)tls\b.*inconsistent|inconsistent.*\btls", "tls_inconsistent", "desync"),
        (r"\[InitChannelStage\]\[ParameterConflict\]|CMD information \w+ check fail"
         r"|arguments for collective communication are inconsistent", "parameter_conflict", "desync"),
        (r"\[InitChannelStage\]\[VersionConflict\]", "version_conflict", "desync"),
    )
)

# Phrasings HCCL prints in more than one stage: provisional, like a fallback, so that the stage's own
# line near it decides ("Wait timeout for sockets recv" is a rendezvous timeout when the topo
# exchange lines follow it, a link setup timeout otherwise).
_WEAK_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"Wait timeout for sockets"), "socket_timeout", "connect_timeout"),
)

# An [ERROR] plog header: module, then the source file the line was printed from (if any).
_ERROR_HEADER_RE = re.compile(r"\[ERROR\]\s?([A-Z][A-Z0-9_]*)\(\d+,[^)]*\):")
_SOURCE_FILE_RE = re.compile(r"\[(?:[^\[\]:]*/)?([A-Za-z0-9_.-]+?)\.(?:cc|cpp|cxx|c|h|hpp|py)\s*:\s*\d+\]")
_HCCL_MODULES = frozenset({"HCCL", "HCCP", "ROCE"})
# Other modules' [ERROR] lines count only when they name HCCL: RUNTIME/ASCENDCL print errors of
# every kind of task, and a TDT queue error is not a collective failure.
_HCCL_MARKERS = ("hccl", "Hccl", "HCCL", "hcom", "Hcom", "HCOM")

_IPV4 = r"\d{1,3}(?:\.\d{1,3}){3}"
_SKIP_VALUES = frozenset({"", "unknown", "local", "4294967295", "-1", "null", "none", "NA"})
_HINT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[Rr]emote ?[Rr]ank(?:\s*:\s*\[?|\s*\[)\s*([^\]\s,;)]+)"), "remote_rank"),
    (re.compile(r"remoteUserrank\[(\d+)\]"), "remote_rank"),
    (re.compile(r"crimer rank \[([^\]]+)\]"), "crimer_rank"),
    (re.compile(r"Cluster Exception Location\[IP/ID\]:\[([^\]]*)\]"), "exception_location"),
    (re.compile(rf"dstRank \(server ({_IPV4}), device ID (\d+)\)"), "dst_rank"),
    (re.compile(r"(?:dstRank|dst_rank)\s*[\[:=]\s*(\d+)"), "dst_rank"),
    (re.compile(rf"\|\s+({_IPV4})\((\d+)\)\s+\|"), "link_peer"),
    (re.compile(rf"Peer information: server ({_IPV4}), device ID (\d+)"), "peer"),
    (re.compile(rf"Peer information: server {_IPV4}, device ID \d+, device IP ({_IPV4})"), "peer"),
    (re.compile(r"remoteIP\{server\[([^\]]+)\]"), "peer"),
    (re.compile(r"remoteIP\{server\[[^\]]*\],deviceId\[[^\]]*\],deviceIp\[([^\]]+)\]"), "peer"),
    (re.compile(r"(?:remoteIpAddr|remote_ip_addr)\[([^\]]+)\]"), "peer"),
    (re.compile(r"serverId\[([^\]]+)\], deviceId\[(\d+)\]"), "exception_location"),
    (re.compile(r"Heartbeat lost! \(device=(\d+)"), "device"),
    (re.compile(r"connect server\[\s*(\S+?)\s*:\s*(\d+)\s*\]"), "root_server"),
    (re.compile(r"remote device\[(\d+)\]"), "remote_device"),
)
_HINT_TRIGGERS = ("emote", "crimer", "Cluster Exception", "dstRank", "dst_rank", "|", "Peer information",
                  "serverId[", "(device=", "connect server[")
_HINT_JOINERS = {"root_server": ":"}
_AGENT_LIST_RE = re.compile(r"(?:Failed to connect agent|connectFailedAgentIdList)\[([\d,\s]*)\]")
# EI0015 root side: "total connected num is [4],line num is [1]", "need connect rankNum is [8]",
# "connected rankinfo[LINE 0]: [0000000000000000],[0000000000000002],...;"
_CONNECTED_TOTAL_RE = re.compile(r"total connected num is \[(\d+)\],\s*line num is \[(\d+)\]")
_NEED_CONNECT_RE = re.compile(r"need connect rankNum is \[(\d+)\]")
_CONNECTED_LINE_RE = re.compile(r"connected rankinfo\[LINE \d+\]:((?:\s*\[\d+\],?)*)")
_RANK_ID_RE = re.compile(r"\[(\d+)\]")
_RENDEZVOUS_TRIGGERS = ("connected num", "need connect", "connected rankinfo")
_MAX_RANKS = 1 << 20


def _split_prefixes(line: str) -> tuple[str, bool]:
    """(text without prefixes, whether it was indented under them)."""
    text = line.rstrip()
    indented = text[:1].isspace()
    text = text.lstrip()
    for _ in range(3):
        if not text or text[0] not in "([":
            break
        match = _PREFIX_RE.match(text)
        if match is None:
            break
        rest = text[match.end():]
        indented = rest[:1].isspace()
        text = rest.lstrip()
    return text, indented


def _hints(text: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    if any(trigger in text for trigger in _HINT_TRIGGERS):
        for pattern, kind in _HINT_RULES:
            for match in pattern.finditer(text):
                value = _HINT_JOINERS.get(kind, "/").join(match.groups())
                if value.strip() not in _SKIP_VALUES and (kind, value) not in found:
                    found.append((kind, value))
                if kind == "link_peer":
                    break  # a LINK_ERROR_INFO row names the destination first
    if "connect agent[" in text or "AgentIdList[" in text:
        agents = _AGENT_LIST_RE.search(text)
        if agents is not None:
            for rank in agents.group(1).split(","):
                entry = ("missing_rank", rank.strip())
                if rank.strip() and entry not in found:
                    found.append(entry)
    return tuple(found)


def _is_advice(text: str) -> bool:
    return text.startswith(("Possible Cause", "Solution", "(Please search"))


def _fallback_code(text: str) -> str | None:
    """``module:file`` of an [ERROR] plog line that belongs to HCCL, else None."""
    header = _ERROR_HEADER_RE.search(text)  # search: grep output puts "path:" before the header
    if header is None:
        return None
    module = header.group(1)
    if module not in _HCCL_MODULES and not any(marker in text for marker in _HCCL_MARKERS):
        return None
    source = _SOURCE_FILE_RE.search(text, header.end())
    if source is None:
        return module.lower()
    return f"{module.lower()}:{source.group(1).lower()[:48]}"


def _analyse(line: str, ref_time: float | None) -> LineResult | None:
    """None when the pre-filter rejects the line; else its timestamp, matches and hints."""
    if line.startswith(_QUIET_LEVELS) and "crimer" not in line:
        return None
    if not _interesting(line):
        return None
    text, indented = _split_prefixes(line)
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
    provisional = False
    if not matches:
        for pattern, code, category in _WEAK_RULES:
            if pattern.search(text):
                matches.append((code, category))
                break
        else:
            fallback = _fallback_code(text)
            if fallback is not None:
                matches.append((fallback, "other"))
        provisional = bool(matches)
    return LineResult(parse_timestamp(text, ref_time), tuple(matches), _hints(text), text[:MAX_TEXT],
                      provisional, indented)


def classify_line(line: str, ref_time: float | None = None) -> LineResult | None:
    """Classify one line; None when it says nothing about an error (the common, fast case).

    ``ref_time`` (the file's mtime) supplies the year for glog and syslog timestamps.
    """
    result = _analyse(line, ref_time)
    if result is None or (not result.matches and not result.hints):
        return None
    return result


def _is_ascend_code(code: str) -> bool:
    return _ASCEND_CODE_FULL_RE.fullmatch(code) is not None


# ---------------------------------------------------------------- stream state

_LOCATION_START = "Cluster Exception Location"
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
        if self.need is None or self.lines_seen < self.lines_expected or self.need > _MAX_RANKS:
            return None
        return [rank for rank in range(self.need) if rank not in self.connected]


@dataclass
class StreamClassifier:
    """Classifies the lines of one file or stream in order, joining blocks and deduplicating.

    ``feed(line)`` returns the events that became final with that line (a line's own events may
    come back with a later line, see the module docstring) and the hints found on that line (hints
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
        result = _analyse(line, self.ref_time)
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
                         result.indented, ts)
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
        return Event(code, category, held.timestamp, held.text, self.source, held.line_no, held.hints)

    # ------------------------------------------------------------ hints spread over lines

    def _continue_pending(self, line: str) -> list[Hint]:
        """A ``Cluster Exception Location[IP/ID]:[...]`` value broken over lines."""
        self._pending += line.strip()  # a value wrapped mid-token: join without a space
        self._pending_lines += 1
        found = _hints(self._pending)
        located = [Hint(k, v, self._last_ts, self.source) for k, v in found if k == "exception_location"]
        if located or self._pending_lines >= _MAX_PENDING_LINES:
            self._pending, self._pending_lines = "", 0
        return located

    def _rendezvous_hints(self, text: str, line_no: int, ts: float | None) -> list[Hint]:
        """Missing ranks from the EI0015 root-side lines (the agent-side list is a line hint)."""
        if not any(trigger in text for trigger in _RENDEZVOUS_TRIGGERS):
            return []
        root = self._root
        if root is not None and line_no - root.started_line > self.block_lines:
            root = self._root = None
        total = _CONNECTED_TOTAL_RE.search(text)
        if root is None or (total is not None and root.lines_seen):
            root = self._root = _RootConnections(line_no, 1)
        if total is not None:
            root.lines_expected = int(total.group(2))
        need = _NEED_CONNECT_RE.search(text)
        if need is not None:
            root.need = int(need.group(1))
        listed = _CONNECTED_LINE_RE.search(text)
        if listed is not None:
            root.lines_seen += 1
            root.connected.update(int(rank) for rank in _RANK_ID_RE.findall(listed.group(1)))
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
        ascend = _is_ascend_code(code)
        key = code if ascend else "~" + category
        if self._near(self._counted.get(key), ts, line_no):
            return False
        if not ascend and self._near(self._counted.get("!" + category), ts, line_no):
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
