"""Diagnose's one verdict: the most likely cause, every device it was found on, what to do next.

Any FAIL finding wins (the most convincing by ``agent.triage.faults``' weights); then "could not
check" when npu-smi gave no chip list, a tool hung (a hung tool may be the symptom itself, so the
node is not called ok) or a check could not judge (UNKNOWN folds above WARN, as in
``agent.health.status``, so both commands give such a node the same exit code); then WARN
findings; then the culprit off this node that the triage engine names from the logs; else ok. The
verdict names each device its cause was found on and the other causes found at the same
severity, so nothing failing hides behind "and 3 more".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.core.humanize import join
from agent.diagnose.advice import action, runbook
from agent.diagnose.results import CAUSES, FAIL, UNKNOWN, WARN, Check, Finding, window_text
from agent.health.readings import LogScan
from agent.health.status import EXIT_CODES as HEALTH_EXIT_CODES
from agent.triage.report import Culprit

__all__ = ["EXIT_CODES", "SEVERITY_WORDS", "Report", "Verdict", "decide", "devices_text"]

EXIT_CODES = HEALTH_EXIT_CODES["nagios"]
# The word that leads a verdict line, by status.
SEVERITY_WORDS = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "unknown": "UNKNOWN"}
_NPU_LABEL = re.compile(r"^NPU (\d+)$")


@dataclass(frozen=True)
class Verdict:
    status: str  # ok | warn | fail | unknown
    cause: str | None  # a key of CAUSES, remote_peer, log_errors, no_chip_list, tool_hung or None
    device: int | None
    summary: str  # the finding, without its severity word
    also: tuple[str, ...] = ()  # the other causes at the same severity, most convincing first
    action: str = ""  # what to do next
    runbook: str | None = None  # the alert runbook of ``cause``

    @property
    def word(self) -> str:
        """``FAIL``, ``WARN``, ``UNKNOWN`` or ``ok``: what the verdict line starts with."""
        return SEVERITY_WORDS[self.status]

    @property
    def text(self) -> str:
        """The verdict as one line (``--json``): the finding and the other causes.

        Only the ok verdict's starts with its word (``ok: ...``), as it always did; the status
        field carries the others'.
        """
        text = self.summary + (f"; also {', '.join(self.also)}" if self.also else "")
        return f"ok: {text}" if self.status == "ok" else text

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "cause": self.cause, "device": self.device, "text": self.text}


@dataclass(frozen=True)
class Report:
    checks: tuple[Check, ...]
    verdict: Verdict
    chips: int

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict.status]

    def to_dict(self) -> dict[str, Any]:
        return {"checks": [check.to_dict() for check in self.checks], "verdict": self.verdict.to_dict(),
                "exit_code": self.exit_code}


def devices_text(labels: Sequence[str]) -> str:
    """``NPU 3``, ``NPUs 3 and 5``, ``NPU 1 chip 0 and NPU 1 chip 1``, ``this node`` (repeats dropped)."""
    unique = list(dict.fromkeys(labels))
    numbers = [match.group(1) for match in map(_NPU_LABEL.match, unique) if match]
    if len(unique) > 1 and len(numbers) == len(unique):
        return f"NPUs {join(numbers)}"
    return join(unique)


def _located(checks: Sequence[Check], status: str) -> list[tuple[Finding, str]]:
    """The findings of ``status`` with the name of their check, most convincing first."""
    found = [(finding, check.name) for check in checks for finding in check.findings if finding.status == status]
    return sorted(found, key=lambda pair: pair[0].rank)


def _findings_verdict(status: str, located: Sequence[tuple[Finding, str]]) -> Verdict:
    """The top cause on every device it was found on, then each other cause with its devices."""
    by_cause: dict[str, list[tuple[Finding, str]]] = {}
    for finding, check in located:
        by_cause.setdefault(finding.cause, []).append((finding, check))
    (cause, found), *others = by_cause.items()
    first, check = found[0]
    summary = f"{CAUSES[cause][0]} on {first.label} ({first.detail})"
    more = [finding.label for finding, _ in found[1:] if finding.label != first.label]
    if more:
        summary += f" and on {devices_text(more)}"
    also = tuple(f"{CAUSES[other][0]} on {devices_text([f.label for f, _ in group])}" for other, group in others)
    return Verdict(status, cause, first.npu, summary, also, action(cause), runbook(cause, check))


def _could_not_check(cause: str, why: str) -> Verdict:
    return Verdict("unknown", cause, None, f"could not check this node: {why}", action=action(cause),
                   runbook=runbook(cause))


def decide(checks: Sequence[Check], scan: LogScan | None, remote: Culprit | None = None,
           chip_list_error: str | None = None, hung_tools: Sequence[str] = ()) -> Verdict:
    """The one most likely cause (see the module docstring for the order)."""
    fails = _located(checks, FAIL)
    if fails:
        return _findings_verdict("fail", fails)
    if chip_list_error is not None:
        return _could_not_check("no_chip_list", chip_list_error)
    if hung_tools:
        return _could_not_check("tool_hung", "; ".join(hung_tools))
    warns = _located(checks, WARN)
    if all(check.status == UNKNOWN for check in checks):
        return Verdict("unknown", None, None, "could not check anything on this node",
                       action=action("nothing_checked"))
    unchecked = [check for check in checks if check.status == UNKNOWN]
    if unchecked:
        names = ", ".join(check.name for check in unchecked)
        also = _findings_verdict("warn", warns).summary if warns else ""
        return Verdict("unknown", "not_checked", None, f"could not check {names}: {unchecked[0].evidence}",
                       (f"WARN {also}",) if also else (), action("not_checked"), runbook("not_checked"))
    if warns:
        return _findings_verdict("warn", warns)
    if scan is not None and scan.events:
        codes = ", ".join(f"{code} x{count}" for code, count in scan.by_code().most_common(3))
        window = window_text(scan.window_s)
        if remote is not None:
            parts = (f"node {remote.node}" if remote.node != "unknown" else "",
                     f"remote rank {remote.rank}" if remote.rank is not None else "",
                     f"IP {remote.ip}" if remote.ip else "")
            who = " / ".join(part for part in parts if part)
            return Verdict("warn", "remote_peer", None,
                           f"look at {who}, not this node ({codes} in the last {window}; "
                           f"every local check passes)", action=action("remote_peer"),
                           runbook=runbook("remote_peer"))
        return Verdict("warn", "log_errors", None,
                       f"HCCL errors in the logs ({codes} in the last {window}) but no local cause found",
                       action=action("log_errors"), runbook=runbook("log_errors"))
    return Verdict("ok", None, None, "no local cause of HCCL timeouts found")
