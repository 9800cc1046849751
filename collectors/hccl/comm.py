"""Read communicator facts (``collectors.hccl.facts``) off HCCL / CANN log lines (pure: text in, records out).

Which lines state which fact: docs/hccl-log-formats.md. Speed: an INFO/DEBUG line must contain
``Entry-Hccl``, ``ankNum[`` or ``Key Info]``, any other line one of a few more substrings, before
any regular expression runs, and a line's time is parsed only when it states a fact
(``bench/comm.py``).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from collectors.hccl.facts import (
    CollectiveFailure,
    CollectiveOp,
    Communicator,
    Fact,
    InitTimeout,
    RankIdentity,
    RootInfoCreated,
    WatchdogTimeout,
)
from collectors.hccl.lines import BLOCK_LINES, QUIET_LEVELS, parse_timestamp
from collectors.hccl.rendezvous import TOKENS as RENDEZVOUS_TOKENS
from collectors.hccl.rendezvous import absent_ranks, parse_rendezvous

__all__ = ["CommFactParser", "parse_line", "parse_lines", "split_tag"]

# ---------------------------------------------------------------- line pieces

_HEADER_RE = re.compile(r"\[(?:ERROR|INFO|WARNING|DEBUG|EVENT|TRACE|CRITICAL)\]\s?[A-Z][A-Z0-9_]*\((\d+),[^)]*\):")
_PID_BLOCK_RE = re.compile(r"\[PID: (\d+)\]")
_KV_RE = re.compile(r"(\w+):?\[([^\[\]]*)\]")
_COLON_ITEM_RE = re.compile(r"(\w+)\s*:\s*([^,]*)")
_ENTRY_RE = re.compile(r"Entry-Hccl(\w+?):")
_HOST_ROOT_RE = re.compile(r"host ip\[([^\]]*)\] port\[(\d+)\]")
_WATCHDOG_RE = re.compile(r"\[Rank (\d+)\] Watchdog caught collective operation timeout: WorkHCCL\(SeqNum=(\d+), "
                          r"OpType=(\w+), Timeout\(ms\)=(\d+)\)(?: ran for (\d+) milliseconds)?")

# HCCL's cmdType / opType enumeration (hicann/hccl fault-diagnosis guide).
_CMD_TYPES = {1: "Broadcast", 2: "AllReduce", 3: "Reduce", 4: "Send", 5: "Receive", 6: "AllGather",
              7: "ReduceScatter", 8: "AlltoAllV", 9: "AlltoAllVC", 10: "AlltoAll", 11: "Gather", 12: "Scatter",
              13: "BatchSendRecv", 16: "AllGatherV", 17: "ReduceScatterV"}
_NO_RANK = frozenset({"4294967295", "-1", "local", "unknown", ""})
_NO_ADDRESS = frozenset({"", "0.0.0.0", "unknown"})  # noqa: S104 - "unset" as HCCL prints it, no socket
_MAX_PROCESSES = 4096


def _may_state_a_fact(line: str) -> bool:
    """The pre-filter: a few substring tests, no regular expression (most lines are INFO noise).

    Of the shapes above only the Entry-, init and key-info lines are printed at INFO/DEBUG level.
    """
    if line.startswith(QUIET_LEVELS):
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


def _rank_id(value: str | None) -> int | None:
    """``rankId[3]``, or its two-number form ``rankId[3 4294967295]`` / ``rankId[25 24]``: the first is the
    reporting rank (the second, when set, another rank id of it)."""
    if value is None:
        return None
    parts = value.split()
    return _int(parts[0]) if parts else None


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
            missing = absent_ranks(self.expected, self.connected)
        if connected is None and missing is not None and self.expected is not None and (
                self.listed is None or self.listed == self.expected - len(missing)):
            connected = absent_ranks(self.expected, missing)
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
        if any(token in text for token in RENDEZVOUS_TOKENS):
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
        builder.fill(group=pairs["group"], rank_size=_int(pairs.get("rankSize")), rank=_rank_id(pairs.get("rankId")))
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
            if "connectFailedAgentIdList" in text or "unconnected ranks" in text:
                builder = self._init_for(pid, "root", when, builder)
            else:
                return
        said = parse_rendezvous(text)
        if said.timeout_s is not None:
            builder.timeout_s = said.timeout_s
        if said.connected_total is not None:
            builder.listed = said.connected_total
        if said.need is not None:
            builder.expected = said.need
        if said.connected is not None:
            builder.connected_seen = True
            builder.connected.update(said.connected)
        if said.missing is not None:
            builder.missing = said.missing
        if said.rank_num is not None:
            builder.expected, builder.listed = said.rank_num
        if said.root is not None:
            builder.root = said.root
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
        """Finish the blocks no line has added to for ``BLOCK_LINES`` lines."""
        if self._finished:
            facts.extend(self._finished)
            self._finished.clear()
        limit = self.line_no - BLOCK_LINES
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
