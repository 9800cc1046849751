"""``npuwatch check`` on a terminal: the one-line verdict first, then a table of the checks.

On a terminal the evidence and the hints are folded to its width under their column; to a pipe or a
file every line stays whole. The verdict line keeps the handling level it names (``SeparateNPU``)
when it has to be shortened to node-problem-detector's 80 characters.
"""

from __future__ import annotations

import sys

from agent.check.report import MESSAGE_LIMIT, LevelReport
from agent.core.terminal import Style, terminal_width, wrap
from agent.health.status import PASS

__all__ = ["render_text", "verdict_line"]


def verdict_line(report: LevelReport, limit: int = MESSAGE_LIMIT) -> str:
    """The report's one-line message in ``limit`` characters (``LevelReport.message``: the lead cause)."""
    return report.message(limit)


def render_text(report: LevelReport, style: str = "nagios", width: int | None = -1, paint: Style | None = None) -> str:
    """The message line (what NPD shows), a table of every check with its time, hints under the others,
    then the level's time against its budget. ``width``: columns to fold to (-1: stdout's terminal, None:
    no folding); ``paint``: colours for the verdict's first word and each status (default none)."""
    paint = paint or Style(False)
    columns = terminal_width(sys.stdout) if width == -1 else width
    verdict = verdict_line(report)
    word = verdict.split(":", 1)[0].split(" ", 1)[0]  # OK, WARN, FAIL, UNKNOWN
    lines = [paint.severity(word, strong=True) + verdict[len(word):], ""]
    header = ("CHECK", "STATUS", "TIME", "EVIDENCE")
    rows = [(c.name, c.status, f"{c.duration_s:.1f}s", c.evidence) for c in report.checks]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    column = sum(widths) + 6
    for index, row in enumerate([header, *rows]):
        cells = [row[i].ljust(widths[i]) for i in range(3)]
        if index:
            cells[1] = paint.severity(row[1]) + " " * (widths[1] - len(row[1]))
        start = "  ".join(cells) + "  "
        folded = wrap(row[3], columns, indent=column, first_indent=column)
        lines.append(start + folded[0][column:])
        lines += folded[1:]
        check = report.checks[index - 1] if index else None
        if check is not None and check.status != PASS and check.hint:
            lines += wrap(f"hint: {check.hint}", columns, indent=column + 6, first_indent=column)
    lines.append("")
    extra = []
    if report.skipped:
        extra.append(f"device checks not run: {report.skipped}")
    if report.baseline_source:
        extra.append(f"fleet baseline: {report.baseline_source}")
    if report.baseline_error:
        extra.append(f"fleet baseline unusable: {report.baseline_error}")
    for line in extra:
        lines += wrap(line, columns, indent=2)
    lines += wrap(f"{report.level}: {report.verdict} in {report.duration_s:.1f}s (budget {report.budget_s:.0f}s, "
                  f"node read in {report.read_s:.1f}s), exit {report.exit_code(style)} ({style})", columns, indent=2)
    return "\n".join(lines) + "\n"
