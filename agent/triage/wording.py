"""The words of a triage report: each culprit's evidence lines, an incident's notes and its one-line verdict."""

from __future__ import annotations

from collections.abc import Sequence

from agent.triage.candidates import Candidate
from agent.triage.drafts import Scope
from agent.triage.evidence import Evidence, LocalFault
from agent.triage.fault_chain import Chain
from agent.triage.faults import FAULT_KINDS, rank_faults
from agent.triage.flight import rank_ranges
from agent.triage.locate import Locator
from agent.triage.report import Culprit, Tie
from agent.triage.timefmt import clock, stamp

__all__ = ["Wording", "ranks_phrase"]

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


class Wording:
    """Explains the culprits of one incident (``scope``) and says its verdict."""

    def __init__(self, scope: Scope, evidence: Evidence, locator: Locator) -> None:
        self.scope = scope
        self.evidence = evidence
        self.locator = locator

    def where(self, candidate: Candidate) -> str:
        text = candidate.node or candidate.ip or "an unknown node"
        if candidate.npu is not None:
            text += f" NPU {candidate.npu}"
        return text

    def explain(self, candidate: Candidate, best: LocalFault | None, graph: Chain | None = None) -> list[str]:
        lines: list[str] = []
        chain: list[str] = []
        ref = self.scope.start
        if best is not None:
            when = f" at {clock(best.at, ref)}" if best.at is not None else " (undated)"
            chain.append(f"{FAULT_KINDS[best.kind].label} on {self.where(candidate)}{when}")
        if candidate.blamers:
            # the way most peers blamed it; on a tie the specific one (heartbeat lost) over "waited on"
            how = max(sorted(candidate.hows), key=lambda h: (candidate.hows[h], h != "waited_on"))
            named = candidate.ip or (f"rank {candidate.rank}" if candidate.rank is not None else "it")
            peers = len(candidate.blamers)
            if self.scope.rank_size:  # lines that place no reporter never count past the communicator
                peers = min(peers, max(1, self.scope.rank_size - 1))
            since = f" from {clock(candidate.first_blame, ref)}" if candidate.first_blame is not None else ""
            chain.append(f"{peers} peer{'s' if peers > 1 else ''} {_HOW_PHRASES.get(how, 'named it')} "
                         f"({named}){since}")
        if chain and self.scope.draft.failures and (candidate.blamers or candidate.silent):
            codes = "/".join(self.scope.codes[:2]) or "timeouts"
            chain.append(f"{self.scope.reporters} rank{'s' if self.scope.reporters != 1 else ''} reported {codes} "
                         f"at {clock(self.scope.start, ref)}")
        if candidate.blamers and candidate.node is not None and candidate.ip and candidate.via:
            chain.append(f"{candidate.ip} is {self.where(candidate)} ({candidate.via})")
        if len(chain) > 1:
            lines.append(" -> ".join(chain))
        elif chain and best is None:
            lines.append(chain[0])
        if candidate.shared_with:
            links = candidate.erroring_links
            share = "every one" if len(candidate.shared_with) == links else f"{len(candidate.shared_with)}"
            lines.append(f"shared endpoint: {share} of the {links} links with RoCE errors ends at "
                         f"{self.where(candidate)} (the other ends: {', '.join(candidate.shared_with)}); "
                         "a fault of each peer would show on one link only")
        if graph is not None:
            lines.append(graph.text())
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
                             f"{clock(self.scope.end, ref)}")
            elif candidate.node is not None and candidate.node in self.evidence.nodes:
                lines.append(f"rank {candidate.rank} reported no failure ({candidate.node}'s logs end before "
                             "the incident)")
            else:
                lines.append(f"rank {candidate.rank} reported no failure; no logs from "
                             f"{candidate.node or 'its node'}")
        if candidate.node is None:
            lines.append("no bundle, rank table or address maps it to a node")
        return lines

    def notes(self, named: bool, tie: Tie | None = None) -> list[str]:
        notes = []
        if tie is not None:
            notes.append(f"tie: {tie.text}: nothing in these inputs tells them apart; what would: "
                         + "; ".join(tie.would_break_it))
        elif not named and self.scope.draft.failures:
            if not self.scope.silent and self.scope.rank_size:
                notes.append("every rank reported: what stopped first is not in these inputs (a rank of another "
                             "communicator, the fabric); flight-recorder dumps or HCCL_ENTRY_LOG_ENABLE=1 entry logs "
                             "would show who fell behind")
            elif self.scope.silent:
                ranks = "rank has" if len(self.scope.silent) == 1 else "ranks have"
                notes.append(f"the silent {ranks} no evidence here: "
                             "add the bundles of their nodes, or a rank table to place them")
        read = set(self.evidence.nodes)
        unread = sorted({p.node for p in self.locator.ranks_of(self.scope.draft.comm).values() if p.node and
                         p.node not in read}) if self.scope.draft.comm else []
        if unread:
            notes.append(f"no bundle from {', '.join(unread[:6])}{' ...' if len(unread) > 6 else ''}")
        if self.scope.rank_size == 0:
            notes.append("the communicator's size is unknown: no rank list")
        return notes

    def verdict(self, top: Culprit | None, comm: str, tie: Tie | None = None) -> str:
        what = f"communicator {comm}" if self.scope.draft.comm else (comm or "an unknown communicator")
        size = f" of {self.scope.rank_size}" if self.scope.rank_size else ""
        codes = f" ({', '.join(self.scope.codes[:3])})" if self.scope.codes else ""
        finding = self.scope.draft.finding
        when = stamp(self.scope.start)
        if self.scope.draft.failures or finding is None:
            reporting = len(self.scope.reporting) or self.scope.reporters
            reported = f"{reporting}{size} ranks of {what} timed out{codes} at {when}"
        elif finding.kind == "hang":
            stopped = [rank for rank in finding.expected if rank not in finding.reached]
            reported = (f"{len(finding.reached)}{size} ranks of {what} entered {finding.op or 'collective'} "
                        f"#{finding.seq} at {when}, rank{'s' if len(stopped) > 1 else ''} {rank_ranges(stopped)} "
                        "never did")
        else:
            reported = f"ranks of {what} called different collectives at #{finding.seq} ({when})"
        if tie is not None:
            causes = sorted({_CAUSE_PHRASES.get(c.cause) or _CAUSE_LABELS.get(c.cause, c.cause) for c in tie.culprits})
            return f"undecided: {tie.text} ({', '.join(causes)}); {reported}"
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


def ranks_phrase(ranks: Sequence[int]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {rank_ranges(ranks)}"
