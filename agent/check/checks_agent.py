"""The check only ``npuwatch check`` runs: the local npuwatch agent answers and none of its collectors is down."""

from __future__ import annotations

from agent.check.local_agent import FAULT_REASONS, AgentReading
from agent.health.readings import QuickReadings
from agent.health.results import CheckResult, Result, fold
from agent.health.settings import JudgeSettings
from agent.health.status import FAIL, PASS, UNKNOWN, WARN

__all__ = ["check_agent"]


def check_agent(readings: QuickReadings, settings: JudgeSettings) -> CheckResult:
    """The local agent answers, and none of its collectors is down for a fault."""
    name = "agent"
    reading: AgentReading | None = readings.agent
    if reading is None:
        return CheckResult(name, UNKNOWN, "agent not read", (Result(UNKNOWN, "agent not read"),))
    if reading.error is not None:
        return CheckResult(name, UNKNOWN, reading.error, (Result(UNKNOWN, reading.error),),
                           "start the agent (systemctl start npuwatch) or skip this check (check.skip: [agent])")
    results = []
    for collector, up in sorted(reading.up.items()):
        reason = reading.reasons.get(collector, "")
        if up == 1:
            continue
        if reason in FAULT_REASONS:
            results.append(Result(FAIL, f"collector {collector} down ({reason})", value=reason))
        elif reason == "degraded":
            results.append(Result(WARN, f"collector {collector} degraded", value=reason))
    if not results:
        results.append(Result(PASS, f"{len(reading.up)} collectors, none down for a fault", value=0, threshold=0,
                              unit="collectors down", basis=reading.where))
    return fold(name, results, f"{len(reading.up)} collectors up ({reading.where})",
                "see npuwatch_collector_down_reason and the agent's log (journalctl -u npuwatch)")
