"""One NPU's exported series judged with the fault functions the checks use: what ``npuwatch top`` colours.

``top`` reads the agent's ``/metrics``, not the tools; each series is turned back into the record its
fault function takes (a link state, an ECC count, an HCCS health word), so a cell here and a check
there can never disagree on the same reading. The handling level is the agent's own
(``npu_fault_handling``: its history of repeated and lasting codes included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent.health import faults
from agent.health.results import CheckResult, Result, fold
from agent.health.status import FAIL, PASS, WARN, rank
from agent.health.thresholds import fault_kind
from collectors.hccn_link import LinkRecord
from collectors.hccn_net_health import NetHealthRecord
from collectors.npu_smi_ecc import EccCounts, EccRecord
from collectors.npu_smi_hccs import HccsRecord

__all__ = ["NpuSeries", "as_checks", "judge_series", "worst"]


@dataclass(frozen=True)
class NpuSeries:
    """What the agent exports of one chip (None: not exported)."""

    npu: int
    chip: int = 0
    temperature: float | None = None  # npu_temperature_celsius
    health: str | None = None  # npu_health_state{state}
    handling: str | None = None  # npu_fault_handling{handling}
    hbm_double_bit: float | None = None  # npu_hbm_ecc_current_errors{bit="double"}
    hbm_isolated_pages: float | None = None  # sum of npu_hbm_ecc_isolated_pages
    hccs_healthy: bool | None = None  # npu_hccs_healthy
    link_up: bool | None = None  # npu_roce_link_up
    link_downs: int | None = None  # link-downs seen within the flap window (a watcher's own count)
    net_health: str | None = None  # npu_roce_net_health_state{state}
    optics_lost: bool | None = None  # npu_optical_signal_lost


def judge_series(series: NpuSeries, *, flap_window_s: float | None = None) -> list[Result]:
    """Every judgement the series allow, one result each (``kind`` set where a fault was found)."""
    where: dict[str, Any] = {"npu": series.npu, "chip": series.chip}
    device = series.npu
    out: list[Result] = []
    if series.temperature is not None:
        out.append(faults.temperature(series.temperature, **where))
    if series.handling is not None:
        out.append(faults.handling_level(series.handling, "npu_fault_handling", **where))
    if series.health is not None and (series.handling is None or series.handling == "NotHandleFault"):
        out.append(faults.chip_health(series.health, (), said=f"npu-smi says {series.health}", **where))
    if series.hbm_double_bit is not None or series.hbm_isolated_pages is not None:
        ecc = EccRecord(hbm=EccCounts(double_bit_errors=series.hbm_double_bit,
                                      single_bit_isolated_pages=series.hbm_isolated_pages))
        out.append(faults.hbm_ecc(ecc, **where))
    if series.hccs_healthy is not None:
        out.append(faults.hccs(HccsRecord(health="OK" if series.hccs_healthy else "NOK"), **where))
    if series.link_up is not None:
        out.append(faults.link(LinkRecord(series.link_up, "UP" if series.link_up else "DOWN"), device, **where))
    if series.link_downs:
        out.append(faults.link_downs(series.link_downs, device, up_now=bool(series.link_up),
                                     window_s=flap_window_s or float(fault_kind("link_flap").window_s or 0.0),
                                     **where))
    if series.net_health is not None:
        out.append(faults.net_health(NetHealthRecord(series.net_health), device, **where))
    if series.optics_lost:
        out.append(faults.signal_lost(device, **where))
    label = f"NPU {series.npu}" if series.chip == 0 else f"NPU {series.npu} chip {series.chip}"
    return [result.where(label) for result in out]


def worst(results: Sequence[Result]) -> Result | None:
    """The finding a one-word cell shows: the worst status, then the heaviest kind."""
    found = [r for r in results if r.kind is not None and r.status in (FAIL, WARN)]
    if not found:
        return None
    return min(found, key=lambda r: (-rank(r.status), -fault_kind(r.kind or "").weight))


def as_checks(results: Sequence[Result]) -> list[CheckResult]:
    """The results folded by the check each kind belongs to, for the one lead cause (agent.health.verdict)."""
    by_check: dict[str, list[Result]] = {}
    for result in results:
        name = fault_kind(result.kind).check if result.kind else "series"
        by_check.setdefault(name, []).append(result)
    return [fold(name, items, "ok") for name, items in by_check.items() if any(r.status != PASS for r in items)]
