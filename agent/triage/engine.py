"""``analyze(evidence, window) -> TriageReport``: which rank stopped the collective, and why.

**Incidents.** Every failure report of a timeout-like category (``TRIAGE_FAILURE_CATEGORIES``) in the
window belongs to an incident: reports of one communicator less than ``INCIDENT_GAP_S`` apart are
one incident (ranks time out minutes apart: each waits its own ``HCCL_EXEC_TIMEOUT`` from when it
entered the collective). A report that names no communicator joins the incident of its node's
ranks at that time, else forms a communicator-less one. A flight-recorder process group whose
ranks disagree (``agent.triage.flight``) joins the incident of a communicator of its size at that
time, else is an incident of its own. The ranks of the communicator that reported are the
*reporting* ranks; the others (of ``rank_size``) are *silent*.

**Culprits.** Candidates are the ranks, NPUs, nodes and addresses the evidence points at; each
gets a score, a sum of independent kinds of evidence (the more kinds agree, the higher):

=====================  ======================================================================
peer blame             1 + 2 x (share of the reporting ranks whose logs name it: heartbeat
                       lost or stuck, remote rank waited on, unreachable link peer, CQE peer,
                       missing from the rendezvous); 1..3
silence                1.5 / (number of silent ranks), when at least half the ranks reported
flight recorder        3 for the rank furthest behind (hang) or outside the majority at one
                       collective (desync); 1.5 for weaker variants, 1 for a missing dump
HCCL desync            3 for a rank whose failed operation differs from the majority's at the
                       same operation index
entry log              1.5 for a rank whose HCCL_ENTRY_LOG_ENABLE entries stop before the others'
local fault            the weight of its most convincing fault in the incident's time span
                       (``agent.triage.faults``: link down 5 ... counters 0.8; x0.6 undated),
                       +0.2 for each other kind of fault there (at most +0.6); on an NPU or node
                       that nothing else points at, but that runs a rank of the communicator,
                       half of that
=====================  ======================================================================

So a local fault on a rank its peers blame outranks the same fault on a rank nobody blames
(independent evidence agrees), which outranks blame alone, which outranks silence alone. A
fault counts when it is dated within ``LOOKBACK_S`` before the first report up to ``AFTER_S``
after the last, or was still going on then.

**Cause.** A fault of weight >= ``STRONG_FAULT`` names the cause (link_down, link_flap, optics,
roce_errors, chip_fault, hbm_ecc, slow_chip); else desync (flight recorder or HCCL); else a hang
(flight recorder behind, heartbeat "stuck", entry log behind, silent while its node's logs
continue); else process_exit (heartbeat lost); else a weaker fault's cause; else unknown.

A culprit is *named* when its score reaches ``NAMED_SCORE`` and something identifies it (a node,
a rank or an address). Exit status: 0 no incident, 1 every incident has a named culprit, 2 an
incident without one, 3 nothing could be read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agent.triage.evidence import Blame, Evidence, LocalFault, OpProgress, RankFailure, Window
from agent.triage.faults import FAULT_KINDS, fault_weight, rank_faults
from agent.triage.flight import FlightCulprit, FlightFinding, analyze_flights, rank_ranges
from agent.triage.locate import Locator
from agent.triage.report import Culprit, Incident, TriageReport
from agent.triage.timefmt import clock, stamp
from collectors.hccl.codes import TRIAGE_FAILURE_CATEGORIES

__all__ = [
    "NAMED_SCORE",
    "analyze",
]

INCIDENT_GAP_S = 1200.0
LOOKBACK_S = 3600.0
AFTER_S = 600.0
BLAME_BEFORE_S = 900.0  # heartbeat lines come a minute or more before the task times out
FLIGHT_BEFORE_S = 2 * 3600.0  # a collective is enqueued up to an exec timeout before it fails
NAMED_SCORE = 1.5
STRONG_FAULT = 2.0
MAX_CULPRITS = 5
BLAME_BASE, BLAME_SHARE = 1.0, 2.0
SILENCE = 1.5
HCCL_DESYNC = 3.0
ENTRY_BEHIND = 1.5
MEMBER_FACTOR = 0.5
CORROBORATION, CORROBORATION_MAX = 0.2, 0.6

_HOW_PHRASES = {
    "lost": "lost its heartbeat",
    "stuck": "saw it stuck",
    "waited_on": "waited on it",
    "unreachable": "could not reach it",
    "cqe": "got RoCE CQE errors from it",
    "missing": "never heard from it at the rendezvous",
}
_CAUSE_PHRASES = {
    "process_hang": "its process stopped issuing collectives (hung)",
    "process_exit": "its process exited or lost its network (heartbeat lost)",
    "desync": "it called a different collective than its peers (desync)",
    "unknown": "blamed, cause not found in the inputs",
}


# ----------------------------------------------------------------------------- drafts


@dataclass
class _Draft:
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


def _drafts(failures: list[RankFailure]) -> list[_Draft]:
    by_comm: dict[str, list[RankFailure]] = defaultdict(list)
    loose: list[RankFailure] = []
    for failure in failures:
        (by_comm[failure.comm] if failure.comm else loose).append(failure)
    drafts = [_Draft(comm, cluster) for comm, items in sorted(by_comm.items()) for cluster in _clusters(items)]
    homes = [(draft, draft.nodes, draft.start, draft.end) for draft in drafts]
    unplaced: list[RankFailure] = []
    for failure in loose:
        home = next((draft for draft, nodes, start, end in homes
                     if failure.node in nodes and _near(failure.at, start, end)), None)
        (home.failures if home is not None else unplaced).append(failure)
    drafts.extend(_Draft(None, cluster) for cluster in _clusters(unplaced))
    return drafts


def _near(at: float | None, start: float | None, end: float | None) -> bool:
    if at is None or start is None or end is None:
        return True
    return start - INCIDENT_GAP_S <= at <= end + INCIDENT_GAP_S


def _size(draft: _Draft, locator: Locator) -> int | None:
    sizes = [f.rank_size for f in draft.failures if f.rank_size is not None]
    known = locator.comm_size(draft.comm)
    if known is not None:
        sizes.append(known)
    return max(sizes) if sizes else None


def _attach_flight(finding: FlightFinding, drafts: list[_Draft], locator: Locator) -> None:
    size = len(finding.expected)
    for draft in drafts:
        if draft.finding is not None or not draft.failures:
            continue
        if _size(draft, locator) not in (size, None):
            continue
        start, end = draft.start, draft.end
        if finding.at is None or start is None or end is None or (
                start - FLIGHT_BEFORE_S <= finding.at <= end + INCIDENT_GAP_S):
            draft.finding = finding
            return
    drafts.append(_Draft(None, [], finding))


# ----------------------------------------------------------------------------- candidates


@dataclass
class _Candidate:
    node: str | None
    npu: int | None
    rank: int | None = None
    ip: str | None = None
    via: str = ""
    blamers: set[tuple[str, object]] = field(default_factory=set)
    hows: Counter[str] = field(default_factory=Counter)
    first_blame: float | None = None
    silent: bool = False
    silent_observed: bool = False
    silence: float = 0.0
    flights: list[FlightCulprit] = field(default_factory=list)
    desync: list[str] = field(default_factory=list)
    behind: list[str] = field(default_factory=list)
    faults: list[LocalFault] = field(default_factory=list)
    member: bool = False  # pointed at only because it runs a rank of the communicator

    @property
    def pointed(self) -> bool:
        return bool(self.blamers or self.silent or self.flights or self.desync or self.behind)


class _Candidates:
    def __init__(self, locator: Locator, comm: str | None, rank_size: int | None) -> None:
        self.locator = locator
        self.comm = comm
        self.rank_size = rank_size
        self.items: dict[tuple[object, ...], _Candidate] = {}
        self.aliases: dict[tuple[object, ...], tuple[object, ...]] = {}
        self._by_place: dict[tuple[str | None, int | None], int] | None = None

    def get(self, *, node: str | None = None, npu: int | None = None, rank: int | None = None,
            ip: str | None = None, device: int | None = None) -> _Candidate:
        via = ""
        if node is None and ip is not None:
            place = self.locator.where_ip(ip)
            if place is not None:
                node, npu, via = place.node, place.npu, place.via
                if rank is None and place.rank is not None and self.rank_size in (None, self.locator.table_size):
                    rank = place.rank
        if node is None and rank is not None:
            place = self.locator.where_rank(self.comm, rank, self.rank_size)
            if place is not None:
                node, npu, via = place.node, place.npu, place.via
        if node is not None and npu is None and device is not None:
            npu = device
        if node is not None and npu is not None and rank is None and self.comm is not None:
            rank = self._placed().get((node, npu))
        key: tuple[object, ...]
        if node is not None:
            key = ("at", node, npu)
        elif rank is not None:
            key = ("rank", rank)
        else:
            key = ("ip", ip)
        for alias in (("rank", rank), ("ip", ip)):
            if alias[1] is None or alias not in self.aliases:
                continue
            known = self.aliases[alias]
            if known == key or known not in self.items:
                continue
            if node is None:
                key = known  # a reference without a place joins the candidate that has one
            elif self.items[known].node is None:
                self._merge(self.items.pop(known), key, node, npu)
        candidate = self.items.get(key)
        if candidate is None:
            candidate = self.items[key] = _Candidate(node, npu)
        candidate.rank = candidate.rank if candidate.rank is not None else rank
        candidate.ip = candidate.ip or ip
        candidate.via = candidate.via or via
        for alias in (("rank", candidate.rank), ("ip", candidate.ip)):
            if alias[1] is not None:
                self.aliases[alias] = key
        return candidate

    def _placed(self) -> dict[tuple[str | None, int | None], int]:
        if self._by_place is None:
            self._by_place = {(place.node, place.npu): rank
                              for rank, place in self.locator.ranks_of(self.comm or "").items()}
        return self._by_place

    def _merge(self, old: _Candidate, key: tuple[object, ...], node: str, npu: int | None) -> None:
        target = self.items.setdefault(key, _Candidate(node, npu))
        _absorb(target, old)

    def settle(self) -> list[_Candidate]:
        """Fold a node-level candidate into the one NPU-level candidate of its node, when there is one."""
        by_node: dict[str, list[_Candidate]] = defaultdict(list)
        for candidate in self.items.values():
            if candidate.node is not None and candidate.npu is not None:
                by_node[candidate.node].append(candidate)
        result = []
        for candidate in self.items.values():
            if candidate.node is not None and candidate.npu is None and len(by_node.get(candidate.node, [])) == 1:
                _absorb(by_node[candidate.node][0], candidate)
            else:
                result.append(candidate)
        return result


def _absorb(target: _Candidate, old: _Candidate) -> None:
    target.rank = target.rank if target.rank is not None else old.rank
    target.ip = target.ip or old.ip
    target.via = target.via or old.via
    target.blamers |= old.blamers
    target.hows.update(old.hows)
    if old.first_blame is not None:
        target.first_blame = min(target.first_blame or old.first_blame, old.first_blame)
    target.silent = target.silent or old.silent
    target.silent_observed = target.silent_observed or old.silent_observed
    target.silence = max(target.silence, old.silence)
    target.flights.extend(old.flights)
    target.desync.extend(old.desync)
    target.behind.extend(old.behind)
    target.faults.extend(f for f in old.faults if f not in target.faults)
    target.member = target.member and old.member


# ----------------------------------------------------------------------------- one incident


def _relevant(fault: LocalFault, low: float | None, high: float | None) -> bool:
    if fault.at is not None:
        if high is not None and fault.at > high:
            return False
        if low is not None and fault.at < low:
            last = fault.until if fault.until is not None else fault.seen_at
            return fault.until is None and last is not None and last >= low
        return True
    return not (fault.seen_at is not None and low is not None and fault.seen_at < low)


class _Judge:
    """Scores the candidates of one incident and explains them."""

    def __init__(self, draft: _Draft, evidence: Evidence, blames: Sequence[Blame], locator: Locator) -> None:
        self.draft = draft
        self.evidence = evidence
        self.locator = locator
        self.start, self.end = draft.start, draft.end
        finding = draft.finding
        size = _size(draft, locator)
        if size is None and finding is not None:
            size = len(finding.expected)
        self.rank_size = size or 0
        reporting = {f.rank for f in draft.failures if f.rank is not None}
        if not draft.failures and finding is not None:
            reporting = set(finding.reached)
        self.reporting = tuple(sorted(reporting))
        self.reporters = len({(f.node, f.rank if f.rank is not None else f.pid) for f in draft.failures}) or len(
            reporting)
        self.silent = tuple(rank for rank in range(self.rank_size) if rank not in reporting)
        self.codes = _codes(draft.failures)
        ops = Counter(f.op for f in draft.failures if f.op)
        self.op = ops.most_common(1)[0][0] if ops else (finding.op if finding is not None else None)
        self.cands = _Candidates(locator, draft.comm, size)
        self.nodes = draft.nodes
        self.blames = [b for b in blames if self._mine(b)]

    def _mine(self, blame: Blame) -> bool:
        comm = self.draft.comm
        if comm is not None and blame.comm is not None and blame.comm != comm:
            return False
        if blame.comm is None and blame.node not in self.nodes:
            return False
        if comm is None and blame.comm is not None:
            return False
        if blame.at is None or self.start is None or self.end is None:
            return True
        return self.start - BLAME_BEFORE_S <= blame.at <= self.end + AFTER_S

    # -- evidence kinds

    def blame(self) -> None:
        for blame in self.blames:
            target = self.cands.get(rank=blame.rank, ip=blame.ip, device=blame.device)
            reporter = blame.reporter_rank if blame.reporter_rank is not None else (blame.pid, blame.source)
            if blame.rank is not None and blame.rank == blame.reporter_rank:
                continue
            if target.node == blame.node and target.npu is not None and blame.reporter_rank is not None:
                place = self.locator.where_rank(self.draft.comm, blame.reporter_rank, self.rank_size or None)
                if place is not None and (place.node, place.npu) == (target.node, target.npu):
                    continue
            target.blamers.add((blame.node, reporter))
            target.hows[blame.how] += 1
            if blame.at is not None:
                target.first_blame = blame.at if target.first_blame is None else min(target.first_blame, blame.at)

    def silence(self) -> None:
        if not self.silent or len(self.reporting) * 2 < self.rank_size or not self.draft.failures:
            return
        share = SILENCE / len(self.silent)
        for rank in self.silent:
            candidate = self.cands.get(rank=rank)
            candidate.silent = True
            candidate.silence = max(candidate.silence, share)
            coverage = self.evidence.nodes.get(candidate.node) if candidate.node is not None else None
            if coverage is not None and coverage.last_at is not None and self.end is not None and (
                    coverage.last_at >= self.end):
                candidate.silent_observed = True

    def flight(self) -> None:
        finding = self.draft.finding
        if finding is None:
            return
        for culprit in finding.culprits:
            candidate = self.cands.get(node=culprit.node, rank=culprit.rank) if culprit.node is not None else (
                self.cands.get(rank=culprit.rank))
            if culprit.node is not None and candidate.npu is None:
                place = self.locator.where_rank(self.draft.comm, culprit.rank, self.rank_size or None)
                if place is not None and place.node == culprit.node:
                    candidate.npu = place.npu
            candidate.flights.append(culprit)

    def hccl_desync(self) -> None:
        by_index: dict[int, dict[int, str]] = defaultdict(dict)
        for failure in self.draft.failures:
            if failure.index is not None and failure.rank is not None and failure.op:
                by_index[failure.index][failure.rank] = failure.op
        for index, ops in sorted(by_index.items()):
            counts = Counter(ops.values())
            if len(counts) < 2:
                continue
            (top, top_n), (_, second_n) = counts.most_common(2)
            majority = top if top_n > second_n else None
            for rank, op in sorted(ops.items()):
                if op == majority:
                    continue
                others = sorted(r for r, o in ops.items() if o != op)
                other_ops = "/".join(sorted({ops[r] for r in others}))
                text = (f"HCCL: rank {rank} timed out in {op} at operation index {index}, "
                        f"rank{'s' if len(others) > 1 else ''} {rank_ranges(others)} in {other_ops}")
                self.cands.get(rank=rank).desync.append(text if majority else text + " (no majority)")

    def entry_progress(self) -> None:
        """Ranks whose entry logs show fewer collectives than the others' (counts of one process summed over
        its rotated plogs)."""
        comm = self.draft.comm
        if comm is None:
            return
        per_process: dict[tuple[str, int | None, int], list[OpProgress]] = defaultdict(list)
        for progress in self.evidence.progress:
            if progress.comm == comm and progress.rank is not None:
                per_process[(progress.node, progress.pid, progress.rank)].append(progress)
        issued: dict[int, tuple[int, OpProgress]] = {}
        for (_, _, rank), parts in per_process.items():
            total = sum(p.ops for p in parts)
            last = max(parts, key=lambda p: p.last_at or 0.0)
            if rank not in issued or total > issued[rank][0]:
                issued[rank] = (total, last)
        if len(issued) < 2:
            return
        top = max(total for total, _ in issued.values())
        ahead = sorted(rank for rank, (total, _) in issued.items() if total == top)
        for rank, (total, last) in sorted(issued.items()):
            if total >= top:
                continue
            text = (f"entry log: rank {rank} issued {total} collectives (the last, {last.last_op}, at "
                    f"{clock(last.last_at, self.start)}); {_ranks_phrase(ahead)} issued {top}")
            place = self.locator.where_rank(comm, rank, self.rank_size or None)
            npu = place.npu if place is not None and place.node == last.node else None
            self.cands.get(node=last.node, npu=npu, rank=rank).behind.append(text)

    def local_faults(self) -> None:
        low = self.start - LOOKBACK_S if self.start is not None else None
        high = self.end + AFTER_S if self.end is not None else None
        relevant = [f for f in self.evidence.faults if _relevant(f, low, high)]
        if not relevant:
            return
        members = self._member_places()
        member_nodes = {node for node, _ in members}
        for fault in relevant:
            for candidate in list(self.cands.items.values()):
                if candidate.node == fault.node and (candidate.npu is None or fault.npu is None
                                                     or candidate.npu == fault.npu):
                    candidate.faults.append(fault)
            if fault.node not in member_nodes:
                continue
            if fault.npu is not None and (fault.node, fault.npu) not in members and (
                    self.locator.comms_at(fault.node, fault.npu) - {self.draft.comm}):
                continue  # the logs place another communicator's rank, not one of this, on that NPU
            candidate = self.cands.get(node=fault.node, npu=fault.npu)
            if fault not in candidate.faults:
                candidate.faults.append(fault)
            if not candidate.pointed:
                candidate.member = True

    def _member_places(self) -> set[tuple[str, int | None]]:
        places: set[tuple[str, int | None]] = set()
        if self.draft.comm is not None:
            places |= {(p.node, p.npu) for p in self.locator.ranks_of(self.draft.comm).values() if p.node}
        for failure in self.draft.failures:
            npu = failure.npu
            if npu is None and failure.rank is not None:
                place = self.locator.where_rank(self.draft.comm, failure.rank, self.rank_size or None)
                npu = place.npu if place is not None and place.node == failure.node else None
            places.add((failure.node, npu))
        for candidate in self.cands.items.values():
            if candidate.node is not None and candidate.pointed:
                places.add((candidate.node, candidate.npu))
        return places

    # -- judging

    def culprits(self) -> list[Culprit]:
        self.blame()
        self.silence()
        self.flight()
        self.hccl_desync()
        self.entry_progress()
        self.local_faults()
        judged = [self._judge(c) for c in self.cands.settle()]
        judged = [c for c in judged if c.score > 0]
        judged.sort(key=lambda c: (-c.score, c.node, -1 if c.npu is None else c.npu,
                                   -1 if c.rank is None else c.rank))
        return judged[:MAX_CULPRITS]

    def _fault_score(self, candidate: _Candidate) -> tuple[float, LocalFault | None]:
        if not candidate.faults:
            return 0.0, None
        if candidate.npu is None:  # a node-level candidate takes its NPU when only one has faults
            npus = {f.npu for f in candidate.faults if f.npu is not None}
            if len(npus) == 1:
                candidate.npu = npus.pop()
        here = [f for f in candidate.faults if candidate.npu is None or f.npu in (None, candidate.npu)]
        ranked = rank_faults(here)
        if not ranked:
            return 0.0, None
        kinds = {f.kind for f in ranked}
        score = fault_weight(ranked[0]) + min(CORROBORATION_MAX, CORROBORATION * (len(kinds) - 1))
        if candidate.member and not candidate.pointed:
            score *= MEMBER_FACTOR
        return score, ranked[0]

    def _judge(self, candidate: _Candidate) -> Culprit:
        parts: dict[str, float] = {}
        if candidate.blamers:
            share = min(1.0, len(candidate.blamers) / max(1, self.reporters))
            parts["blame"] = BLAME_BASE + BLAME_SHARE * share
        if candidate.silence:
            parts["silence"] = candidate.silence
        if candidate.flights:
            parts["flight"] = max(f.score for f in candidate.flights)
        if candidate.desync:
            parts["desync"] = HCCL_DESYNC
        if candidate.behind:
            parts["behind"] = ENTRY_BEHIND
        fault_score, best = self._fault_score(candidate)
        if fault_score:
            parts["fault"] = fault_score
        cause = self._cause(candidate, fault_score, best)
        return Culprit(node=candidate.node or "unknown", npu=candidate.npu, rank=candidate.rank, cause=cause,
                       score=round(sum(parts.values()), 2), evidence=tuple(self._explain(candidate, best)),
                       ip=candidate.ip)

    @staticmethod
    def _cause(candidate: _Candidate, fault_score: float, best: LocalFault | None) -> str:
        flight_causes = {f.cause for f in candidate.flights}
        if best is not None and fault_score >= STRONG_FAULT:
            return FAULT_KINDS[best.kind].cause
        if candidate.desync or "desync" in flight_causes:
            return "desync"
        if "process_hang" in flight_causes or candidate.hows["stuck"] or candidate.behind:
            return "process_hang"
        if candidate.hows["lost"]:
            return "process_exit"
        if candidate.silent_observed:
            return "process_hang"
        if best is not None:
            return FAULT_KINDS[best.kind].cause
        if candidate.hows["cqe"]:
            return "roce_errors"
        return "unknown"

    # -- explaining

    def _where(self, candidate: _Candidate) -> str:
        text = candidate.node or candidate.ip or "an unknown node"
        if candidate.npu is not None:
            text += f" NPU {candidate.npu}"
        return text

    def _explain(self, candidate: _Candidate, best: LocalFault | None) -> list[str]:
        lines: list[str] = []
        chain: list[str] = []
        ref = self.start
        if best is not None:
            when = f" at {clock(best.at, ref)}" if best.at is not None else " (undated)"
            chain.append(f"{FAULT_KINDS[best.kind].label} on {self._where(candidate)}{when}")
        if candidate.blamers:
            how = candidate.hows.most_common(1)[0][0]
            named = candidate.ip or (f"rank {candidate.rank}" if candidate.rank is not None else "it")
            peers = len(candidate.blamers)
            since = f" from {clock(candidate.first_blame, ref)}" if candidate.first_blame is not None else ""
            chain.append(f"{peers} peer{'s' if peers > 1 else ''} {_HOW_PHRASES.get(how, 'named it')} "
                         f"({named}){since}")
        if chain and self.draft.failures and (candidate.blamers or candidate.silent):
            codes = "/".join(self.codes[:2]) or "timeouts"
            chain.append(f"{self.reporters} rank{'s' if self.reporters != 1 else ''} reported {codes} "
                         f"at {clock(self.start, ref)}")
        if candidate.blamers and candidate.node is not None and candidate.ip and candidate.via:
            chain.append(f"{candidate.ip} is {self._where(candidate)} ({candidate.via})")
        if len(chain) > 1:
            lines.append(" -> ".join(chain))
        elif chain and best is None:
            lines.append(chain[0])
        if best is not None:
            for fault in rank_faults(candidate.faults)[:3]:
                if candidate.npu is None or fault.npu in (None, candidate.npu):
                    when = f"{clock(fault.at, ref)} " if fault.at is not None else ""
                    lines.append(f"{when}{fault.node}{'' if fault.npu is None else f' NPU {fault.npu}'}: "
                                 f"{fault.detail}")
            if candidate.member and not candidate.pointed:
                lines.append("no log names it: it runs a rank of this communicator")
        lines.extend(f.text for f in candidate.flights)
        lines.extend(candidate.desync)
        lines.extend(candidate.behind)
        if candidate.silent and candidate.rank is not None:
            if candidate.silent_observed:
                lines.append(f"rank {candidate.rank} reported no failure; {candidate.node}'s logs go on past "
                             f"{clock(self.end, ref)}")
            elif candidate.node is not None and candidate.node in self.evidence.nodes:
                lines.append(f"rank {candidate.rank} reported no failure ({candidate.node}'s logs end before "
                             "the incident)")
            else:
                lines.append(f"rank {candidate.rank} reported no failure; no logs from "
                             f"{candidate.node or 'its node'}")
        if candidate.node is None:
            lines.append("no bundle, rank table or address maps it to a node")
        return lines

    # -- the incident

    def incident(self) -> Incident:
        culprits = self.culprits()
        top = culprits[0] if culprits else None
        named = top is not None and top.score >= NAMED_SCORE and (
            top.node != "unknown" or top.rank is not None or top.ip is not None)
        comm = self.draft.comm or (self.draft.finding.label if self.draft.finding is not None else "")
        if self.draft.comm:
            title = f"communicator {self.draft.comm}"
        elif self.draft.finding is not None:
            title = self.draft.finding.label
        else:
            title = "communicator not named in the logs"
        nodes = tuple(sorted(self.nodes))
        verdict = self._verdict(top if named else None, comm)
        return Incident(comm=comm, start=self.start, end=self.end, codes=tuple(self.codes), rank_size=self.rank_size,
                        reporting_ranks=self.reporting, silent_ranks=self.silent, culprits=tuple(culprits),
                        op=self.op, reporters=self.reporters, nodes=nodes, notes=tuple(self._notes(named)), named=named,
                        verdict=verdict, title=title)

    def _notes(self, named: bool) -> list[str]:
        notes = []
        if not named and self.draft.failures:
            if not self.silent and self.rank_size:
                notes.append("every rank reported: what stopped first is not in these inputs (a rank of another "
                             "communicator, the fabric); flight-recorder dumps or HCCL_ENTRY_LOG_ENABLE=1 entry logs "
                             "would show who fell behind")
            elif self.silent:
                notes.append(f"the silent {'rank has' if len(self.silent) == 1 else 'ranks have'} no evidence here: "
                             "add the bundles of their nodes, or a rank table to place them")
        read = set(self.evidence.nodes)
        unread = sorted({p.node for p in self.locator.ranks_of(self.draft.comm).values() if p.node and
                         p.node not in read}) if self.draft.comm else []
        if unread:
            notes.append(f"no bundle from {', '.join(unread[:6])}{' ...' if len(unread) > 6 else ''}")
        if self.rank_size == 0:
            notes.append("the communicator's size is unknown: no rank list")
        return notes

    def _verdict(self, top: Culprit | None, comm: str) -> str:
        what = f"communicator {comm}" if self.draft.comm else (comm or "an unknown communicator")
        size = f" of {self.rank_size}" if self.rank_size else ""
        codes = f" ({', '.join(self.codes[:3])})" if self.codes else ""
        finding = self.draft.finding
        when = stamp(self.start)
        if self.draft.failures or finding is None:
            reported = f"{len(self.reporting) or self.reporters}{size} ranks of {what} timed out{codes} at {when}"
        elif finding.kind == "hang":
            stopped = [rank for rank in finding.expected if rank not in finding.reached]
            reported = (f"{len(finding.reached)}{size} ranks of {what} entered {finding.op or 'collective'} "
                        f"#{finding.seq} at {when}, rank{'s' if len(stopped) > 1 else ''} {rank_ranges(stopped)} "
                        "never did")
        else:
            reported = f"ranks of {what} called different collectives at #{finding.seq} ({when})"
        if top is None:
            return f"{reported}; culprit unknown"
        cause = _CAUSE_PHRASES.get(top.cause) or _CAUSE_LABELS.get(top.cause, top.cause)
        return f"{top.where}: {cause}; {reported}"


_CAUSE_LABELS: dict[str, str] = {
    "link_down": "RoCE link down",
    "link_flap": "RoCE link flapping",
    "roce_errors": "RoCE errors",
    "optics": "optical module fault",
    "chip_fault": "chip fault",
    "hbm_ecc": "HBM ECC errors",
    "slow_chip": "slow chip",
}


def _ranks_phrase(ranks: Sequence[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {rank_ranges(ranks)}"


def _codes(failures: Iterable[RankFailure]) -> list[str]:
    codes = {f.code for f in failures}
    return sorted(codes, key=lambda code: (not (code[:2] in ("EI", "EJ", "EE") or code.isdigit()), code))


# ----------------------------------------------------------------------------- the report


def analyze(evidence: Evidence, window: Window | None = None) -> TriageReport:
    """Incidents in ``window`` (default: everything) with their culprits, best first."""
    window = window or Window()
    nodes = tuple(sorted(evidence.nodes))
    problems = tuple(evidence.problems)
    if evidence.empty:
        text = "could not read any input" + (f": {problems[0]}" if problems else "")
        return TriageReport("unreadable", text, (), window, nodes, problems)
    failures = [f for f in evidence.failures if f.category in TRIAGE_FAILURE_CATEGORIES and window.contains(f.at)]
    blames = [b for b in evidence.blames if window.contains(b.at)]
    locator = Locator(evidence)
    drafts = _drafts(failures)
    for finding in analyze_flights(evidence.flights):
        if window.contains(finding.at):
            _attach_flight(finding, drafts, locator)
    incidents = [_Judge(draft, evidence, blames, locator).incident() for draft in drafts]
    incidents.sort(key=lambda i: (i.start is None, i.start or 0.0, i.comm))
    if not incidents:
        scope = "in the window" if not window.everything else "in the inputs"
        return TriageReport("none", f"no HCCL incident {scope} ({len(nodes)} node{'s' if len(nodes) != 1 else ''} "
                                    "read)", (), window, nodes, problems)
    status = "culprit" if all(i.named for i in incidents) else "unknown"
    if len(incidents) == 1:
        verdict = incidents[0].verdict
    else:
        verdict = f"{len(incidents)} incidents: " + "; ".join(
            f"[{n}] {i.verdict}" for n, i in enumerate(incidents, start=1))
    return TriageReport(status, verdict, tuple(incidents), window, nodes, problems)
