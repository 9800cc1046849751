"""The one check set: every check ``npuwatch check`` and ``npuwatch diagnose`` run over one node reading.

``check`` selects from it by level and budget (``agent.check.levels``) and adds what only a job gate
asks (``agent``, the device checks); ``diagnose`` runs all of it. Each name is the ``check`` of the fault
kinds it judges (``agent.health.thresholds``), so a fault is always found by the same check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent.health import checks_chip, checks_node, checks_roce
from agent.health.readings import QuickReadings
from agent.health.results import CheckResult
from agent.health.settings import JudgeSettings

__all__ = ["NODE_CHECKS", "ROCE_CHECKS", "judge", "run_checks"]

Judge = Callable[[QuickReadings, JudgeSettings], CheckResult]

# In the order every command lists them.
NODE_CHECKS: dict[str, Judge] = {
    "chip_count": checks_chip.check_chip_count,
    "chip_health": checks_chip.check_chip_health,
    "hbm_ecc": checks_chip.check_hbm_ecc,
    "hccs": checks_chip.check_hccs,
    "temperature": checks_chip.check_temperature,
    "roce_link": checks_roce.check_roce_link,
    "roce_flaps": checks_roce.check_roce_flaps,
    "net_health": checks_roce.check_net_health,
    "optics": checks_roce.check_optics,
    "roce_errors": checks_roce.check_roce_errors,
    "roce_ip": checks_roce.check_roce_ip,
    "versions": checks_chip.check_versions,
    "hccl_errors": checks_node.check_hccl_errors,
}
ROCE_CHECKS = frozenset({"roce_link", "roce_flaps", "net_health", "optics", "roce_errors", "roce_ip"})


def judge(name: str, readings: QuickReadings, settings: JudgeSettings, *, roce: bool) -> CheckResult:
    """One check of the set (``tools`` too: ``roce`` says whether hccn_tool was asked)."""
    if name == "tools":
        return checks_node.check_tools(readings, settings, roce=roce)
    return NODE_CHECKS[name](readings, settings)


def run_checks(readings: QuickReadings, settings: JudgeSettings, names: Sequence[str] = ("tools", *NODE_CHECKS)
               ) -> list[CheckResult]:
    roce = any(name in ROCE_CHECKS for name in names)
    return [judge(name, readings, settings, roce=roce) for name in names]
