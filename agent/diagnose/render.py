"""Diagnose and scan-logs as text a person reads at 3 a.m.: an aligned table, then the verdict.

Every verdict block has the same shape, for both commands::

    FAIL: RoCE link down on NPU 3 (hccn_tool -i 3 -link -g says DOWN) and on NPU 5
      also     HBM double-bit ECC errors on NPU 1
      next     check the cable or optical module and the switch port of this NPU (...)
      runbook  https://github.com/npuwatch/npuwatch/blob/main/alerts/runbooks/NPURoCELinkDown.md

Its severity word leads (coloured when colour is on); ``also``, ``next`` and ``runbook`` appear
when there is something to say. Long text wraps at ``WIDTH`` under its own column.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from agent.core.printable import printable
from agent.core.terminal import Style
from agent.diagnose.report import Report
from agent.health.results import CheckResult
from agent.health.status import PASS
from agent.health.verdict import Verdict
from agent.triage.flight import rank_ranges

__all__ = ["WIDTH", "render_text", "verdict_lines"]

WIDTH = 110
_LABEL = 9  # "runbook" and two spaces


def _wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    return textwrap.wrap(text, max(20, width), initial_indent=first, subsequent_indent=rest,
                         break_on_hyphens=False, break_long_words=False) or [first.rstrip()]


def verdict_lines(word: str, summary: str, *, also: Sequence[str] = (), action: str = "",
                  runbook: str | None = None, style: Style | None = None, width: int = WIDTH) -> list[str]:
    """The verdict block: ``WORD: summary``, then ``also`` (one cause a line), ``next`` and ``runbook``.

    Every text but ``word`` may hold what a log or a tool printed: its control characters are escaped."""
    style = style or Style(False)
    summary, action = printable(summary), printable(action)
    also, runbook = [printable(item) for item in also], (printable(runbook) if runbook else runbook)
    head = _wrap(f"{word}: {summary}", width, "", "  ")
    head[0] = style.severity(word, strong=True) + head[0][len(word):]
    lines = head
    pad = "  " + " " * _LABEL
    for label, items in (("also", list(also)), ("next", [action] if action else []),
                         ("runbook", [runbook] if runbook else [])):
        for index, item in enumerate(items):
            first = f"  {label:<{_LABEL}}" if index == 0 else pad
            lines.extend(_wrap(item, width, first, pad))
    return lines


def _device_cell(check: CheckResult) -> str:
    """``-``, ``NPU 3``, or every NPU of the check's worst results (``NPU 3,5``, ``NPU 0-7``)."""
    npus = {result.npu for result in check.results if result.npu is not None and result.status == check.status}
    if check.status == PASS or not npus:
        return "-"
    return f"NPU {rank_ranges(npus)}"


def render_text(report: Report, style: Style | None = None, width: int = WIDTH) -> str:
    """The checks as an aligned table (a hint under each that is not PASS), a blank line, the verdict.

    A hint already given under an earlier check is not repeated: ``hint: as for npu_health``."""
    style = style or Style(False)
    header = ("CHECK", "STATUS", "DEVICE", "EVIDENCE")
    # Evidence quotes tools and logs (a peer address, a log line): escaped before it is laid out and coloured.
    rows = [(printable(check.name), check.status, printable(_device_cell(check)), printable(check.evidence))
            for check in report.checks]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(3)]
    indent = " " * (sum(widths) + 6)
    lines = [style.bold("  ".join(cell.ljust(w) for cell, w in zip(header, widths)) + "  " + header[3])]
    hinted: dict[str, str] = {}  # hint -> the first check that gave it: said once, then referred to
    for (name, status, device, evidence), check in zip(rows, report.checks):
        status_cell = style.severity(status) + " " * (widths[1] - len(status))
        lead = f"{name.ljust(widths[0])}  {status_cell}  {device.ljust(widths[2])}  "
        evidence_lines = _wrap(evidence, width - len(indent), "", "")
        lines.append(lead + evidence_lines[0])
        lines.extend(indent + line for line in evidence_lines[1:])
        if check.status != PASS and check.hint:
            said = hinted.setdefault(check.hint, name)
            hint = printable(check.hint) if said == name else f"as for {said}"
            lines.extend(_wrap(f"hint: {hint}", width, indent, indent + "      "))
    lines.append("")
    lines.extend(_verdict_block(report.verdict, style, width))
    return "\n".join(lines) + "\n"


def _verdict_block(verdict: Verdict, style: Style, width: int) -> list[str]:
    return verdict_lines(verdict.word, verdict.summary, also=verdict.also, action=verdict.action,
                         runbook=verdict.runbook, style=style, width=width)
