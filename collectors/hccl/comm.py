"""Communicator facts from HCCL / CANN logs: which process is which rank of which communicator,
what each rank was doing when it failed, and who never reached the rendezvous (pure: text in,
typed records out).

A cluster triage engine joins these records across nodes: the communicator name (``group``) is
the same on every rank of one communicator, so ``(group, rank)`` identifies a rank cluster-wide,
and ``pid`` / ``device`` / ``server`` say where it ran. Times are epoch seconds of the local time
the node printed (``hccl_classify.parse_timestamp``).

Line shapes recognised (a ``[LEVEL] MODULE(pid,process):YYYY-MM-DD-HH:MM:SS.mmm.uuu`` plog or
device-log header gives ``pid`` and ``timestamp``; ``grep -r`` prefixes such as
``run/plog/plog-<pid>_<ts>.log:`` and Ray / torchrun prefixes are allowed; "corpus" names files of
``shared/corpus``, "doc" the hicann/hccl fault-diagnosis guide, "src" HCCL source format strings):

``RankIdentity`` (one rank of one communicator):

- ``Entry-HcclCommInitRootInfoInner:ranks[4], rank[2], rootinfo: host ip[127.10.0.1] port[60000]
  nicDeploy[1] identifier[<group>], deviceLogicId[2]`` (run plog, INFO; CANN 8.x: corpus 34, 39;
  also ``Entry-HcclCommInitRootInfo:`` 2024 (corpus ``hccl-plog_HcclCommInitRootInfo``) and
  ``Entry-HcclCommInitRootInfoConfigInner:`` (doc)) -> shape ``comm_init``, ``root`` ``ip:port``;
- ``[HCCL_TRACE]SetupAgent rankNum[8], rank[6], rootInfo identifier[<group>], server[<ip>%<if>],
  logicDevId[2], phydevId[6], deviceIp[<ip>]`` (corpus ``hccl-plog_HcclCommInitRootInfo``, 2024)
  -> shape ``setup_agent``;
- ``HcclCommInitRootInfo failed, return[0x..], rankNum[8], rank[6], rootInfo identifier[<group>],
  server[<ip>%<if>], logicDevId[-1]`` (same file) and ``[InitCommRootInfo]Init failed, return[..],
  rankNum[2048], rank[0], rootInfo identifier[..], server[..], logicDevId[-1]`` (doc, CANN 9.0)
  -> shape ``init_failed``;
- ``rankNum[128], rank[76], server[<ip>], device[4]`` in ``HcclCommInitClusterInfo success``,
  ``HcclCommInitClusterInfo failed``, ``hcom init failed`` and ``... success, sub comm
  identifier[<group>], rankNum[..], rank[..], server[..], device[..].`` (src, rank-table init)
  -> shape ``comm_init`` / ``init_failed``;
- ``[LocalRank Key Info]userRank[6] hostIp[..] devicePhyId[6] server[<ip>] deviceIp[..] ...``
  (run plog, doc, CANN 8.5), its group and size from the ``[Communicator Key Info]`` line of the
  same process -> shape ``local_rank_key_info``;
- a ``CollectiveFailure`` that names its group and rank -> shape ``task_failure``.

``Communicator``: ``[Communicator Key Info]identifier[<group>] rankSize[8] serverNum[1] ...``
(doc, CANN 8.5). ``RootInfoCreated``: ``Entry-HcclGetRootInfo:rootInfo[0x..], deviceLogicId[0]``
(corpus 39: the process that hosts the rendezvous server).

``CollectiveOp``: ``Entry-HcclAllReduce: tag[AllReduce_<group>], sendBuf[..], recvBuf[..],
count[..], dataType[float32], op[sum], localRank[0], streamId[7],comm[0x..], deviceLogicId[0]``
(run plog with HCCL_ENTRY_LOG_ENABLE=1; corpus 35, CANN 8.x); any ``Entry-Hccl<Op>:`` line with a
``tag[...]``.

``CollectiveFailure`` (joined from the lines of one failure block of one process):

- plog ``Task run failed, base information is streamID:[2], taskID[21], tag[AllReduce_<group>],
  AlgType(level 0-1-2):[..]``, ``... groupRank information is group:[<group>], user define
  information[], rankSize[4], rankId[0].`` and ``... opData information is timeStamp:[<issue
  time>], deviceId[0], index[21], count[256], reduceType[sum], ..., dataType[float32].``
  (CANN 8.5 ``[TaskExecStage][Timeout][Host]``: corpus 01, 08, 32, 33) and the 2024 form with
  ``taskType[Notify Wait]``, ``index[3]`` on the base line, ``para information is ... remote
  rank:[local]`` and no ``user define information`` (corpus ``hccl-plog_TaskExceptionHandler``);
- device log (AICPU) ``[TaskException]base information is streamId:149, ..., type:NOTIFY WAIT,
  localRank:1, remoteRank:0, taskId:26064, ...`` and ``opData information is tag:.., group:<group>,
  opIndex:39013693, count:1048576, dataType:11, opType:4, ...`` (corpus 27; ``opType`` is HCCL's
  cmdType enum: 1 Broadcast, 2 AllReduce, 4 Send, 6 AllGather ...);
- screen EI0002 / EI0012 text ``base information: [streamID:[..], taskID[..], taskType[..],
  tag[..].] task information: [..., remote rank:[0].`` with ``group information: [group:[..],
  user define information[], rankSize[8], rankId[3].]`` or ``Communicator information: [...]``
  on the same or a later line (corpus 12, ``hccl-log_EI0002-*``, 08).

A graph-mode tag ``HcomAllReduce_<hash>_<n>`` names the operation but not the group.

``InitTimeout`` (communicator init, EI0015; ``role`` root or agent):

- root: ``topo exchange server get socket timeout! timeout[120 s]``, ``total connected num is
  [4],line num is [1]``, ``need connect rankNum is [8]`` (CANN 8.5; absent in 2024) and
  ``connected rankinfo[LINE k]: [0000000000000000],...;`` (decimal rank ids, 8 a line) -> the
  connected ranks and, with the rank count, the missing ones (corpus 36,
  ``hccl-plog_topo-exchange-server``); ``connectFailedAgentIdList[10,17,...,]`` (doc, CANN 9.0);
- agent: ``TopoDetect ERROR occur !!! fault_type[1], fault_info["Failed to connect
  agent[1,3,5,7,]"]`` and ``rank num[8]is different with rank list size[4]`` (corpus 37);
  ``topo exchange agent get socket timeout! timeout[120]`` and ``TopoExchangeAgent: connect
  server[127.10.0.1 : 60000] failed`` (corpus 38).

The group of an InitTimeout or a key-info line, and the rank count an InitTimeout expects when its
lines do not print it, come from the last init line of the same process (absent when the log holds
none).

``WatchdogTimeout``: torch_npu ``[Rank 1] Watchdog caught collective operation timeout:
WorkHCCL(SeqNum=196, OpType=ALLREDUCE, Timeout(ms)=3600000) ran for 3600185 milliseconds``
(corpus ``hccl-log_torch_npu-watchdog``; the global rank, once per rank and sequence number).

Speed: an INFO/DEBUG line must contain ``Entry-Hccl``, ``ankNum[`` or ``Key Info]``, any other
line one of a few more substrings (``nformation``, ``onnect``...), before any regular expression
runs, and a line's time is parsed only when it states a fact, so GBs of INFO noise cost one
``startswith`` and three substring searches a line (``bench/comm.py``).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any, Union

from collectors.hccl.classify import parse_timestamp

__all__ = [
    "CollectiveFailure",
    "CollectiveOp",
    "CommFactParser",
    "Communicator",
    "Fact",
    "InitTimeout",
    "RankIdentity",
    "RootInfoCreated",
    "WatchdogTimeout",
    "parse_line",
    "parse_lines",
    "split_tag",
]


@dataclass(frozen=True)
class RankIdentity:
    """One rank of one communicator and where it ran. ``device`` is the logical device id."""

    group: str | None
    rank: int
    rank_size: int | None = None
    device: int | None = None
    pid: int | None = None
    server: str | None = None
    device_phy: int | None = None
    device_ip: str | None = None
    root: str | None = None
    timestamp: float | None = None
    shape: str = ""
    line_no: int = 0


@dataclass(frozen=True)
class Communicator:
    """A communicator as its process describes it (``[Communicator Key Info]``)."""

    group: str
    rank_size: int | None = None
    server_count: int | None = None
    pid: int | None = None
    timestamp: float | None = None
    line_no: int = 0


@dataclass(frozen=True)
class RootInfoCreated:
    """``HcclGetRootInfo`` was called: this process hosts a rendezvous server."""

    pid: int | None
    device: int | None = None
    timestamp: float | None = None
    line_no: int = 0


@dataclass(frozen=True)
class CollectiveOp:
    """One collective call as logged with HCCL_ENTRY_LOG_ENABLE=1. ``rank`` is ``localRank``."""

    op: str
    group: str | None
    tag: str
    rank: int | None = None
    count: int | None = None
    data_type: str | None = None
    reduce_op: str | None = None
    stream: int | None = None
    comm: str | None = None
    device: int | None = None
    pid: int | None = None
    timestamp: float | None = None
    line_no: int = 0


@dataclass(frozen=True)
class CollectiveFailure:
    """The collective a rank was running when its task failed (one failure block).

    ``timestamp`` is when the failure was printed, ``issued_at`` when the operation was issued
    (opData ``timeStamp``); ``index`` is the operation's sequence number in its communicator.
    """

    group: str | None
    op: str | None
    rank: int | None
    timestamp: float | None
    stream: int | None = None
    task: int | None = None
    index: int | None = None
    device: int | None = None
    tag: str | None = None
    rank_size: int | None = None
    remote_rank: int | None = None
    task_type: str | None = None
    issued_at: float | None = None
    count: int | None = None
    data_type: str | None = None
    pid: int | None = None
    line_no: int = 0


@dataclass(frozen=True)
class InitTimeout:
    """Communicator init (rendezvous) timed out; ``role`` is ``root`` (the server) or ``agent``.

    ``connected`` / ``missing`` are rank ids; ``root`` is the rendezvous server as ``ip:port``.
    """

    role: str
    group: str | None = None
    expected: int | None = None
    connected: tuple[int, ...] | None = None
    missing: tuple[int, ...] | None = None
    root: str | None = None
    timeout_s: float | None = None
    pid: int | None = None
    timestamp: float | None = None
    line_no: int = 0


@dataclass(frozen=True)
class WatchdogTimeout:
    """torch_npu's watchdog gave up on a collective of (global) ``rank``."""

    rank: int
    seq: int
    op: str
    timeout_s: float
    elapsed_s: float | None = None
    timestamp: float | None = None
    line_no: int = 0


# typing.Union, not "|": this alias is evaluated at run time, and Python 3.9 has no "|" on classes.
Fact = Union[RankIdentity, Communicator, RootInfoCreated, CollectiveOp, CollectiveFailure, InitTimeout,
             WatchdogTimeout]

# ---------------------------------------------------------------- line pieces

_QUIET_LEVELS = ("[INFO]", "[DEBUG]", "[EVENT]", "[TRACE]")
_RENDEZVOUS_TOKENS = ("opo exchange", "total connected", "need connect", "connected rankinfo", "connect agent[",
                      "AgentIdList[", "rank num[", "connect server[")
_HEADER_RE = re.compile(r"\[(?:ERROR|INFO|WARNING|DEBUG|EVENT|TRACE|CRITICAL)\]\s?[A-Z][A-Z0-9_]*\((\d+),[^)]*\):")
_PID_BLOCK_RE = re.compile(r"\[PID: (\d+)\]")
_KV_RE = re.compile(r"(\w+):?\[([^\[\]]*)\]")
_COLON_ITEM_RE = re.compile(r"(\w+)\s*:\s*([^,]*)")
_ENTRY_RE = re.compile(r"Entry-Hccl(\w+?):")
_HOST_ROOT_RE = re.compile(r"host ip\[([^\]]*)\] port\[(\d+)\]")
_TIMEOUT_RE = re.compile(r"timeout\[(\d+)(?:\s*s)?\]")
_CONNECTED_TOTAL_RE = re.compile(r"total connected num is \[(\d+)\],\s*line num is \[(\d+)\]")
_NEED_CONNECT_RE = re.compile(r"need connect rankNum is \[(\d+)\]")
_CONNECTED_LINE_RE = re.compile(r"connected rankinfo\[LINE \d+\]:((?:\s*\[\d+\],?)*)")
_BRACKETED_INT_RE = re.compile(r"\[(\d+)\]")
_AGENT_LIST_RE = re.compile(r"(?:Failed to connect agent|connectFailedAgentIdList)\[([\d,\s]*)\]")
_RANK_NUM_DIFF_RE = re.compile(r"rank num\[(\d+)\]\s*is different with rank list size\[(\d+)\]")
_CONNECT_SERVER_RE = re.compile(r"connect server\[\s*(\S+?)\s*:\s*(\d+)\s*\]")
_WATCHDOG_RE = re.compile(r"\[Rank (\d+)\] Watchdog caught collective operation timeout: WorkHCCL\(SeqNum=(\d+), "
                          r"OpType=(\w+), Timeout\(ms\)=(\d+)\)(?: ran for (\d+) milliseconds)?")

# HCCL's cmdType / opType enumeration (hicann/hccl fault-diagnosis guide).
_CMD_TYPES = {1: "Broadcast", 2: "AllReduce", 3: "Reduce", 4: "Send", 5: "Receive", 6: "AllGather",
              7: "ReduceScatter", 8: "AlltoAllV", 9: "AlltoAllVC", 10: "AlltoAll", 11: "Gather", 12: "Scatter",
              13: "BatchSendRecv", 16: "AllGatherV", 17: "ReduceScatterV"}
_NO_RANK = frozenset({"4294967295", "-1", "local", "unknown", ""})
_NO_ADDRESS = frozenset({"", "0.0.0.0", "unknown"})  # noqa: S104 - "unset" as HCCL prints it, no socket
_BLOCK_LINES = 64
_MAX_PROCESSES = 4096


def _may_state_a_fact(line: str) -> bool:
    """The pre-filter: a few substring tests, no regular expression (most lines are INFO noise).

    Of the shapes above only the Entry-, init and key-info lines are printed at INFO/DEBUG level.
    """
    if line.startswith(_QUIET_LEVELS):
        return "Entry-Hccl" in line or "ankNum[" in line or "Key Info]" in line
    return ("nformation" in line or "Entry-Hccl" in line or "ankNum[" in line or "Key Info]" in line
            or "onnect" in line or "opo exchange" in line or "rank num[" in line or "AgentIdList[" in line
            or "Watchdog caught" in line)


class _LineTime:
    """The time a line printed, parsed only when a fact needs it."""

    __slots__ = ("_parsed", "_ref_time", "_text", "_value")

    def __init__(self, text: str, ref_time: float | None) -> None:
        self._text = text
        self._ref_time = ref_time
        self._value: float | None = None
        self._parsed = False

    @property
    def value(self) -> float | None:
        if not self._parsed:
            self._value, self._parsed = parse_timestamp(self._text, self._ref_time), True
        return self._value


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip().rstrip(".")
    if value in _NO_RANK:
        return None
    try:
        return int(value, 0) if value.startswith("0x") else int(value)
    except ValueError:
        return None


def _address(value: str | None) -> str | None:
    """An IP as printed, without the ``%<ifname>`` suffix; None for unset addresses."""
    if value is None:
        return None
    value = value.split("%", 1)[0].strip()
    return None if value in _NO_ADDRESS else value


def _kv(text: str) -> dict[str, str]:
    """``key[value]`` / ``key:[value]`` pairs; the first occurrence of a key wins."""
    pairs: dict[str, str] = {}
    for key, value in _KV_RE.findall(text):
        pairs.setdefault(key, value)
    return pairs


def _colon_items(text: str) -> dict[str, str]:
    """``key:value, key:value.`` items (device-log AICPU lines)."""
    return {key: value.strip().rstrip(".") for key, value in _COLON_ITEM_RE.findall(text)}


def split_tag(tag: str) -> tuple[str | None, str | None]:
    """(operation, group) of an operation tag: ``AllReduce_<group>`` -> (``AllReduce``, group);
    a graph-mode ``HcomAllReduce_<hash>_<n>`` names no group."""
    op, sep, rest = tag.partition("_")
    if not op or not op[0].isalpha():
        return None, None
    if op.startswith("Hcom"):
        return op[len("Hcom"):] or None, None
    return op, (rest if sep and rest else None)


def _rank_list(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip().isdigit())


# ---------------------------------------------------------------- builders of multi-line facts


@dataclass
class _FailureBuilder:
    """A failure block being joined: the first line that prints a field sets it."""

    last_line: int
    failure: CollectiveFailure

    def fill(self, **values: Any) -> None:
        unknown = {key: value for key, value in values.items()
                   if value is not None and value != "" and getattr(self.failure, key) is None}
        if unknown:
            self.failure = replace(self.failure, **unknown)

    def build(self) -> CollectiveFailure | None:
        failure = self.failure
        if not failure.group and not failure.tag:
            return None
        op, group = split_tag(failure.tag) if failure.tag else (None, None)
        return replace(failure, op=failure.op or op, group=failure.group or group)


@dataclass
class _InitBuilder:
    role: str
    line_no: int
    last_line: int
    pid: int | None
    timestamp: float | None
    group: str | None
    expected: int | None = None
    listed: int | None = None
    connected: set[int] = field(default_factory=set)
    connected_seen: bool = False
    missing: tuple[int, ...] | None = None
    root: str | None = None
    timeout_s: float | None = None

    def build(self) -> InitTimeout:
        connected: tuple[int, ...] | None = tuple(sorted(self.connected)) if self.connected_seen else None
        missing = self.missing
        if missing is None and connected is not None and self.expected is not None:
            missing = tuple(rank for rank in range(self.expected) if rank not in self.connected)
        if connected is None and missing is not None and self.expected is not None and (
                self.listed is None or self.listed == self.expected - len(missing)):
            connected = tuple(rank for rank in range(self.expected) if rank not in missing)
        return InitTimeout(self.role, self.group, self.expected, connected, missing, self.root, self.timeout_s,
                           self.pid, self.timestamp, self.line_no)


# ---------------------------------------------------------------- the parser


class CommFactParser:
    """Reads the lines of one log stream in order; ``feed`` returns the facts that became
    complete, ``finish`` the rest. ``ref_time`` (the file's mtime) dates year-less glog times."""

    def __init__(self, ref_time: float | None = None) -> None:
        self.ref_time = ref_time
        self.line_no = 0
        self._failures: dict[int | None, _FailureBuilder] = {}
        self._inits: dict[int | None, _InitBuilder] = {}
        self._groups: OrderedDict[int | None, tuple[str, int | None]] = OrderedDict()
        self._watchdogs: set[tuple[int, int]] = set()
        self._finished: list[Fact] = []

    def feed(self, line: str) -> list[Fact]:
        self.line_no += 1
        if not _may_state_a_fact(line):
            return []
        facts: list[Fact] = []
        self._expire(facts)
        header = _HEADER_RE.search(line)
        pid: int | None
        if header is not None:
            pid = int(header.group(1))
            text = line[header.end():]
            when = _LineTime(line[header.start():], self.ref_time)
        else:
            block = _PID_BLOCK_RE.search(line)
            pid = int(block.group(1)) if block is not None else None
            text = line
            when = _LineTime(line, self.ref_time)
        if "nformation" in text:
            self._information(text, pid, when, facts)
        if "Entry-Hccl" in text:
            self._entry(text, pid, when, facts)
        if "ankNum[" in text:
            self._init_line(text, pid, when, facts)
        if "Key Info]" in text:
            self._key_info(text, pid, when, facts)
        if any(token in text for token in _RENDEZVOUS_TOKENS):
            self._rendezvous(text, pid, when)
        if "Watchdog caught" in text:
            self._watchdog(text, facts)
        return facts

    def feed_lines(self, lines: Iterable[str]) -> list[Fact]:
        facts: list[Fact] = []
        for line in lines:
            new = self.feed(line)
            if new:
                facts.extend(new)
        return facts

    def finish(self) -> list[Fact]:
        """Every fact still being joined (end of the input)."""
        facts: list[Fact] = list(self._finished)
        self._finished.clear()
        for pid in list(self._failures):
            self._emit_failure(pid, facts)
        for pid in list(self._inits):
            facts.append(self._inits.pop(pid).build())
        return facts

    # ------------------------------------------------------------ shapes

    def _information(self, text: str, pid: int | None, when: _LineTime, facts: list[Fact]) -> None:
        base = text.find("ase information")
        if base >= 0:
            self._base(text[base:], pid, when, facts)
        for marker in ("groupRank information", "group information", "Communicator information"):
            at = text.find(marker)
            if at >= 0:
                self._group_info(text[at:], pid, when, facts)
                break
        at = text.find("opData information is")
        if at >= 0:
            self._op_data(text[at + len("opData information is"):], pid, when, facts)
        at = text.find("para information is")
        if at >= 0:
            builder = self._failure_for(pid)
            if builder is not None:
                builder.fill(remote_rank=_int(_kv(text[at:]).get("rank")))
                builder.last_line = self.line_no

    def _base(self, text: str, pid: int | None, when: _LineTime, facts: list[Fact]) -> None:
        values: dict[str, Any]
        if text.startswith("ase information is") and "streamID" not in text and "streamId:" in text:
            items = _colon_items(text[len("ase information is"):])  # device log (AICPU)
            values = {"stream": _int(items.get("streamId")), "task": _int(items.get("taskId")),
                      "rank": _int(items.get("localRank")), "remote_rank": _int(items.get("remoteRank")),
                      "task_type": items.get("type")}
        else:
            pairs = _kv(text.split("task information", 1)[0].split("Task information", 1)[0])
            values = {"stream": _int(pairs.get("streamID")), "task": _int(pairs.get("taskID")),
                      "tag": pairs.get("tag"), "task_type": pairs.get("taskType"), "index": _int(pairs.get("index"))}
            rest = text.find("ask information")
            if rest >= 0:
                values["remote_rank"] = _int(_kv(text[rest:]).get("rank"))
        builder = self._failures.get(pid)
        if builder is not None and (builder.failure.stream, builder.failure.task) != (values["stream"], values["task"]):
            self._emit_failure(pid, facts)  # the next task of this process
            builder = None
        if builder is None:
            builder = self._new_failure(pid, when)
        builder.fill(**values)
        builder.last_line = self.line_no

    def _group_info(self, text: str, pid: int | None, when: _LineTime, facts: list[Fact]) -> None:
        pairs = _kv(text)
        if not pairs.get("group"):
            return
        builder = self._failure_for(pid) or self._new_failure(pid, when)
        builder.fill(group=pairs["group"], rank_size=_int(pairs.get("rankSize")), rank=_int(pairs.get("rankId")))
        builder.last_line = self.line_no

    def _op_data(self, text: str, pid: int | None, when: _LineTime, facts: list[Fact]) -> None:
        builder = self._failure_for(pid) or self._new_failure(pid, when)
        if "timeStamp:[" in text or "[" in text.split(",", 1)[0]:
            pairs = _kv(text)
            issued = pairs.get("timeStamp")
            builder.fill(issued_at=parse_timestamp(issued) if issued else None, device=_int(pairs.get("deviceId")),
                         index=_int(pairs.get("index")), count=_int(pairs.get("count")),
                         data_type=pairs.get("dataType"))
        else:  # device log (AICPU): key:value items
            items = _colon_items(text)
            op_type = _int(items.get("opType"))
            builder.fill(tag=items.get("tag"), group=items.get("group"), index=_int(items.get("opIndex")),
                         count=_int(items.get("count")), data_type=items.get("dataType"),
                         op=_CMD_TYPES.get(op_type) if op_type is not None else None)
        builder.last_line = self.line_no

    def _new_failure(self, pid: int | None, when: _LineTime) -> _FailureBuilder:
        builder = _FailureBuilder(self.line_no, CollectiveFailure(None, None, None, when.value, pid=pid,
                                                                  line_no=self.line_no))
        self._failures[pid] = builder
        return builder

    def _entry(self, text: str, pid: int | None, when: _LineTime, facts: list[Fact]) -> None:
        match = _ENTRY_RE.search(text)
        if match is None:
            return
        api = match.group(1)
        pairs = _kv(text[match.end():])
        if api.startswith("CommInitRootInfo"):
            group, rank = pairs.get("identifier"), _int(pairs.get("rank"))
            if group and rank is not None:
                root = _HOST_ROOT_RE.search(text)
                identity = RankIdentity(
                    group, rank, _int(pairs.get("ranks")), _int(pairs.get("deviceLogicId")), pid,
                    root=f"{root.group(1)}:{root.group(2)}" if root else None, timestamp=when.value, shape="comm_init",
                    line_no=self.line_no)
                self._remember_group(pid, group, identity.rank_size)
                facts.append(identity)
        elif api == "GetRootInfo":
            facts.append(RootInfoCreated(pid, _int(pairs.get("deviceLogicId")), when.value, self.line_no))
        elif "tag" in pairs:
            tag = pairs["tag"]
            _, group = split_tag(tag)
            facts.append(CollectiveOp(
                api, group, tag, _int(pairs.get("localRank")), _int(pairs.get("count")),
                pairs.get("dataType") or None, pairs.get("op") or None, _int(pairs.get("streamId")),
                pairs.get("comm") or None, _int(pairs.get("deviceLogicId")), pid, when.value, self.line_no))

    def _init_line(self, text: str, pid: int | None, when: _LineTime, facts: list[Fact]) -> None:
        pairs = _kv(text)
        rank = _int(pairs.get("rank"))
        if rank is None or "rankNum" not in pairs:
            return
        group = pairs.get("identifier") or None
        if "SetupAgent" in text:
            shape = "setup_agent"
        elif "fail" in text:
            shape = "init_failed"
        else:
            shape = "comm_init"
        device = _int(pairs.get("logicDevId", pairs.get("device")))
        identity = RankIdentity(group, rank, _int(pairs.get("rankNum")), device, pid, _address(pairs.get("server")),
                                _int(pairs.get("phydevId")), _address(pairs.get("deviceIp")), timestamp=when.value,
                                shape=shape, line_no=self.line_no)
        if group:
            self._remember_group(pid, group, identity.rank_size)
        facts.append(identity)

    def _key_info(self, text: str, pid: int | None, when: _LineTime, facts: list[Fact]) -> None:
        pairs = _kv(text)
        if "Communicator Key Info]" in text and pairs.get("identifier"):
            communicator = Communicator(pairs["identifier"], _int(pairs.get("rankSize")), _int(pairs.get("serverNum")),
                                        pid, when.value, self.line_no)
            self._remember_group(pid, communicator.group, communicator.rank_size)
            facts.append(communicator)
        elif "LocalRank Key Info]" in text:
            rank = _int(pairs.get("userRank"))
            if rank is None:
                return
            group, size = self._groups.get(pid, (None, None))
            facts.append(RankIdentity(group, rank, size, None, pid, _address(pairs.get("server")),
                                      _int(pairs.get("devicePhyId")), _address(pairs.get("deviceIp")),
                                      timestamp=when.value, shape="local_rank_key_info", line_no=self.line_no))

    def _rendezvous(self, text: str, pid: int | None, when: _LineTime) -> None:
        builder = self._inits.get(pid)
        if "opo exchange server get socket timeout" in text or "total connected num" in text:
            builder = self._init_for(pid, "root", when, builder)
        elif "opo exchange agent get socket timeout" in text or "connect agent[" in text or "rank num[" in text:
            builder = self._init_for(pid, "agent", when, builder)
        elif builder is None:
            if "connectFailedAgentIdList" in text:
                builder = self._init_for(pid, "root", when, builder)
            else:
                return
        timeout = _TIMEOUT_RE.search(text) if "get socket timeout" in text else None
        if timeout is not None:
            builder.timeout_s = float(timeout.group(1))
        total = _CONNECTED_TOTAL_RE.search(text)
        if total is not None:
            builder.listed = int(total.group(1))
        need = _NEED_CONNECT_RE.search(text)
        if need is not None:
            builder.expected = int(need.group(1))
        listed = _CONNECTED_LINE_RE.search(text)
        if listed is not None:
            builder.connected_seen = True
            builder.connected.update(int(rank) for rank in _BRACKETED_INT_RE.findall(listed.group(1)))
        missing = _AGENT_LIST_RE.search(text)
        if missing is not None:
            builder.missing = _rank_list(missing.group(1))
        diff = _RANK_NUM_DIFF_RE.search(text)
        if diff is not None:
            builder.expected, builder.listed = int(diff.group(1)), int(diff.group(2))
        server = _CONNECT_SERVER_RE.search(text)
        if server is not None:
            builder.root = f"{server.group(1)}:{server.group(2)}"
        builder.last_line = self.line_no

    def _watchdog(self, text: str, facts: list[Fact]) -> None:
        match = _WATCHDOG_RE.search(text)
        if match is None:
            return
        rank, seq, op, timeout_ms, ran_ms = match.groups()
        if (int(rank), int(seq)) in self._watchdogs:
            return
        self._watchdogs.add((int(rank), int(seq)))
        start = text.find("[E")
        ts = parse_timestamp(text[start:], self.ref_time) if start >= 0 else None
        facts.append(WatchdogTimeout(int(rank), int(seq), op, int(timeout_ms) / 1000,
                                     int(ran_ms) / 1000 if ran_ms else None, ts, self.line_no))

    # ------------------------------------------------------------ bookkeeping

    def _failure_for(self, pid: int | None) -> _FailureBuilder | None:
        """The open failure block of this process; a screen line without a pid joins the latest."""
        builder = self._failures.get(pid)
        if builder is None and pid is None and self._failures:
            builder = max(self._failures.values(), key=lambda b: b.last_line)
        return builder

    def _init_for(self, pid: int | None, role: str, when: _LineTime,
                  builder: _InitBuilder | None) -> _InitBuilder:
        if builder is not None and builder.role == role:
            return builder
        if builder is not None:  # the process switched roles: that block is over
            self._finished.append(self._inits.pop(pid).build())
        group, size = self._groups.get(pid, (None, None))
        new = self._inits[pid] = _InitBuilder(role, self.line_no, self.line_no, pid, when.value, group, size)
        return new

    def _emit_failure(self, pid: int | None, facts: list[Fact]) -> None:
        failure = self._failures.pop(pid).build()
        if failure is None:
            return
        facts.append(failure)
        if failure.group and failure.rank is not None:
            facts.append(RankIdentity(failure.group, failure.rank, failure.rank_size, failure.device, failure.pid,
                                      timestamp=failure.timestamp, shape="task_failure", line_no=failure.line_no))

    def _expire(self, facts: list[Fact]) -> None:
        """Finish the blocks no line has added to for ``_BLOCK_LINES`` lines."""
        if self._finished:
            facts.extend(self._finished)
            self._finished.clear()
        limit = self.line_no - _BLOCK_LINES
        for pid in [pid for pid, b in self._failures.items() if b.last_line < limit]:
            self._emit_failure(pid, facts)
        for pid in [pid for pid, b in self._inits.items() if b.last_line < limit]:
            facts.append(self._inits.pop(pid).build())

    def _remember_group(self, pid: int | None, group: str, size: int | None) -> None:
        self._groups[pid] = (group, size)
        self._groups.move_to_end(pid)
        while len(self._groups) > _MAX_PROCESSES:
            self._groups.popitem(last=False)


def parse_lines(lines: Iterable[str], ref_time: float | None = None) -> list[Fact]:
    """Every fact in the lines of one stream, in the order their first line appears."""
    parser = CommFactParser(ref_time)
    facts = parser.feed_lines(lines)
    facts.extend(parser.finish())
    return sorted(facts, key=lambda fact: fact.line_no)


def parse_line(line: str, ref_time: float | None = None) -> list[Fact]:
    """The facts one line states on its own (a failure block's parts come back partial)."""
    return parse_lines([line], ref_time)
