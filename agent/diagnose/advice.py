"""What to do first about HCCL/CANN log errors of one category, and the runbook that covers it.

The fault kinds' actions and runbooks are the one vocabulary's (``agent.health.thresholds``), the
verdict-only causes' are ``agent.health.verdict.VERDICT_CAUSES``; only the log categories have theirs here.
"""

from __future__ import annotations

from agent.core.runbooks import RUNBOOK_BASE

__all__ = ["category_action", "category_runbook"]

_CATEGORY_ACTIONS = {
    "exec_timeout": "HCCL_EXEC_TIMEOUT expired: a rank stopped taking part; start with the rank named",
    "connect_timeout": "links were never set up: check the peer's RoCE port, IP and firewall",
    "rendezvous_timeout": "not every rank reached the rendezvous: look for a rank that crashed or was late",
    "roce_cqe": "RoCE completion errors: check link, optics and PFC on this and the peer's port",
    "heartbeat": "a rank or device stopped its heartbeat: find the rank that died first",
    "watchdog_timeout": "torch_npu's watchdog hit a collective timeout: find the rank that stopped first",
}
_CATEGORY_DEFAULT = "read the first error: `npuwatch scan-logs` on the log directory"


def category_action(category: str, default: str = _CATEGORY_DEFAULT) -> str:
    """What to do first about HCCL/CANN log errors of ``category`` (``default`` for a category without advice)."""
    return _CATEGORY_ACTIONS.get(category, default)


def category_runbook(category: str) -> str:
    return RUNBOOK_BASE + ("HCCLRoCECQEError.md" if category == "roce_cqe" else "HCCLTimeout.md")
