"""``npuwatch check`` on a terminal: the one-line verdict first, then a table of the checks."""

from __future__ import annotations

from agent.check.report import LevelReport
from agent.health.status import PASS

__all__ = ["render_text"]

_EVIDENCE_WIDTH = 100


def render_text(report: LevelReport, style: str = "nagios") -> str:
    """The message line (what NPD shows), a table of every check with its time, hints under the others,
    then the level's time against its budget."""
    lines = [report.message(), ""]
    header = ("CHECK", "STATUS", "TIME", "EVIDENCE")
    rows = [(c.name, c.status, f"{c.duration_s:.1f}s", c.evidence) for c in report.checks]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    indent = " " * (sum(widths) + 6)
    for index, row in enumerate([header, *rows]):
        evidence = row[3] if len(row[3]) <= _EVIDENCE_WIDTH else row[3][: _EVIDENCE_WIDTH - 3] + "..."
        lines.append("  ".join(row[i].ljust(widths[i]) for i in range(3)) + "  " + evidence)
        check = report.checks[index - 1] if index else None
        if check is not None and check.status != PASS and check.hint:
            lines.append(f"{indent}hint: {check.hint}")
    lines.append("")
    extra = []
    if report.skipped:
        extra.append(f"device checks not run: {report.skipped}")
    if report.baseline_source:
        extra.append(f"fleet baseline: {report.baseline_source}")
    if report.baseline_error:
        extra.append(f"fleet baseline unusable: {report.baseline_error}")
    lines += extra
    lines.append(f"{report.level}: {report.verdict} in {report.duration_s:.1f}s (budget {report.budget_s:.0f}s, "
                 f"node read in {report.read_s:.1f}s), exit {report.exit_code(style)} ({style})")
    return "\n".join(lines) + "\n"
