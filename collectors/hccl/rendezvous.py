"""EI0015, the communicator-init rendezvous: what its lines say, read once for the classifier's hints and the
communicator facts.

The root (the rendezvous server) prints how many ranks connected, how many it needs and the connected
rank ids eight a line; an agent prints the ranks it could not reach, a rank-count mismatch, or the
server it could not connect to (docs/hccl-log-formats.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["MAX_RANKS", "MISSING_TRIGGERS", "ROOT_TRIGGERS", "TOKENS", "RendezvousLine", "absent_ranks",
           "parse_rendezvous"]

# A line without one of these says nothing about a rendezvous (substring tests, before any expression).
TOKENS = ("opo exchange", "total connected", "need connect", "connected rankinfo", "connect agent[",
          "AgentIdList[", "rank num[", "connect server[", "unconnected ranks")
# The lines that list the ranks that never connected (a subset of TOKENS).
MISSING_TRIGGERS = ("connect agent[", "AgentIdList[", "unconnected ranks")
# The root side's connected-rank lines (a subset of TOKENS).
ROOT_TRIGGERS = ("connected num", "need connect", "connected rankinfo")
# A rank count above this is a garbled line, not a communicator: no rank list is made from it.
MAX_RANKS = 1 << 20

_CONNECTED_TOTAL_RE = re.compile(r"total connected num is \[(\d+)\],\s*line num is \[(\d+)\]")
_NEED_CONNECT_RE = re.compile(r"need connect rankNum is \[(\d+)\]")
_CONNECTED_LINE_RE = re.compile(r"connected rankinfo\[LINE \d+\]:((?:\s*\[\d+\],?)*)")
_RANK_ID_RE = re.compile(r"\[(\d+)\]")
# CANN 8.x EI0015 also prints 'List of unconnected ranks: "[16, 17, ...]"' (cut short with an ellipsis).
_AGENT_LIST_RE = re.compile(r"(?:Failed to connect agent|connectFailedAgentIdList|List of unconnected ranks:\s*\"?)"
                            r"\[([\d,\s.]*)\]")
_RANK_NUM_DIFF_RE = re.compile(r"rank num\[(\d+)\]\s*is different with rank list size\[(\d+)\]")
CONNECT_SERVER_RE = re.compile(r"connect server\[\s*(\S+?)\s*:\s*(\d+)\s*\]")
_TIMEOUT_RE = re.compile(r"timeout\[(\d+)(?:\s*s)?\]")


@dataclass(frozen=True)
class RendezvousLine:
    """What one line says about a rendezvous; None where it says nothing."""

    connected_total: int | None = None  # root: "total connected num is [4],line num is [1]"
    list_lines: int | None = None  # root: how many "connected rankinfo" lines follow
    need: int | None = None  # root: "need connect rankNum is [8]"
    connected: tuple[int, ...] | None = None  # root: the ranks of one "connected rankinfo[LINE k]" line
    missing: tuple[int, ...] | None = None  # "Failed to connect agent[1,3,]", "connectFailedAgentIdList[..]"
    rank_num: tuple[int, int] | None = None  # agent: (ranks expected, ranks listed)
    root: str | None = None  # agent: the server it could not connect to, as IP:port
    timeout_s: float | None = None  # "get socket timeout! timeout[120 s]"


def parse_rendezvous(text: str) -> RendezvousLine:
    """The rendezvous pieces of one line (callers test ``TOKENS`` first: most lines have none)."""
    total = _CONNECTED_TOTAL_RE.search(text)
    need = _NEED_CONNECT_RE.search(text)
    listed = _CONNECTED_LINE_RE.search(text)
    agents = _AGENT_LIST_RE.search(text) if any(trigger in text for trigger in MISSING_TRIGGERS) else None
    diff = _RANK_NUM_DIFF_RE.search(text)
    server = CONNECT_SERVER_RE.search(text)
    timeout = _TIMEOUT_RE.search(text) if "get socket timeout" in text else None
    return RendezvousLine(
        connected_total=int(total.group(1)) if total else None,
        list_lines=int(total.group(2)) if total else None,
        need=int(need.group(1)) if need else None,
        connected=tuple(int(rank) for rank in _RANK_ID_RE.findall(listed.group(1))) if listed else None,
        missing=tuple(int(part) for part in agents.group(1).split(",") if part.strip().isdigit()) if agents else None,
        rank_num=(int(diff.group(1)), int(diff.group(2))) if diff else None,
        root=f"{server.group(1)}:{server.group(2)}" if server else None,
        timeout_s=float(timeout.group(1)) if timeout else None,
    )


def absent_ranks(size: int, present: Collection[int]) -> tuple[int, ...] | None:
    """The ranks below ``size`` not in ``present``; None for a size no communicator has."""
    if size > MAX_RANKS:
        return None
    return tuple(rank for rank in range(size) if rank not in present)
