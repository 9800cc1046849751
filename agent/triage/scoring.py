"""Scoring the culprits of one incident: each kind of evidence a candidate gathers (peer blame, silence, flight
recorder, HCCL desync, entry log, local faults) adds its weight from ``agent.triage.weights.WEIGHTS``;
the cause follows from the strongest evidence.

A fault counts when it is dated within ``LOOKBACK_S`` before the first report up to ``AFTER_S``
after the last, or was still going on then; a blame counts from ``ATTACH_WINDOW_S`` before.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from agent.triage.candidates import Candidate, Candidates
from agent.triage.drafts import Scope, pid_ranks, reporter_of
from agent.triage.evidence import Blame, Evidence, LocalFault, OpProgress
from agent.triage.fault_chain import Chain, failure_entity, fault_chain
from agent.triage.faults import FAULT_KINDS, fault_weight, rank_faults
from agent.triage.flight import rank_ranges
from agent.triage.links import UNPLACED, shared_endpoint
from agent.triage.locate import Locator
from agent.triage.report import Culprit
from agent.triage.timefmt import clock
from agent.triage.weights import WEIGHTS
from agent.triage.wording import Wording, ranks_phrase
from collectors.hccl.hints import ATTACH_WINDOW_S

__all__ = ["AFTER_S", "LOOKBACK_S", "MAX_CULPRITS", "Scorer"]

LOOKBACK_S = 3600.0
AFTER_S = 600.0
MAX_CULPRITS = 5


def _relevant(fault: LocalFault, low: float | None, high: float | None) -> bool:
    if fault.at is not None:
        if high is not None and fault.at > high:
            return False
        if low is not None and fault.at < low:
            last = fault.until if fault.until is not None else fault.seen_at
            return fault.until is None and last is not None and last >= low
        return True
    return not (fault.seen_at is not None and low is not None and fault.seen_at < low)


class Scorer:
    """Gathers each candidate's evidence for one incident and scores it (``WEIGHTS``)."""

    def __init__(self, scope: Scope, evidence: Evidence, blames: Sequence[Blame], locator: Locator,
                 wording: Wording) -> None:
        self.scope = scope
        self.evidence = evidence
        self.locator = locator
        self.wording = wording
        self.cands = Candidates(locator, scope.draft.comm, scope.size)
        self.blames = [b for b in blames if self._mine(b)]
        self.low = scope.start - LOOKBACK_S if scope.start is not None else None
        self.high = scope.end + AFTER_S if scope.end is not None else None
        self.entities = self._incident_entities()

    def _incident_entities(self) -> set[str]:
        """The HCCL faults of the knowledge graph the incident shows: its failure reports, and what the logs of
        any node printed in its span."""
        found = {failure_entity(f.code, f.category) for f in self.scope.draft.failures}
        for logged in self.evidence.logged:
            if logged.at is None or ((self.low is None or logged.at >= self.low)
                                     and (self.high is None or logged.at <= self.high)):
                found.add(logged.entity)
        return {entity for entity in found if entity is not None}

    def _mine(self, blame: Blame) -> bool:
        comm = self.scope.draft.comm
        if comm is not None and blame.comm is not None and blame.comm != comm:
            return False
        if blame.comm is None and blame.node not in self.scope.nodes:
            return False
        if comm is None and blame.comm is not None:
            return False
        if blame.at is None or self.scope.start is None or self.scope.end is None:
            return True
        return self.scope.start - ATTACH_WINDOW_S <= blame.at <= self.scope.end + AFTER_S

    # -- evidence kinds

    def blame(self) -> None:
        size = self.scope.size
        ranks_of = pid_ranks(self.scope.draft.failures)
        for blame in self.blames:
            if blame.rank is not None and size is not None and blame.rank >= size and blame.ip is None:
                continue  # no rank of this communicator (a device id, a garbled or truncated list)
            rank = blame.rank if blame.rank is None or size is None or blame.rank < size else None
            target = self.cands.get(rank=rank, ip=blame.ip, device=blame.device)
            reporter: tuple[object, ...] = ("line", blame.source)  # names neither its rank nor its process
            if blame.reporter_rank is not None or blame.pid is not None:
                reporter = reporter_of(blame.node, blame.reporter_rank, blame.pid, ranks_of)
            if rank is not None and rank == blame.reporter_rank:
                continue
            if target.node == blame.node and target.npu is not None and blame.reporter_rank is not None:
                place = self.locator.where_rank(self.scope.draft.comm, blame.reporter_rank,
                                                self.scope.rank_size or None)
                if place is not None and (place.node, place.npu) == (target.node, target.npu):
                    continue
            if (reporter, blame.how) not in target.blamers_how:  # one count per reporter and way, not per copy
                target.blamers_how.add((reporter, blame.how))
                target.hows[blame.how] += 1
            target.blamers.add(reporter)
            if blame.at is not None:
                target.first_blame = blame.at if target.first_blame is None else min(target.first_blame, blame.at)

    def silence(self) -> None:
        scope = self.scope
        if not scope.silent or len(scope.reporting) * 2 < scope.rank_size or not scope.draft.failures:
            return
        share = WEIGHTS["silence"] / len(self.scope.silent)
        for rank in self.scope.silent:
            candidate = self.cands.get(rank=rank)
            candidate.silent = True
            candidate.silence = max(candidate.silence, share)
            coverage = self.evidence.nodes.get(candidate.node) if candidate.node is not None else None
            if coverage is not None and coverage.last_at is not None and self.scope.end is not None and (
                    coverage.last_at >= self.scope.end):
                candidate.silent_observed = True

    def flight(self) -> None:
        finding = self.scope.draft.finding
        if finding is None:
            return
        for culprit in finding.culprits:
            candidate = self.cands.get(node=culprit.node, rank=culprit.rank) if culprit.node is not None else (
                self.cands.get(rank=culprit.rank))
            if culprit.node is not None and candidate.npu is None:
                place = self.locator.where_rank(self.scope.draft.comm, culprit.rank, self.scope.rank_size or None)
                if place is not None and place.node == culprit.node:
                    candidate.npu = place.npu
            candidate.flights.append(culprit)

    def hccl_desync(self) -> None:
        by_index: dict[int, dict[int, str]] = defaultdict(dict)
        for failure in self.scope.draft.failures:
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
        comm = self.scope.draft.comm
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
                    f"{clock(last.last_at, self.scope.start)}); {ranks_phrase(ahead)} issued {top}")
            place = self.locator.where_rank(comm, rank, self.scope.rank_size or None)
            npu = place.npu if place is not None and place.node == last.node else None
            self.cands.get(node=last.node, npu=npu, rank=rank).behind.append(text)

    def shared_link(self) -> None:
        """The endpoint that the links with errors share (agent.triage.links)."""
        shared = shared_endpoint((f for f in self.evidence.faults if _relevant(f, self.low, self.high)),
                                 self.locator)
        if shared is None:
            return
        node, npu = shared.endpoint
        if node.startswith(UNPLACED):  # only its address is known: the culprit is that address
            candidate = self.cands.get(ip=node[len(UNPLACED):])
        else:
            candidate = self.cands.get(node=node, npu=npu)
        candidate.shared_with = tuple(f"{peer}{'' if peer_npu is None else f' NPU {peer_npu}'}"
                                      for peer, peer_npu in shared.peers)
        candidate.erroring_links = shared.links
        candidate.link_faults = [f for f in self.evidence.faults if f.kind == "roce_cqe" and (f.node, f.npu)
                                 in shared.peers and _relevant(f, self.low, self.high)]

    def local_faults(self) -> None:
        relevant = [f for f in self.evidence.faults if _relevant(f, self.low, self.high)]
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
                    self.locator.comms_at(fault.node, fault.npu) - {self.scope.draft.comm}):
                continue  # the logs place another communicator's rank, not one of this, on that NPU
            candidate = self.cands.get(node=fault.node, npu=fault.npu)
            if fault not in candidate.faults:
                candidate.faults.append(fault)
            if not candidate.pointed:
                candidate.member = True

    def _member_places(self) -> set[tuple[str, int | None]]:
        places: set[tuple[str, int | None]] = set()
        if self.scope.draft.comm is not None:
            places |= {(p.node, p.npu) for p in self.locator.ranks_of(self.scope.draft.comm).values() if p.node}
        for failure in self.scope.draft.failures:
            npu = failure.npu
            if npu is None and failure.rank is not None:
                place = self.locator.where_rank(self.scope.draft.comm, failure.rank, self.scope.rank_size or None)
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
        self.shared_link()
        self.local_faults()
        judged = [self._judge(c) for c in self.cands.settle()]
        judged = [c for c in judged if c.score > 0]
        judged.sort(key=lambda c: (-c.score, c.node, -1 if c.npu is None else c.npu,
                                   -1 if c.rank is None else c.rank))
        return judged[:MAX_CULPRITS]

    def _fault_score(self, candidate: Candidate) -> tuple[float, list[LocalFault]]:
        """The score of the candidate's faults and the faults of its NPU, most convincing first."""
        if not candidate.faults:
            return 0.0, []
        if candidate.npu is None:  # a node-level candidate takes its NPU when only one has faults
            npus = {f.npu for f in candidate.faults if f.npu is not None}
            if len(npus) == 1:
                candidate.npu = npus.pop()
        here = [f for f in candidate.faults if candidate.npu is None or f.npu in (None, candidate.npu)]
        ranked = rank_faults(here)
        if not ranked:
            return 0.0, []
        kinds = {f.kind for f in ranked}
        corroboration = WEIGHTS["fault_corroboration"] * (len(kinds) - 1)
        score = fault_weight(ranked[0]) + min(WEIGHTS["fault_corroboration_max"], corroboration)
        if candidate.member and not candidate.pointed:
            score *= WEIGHTS["member_factor"]
        return score, ranked

    def _judge(self, candidate: Candidate) -> Culprit:
        parts: dict[str, float] = {}
        if candidate.blamers:
            share = min(1.0, len(candidate.blamers) / max(1, self.scope.reporters))
            parts["blame"] = WEIGHTS["blame_base"] + WEIGHTS["blame_share"] * share
        if candidate.silence:
            parts["silence"] = candidate.silence
        if candidate.flights:
            parts["flight"] = max(f.score for f in candidate.flights)
        if candidate.desync:
            parts["desync"] = WEIGHTS["hccl_desync"]
        if candidate.behind:
            parts["behind"] = WEIGHTS["entry_behind"]
        if candidate.shared_with:
            parts["shared_link"] = WEIGHTS["shared_endpoint"]
        fault_score, ranked = self._fault_score(candidate)
        best = ranked[0] if ranked else None
        if fault_score:
            parts["fault"] = fault_score
        elif candidate.shared_with and candidate.link_faults:
            # a shared endpoint that logged nothing itself (a peer node whose logs are missing or silent)
            # carries the errors its peers logged on its links
            best = rank_faults(candidate.link_faults)[0]
            parts["fault"] = fault_score = fault_weight(best)
        # Explanation only, no weight: the graph lacks edges (a link down during a collective leads to
        # its timeout, yet the graph has 0x81078603 lead only to RDMA init failures).
        chain: Chain | None = fault_chain(ranked, self.entities)
        cause = self._cause(candidate, fault_score, best)
        return Culprit(node=candidate.node or "unknown", npu=candidate.npu, rank=candidate.rank, cause=cause,
                       score=round(sum(parts.values()), 2),
                       evidence=tuple(self.wording.explain(candidate, best, chain)), ip=candidate.ip)

    @staticmethod
    def _cause(candidate: Candidate, fault_score: float, best: LocalFault | None) -> str:
        flight_causes = {f.cause for f in candidate.flights}
        if best is not None and fault_score >= WEIGHTS["strong_fault"]:
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
