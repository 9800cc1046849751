"""The evidence triage reasons over: typed records, independent of where they were read.

Every record names the ``node`` whose data it came from (a bundle's node, a directory's name, a
Prometheus ``node`` label). Times are epoch seconds (``None``: unknown). Communicators are named by
their HCCL group tag (``comm``), the same string on every rank of one communicator, so records from
different nodes join on ``(comm, rank)``; a flight-recorder process group is named by its
``process_group`` name instead (``FlightRecord.group``).

Builders:

- log files and bundles: ``agent.triage.logs`` (plogs, device logs, job logs, kernel logs),
  ``agent.triage.snapshots`` (hccn_tool / npu-smi outputs, hccn.conf, rank tables),
  ``agent.triage.inputs`` (flight-recorder dumps, bundle manifests);
- Prometheus series: ``agent.triage.series`` turns each node's exported findings
  (``npu_fault_since_timestamp_seconds``) into ``LocalFault`` records, ``agent.triage.stragglers`` the fleet
  rules' firing NPUJobStraggler alerts into ``JobStraggler`` records. Log-derived series map onto the
  other records the same way, filling what the labels give and leaving the rest ``None``: an error counter's increase ->
  ``RankFailure(node, at=when it rose, code, category, comm=..., rank=...)`` (no ``comm``: the
  engine joins it to its node's ranks at that time); a blamed peer -> ``Blame(node, at, how,
  comm, rank=..., ip=...)``; a device address -> ``Address(ip, node, npu)``; a rank's placement
  -> ``RankSeen(comm, rank, node, npu=...)``. ``engine.analyze`` needs nothing else.

Nothing here reads a file or a clock. ``Evidence`` is a plain container (picklable, so worker
processes can return it) with ``extend`` to merge and ``relabel`` to rename a node once a
bundle's manifest says its real name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

__all__ = [
    "Address",
    "Blame",
    "Evidence",
    "FlightEntry",
    "FlightRecord",
    "JobStraggler",
    "LocalFault",
    "LoggedFault",
    "NodeCoverage",
    "OpProgress",
    "RankFailure",
    "RankSeen",
    "Window",
]

@dataclass(frozen=True)
class Window:
    """The time range triage looks at; an open end is ``None``. Records without a time are in it."""

    start: float | None = None
    end: float | None = None

    def contains(self, at: float | None) -> bool:
        if at is None:
            return True
        return (self.start is None or at >= self.start) and (self.end is None or at <= self.end)

    def overlaps(self, first: float | None, last: float | None) -> bool:
        """Whether ``[first, last]`` (either end unknown = unbounded) meets the window."""
        if self.end is not None and first is not None and first > self.end:
            return False
        return not (self.start is not None and last is not None and last < self.start)

    @property
    def everything(self) -> bool:
        return self.start is None and self.end is None


@dataclass(frozen=True)
class RankSeen:
    """A rank of a communicator and where it ran (init lines, failure blocks, a rank table, a dump).

    ``npu`` is the device id the rank used (HCCL's logical device id, which is the NPU id on a node
    that shows all its chips); ``device_ip`` / ``server_ip`` are its RoCE and host addresses.
    """

    comm: str
    rank: int
    node: str | None
    rank_size: int | None = None
    npu: int | None = None
    pid: int | None = None
    device_ip: str | None = None
    server_ip: str | None = None
    at: float | None = None
    source: str = ""


@dataclass(frozen=True)
class RankFailure:
    """A rank (or a process of a node whose rank is unknown) reported a collective failure.

    ``code`` is the Ascend code when one was printed (EI0002), else a synthetic one
    (``task_exec_timeout``, ``watchdog``); ``index`` is the operation's sequence number in its
    communicator (HCCL's opData index, torch's SeqNum) when printed.
    """

    node: str
    at: float | None
    code: str
    category: str
    comm: str | None = None
    rank: int | None = None
    rank_size: int | None = None
    npu: int | None = None
    op: str | None = None
    index: int | None = None
    pid: int | None = None
    source: str = ""


@dataclass(frozen=True)
class Blame:
    """A reporter's log names a peer: a rank of the reporter's communicator, an address, or both.

    ``how`` is one of ``collectors.hccl.hints.BLAME_HOWS``; ``device`` is a device id printed next to the address.
    """

    node: str
    at: float | None
    how: str
    comm: str | None = None
    reporter_rank: int | None = None
    rank: int | None = None
    ip: str | None = None
    device: int | None = None
    pid: int | None = None
    source: str = ""


@dataclass(frozen=True)
class LocalFault:
    """Something wrong on one node, on one NPU (``npu``) or the node as a whole (``npu`` None).

    ``kind`` is a key of ``agent.triage.faults.FAULT_KINDS``. ``at`` is when it started or
    happened when that is known (a link_stat change, a log line), ``seen_at`` when it was observed
    (a tool snapshot); a fault with neither time is a state with no date (an ECC count).
    ``until`` is when it was last seen still going on (None: still on when observed, or a moment).
    ``peers`` are the addresses at the other end of a link fault (RoCE CQE errors towards them).
    """

    node: str
    npu: int | None
    kind: str
    detail: str
    at: float | None = None
    seen_at: float | None = None
    until: float | None = None
    source: str = ""
    peers: tuple[str, ...] = ()
    status: str = ""  # FAIL or WARN as the node judged it (its exported finding); "" for the kind's own

    @property
    def dated(self) -> bool:
        return self.at is not None


@dataclass(frozen=True)
class JobStraggler:
    """The fleet's finding that one rank, port or host slows its training job: a firing alert of a fleet kind of
    the registry (``job_straggler``: NPUJobStraggler), judged by the fleet's rules over every rank of the job and
    read as it is, never judged again here.

    ``cause`` is the rule's (``compute``, ``link``, ``host``); a ``host`` finding names the node only (``npu``
    and ``rank`` None). ``at`` is the first time the window shows it firing, ``until`` the last when it had
    ended before the window's end (None: still firing).
    """

    node: str
    training_job: str
    cause: str
    kind: str = "job_straggler"
    npu: int | None = None
    rank: int | None = None
    at: float | None = None
    until: float | None = None
    source: str = ""


@dataclass(frozen=True)
class LoggedFault:
    """An HCCL fault of the knowledge graph that a log line shows (``entity``: ``AISW_CANN_HCCL_014``), the
    first line of it in one log stream, whether or not it reports a collective's failure."""

    node: str
    entity: str
    at: float | None
    npu: int | None = None
    source: str = ""


@dataclass(frozen=True)
class Address:
    """An IP address that belongs to a node (host address, ``npu`` None) or to one of its NPUs.

    ``rank`` is set when a rank table gives the rank that uses this device address.
    """

    ip: str
    node: str | None
    npu: int | None = None
    rank: int | None = None
    source: str = ""


@dataclass(frozen=True)
class FlightEntry:
    """One collective of a flight-recorder ring buffer, reduced to what triage compares."""

    seq: int
    op: str | None
    state: str
    at: float | None = None  # when it was enqueued (time_created_ns)
    sizes: str = ""  # input sizes and dtypes as one comparable text
    p2p: bool = False


@dataclass(frozen=True)
class FlightRecord:
    """One rank's flight-recorder view of one process group.

    ``group`` is the process group's name as the entries give it (``"0"``, ``group_name_0``),
    the same on every rank; ``group_ranks`` the global ranks of the group when the dump says.
    ``last_enqueued`` is the newest collective sequence number the rank entered.
    """

    node: str
    rank: int
    group: str
    group_desc: str = ""
    group_ranks: tuple[int, ...] | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    entries: tuple[FlightEntry, ...] = ()
    source: str = ""


@dataclass(frozen=True)
class OpProgress:
    """How far a rank got in a communicator according to its entry log (HCCL_ENTRY_LOG_ENABLE=1)."""

    node: str
    comm: str
    rank: int | None
    ops: int
    last_op: str | None
    last_at: float | None
    pid: int | None = None
    source: str = ""


@dataclass
class NodeCoverage:
    """What was read for one node: inputs, files, bytes, the time span its logs cover, problems."""

    node: str
    inputs: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    first_at: float | None = None
    last_at: float | None = None
    taken_at: float | None = None  # when a bundle was made
    problems: list[str] = field(default_factory=list)

    def saw(self, at: float | None) -> None:
        if at is None:
            return
        self.first_at = at if self.first_at is None else min(self.first_at, at)
        self.last_at = at if self.last_at is None else max(self.last_at, at)

    def merge(self, other: NodeCoverage) -> None:
        self.inputs.extend(other.inputs)
        self.files += other.files
        self.bytes += other.bytes
        self.saw(other.first_at)
        self.saw(other.last_at)
        if other.taken_at is not None:
            self.taken_at = max(self.taken_at or 0.0, other.taken_at)
        self.problems.extend(other.problems)


_LISTS = ("ranks", "failures", "blames", "faults", "logged", "addresses", "flights", "progress", "stragglers")


@dataclass
class Evidence:
    """Everything read from the inputs, as records; ``problems`` are inputs that could not be read."""

    ranks: list[RankSeen] = field(default_factory=list)
    failures: list[RankFailure] = field(default_factory=list)
    blames: list[Blame] = field(default_factory=list)
    faults: list[LocalFault] = field(default_factory=list)
    logged: list[LoggedFault] = field(default_factory=list)
    addresses: list[Address] = field(default_factory=list)
    flights: list[FlightRecord] = field(default_factory=list)
    progress: list[OpProgress] = field(default_factory=list)
    stragglers: list[JobStraggler] = field(default_factory=list)
    nodes: dict[str, NodeCoverage] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    # the fleet's own findings were read (a Prometheus that holds the fleet rules' alerts): bundles have none
    fleet_view: bool = False

    def coverage(self, node: str) -> NodeCoverage:
        if node not in self.nodes:
            self.nodes[node] = NodeCoverage(node)
        return self.nodes[node]

    def extend(self, other: Evidence) -> Evidence:
        for name in _LISTS:
            getattr(self, name).extend(getattr(other, name))
        for node, coverage in other.nodes.items():
            if node in self.nodes:
                self.nodes[node].merge(coverage)
            else:
                self.nodes[node] = coverage
        self.problems.extend(other.problems)
        self.fleet_view = self.fleet_view or other.fleet_view
        return self

    def relabel(self, old: str, new: str) -> None:
        """Rename node ``old`` to ``new`` in every record (a bundle's manifest names its node)."""
        if old == new:
            return
        for name in _LISTS:
            records: list[Any] = getattr(self, name)
            for i, record in enumerate(records):
                if getattr(record, "node", None) == old:
                    records[i] = replace(record, node=new)
        coverage = self.nodes.pop(old, None)
        if coverage is not None:
            coverage.node = new
            if new in self.nodes:
                self.nodes[new].merge(coverage)
            else:
                self.nodes[new] = coverage

    def counts(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in _LISTS}

    @property
    def empty(self) -> bool:
        """Nothing was read: no record, no file of any node (an empty directory is empty, and so is one of
        binary files only: they are skipped, not read) and no Prometheus answered (a healthy fleet's has no record)."""
        if self.fleet_view:
            return False
        read = any(coverage.files or coverage.taken_at is not None for coverage in self.nodes.values())
        return not read and not any(getattr(self, name) for name in _LISTS)
