"""A tie at the top of an incident's culprits: who is tied, and what evidence would tell them apart.

The order of equal scores is only for display (by node name, NPU, rank): it says nothing about
which one stopped the collective. So a tie is reported as a tie, never as a culprit, with the
readings that would break it, chosen from what the inputs lack for the tied culprits.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.triage.drafts import Scope
from agent.triage.evidence import Evidence
from agent.triage.flight import rank_ranges
from agent.triage.report import Culprit, Tie

__all__ = ["LINK_CAUSES", "find_tie"]

LINK_CAUSES = frozenset({"roce_errors", "link_flap", "link_down", "optics"})


def find_tie(culprits: Sequence[Culprit], scope: Scope, evidence: Evidence) -> Tie | None:
    """The culprits that share the top score, when more than one does."""
    if len(culprits) < 2 or culprits[0].score != culprits[1].score:
        return None
    tied = tuple(c for c in culprits if c.score == culprits[0].score)
    return Tie(tied, tied[0].score, tuple(_breakers(tied, scope, evidence)))


def _breakers(tied: Sequence[Culprit], scope: Scope, evidence: Evidence) -> list[str]:
    found: list[str] = []
    unread = sorted({c.node for c in tied if c.node != "unknown" and c.node not in evidence.nodes})
    if unread:
        found.append(f"the bundle of {', '.join(unread)} (`npuwatch bundle` there): its logs and tool output are "
                     "not in these inputs")
    if all(c.cause in LINK_CAUSES for c in tied):
        found.append("RoCE errors on another link of one of them: CQE errors towards a third address, or "
                     "`hccn_tool -i N -stat -g` error counters rising on one side only")
        ports = [f"`hccn_tool -i {c.npu} -optical -g` and `-link_stat -g` on {c.node}" for c in tied
                 if c.npu is not None and c.node != "unknown"]
        if ports:
            found.append("each port's optics and link history: " + "; ".join(ports))
    ranks = sorted({c.rank for c in tied if c.rank is not None})
    if ranks and scope.draft.finding is None:
        found.append(f"flight-recorder dumps, or HCCL_ENTRY_LOG_ENABLE=1 entry logs, of ranks {rank_ranges(ranks)}: "
                     "which of them fell behind first")
    if not found:
        found.append("any reading of one of them that the others lack: npu-smi health, hccn_tool output, the "
                     "node's kernel log")
    return found
