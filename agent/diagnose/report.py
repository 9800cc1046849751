"""What ``npuwatch diagnose`` found: the one check set's results and the one verdict, and its JSON document.

The JSON (``npuwatch diagnose --json``) shares its schema with ``npuwatch check --json``: ``checks`` are the
same check records (``agent.health.results.CheckResult.to_dict``) and ``verdict`` the same verdict object
(``agent.health.verdict.Verdict.to_dict``)::

    {"format": "npuwatch-diagnose/2", "checks": [...], "verdict": {"status": "fail", "cause": "link_down",
     "npu": 3, "text": "...", ...}, "exit_code": 2}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.health.results import CheckResult
from agent.health.verdict import Verdict

__all__ = ["FORMAT", "Report"]

FORMAT = "npuwatch-diagnose/2"


@dataclass(frozen=True)
class Report:
    checks: tuple[CheckResult, ...]
    verdict: Verdict
    chips: int

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code()

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "checks": [check.to_dict() for check in self.checks],
                "verdict": self.verdict.to_dict(), "exit_code": self.exit_code}
