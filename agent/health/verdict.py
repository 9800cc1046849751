"""The one lead-cause ranking and the verdict every surface prints: check's verdict line, diagnose's verdict,
top's header. A surface presents the ``Verdict`` this module decides; none ranks faults of its own.

The order: any FAIL finding wins; then "could not check" (no chip list; nothing checked; a check that
could not judge: UNKNOWN folds above WARN, as in ``agent.health.status``); then WARN findings; then HCCL
errors in the logs with no local cause (the culprit off this node when the caller knows one); else ok.
Within a status, a finding on an NPU the HCCL logs blame comes first (the logs name the NPU the incident
went through), then the heavier fault kind (``agent.health.thresholds``' weight), then the lower NPU. A
port that flaps and happens to be down when read is named as flapping.
The verdict names every device its cause was found on and the other causes at the same severity, so
nothing failing hides behind "and 3 more".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from agent.core import runbooks
from agent.core.humanize import join
from agent.core.runbooks import RUNBOOK_BASE
from agent.health.checks_node import BLAMED, TOOLS_HINT
from agent.health.results import CheckResult, Result
from agent.health.status import EXIT_CODES, FAIL, PASS, UNKNOWN, WARN, rank
from agent.health.thresholds import fault_kind

__all__ = ["RUNBOOK_BASE", "SEVERITY_WORDS", "VERDICT_CAUSES", "Finding", "Verdict", "devices_text", "exit_code",
           "findings", "lead", "ranked", "runbook_url",
           "unsubsumed", "verdict_of"]

SEVERITY_WORDS = {"ok": "ok", "warn": "WARN", "fail": "FAIL", "unknown": "UNKNOWN"}
# The causes only a verdict names (no fault kind): what to do, and the alert whose runbook says more.
VERDICT_CAUSES: dict[str, tuple[str, str | None]] = {
    "remote_peer": ("run `npuwatch diagnose` on that node; for the whole job, `npuwatch bundle` on every node "
                    "and `npuwatch triage` over the bundles", "HCCLTimeout"),
    "log_errors": ("compare with the other ranks' logs: `npuwatch bundle` on every node of the job, then "
                   "`npuwatch triage *.tar.gz` names the rank that stopped first", "HCCLTimeout"),
    "no_chip_list": ("npu-smi must answer first: run `npu-smi info` by hand and check dmesg for driver (dcmi) "
                     "errors; " + TOOLS_HINT, "NPUCollectorFailing"),
    "not_checked": ("run the check that could not judge by hand (its evidence says which call failed); a node "
                    "that cannot be checked is not vouched for", "NPUCollectorFailing"),
    "nothing_checked": (TOOLS_HINT, None),
}
# A finding explained by another kind on the same NPU: a flapping port is sometimes down at the moment it is
# read, and the lead must not depend on that moment.
_SUBSUMED = {"link_down": "link_flap"}
_NPU_LABEL = re.compile(r"^NPU (\d+)$")
_WHERE = re.compile(r"^(NPU \d+(?: chip \d+)?(?: -> NPU \d+(?: chip \d+)?)?): ")


def runbook_url(alert: str | None) -> str | None:
    """The runbook of ``alert`` at the one configured base (``agent.core.runbooks``), None for none."""
    return runbooks.runbook_url(alert) if alert else None


@dataclass(frozen=True)
class Finding:
    """A result that did not pass, as a verdict names it: its kind (None: a check without a fault kind for it),
    where it was seen and what was seen there."""

    status: str
    kind: str | None
    check: str
    npu: int | None
    where: str  # "NPU 3", "NPU 1 chip 0", "this node"
    detail: str  # "hccn_tool -i 3 -link -g says DOWN"
    blamed: bool = False  # the HCCL logs blame this NPU
    chip: int | None = None
    at: float | None = None  # when the tool's output says it started

    @property
    def cause(self) -> str:
        return self.kind or self.check

    @property
    def label(self) -> str:
        return fault_kind(self.kind).label if self.kind else f"{self.check} check"

    @property
    def weight(self) -> float:
        return fault_kind(self.kind).weight if self.kind else 0.0

    @property
    def hint(self) -> str:
        return fault_kind(self.kind).hint_for(self.check) if self.kind else ""


def _finding(check: CheckResult, result: Result, blamed: set[int]) -> Finding:
    match = _WHERE.match(result.evidence)
    where, detail = (match.group(1), result.evidence[match.end():]) if match else ("this node", result.evidence)
    npu = result.npu
    if npu is None and match is not None and match.group(1).split()[1].isdigit():
        npu = int(match.group(1).split()[1])
    return Finding(result.status, result.kind, check.name, npu, where, detail, npu is not None and npu in blamed,
                   result.chip if result.npu is not None else None, result.at)


def blamed_npus(checks: Sequence[CheckResult]) -> set[int]:
    """The NPUs whose own addresses or devices the HCCL logs blame (``checks_node.local_blame``)."""
    return {result.npu for check in checks for result in check.results
            if result.basis == BLAMED and result.npu is not None}


def findings(checks: Sequence[CheckResult]) -> list[Finding]:
    """Every result that did not pass and says something of its own: a fault kind, or a problem a check found
    without one (a collector down, more chips than expected). Log incidents and blames are the log path's."""
    blamed = blamed_npus(checks)
    found = []
    for check in checks:
        if check.status in (FAIL, WARN) and not any(result.status == check.status for result in check.results):
            found.append(_finding(check, Result(check.status, check.evidence), blamed))  # a check without results
        for result in check.results:
            if result.status not in (FAIL, WARN):
                continue
            if result.kind is None and (check.name == "hccl_errors" or result.basis == BLAMED):
                continue
            found.append(_finding(check, result, blamed))
    return ranked(unsubsumed(found))


def unsubsumed(found: Sequence[Finding]) -> list[Finding]:
    """``found`` less each finding another kind on the same NPU explains (a flapping port read down); one node's."""
    kinds = {(finding.npu, finding.kind) for finding in found}
    return [finding for finding in found
            if finding.kind not in _SUBSUMED or (finding.npu, _SUBSUMED[finding.kind]) not in kinds]


def ranked(found: Sequence[Finding]) -> list[Finding]:
    """The one order of findings: worst status, then blamed by the logs, then weight, then NPU."""
    return sorted(found, key=lambda f: (-rank(f.status), not f.blamed, -f.weight, -1 if f.npu is None else f.npu))


def devices_text(labels: Sequence[str]) -> str:
    """``NPU 3``, ``NPUs 3 and 5``, ``NPU 1 chip 0 and NPU 1 chip 1``, ``this node`` (repeats dropped)."""
    unique = list(dict.fromkeys(labels))
    numbers = [match.group(1) for match in map(_NPU_LABEL.match, unique) if match]
    if len(unique) > 1 and len(numbers) == len(unique):
        return f"NPUs {join(numbers)}"
    return join(unique)


@dataclass(frozen=True)
class Verdict:
    status: str  # ok | warn | fail | unknown
    cause: str | None  # a fault kind, a check's name (a finding without a kind), a VERDICT_CAUSES key, or None
    npu: int | None
    summary: str  # the finding, without its severity word
    also: tuple[str, ...] = ()  # the other causes at the same severity, most convincing first
    action: str = ""  # what to do next
    runbook: str | None = None  # the alert runbook of ``cause``
    check: str | None = None  # the check that found the cause
    evidence: str = ""  # the leading finding as its check printed it ("NPU 3: hccn_tool -i 3 -link -g says DOWN")

    @property
    def word(self) -> str:
        """``FAIL``, ``WARN``, ``UNKNOWN`` or ``ok``: what the verdict line starts with."""
        return SEVERITY_WORDS[self.status]

    @property
    def text(self) -> str:
        """The verdict as one line: the finding and the other causes (the ok verdict's starts with ``ok:``)."""
        text = self.summary + (f"; also {', '.join(self.also)}" if self.also else "")
        return f"ok: {text}" if self.status == "ok" else text

    def exit_code(self, style: str = "nagios") -> int:
        return exit_code(self.status, style)

    def to_dict(self) -> dict[str, Any]:
        """The one JSON verdict object of every command (docs/health-checks.md#json-output)."""
        return {"status": self.status, "cause": self.cause, "npu": self.npu, "check": self.check, "text": self.text,
                "summary": self.summary, "also": list(self.also), "action": self.action, "runbook": self.runbook}


def exit_code(status: str, style: str = "nagios") -> int:
    """The one exit-status policy (``agent.health.status.EXIT_CODES``) of check, diagnose, scan-logs and triage."""
    return EXIT_CODES[style][status]


def verdict_of(status: str, found: Sequence[Finding]) -> Verdict:
    """``status``'s verdict over ``found`` (ranked, all of that status): the top cause on every device it was
    found on, then each other cause with its devices."""
    by_cause: dict[str, list[Finding]] = {}
    for finding in found:
        by_cause.setdefault(finding.cause, []).append(finding)
    (cause, group), *others = by_cause.items()
    first = group[0]
    summary = f"{first.label} on {first.where} ({first.detail})"
    if first.blamed:
        summary += ", which the HCCL logs blame"
    more = [finding.where for finding in group[1:] if finding.where != first.where]
    if more:
        summary += f" and on {devices_text(more)}"
    also = tuple(f"{other[0].label} on {devices_text([f.where for f in other])}" for _, other in others)
    alert = fault_kind(first.kind).runbook_for(first.check) if first.kind else None
    evidence = f"{first.where}: {first.detail}" if first.where != "this node" else first.detail
    return Verdict(status, cause, first.npu, summary, also, first.hint, runbook_url(alert), first.check, evidence)


def _named(cause: str, status: str, summary: str, also: tuple[str, ...] = ()) -> Verdict:
    action, alert = VERDICT_CAUSES[cause]
    return Verdict(status, cause, None, summary, also, action, runbook_url(alert))


def lead(checks: Sequence[CheckResult], *, chip_list_error: str | None = None, remote: str | None = None
         ) -> Verdict:
    """The one most likely cause of what ``checks`` found (the order is the module docstring's).

    ``remote``: who the culprit off this node is (``node b / remote rank 5``), when the caller's logs name one.
    """
    found = findings(checks)
    fails = [finding for finding in found if finding.status == FAIL]
    if fails:
        return verdict_of("fail", fails)
    warns = [finding for finding in found if finding.status == WARN]
    if chip_list_error is not None:
        tools = next((check for check in checks if check.name == "tools" and check.status == UNKNOWN), None)
        why = tools.evidence if tools is not None else chip_list_error  # names the setting to change
        return replace(_named("no_chip_list", "unknown", f"could not check this node: {why}"),
                       check="tools" if tools is not None else None)
    if not checks or all(check.status == UNKNOWN for check in checks):
        return _named("nothing_checked", "unknown", "could not check anything on this node")
    unchecked = [check for check in checks if check.status == UNKNOWN]
    if unchecked:
        names = ", ".join(check.name for check in unchecked)
        also = (f"WARN {verdict_of('warn', warns).summary}",) if warns else ()
        return replace(_named("not_checked", "unknown", f"could not check {names}: {unchecked[0].evidence}", also),
                       check=unchecked[0].name, evidence=unchecked[0].evidence)
    if warns:
        return verdict_of("warn", warns)
    logs = next((check for check in checks if check.name == "hccl_errors" and check.status != PASS), None)
    if logs is not None:
        if remote is not None:
            return replace(_named("remote_peer", "warn", f"look at {remote}, not this node ({logs.evidence}; every "
                                                         "local check passes)"), check=logs.name)
        return replace(_named("log_errors", "warn", f"HCCL errors in the logs but no local cause found "
                                                    f"({logs.evidence})"), check=logs.name)
    return Verdict("ok", None, None, "no local cause of HCCL timeouts found")

