"""The levels, their time budgets, the checks each adds, and the named groups NPD conditions use.

Levels are cumulative: ``medium`` runs every ``quick`` check and its own, ``long`` all three sets.
``dmi_diag`` stands for one check per ``ascend-dmi -dg`` item (``dmi_diag_hbm``, ``dmi_diag_aicore``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "BUDGET_S",
    "CHECKS",
    "CONDITIONS",
    "LEVELS",
    "CheckSpec",
    "SelectionError",
    "checks_of",
    "select",
]

LEVELS = ("quick", "medium", "long")
BUDGET_S = {"quick": 10.0, "medium": 120.0, "long": 900.0}


@dataclass(frozen=True)
class CheckSpec:
    name: str
    level: str  # the level that adds it
    scope: str  # chip | node | pair
    what: str


CHECKS: tuple[CheckSpec, ...] = (
    # quick: read-only, no device load, safe while jobs run
    CheckSpec("tools", "quick", "node", "npu-smi and hccn_tool answer (no hang, no error, readable output)"),
    CheckSpec("chip_count", "quick", "node", "npu-smi lists expected_chips chips"),
    CheckSpec("chip_health", "quick", "chip", "no active error code of a level that needs handling; health OK"),
    CheckSpec("hbm_ecc", "quick", "chip", "no HBM double-bit error; isolated pages under the threshold"),
    CheckSpec("hccs", "quick", "chip", "HCCS health OK"),
    CheckSpec("temperature", "quick", "chip", "chip temperature under the thresholds table's warning degrees"),
    CheckSpec("roce_link", "quick", "chip", "RoCE link UP"),
    CheckSpec("roce_flaps", "quick", "chip", "fewer than 2 RoCE link-down events in the flap window (1 warns)"),
    CheckSpec("net_health", "quick", "chip", "hccn_tool net_health Success"),
    CheckSpec("optics", "quick", "chip", "light on every lane, powers and temperature within the module's thresholds"),
    CheckSpec("roce_errors", "quick", "chip", "no RoCE error counter rises between two readings"),
    CheckSpec("roce_ip", "quick", "chip", "RoCE addresses as /etc/hccn.conf sets them, none twice"),
    CheckSpec("versions", "quick", "node", "one driver and one firmware version on every card (and the expected ones)"),
    CheckSpec("hccl_errors", "quick", "node", "no HCCL/CANN error in the recent logs"),
    CheckSpec("agent", "quick", "node", "the local npuwatch agent answers and its collectors are up"),
    # medium: short device load, idle only, under the probe lock
    CheckSpec("gemm", "medium", "chip", "GEMM product correct and FLOP/s at the reference"),
    CheckSpec("hbm_bandwidth", "medium", "chip", "device copy bandwidth (read + written) at the reference"),
    CheckSpec("h2d_bandwidth", "medium", "chip", "host-to-device bandwidth at the reference"),
    CheckSpec("d2h_bandwidth", "medium", "chip", "device-to-host bandwidth at the reference"),
    # long: minutes of load, idle only
    CheckSpec("dmi_diag", "long", "node", "every ascend-dmi -dg item passes (one check per item)"),
    CheckSpec("dmi_bandwidth", "long", "chip", "ascend-dmi --bw bandwidths at the reference"),
    CheckSpec("allreduce", "long", "node", "node all-reduce sums correct, bus bandwidth at the reference"),
    CheckSpec("p2p_bandwidth", "long", "pair", "chip-to-chip copy bandwidth of every pair at the reference"),
    CheckSpec("sustained_gemm", "long", "chip", "minutes of GEMM without throttling (clock, power, temperature)"),
)
_BY_NAME = {spec.name: spec for spec in CHECKS}
_DMI_ITEM_RE = re.compile(r"^dmi_diag_[A-Za-z][\w]*$")

CONDITIONS: dict[str, tuple[str, ...]] = {
    "NPUHealthy": ("tools", "chip_count", "chip_health", "hccs", "temperature", "versions", "gemm", "h2d_bandwidth",
                   "d2h_bandwidth", "dmi_diag", "dmi_bandwidth", "sustained_gemm"),
    "NPUNetworkHealthy": ("roce_link", "roce_flaps", "net_health", "optics", "roce_errors", "roce_ip", "hccl_errors",
                          "allreduce", "p2p_bandwidth"),
    "NPUMemoryHealthy": ("hbm_ecc", "hbm_bandwidth"),
}


class SelectionError(ValueError):
    """An unknown check, level or condition name (the message lists the known ones)."""


def checks_of(level: str) -> list[str]:
    """Every check a level runs (its own and those of the levels below it)."""
    if level not in LEVELS:
        raise SelectionError(f"unknown level {level!r}: expected one of {', '.join(LEVELS)}")
    upto = LEVELS[: LEVELS.index(level) + 1]
    return [spec.name for spec in CHECKS if spec.level in upto]


def _base(name: str) -> str:
    return "dmi_diag" if _DMI_ITEM_RE.match(name) else name


def select(level: str, only: Sequence[str] = (), condition: str | None = None,
           skip: Iterable[str] = ()) -> list[str]:
    """The checks to run: the level's, narrowed to ``only`` or to a condition's group, less ``skip``.

    A name in ``only`` or ``skip`` may be a single ``ascend-dmi -dg`` item (``dmi_diag_hbm``); the
    ``dmi_diag`` check is then run and narrowed to it by the runner.
    """
    chosen = checks_of(level)
    for name in [*only, *skip]:
        if _base(name) not in _BY_NAME:
            raise SelectionError(f"unknown check {name!r}; known: {', '.join(spec.name for spec in CHECKS)}")
    if condition is not None:
        if condition not in CONDITIONS:
            raise SelectionError(f"unknown condition {condition!r}; known: {', '.join(CONDITIONS)}")
        group = set(CONDITIONS[condition])
        chosen = [name for name in chosen if name in group]
    if only:
        wanted = {_base(name) for name in only}
        above = sorted(name for name in wanted if name not in chosen and condition is None)
        if above:
            raise SelectionError(f"{', '.join(above)} not in level {level} (it runs: {', '.join(chosen)})")
        chosen = [name for name in chosen if name in wanted]
    skipped = {name for name in skip if name in _BY_NAME}
    return [name for name in chosen if name not in skipped]


def dmi_items_wanted(only: Sequence[str], skip: Iterable[str]) -> tuple[set[str] | None, set[str]]:
    """(``-dg`` items ``only`` narrows to, None for all; items ``skip`` drops), by item name."""
    named = {name[len("dmi_diag_"):] for name in only if _DMI_ITEM_RE.match(name)}
    whole = "dmi_diag" in only
    dropped = {name[len("dmi_diag_"):] for name in skip if _DMI_ITEM_RE.match(name)}
    return (None if whole or not named else named), dropped


def spec(name: str) -> CheckSpec:
    return _BY_NAME[_base(name)]
