"""One level's outcome: every check, the verdict, the exit code in either style, and the JSON document.

The JSON document (``npuwatch check --json``) is a contract; ``FORMAT`` names its version::

    {
      "format": "npuwatch-check/2",
      "level": "quick", "exit_code": 2, "exit_codes": "nagios",
      "verdict": {"status": "fail", "cause": "link_down", "npu": 3, "text": "RoCE link down on NPU 3 (...)",
                  "summary": "...", "also": [], "action": "check the cable ...", "runbook": "https://..."},
      "message": "FAIL roce_link: NPU 3: hccn_tool -i 3 -link -g says DOWN",
      "node": "npu-node-01", "model": "910B3", "chips": 8,
      "started_at": 1764558000.0, "duration_s": 3.21, "budget_s": 10.0, "read_s": 2.9,
      "skipped": null,
      "baseline": {"source": null, "error": null},
      "checks": [
        {"name": "roce_link", "status": "FAIL", "evidence": "NPU 3: hccn_tool -i 3 -link -g says DOWN", "hint": "...",
         "duration_s": 0.0, "value": "DOWN", "threshold": "UP", "unit": null, "basis": null,
         "results": [{"status": "FAIL", "npu": 3, "chip": 0, "peer": null, "value": "DOWN",
                      "threshold": "UP", "unit": null, "basis": null, "measure": null, "model": null,
                      "kind": "link_down", "evidence": "NPU 3: hccn_tool -i 3 -link -g says DOWN"}, ...]},
        ...
      ]
    }

``verdict`` is the one verdict object every command prints (``agent.health.verdict``: the lead cause that
``diagnose`` and ``top`` name too); its ``status`` is ok, warn, fail or unknown. ``exit_code`` follows
``exit_codes``: Nagios (0 ok, 1 warn, 2 fail, 3 unknown) or node-problem-detector (0 OK for ok and warn,
1 NonOK for fail, 2 Unknown). Format 1 had ``verdict`` as the status word alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agent.core import terminal
from agent.health.results import CheckResult
from agent.health.status import EXIT_CODES, PASS, UNKNOWN, worst
from agent.health.verdict import Verdict, lead
from collectors.fault_levels import LEVELS

__all__ = ["EXIT_CODES", "FORMAT", "MESSAGE_LIMIT", "LevelReport", "one_line"]

FORMAT = "npuwatch-check/2"
MESSAGE_LIMIT = 80  # node-problem-detector keeps the first 80 characters of a plugin's output


@dataclass
class LevelReport:
    level: str
    checks: list[CheckResult]
    started_at: float
    duration_s: float
    budget_s: float
    node: str
    model: str | None = None
    chips: int = 0
    read_s: float = 0.0
    skipped: str | None = None  # why the device checks did not run (busy, probe lock held)
    baseline_source: str | None = None
    baseline_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    chip_list_error: str | None = None  # why npu-smi listed no chip

    @property
    def status(self) -> str:
        return worst((check.status for check in self.checks), default=UNKNOWN)

    @property
    def lead(self) -> Verdict:
        """The lead cause of what the checks found (the one ranking of agent.health.verdict)."""
        return lead(self.checks, chip_list_error=self.chip_list_error)

    @property
    def verdict(self) -> str:
        return self.lead.status

    def exit_code(self, style: str = "nagios") -> int:
        return EXIT_CODES[style][self.verdict]

    def message(self, limit: int = MESSAGE_LIMIT) -> str:
        return one_line(self, limit)

    def to_dict(self, style: str = "nagios") -> dict[str, Any]:
        return {
            "format": FORMAT,
            "level": self.level,
            "verdict": self.lead.to_dict(),
            "exit_code": self.exit_code(style),
            "exit_codes": style,
            "message": self.message(),
            "node": self.node,
            "model": self.model,
            "chips": self.chips,
            "started_at": round(self.started_at, 3),
            "duration_s": round(self.duration_s, 3),
            "budget_s": self.budget_s,
            "read_s": round(self.read_s, 3),
            "skipped": self.skipped,
            "baseline": {"source": self.baseline_source, "error": self.baseline_error},
            "checks": [check.to_dict() for check in self.checks],
        }


def one_line(report: LevelReport, limit: int = MESSAGE_LIMIT) -> str:
    """At most ``limit`` characters: the verdict and its lead cause (NPD shows this as the condition's message),
    shortened in the middle rather than losing the handling level it names (``... is SeparateNPU``)."""
    if report.status == PASS:
        text = f"OK: {len(report.checks)} {report.level} checks pass"
        return terminal.one_line(text + f" on {report.chips} chips" if report.chips else text, limit)
    if not report.checks:
        return terminal.one_line(f"{report.status}: no check ran", limit)
    verdict = report.lead
    where = f" {verdict.check}" if verdict.check else ""
    more = f" (+{len(verdict.also)} more)" if verdict.also else ""
    # the lead finding as its check printed it: the NPU first, then what was seen (a handling level is kept)
    return terminal.one_line(f"{verdict.word}{where}{more}: {verdict.evidence or verdict.summary}", limit,
                             keep=LEVELS)
