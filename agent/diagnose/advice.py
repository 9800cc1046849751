"""What to do first about HCCL/CANN log errors of one category, and the runbook that covers it, at the one
runbook base (``agent.core.runbooks``).

The categories' advice is ``agent.health.log_categories``'; the fault kinds' is the one vocabulary's
(``agent.health.thresholds``), the verdict-only causes' ``agent.health.verdict.VERDICT_CAUSES``.
"""

from __future__ import annotations

from agent.core.runbooks import RUNBOOK_BASE
from agent.health.log_categories import LOG_CATEGORIES, category_hint
from agent.health.log_categories import category_runbook as runbook_file

__all__ = ["category_action", "category_runbook"]

_KNOWN = frozenset(category.name for category in LOG_CATEGORIES)


def category_action(category: str, default: str | None = None) -> str:
    """What to do first about HCCL/CANN log errors of ``category`` (``default``, when given, for an unknown one)."""
    if category not in _KNOWN and default is not None:
        return default
    return category_hint(category)


def category_runbook(category: str) -> str:
    return RUNBOOK_BASE + runbook_file(category).rsplit("/", 1)[-1]
