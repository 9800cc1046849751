"""The one status order of every health judgement, how statuses fold, and what each means as an exit code.

Statuses are PASS, WARN, FAIL and UNKNOWN. Folding many into one (a check over its devices, a
command over its checks) takes the worst in the order FAIL > UNKNOWN > WARN > PASS: a command that
could not look at part of the node cannot vouch for it, which weighs more than a warning. ``check``
and ``diagnose`` both fold this way, so a node with a warning and an unreadable part exits 3
(Nagios unknown) from either command.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["EXIT_CODES", "EXIT_STATUS_HELP", "FAIL", "PASS", "STATUSES", "UNKNOWN", "VERDICT_OF", "WARN", "rank",
           "worst"]

PASS, WARN, FAIL, UNKNOWN = "PASS", "WARN", "FAIL", "UNKNOWN"
STATUSES = (PASS, WARN, UNKNOWN, FAIL)  # least to most severe
_RANK = {status: index for index, status in enumerate(STATUSES)}
VERDICT_OF = {PASS: "ok", WARN: "warn", FAIL: "fail", UNKNOWN: "unknown"}
# Nagios (0 ok, 1 warn, 2 fail, 3 unknown) or node-problem-detector (0 OK for ok and warn, 1 NonOK, 2 Unknown).
EXIT_CODES: dict[str, dict[str, int]] = {
    "nagios": {"ok": 0, "warn": 1, "fail": 2, "unknown": 3},
    "npd": {"ok": 0, "warn": 0, "fail": 1, "unknown": 2},
}
# The one exit-status policy, as every judging command's --help prints it (docs/health-checks.md#exit-status).
EXIT_STATUS_HELP = """\
exit status (check, diagnose, scan-logs and triage alike: the verdict's status):
  0  ok: nothing wrong found (triage: no incident and no local fault)
  1  warn: a warning or log errors (triage: no incident, local faults that warn)
  2  fail: a fault on this node (check, diagnose; scan-logs: one the logs show, a
     device that dropped out or an SDMA fault); triage: an incident whose culprit
     is named, or no incident and a local fault that fails
  3  unknown: could not tell: nothing read or checked (a missing npu-smi, an empty
     directory, binary files only) or an input that could not be read; triage:
     an incident whose culprit could not be named (a tie)
check --exit-codes npd: 0 ok and warn, 1 fail, 2 unknown.
"""


def rank(status: str) -> int:
    """0 for PASS up to 3 for FAIL: a sort key, the more severe the higher."""
    return _RANK[status]


def worst(statuses: Iterable[str], default: str = PASS) -> str:
    return max(statuses, key=_RANK.__getitem__, default=default)
