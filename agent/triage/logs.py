"""Evidence from one log stream (a plog, a device log, a job's stdout, a kernel log).

Two parsers read the same lines: ``collectors.hccl.comm`` (who is which rank of which
communicator, what each rank was running when it failed, rendezvous timeouts, torch_npu watchdog)
and ``collectors.hccl.classify`` (error codes and culprit hints). This module joins what they say
into records (``agent.triage.evidence``):

- ``RankSeen`` for every rank identity (init lines, failure blocks);
- ``RankFailure`` for every failure block (group, rank, operation, index) with the Ascend code
  printed near it, and for timeout-like errors with no block, placed by the process's identity;
- ``Blame`` for every peer a line names, with ``how`` read from the line (heartbeat lost or stuck,
  remote rank waited on, link peer, CQE peer, missing from the rendezvous), and the reporter
  (communicator and rank) of the same process nearest in time;
- ``LocalFault`` for RoCE completion errors (on the logging device), for the kernel's
  ``Heartbeat lost! (device=N)``, and for the failures that stop the logging rank (device OOM, AI Core,
  SDMA, a device that dropped out, a port it could not listen on: ``agent.health.log_categories``);
- ``OpProgress`` per process and communicator from HCCL_ENTRY_LOG_ENABLE entry lines.

**Speed.** ``candidate_lines`` is a prefilter on raw bytes: plog ``[INFO]``/``[DEBUG]``/
``[EVENT]``/``[TRACE]`` lines (almost all of a log) are skipped by one regular expression that
finds only the starts of other lines, plus ``bytes.find`` for the four tokens an INFO line may
carry a fact in (``Entry-Hccl``, ``ankNum[``, ``Key Info]``, ``crimer``). Line numbers stay exact
(newlines are counted in C), so both parsers join blocks as if they had read every line.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field

from agent.health.log_categories import fault_of
from agent.triage.evidence import Blame, Evidence, LocalFault, LoggedFault, OpProgress, RankFailure, RankSeen
from agent.triage.fault_chain import logged_entity
from collectors.hccl.classify import Event, StreamClassifier
from collectors.hccl.codes import TRIAGE_FAILURE_CATEGORIES
from collectors.hccl.comm import CommFactParser
from collectors.hccl.facts import CollectiveFailure, CollectiveOp, Fact, InitTimeout, RankIdentity, WatchdogTimeout
from collectors.hccl.hints import ATTACH_WINDOW_S, Hint, blame_how, decode_peer
from collectors.hccl.lines import BLOCK_LINES, QUIET_LEVELS, line_rank_device, parse_timestamp

__all__ = ["CHUNK_BYTES", "MAX_LINE", "LogReader", "candidate_lines", "read_stream"]

CHUNK_BYTES = 4 << 20
MAX_LINE = 64 << 10
CODE_NEAR_S = 120.0  # an error code printed this close to a failure block belongs to it
CODE_NEAR_LINES = BLOCK_LINES

_QUIET = tuple(level.encode() for level in QUIET_LEVELS)
_RARE_TOKENS = (b"Entry-Hccl", b"ankNum[", b"Key Info]", b"crimer")
_NOT_QUIET_START = re.compile(rb"\n(?!(?:" + b"|".join(re.escape(level) for level in _QUIET) + rb"))")
_PID_RE = re.compile(r"[A-Z][A-Z0-9_]*\((\d+),[^)]*\):|\[PID: (\d+)\]")
_LOCAL_DEVICE_RE = re.compile(r"localInfo\{server\[[^\]]*\],deviceId\[(\d+)\]")
# a heartbeat line names its reporter as ``Discoverer:[<device IP>/<rank>]``
_DISCOVERER_RE = re.compile(r"Discoverer:\[[^\]/]*/(\d+)\]")


def candidate_lines(data: bytes, first_line_no: int) -> tuple[list[tuple[int, bytes]], int]:
    """The lines of ``data`` (whole lines) that may say something, with their 1-based numbers,
    and how many lines ``data`` holds."""
    starts: list[int] = []
    if data and not data.startswith(_QUIET):
        starts.append(0)
    size = len(data)
    starts.extend(match.end() for match in _NOT_QUIET_START.finditer(data) if match.end() < size)
    extra = False
    for token in _RARE_TOKENS:
        at = data.find(token)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            if data.startswith(_QUIET, start):
                starts.append(start)
                extra = True
            end = data.find(b"\n", at)
            if end < 0:
                break
            at = data.find(token, end)
    if extra:
        starts = sorted(set(starts))
    lines: list[tuple[int, bytes]] = []
    line_no = first_line_no
    previous = 0
    for start in starts:
        line_no += data.count(b"\n", previous, start)
        previous = start
        end = data.find(b"\n", start)
        if end < 0:
            end = size
        if end > start:
            lines.append((line_no, data[start:min(end, start + MAX_LINE)]))
    total = data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
    return lines, total


def read_stream(read: Callable[[int], bytes], reader: LogReader, limit: int | None = None) -> int:
    """Feed every candidate line of a binary stream to ``reader``; returns the bytes read.

    ``limit`` stops after that many bytes (the rest of the stream is not read).
    """
    carry = b""
    line_no = 1
    total = 0
    first: bytes | None = None
    last = b""
    while True:
        want = CHUNK_BYTES if limit is None else min(CHUNK_BYTES, limit - total)
        data = read(want) if want > 0 else b""
        if not data:
            break
        total += len(data)
        buf = carry + data if carry else data
        cut = buf.rfind(b"\n")
        if cut < 0:
            carry = buf if len(buf) < MAX_LINE else b""
            continue
        whole, carry = buf[:cut + 1], buf[cut + 1:]
        if first is None:
            first = whole[:whole.find(b"\n")][:512]
        last = whole[whole.rfind(b"\n", 0, len(whole) - 1) + 1:][:512]
        lines, count = candidate_lines(whole, line_no)
        line_no += count
        for number, raw in lines:
            reader.feed(number, raw.decode("utf-8", "replace").rstrip("\r"))
    if carry:
        if first is None:
            first = carry[:512]
        last = carry[:512]
        lines, _ = candidate_lines(carry, line_no)
        for number, raw in lines:
            reader.feed(number, raw.decode("utf-8", "replace").rstrip("\r"))
    for edge in (first, last):
        if edge:
            reader.saw(parse_timestamp(edge.decode("utf-8", "replace"), reader.ref_time))
    return total


def _line_pid(line: str) -> int | None:
    match = _PID_RE.search(line)
    if match is None:
        return None
    return int(match.group(1) or match.group(2))


def _int(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


_ALL = -1  # by_pid key of every identity of the stream (no real pid is negative)


class _EventIndex:
    """The stream's timeout-like events, found by time (within ``CODE_NEAR_S``) or by line."""

    def __init__(self, events: list[Event]) -> None:
        self.pids = [_line_pid(event.text) for event in events]
        wanted = [(i, e) for i, e in enumerate(events) if e.category in TRIAGE_FAILURE_CATEGORIES]
        timed = sorted((e.timestamp, i) for i, e in wanted if e.timestamp is not None)
        self._times = [t for t, _ in timed]
        self._timed = [i for _, i in timed]
        self._lines = sorted((e.line_no, i) for i, e in wanted)
        self._line_nos = [line for line, _ in self._lines]
        self._untimed = {i for i, e in wanted if e.timestamp is None}

    def near(self, at: float | None, line_no: int) -> list[int]:
        """Event indexes near a failure block, in stream order."""
        found: set[int] = set()
        if at is not None:
            low, high = bisect_left(self._times, at - CODE_NEAR_S), bisect_right(self._times, at + CODE_NEAR_S)
            found.update(self._timed[low:high])
        low = bisect_left(self._line_nos, line_no - CODE_NEAR_LINES)
        high = bisect_right(self._line_nos, line_no + CODE_NEAR_LINES)
        for _, index in self._lines[low:high]:
            if at is None or index in self._untimed:
                found.add(index)
        return sorted(found)


class _Reports:
    """The failures of a stream that name a communicator, by process, for the nearest-in-time lookup."""

    def __init__(self, failures: list[RankFailure]) -> None:
        self._pools: dict[int | None, list[tuple[float, str, int | None]]] = {}
        self._undated: dict[int | None, tuple[str, int | None]] = {}
        self._all: list[tuple[float, str, int | None]] = []
        for failure in failures:
            if failure.comm is None:
                continue
            if failure.at is None:
                self._undated.setdefault(failure.pid, (failure.comm, failure.rank))
                continue
            item = (failure.at, failure.comm, failure.rank)
            self._pools.setdefault(failure.pid, []).append(item)
            self._all.append(item)
        for pool in (*self._pools.values(), self._all):
            pool.sort(key=lambda item: item[0])

    def nearest(self, pid: int | None, at: float | None) -> tuple[str | None, int | None] | None:
        """(comm, rank) of the failure of process ``pid`` (or of no known process) nearest to ``at``."""
        pools = [self._all] if pid is None else [self._pools.get(pid, []), self._pools.get(None, [])]
        best: tuple[float, str, int | None] | None = None
        for pool in pools:
            if not pool:
                continue
            if at is None:
                candidate = (ATTACH_WINDOW_S, pool[0][1], pool[0][2])
            else:
                index = _bisect_at(pool, at)
                around = pool[max(0, index - 1):index + 1]
                near = min(around, key=lambda item: abs(item[0] - at))
                candidate = (abs(near[0] - at), near[1], near[2])
            if candidate[0] <= ATTACH_WINDOW_S and (best is None or candidate[0] < best[0]):
                best = candidate
        if best is not None:
            return best[1], best[2]
        undated = self._undated.get(pid) if pid is not None else next(iter(self._undated.values()), None)
        return undated


def _bisect_at(pool: list[tuple[float, str, int | None]], at: float) -> int:
    """``bisect_left`` on the times of ``pool`` (Python 3.9 has no ``key=``)."""
    low, high = 0, len(pool)
    while low < high:
        middle = (low + high) // 2
        if pool[middle][0] < at:
            low = middle + 1
        else:
            high = middle
    return low


@dataclass
class _HintSeen:
    hint: Hint
    how: str
    pid: int | None
    line_no: int
    rank: int | None = None  # the rank its line's prefix names (``[rank0]:``): the reporter


@dataclass
class _Cqe:
    at: float | None
    pid: int | None
    device: int | None
    peer: str | None
    line_no: int


@dataclass
class _Ops:
    count: int = 0
    last_op: str | None = None
    last_at: float | None = None
    rank: int | None = None


@dataclass
class LogReader:
    """Reads one stream's candidate lines (``feed``) and turns them into evidence (``finish``)."""

    node: str
    source: str
    ref_time: float | None = None
    facts: list[Fact] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    hints: list[_HintSeen] = field(default_factory=list)
    cqes: list[_Cqe] = field(default_factory=list)
    lost_devices: list[tuple[int | None, float | None, int]] = field(default_factory=list)
    ops: dict[tuple[str, int | None], _Ops] = field(default_factory=dict)
    first_at: float | None = None
    last_at: float | None = None
    keep_hints: bool = False  # also keep every hint as the classifier gave it (``raw_hints``)
    raw_hints: list[Hint] = field(default_factory=list)
    # line number -> the rank its prefix names (``[rank9]:``, ``[Rank 9]``): a job log's copy of a
    # failure block says whose it is there, not in the block
    prefix_ranks: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._comm = CommFactParser(self.ref_time)
        self._classifier = StreamClassifier(source=self.source, ref_time=self.ref_time)

    def saw(self, at: float | None) -> None:
        if at is None:
            return
        self.first_at = at if self.first_at is None else min(self.first_at, at)
        self.last_at = at if self.last_at is None else max(self.last_at, at)

    def feed(self, line_no: int, line: str) -> None:
        if line[:1] in "[(" and "ank" in line[:16]:
            rank = line_rank_device(line[:32])[0]
            if rank is not None:
                self.prefix_ranks[line_no] = rank
        self._comm.line_no = line_no - 1
        for fact in self._comm.feed(line):
            self._fact(fact)
        self._classifier.line_no = line_no - 1
        events, hints = self._classifier.feed(line)
        if events:
            self.events.extend(events)
        if hints:
            self._hints(line, line_no, hints)
            if self.keep_hints:
                self.raw_hints.extend(hints)

    def _hints(self, line: str, line_no: int, hints: list[Hint]) -> None:
        pid = _line_pid(line)
        rank = self.prefix_ranks.get(line_no)
        if rank is None and "Discoverer:[" in line:
            found = _DISCOVERER_RE.search(line)
            rank = int(found.group(1)) if found is not None else None
        for hint in hints:
            if hint.kind == "device":  # the kernel's "Heartbeat lost! (device=N"
                self.lost_devices.append((_int(hint.value), hint.timestamp, line_no))
                continue
            how = blame_how(hint.kind, line)
            if how is None:
                continue
            self.hints.append(_HintSeen(hint, how, pid, line_no, rank))
            if how == "cqe":
                local = _LOCAL_DEVICE_RE.search(line)
                peer = decode_peer(hint.kind, hint.value)
                self.cqes.append(_Cqe(hint.timestamp, pid, int(local.group(1)) if local else None,
                                      peer.address if peer is not None else None, line_no))

    def _fact(self, fact: Fact) -> None:
        if isinstance(fact, CollectiveOp):
            if fact.group is None:
                return
            ops = self.ops.setdefault((fact.group, fact.pid), _Ops())
            ops.count += 1
            ops.last_op = fact.op
            ops.last_at = fact.timestamp
            ops.rank = fact.rank if fact.rank is not None else ops.rank
            return
        self.facts.append(fact)

    # ------------------------------------------------------------------ finish

    def finish(self) -> Evidence:
        for fact in self._comm.finish():
            self._fact(fact)
        self.events.extend(self._classifier.flush())
        evidence = Evidence()
        identities = [f for f in self.facts if isinstance(f, RankIdentity)]
        failures = [f for f in self.facts if isinstance(f, CollectiveFailure)]
        by_pid: dict[int | None, list[RankIdentity]] = {_ALL: identities}
        for identity in identities:
            by_pid.setdefault(identity.pid, []).append(identity)
            if identity.group is not None:
                evidence.ranks.append(RankSeen(identity.group, identity.rank, self.node, identity.rank_size,
                                               identity.device, identity.pid, identity.device_ip, identity.server,
                                               identity.timestamp, f"{self.source}:{identity.line_no}"))
            self.saw(identity.timestamp)
        used: set[int] = set()
        codes = _EventIndex(self.events)
        for failure in failures:
            evidence.failures.append(self._failure(failure, by_pid, used, codes))
        logged: dict[tuple[str, int | None], LoggedFault] = {}
        for index, event in enumerate(self.events):
            self.saw(event.timestamp)
            entity = logged_entity(event.text, event.category)
            if entity is not None:
                device = self._identity(codes.pids[index], by_pid, event.timestamp)[3]
                logged.setdefault((entity, device), LoggedFault(self.node, entity, event.timestamp, device,
                                                                f"{self.source}:{event.line_no}"))
            fault = fault_of(event.category, event.code)
            if fault is not None:
                device = self._identity(codes.pids[index], by_pid, event.timestamp)[3]
                device = device if device is not None else event.device
                evidence.faults.append(LocalFault(self.node, device, fault.kind, f"{fault.label}: {event.code} "
                                                  f"({self.source.rsplit('/', 1)[-1]})", at=event.timestamp,
                                                  source=f"{self.source}:{event.line_no}"))
            if index in used or event.category not in TRIAGE_FAILURE_CATEGORIES:
                continue
            pid = codes.pids[index]
            group, rank, size, device = self._identity(pid, by_pid, event.timestamp)
            # no communicator fact places the process: the rank and device its own line prints ([rank9]:, Device:3)
            rank = rank if rank is not None else event.rank
            device = device if device is not None else event.device
            evidence.failures.append(RankFailure(self.node, event.timestamp, event.code, event.category, group, rank,
                                                 size, device, pid=pid, source=f"{self.source}:{event.line_no}"))
        for fact in self.facts:
            if isinstance(fact, InitTimeout):
                self._init_timeout(fact, by_pid, evidence)
            elif isinstance(fact, WatchdogTimeout):
                evidence.failures.append(RankFailure(self.node, fact.timestamp, "watchdog", "watchdog_timeout", None,
                                                     fact.rank, None, None, fact.op, fact.seq,
                                                     source=f"{self.source}:{fact.line_no}"))
        evidence.logged.extend(logged.values())
        reports = _Reports(evidence.failures)
        for seen in self.hints:
            comm, reporter = reports.nearest(seen.pid, seen.hint.timestamp) or self._identity(
                seen.pid, by_pid, seen.hint.timestamp)[:2]
            reporter = seen.rank if seen.rank is not None else reporter
            peer = decode_peer(seen.hint.kind, seen.hint.value, seen.how)
            if peer is None:
                continue
            evidence.blames.append(Blame(self.node, seen.hint.timestamp, seen.how, comm, reporter, peer.rank,
                                         peer.address, peer.device, seen.pid, f"{self.source}:{seen.line_no}"))
        evidence.faults.extend(self._cqe_faults(by_pid))
        for device, at, line_no in self.lost_devices:
            evidence.faults.append(LocalFault(self.node, device, "device_lost",
                                              f"kernel log: Heartbeat lost! (device={device})", at=at,
                                              source=f"{self.source}:{line_no}"))
        for (group, pid), ops in self.ops.items():
            rank = ops.rank
            if rank is None:
                rank = next((i.rank for i in by_pid.get(pid, []) if i.group == group), None)
            evidence.progress.append(OpProgress(self.node, group, rank, ops.count, ops.last_op, ops.last_at, pid,
                                                self.source))
        for at in [f.at for f in evidence.failures] + [b.at for b in evidence.blames]:
            self.saw(at)
        return evidence

    def _failure(self, failure: CollectiveFailure, by_pid: dict[int | None, list[RankIdentity]],
                 used: set[int], codes: _EventIndex) -> RankFailure:
        code, category = "task_exec_timeout", "exec_timeout"
        best: tuple[float, int] | None = None
        for index in codes.near(failure.timestamp, failure.line_no):
            event = self.events[index]
            if failure.pid is not None and codes.pids[index] not in (None, failure.pid):
                continue
            ascend = event.code[:2] in ("EI", "EE", "EJ") or event.code.isdigit()
            rank_key = (0.0 if ascend else 1.0, index)
            if best is None or rank_key < best:
                best = rank_key
                code, category = event.code, event.category
            used.add(index)
        group, rank, size, device = failure.group, failure.rank, failure.rank_size, failure.device
        if rank is None:
            rank = self.prefix_ranks.get(failure.line_no)
        if group is None or rank is None:
            known_group, known_rank, known_size, known_device = self._identity(failure.pid, by_pid, failure.timestamp)
            group = group or known_group
            rank = rank if rank is not None else known_rank
            size = size if size is not None else known_size
            device = device if device is not None else known_device
        if device is None and group is not None:
            device = next((i.device for i in by_pid.get(failure.pid, []) if i.group == group and i.rank == rank
                           and i.device is not None), None)
        return RankFailure(self.node, failure.timestamp, code, category, group, rank, size, device, failure.op,
                           failure.index, failure.pid, f"{self.source}:{failure.line_no}")

    def _identity(self, pid: int | None, by_pid: dict[int | None, list[RankIdentity]], at: float | None
                  ) -> tuple[str | None, int | None, int | None, int | None]:
        """(group, rank, size, device) of a process when its identities name one communicator."""
        known = by_pid.get(pid) if pid is not None else by_pid.get(_ALL)
        places = {(i.group, i.rank) for i in known or [] if i.group is not None}
        if len(places) != 1:
            return None, None, None, None
        group, rank = places.pop()
        sizes = [i.rank_size for i in known or [] if i.rank_size is not None]
        devices = [i.device for i in known or [] if i.device is not None]
        return group, rank, max(sizes) if sizes else None, devices[0] if devices else None

    def _init_timeout(self, fact: InitTimeout, by_pid: dict[int | None, list[RankIdentity]],
                      evidence: Evidence) -> None:
        group, rank, size, device = self._identity(fact.pid, by_pid, fact.timestamp)
        group = fact.group or group
        source = f"{self.source}:{fact.line_no}"
        evidence.failures.append(RankFailure(self.node, fact.timestamp, "EI0015", "rendezvous_timeout", group, rank,
                                             fact.expected or size, device, pid=fact.pid, source=source))
        for missing in fact.missing or ():
            evidence.blames.append(Blame(self.node, fact.timestamp, "missing", group, rank, missing, pid=fact.pid,
                                         source=source))
        if fact.role == "agent" and fact.root is not None:
            root = decode_peer("root_server", fact.root)
            evidence.blames.append(Blame(self.node, fact.timestamp, "unreachable", group, rank,
                                         ip=root.address if root is not None else None, pid=fact.pid, source=source))

    def _cqe_faults(self, by_pid: dict[int | None, list[RankIdentity]]) -> list[LocalFault]:
        """One fault per device: the first CQE error, how many, towards whom, until the last."""
        grouped: dict[int | None, list[_Cqe]] = {}
        for cqe in self.cqes:
            device = cqe.device if cqe.device is not None else self._identity(cqe.pid, by_pid, cqe.at)[3]
            grouped.setdefault(device, []).append(cqe)
        faults = []
        for device, items in grouped.items():
            times = [c.at for c in items if c.at is not None]
            peers = sorted({c.peer for c in items if c.peer})
            towards = f" towards {', '.join(peers[:3])}" if peers else ""
            count = f"{len(items)} RoCE CQE error lines" if len(items) > 1 else "a RoCE CQE error"
            where = self.source.rsplit("/", 1)[-1]
            faults.append(LocalFault(self.node, device, "roce_cqe", f"{count}{towards} ({where})",
                                     at=min(times) if times else None, until=max(times) if times else None,
                                     source=f"{self.source}:{items[0].line_no}", peers=tuple(peers)))
        return faults
