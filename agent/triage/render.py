"""A triage report as text a person reads top to bottom, or as JSON (``TriageReport.to_dict``).

Example::

    npuwatch triage: 3 nodes (node-a, node-b, node-c); window: everything in the inputs

    incident 1: communicator 29.1.0.10%enp_60000_0_1761275812718970
      when      2025-10-24 10:31:02 .. 10:31:09 (AllReduce)
      codes     EI0002
      reported  7 of 8 ranks: 0-4,6-7 (node-a, node-b)
      silent    rank 5
      culprits
        1. node-b NPU 1 (rank 5)  link_down  score 9.5
           RoCE link down on node-b NPU 1 at 10:25:48
           -> 7 peers lost its heartbeat (29.2.1.11) from 10:30:02
           -> 7 ranks reported EI0002 at 10:31:02
           -> 29.2.1.11 is node-b NPU 1 (hccn.conf of node-b)
           - node-b NPU 1: hccn_tool -i 1 -link -g says DOWN at 10:25:48

    verdict: node-b NPU 1 (rank 5): RoCE link down; 7 of 8 ranks of communicator ... timed out (EI0002) ...
"""

from __future__ import annotations

import json
import textwrap
from typing import IO

from agent.core.printable import printable, printable_lines
from agent.triage.flight import rank_ranges
from agent.triage.report import Incident, TriageReport
from agent.triage.stragglers import FLEET_KINDS
from agent.triage.timefmt import span, stamp

__all__ = ["render_json", "render_text", "verdict_text"]

WIDTH = 110
SHOWN_CULPRITS = 3


def _wrap(text: str, indent: str, first: str = "") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent + first, subsequent_indent=indent + " " * len(first),
                         break_on_hyphens=False, break_long_words=False) or [indent + first]


def _ranks(ranks: tuple[int, ...]) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {rank_ranges(ranks)}"


def _incident(number: int, incident: Incident) -> list[str]:
    # Names, codes and evidence come from the bundles' logs and manifests: each is escaped where it is placed.
    lines = [f"incident {number}: {printable(incident.title or incident.comm)}"]
    when = span(incident.start, incident.end) + (f" ({printable(incident.op)})" if incident.op else "")
    lines.append(f"  when      {when}")
    if incident.codes:
        lines.append(f"  codes     {printable(', '.join(incident.codes))}")
    size = f" of {incident.rank_size}" if incident.rank_size else ""
    if incident.reporting_ranks:
        nodes = f" ({printable(', '.join(incident.nodes))})" if incident.nodes else ""
        verb = "reported" if incident.codes else "waiting"
        lines.extend(_wrap(f"{len(incident.reporting_ranks)}{size} ranks: {rank_ranges(incident.reporting_ranks)}"
                           f"{nodes}", "  ", f"{verb:<10}"))
    elif incident.reporters:
        lines.append(f"  reported  {incident.reporters} process{'es' if incident.reporters > 1 else ''}, ranks not "
                     "named in the logs")
    if incident.silent_ranks:
        lines.extend(_wrap(_ranks(incident.silent_ranks), "  ", "silent    "))
    if incident.culprits:
        lines.append("  culprits")
        for rank, culprit in enumerate(incident.culprits[:SHOWN_CULPRITS], start=1):
            lines.append(f"    {rank}. {printable(culprit.where)}  {printable(culprit.cause)}  score {culprit.score:g}")
            for item in culprit.evidence:
                steps = printable(item).split(" -> ")
                lines.extend(_wrap(steps[0], "       ", "" if len(steps) > 1 else "- "))
                for step in steps[1:]:
                    lines.extend(_wrap(step, "       ", "-> "))
        hidden = len(incident.culprits) - SHOWN_CULPRITS
        if hidden > 0:
            lines.append(f"    ({hidden} more in --json)")
    else:
        lines.append("  culprits  none found: no log, dump or tool reading points at a rank")
    for note in incident.notes:
        lines.extend(_wrap(printable(note), "  ", "note      "))
    return lines


def render_text(report: TriageReport) -> str:
    nodes = ", ".join(printable(node) for node in report.nodes[:8]) + (
        f", ... ({len(report.nodes)} in all)" if len(report.nodes) > 8 else "")
    window = report.window
    if window.everything:
        scope = "everything in the inputs"
    elif window.end is None:
        scope = f"since {stamp(window.start)}"
    elif window.start is None:
        scope = f"until {stamp(window.end)}"
    else:
        scope = span(window.start, window.end)
    count = len(report.nodes)
    lines = [f"npuwatch triage: {count} node{'s' if count != 1 else ''}" + (f" ({nodes})" if nodes else "")
             + f"; window: {scope}"]
    for number, incident in enumerate(report.incidents, start=1):
        lines.append("")
        lines.extend(_incident(number, incident))
    lines.extend(_stragglers(report))
    if report.problems:
        lines.append("")
        lines.append("could not read")
        for problem in report.problems[:20]:
            lines.extend(_wrap(printable(problem), "  ", "- "))
        if len(report.problems) > 20:
            lines.append(f"  ({len(report.problems) - 20} more in --json)")
    lines.append("")
    lines.extend(textwrap.wrap(f"verdict: {printable(verdict_text(report))}", WIDTH, subsequent_indent="  ",
                               break_on_hyphens=False, break_long_words=False))
    return printable_lines("\n".join(lines)) + "\n"  # and whatever else a bundle put in a line


_FLEET = {kind.kind for kind in FLEET_KINDS.values()}
_NO_FLEET_VIEW = "not judged: only the fleet's rules can (NPUJobStraggler); --prometheus URL reads them"


def _stragglers(report: TriageReport) -> list[str]:
    """The fleet rules' stragglers that fired in the window (none: nothing said), or, without a fleet view (bundles
    alone), that they were not judged."""
    if not report.fleet_view:
        return ["", *_wrap(_NO_FLEET_VIEW, "", "stragglers  ")]
    found = [finding for finding in report.findings if finding.get("kind") in _FLEET]
    if not found:
        return []
    lines = ["", "stragglers (the fleet's rules: NPUJobStraggler)"]
    for finding in found:
        lines.extend(_wrap(printable(f"{finding['where']}: {finding['detail']}"), "  ", "- "))
    return lines


def verdict_text(report: TriageReport) -> str:
    """The lead verdict as check words it (``FAIL <text>``, ``ok: <text>``), the node named where it leads."""
    lead = report.lead
    if lead is None:
        return report.verdict
    if lead.status == "ok":
        return lead.text
    return f"{lead.word} {lead.text}"


def render_json(report: TriageReport, stream: IO[str]) -> None:
    json.dump(report.to_dict(), stream, indent=2)
    stream.write("\n")
