"""Incident drafts: the failure reports of one communicator close in time, with the flight-recorder finding
that joins them, and what follows from them (``Scope``: span, size, reporting and silent ranks, codes).

An incident whose reports print no communicator size (torch watchdog lines, screen codes) is as large as
the rank table when its ranks are at least half of the table's.

Reports of one communicator less than ``INCIDENT_GAP_S`` apart are one incident (ranks time out
minutes apart: each waits its own ``HCCL_EXEC_TIMEOUT`` from when it entered the collective). A
report that names no communicator joins the incident of its node's ranks at that time, else forms
a communicator-less one. A flight-recorder process group whose ranks disagree joins the incident
of a communicator of its size at that time, else is an incident of its own.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from agent.triage.evidence import RankFailure
from agent.triage.flight import FlightFinding
from agent.triage.locate import Locator
from collectors.hccl.codes import is_ascend_code

__all__ = ["FLIGHT_BEFORE_S", "INCIDENT_GAP_S", "Draft", "Scope", "attach_flight", "drafts", "pid_ranks",
           "reporter_of", "scope_of"]

INCIDENT_GAP_S = 1200.0
FLIGHT_BEFORE_S = 2 * 3600.0  # a collective is enqueued up to an exec timeout before it fails


@dataclass
class Draft:
    comm: str | None
    failures: list[RankFailure] = field(default_factory=list)
    finding: FlightFinding | None = None

    def times(self) -> list[float]:
        found = [f.at for f in self.failures if f.at is not None]
        if self.finding is not None and self.finding.at is not None and not found:
            found.append(self.finding.at)
        return found

    @property
    def start(self) -> float | None:
        return min(self.times(), default=None)

    @property
    def end(self) -> float | None:
        return max(self.times(), default=None)

    @property
    def nodes(self) -> set[str]:
        return {f.node for f in self.failures}


def _clusters(failures: list[RankFailure]) -> list[list[RankFailure]]:
    dated = sorted((f for f in failures if f.at is not None), key=lambda f: f.at or 0.0)
    undated = [f for f in failures if f.at is None]
    clusters: list[list[RankFailure]] = []
    last: float | None = None
    for failure in dated:
        assert failure.at is not None
        if last is None or failure.at - last > INCIDENT_GAP_S:
            clusters.append([])
        clusters[-1].append(failure)
        last = failure.at
    if undated:
        if clusters:
            max(clusters, key=len).extend(undated)
        else:
            clusters.append(undated)
    return clusters


def drafts(failures: list[RankFailure]) -> list[Draft]:
    by_comm: dict[str, list[RankFailure]] = defaultdict(list)
    loose: list[RankFailure] = []
    for failure in failures:
        (by_comm[failure.comm] if failure.comm else loose).append(failure)
    drafts = [Draft(comm, cluster) for comm, items in sorted(by_comm.items()) for cluster in _clusters(items)]
    homes = [(draft, draft.nodes, draft.start, draft.end) for draft in drafts]
    unplaced: list[RankFailure] = []
    for failure in loose:
        home = next((draft for draft, nodes, start, end in homes
                     if failure.node in nodes and _near(failure.at, start, end)), None)
        (home.failures if home is not None else unplaced).append(failure)
    drafts.extend(Draft(None, cluster) for cluster in _clusters(unplaced))
    return drafts


def _near(at: float | None, start: float | None, end: float | None) -> bool:
    if at is None or start is None or end is None:
        return True
    return start - INCIDENT_GAP_S <= at <= end + INCIDENT_GAP_S


def draft_size(draft: Draft, locator: Locator) -> int | None:
    sizes = [f.rank_size for f in draft.failures if f.rank_size is not None]
    known = locator.comm_size(draft.comm)
    if known is not None:
        sizes.append(known)
    if not sizes and locator.table_size:
        # reports that print no size (torch's watchdog, the EI codes on the screen): the job's world, which the
        # rank table lists (its ranks place them too), when every rank named is in it and half of it or more is
        ranks = {f.rank for f in draft.failures if f.rank is not None}
        if ranks and max(ranks) < locator.table_size and len(ranks) * 2 >= locator.table_size:
            sizes.append(locator.table_size)
    return max(sizes) if sizes else None


def attach_flight(finding: FlightFinding, drafts: list[Draft], locator: Locator) -> None:
    size = len(finding.expected)
    for draft in drafts:
        if draft.finding is not None or not draft.failures:
            continue
        if draft_size(draft, locator) not in (size, None):
            continue
        start, end = draft.start, draft.end
        if finding.at is None or start is None or end is None or (
                start - FLIGHT_BEFORE_S <= finding.at <= end + INCIDENT_GAP_S):
            draft.finding = finding
            return
    drafts.append(Draft(None, [], finding))


@dataclass(frozen=True)
class Scope:
    """One incident as its draft defines it: span, size, who reported, who stayed silent, what was printed.

    ``size`` is the communicator's size when known (``None`` else), ``rank_size`` the same with 0
    for unknown; the *reporting* ranks are those of the communicator that reported, the *silent* ones
    the others of ``rank_size``.
    """

    draft: Draft
    start: float | None
    end: float | None
    size: int | None
    rank_size: int
    reporting: tuple[int, ...]
    reporters: int
    silent: tuple[int, ...]
    codes: list[str]
    op: str | None
    nodes: set[str]


def scope_of(draft: Draft, locator: Locator) -> Scope:
    finding = draft.finding
    size = draft_size(draft, locator)
    if size is None and finding is not None:
        size = len(finding.expected)
    rank_size = size or 0
    reporting = {f.rank for f in draft.failures if f.rank is not None}
    if not draft.failures and finding is not None:
        reporting = set(finding.reached)
    ranks_of = pid_ranks(draft.failures)
    reporters = len({reporter_of(f.node, f.rank, f.pid, ranks_of) for f in draft.failures}) or len(reporting)
    if size is not None:
        reporters = min(reporters, size)  # what no line names twice over: never more reporters than ranks
    ops = Counter(f.op for f in draft.failures if f.op)
    op = ops.most_common(1)[0][0] if ops else (finding.op if finding is not None else None)
    return Scope(draft, draft.start, draft.end, size, rank_size, tuple(sorted(reporting)), reporters,
                 tuple(rank for rank in range(rank_size) if rank not in reporting), _codes(draft.failures), op,
                 draft.nodes)


def pid_ranks(failures: Iterable[RankFailure]) -> dict[tuple[str, int], int]:
    """(node, pid) -> rank, from the reports that name both: another copy of a report (the job log's, with
    the process id and no rank) is the same rank's."""
    found: dict[tuple[str, int], set[int]] = defaultdict(set)
    for failure in failures:
        if failure.pid is not None and failure.rank is not None:
            found[(failure.node, failure.pid)].add(failure.rank)
    return {key: next(iter(ranks)) for key, ranks in found.items() if len(ranks) == 1}


def reporter_of(node: str, rank: int | None, pid: int | None,
                ranks_of: dict[tuple[str, int], int]) -> tuple[object, ...]:
    """Who reported: one key per rank however many lines and copies (plog, job log) say it; a report with
    neither rank nor process is its node's."""
    if rank is None and pid is not None:
        rank = ranks_of.get((node, pid))
    return ("rank", node, rank) if rank is not None else ("pid", node, pid)


def _codes(failures: Iterable[RankFailure]) -> list[str]:
    """The codes printed, a wording's synthetic code only where no printed code of its category is: EI0002 and
    ``task_exec_timeout`` are one failure's code and its wording."""
    failures = list(failures)
    printed = {f.category for f in failures if is_ascend_code(f.code)}
    codes = {f.code for f in failures if is_ascend_code(f.code) or f.category not in printed}
    return sorted(codes, key=lambda code: (not is_ascend_code(code), code))
