"""The one thresholds table: per fault kind, the check that judges it, its status, threshold, look-back and alert.

Every judgement of ``agent.health.faults`` takes its threshold and status from here, and
tests/unit/test_health_thresholds.py fails when an alert rule (``alerts/*.rules.yml``) that sees the
same quantity holds it to another number or window. Where the alert cannot see the agent's
quantity, ``alert_note`` says why it uses a coarser signal. ``check.flap_window`` and
``check.max_isolated_pages`` override ``window_s`` of ``link_flap`` and ``threshold`` of
``hbm_pages_over`` for every consumer that reads the config (``check`` and ``diagnose``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.health.status import FAIL, WARN
from collectors.fault_levels import FaultTable, configured_table

__all__ = ["INCIDENT_LOOK_BACK_S", "THRESHOLDS", "AlertBound", "Threshold", "fault_table", "flap_window_s",
           "max_isolated_pages", "threshold_of"]


@dataclass(frozen=True)
class AlertBound:
    """What an alert rule's expression must say: ``metric`` (inside ``func(...[window])`` when given) ``op value``."""

    metric: str
    op: str
    value: float
    window: str | None = None  # PromQL range, "15m"


@dataclass(frozen=True)
class Threshold:
    kind: str  # the fault kind (agent.triage.faults.FAULT_KINDS names the same kinds)
    check: str  # the check that judges it (npu_check_result{check}, --only, check.skip)
    status: str  # FAIL or WARN
    threshold: float | str | None  # what a value is held to
    unit: str | None
    window_s: float | None = None  # look-back (a consumer may pass its own window)
    alert: str | None = None  # the shipped alert that pages it
    severity: str | None = None  # that alert's severity label for this fault
    bounds: tuple[AlertBound, ...] = ()  # what the alert's expression must agree on
    alert_note: str = ""  # why the alert differs from the agent's judgement, where it does


_FLAP_WINDOW_S = 900.0
# How far back an HCCL timeout's investigation looks (`diagnose --window`, triage of saved link_stat
# output): a job hangs for up to its HCCL timeouts before it dies, and the cause comes before that.
INCIDENT_LOOK_BACK_S = 7200.0
# The handling-level alerts read npu_fault_handling, a label rather than a number the table could bound.
_LEVEL_NOTE = ("the alert reads the chip's level from npu_fault_handling, which adds the agent's history "
               "(repeated and lasting codes, held separations) to what one reading shows")
THRESHOLDS: dict[str, Threshold] = {t.kind: t for t in (
    Threshold("link_down", "roce_link", FAIL, "UP", None, alert="NPURoCELinkDown", severity="critical",
              bounds=(AlertBound("npu_roce_link_up", "==", 0),)),
    # Two downs in the window flap (at least three state changes: down, up, down); one that came
    # back up is a warning. The alert counts the same in its own samples.
    Threshold("link_flap", "roce_flaps", FAIL, 2, "link-down events", _FLAP_WINDOW_S, "NPURoCELinkFlapping",
              "warning", (AlertBound("npu_roce_link_up", ">=", 3, "15m"),
                          AlertBound("npu_roce_link_up_transitions_total", ">=", 2, "15m")),
              "pages as a warning: the port is up between flaps, so jobs may still run; the node's own "
              "check fails it so a scheduler stops placing jobs there"),
    Threshold("link_down_once", "roce_flaps", WARN, 1, "link-down events", _FLAP_WINDOW_S,
              alert_note="no alert: one down and up is two state changes, under NPURoCELinkFlapping's three; "
                         "a port still down pages NPURoCELinkDown"),
    Threshold("optics_dark", "optics", FAIL, 1e-5, "watts", alert="NPUOpticalModuleDegraded", severity="warning",
              bounds=(AlertBound("npu_optical_signal_lost", "==", 1),),
              alert_note="the agent calls a lane dark under 0.01 mW or with LOS/LoL set; the alert pages "
                         "LOS/LoL, and every lane under 0.1 mW (rx_power_low), which a dark lane also is; "
                         "a warning, because a dark port also pages NPURoCELinkDown (critical)"),
    Threshold("optics_weak", "optics", WARN, "the module's rx power low threshold", "watts",
              alert="NPUOpticalModuleDegraded", severity="warning",
              bounds=(AlertBound("npu_optical_rx_power_watts", "<", 1e-4),),
              alert_note="the module's own rx-low threshold is not exported (one series per module and "
                         "lane would double the optics series); the alert holds every lane to a fixed "
                         "0.1 mW (-10 dBm), under the thresholds modules commonly program"),
    Threshold("optics_out_of_range", "optics", WARN, "the module's thresholds", None,
              alert="NPUOpticalModuleDegraded", severity="warning",
              bounds=(AlertBound("npu_optical_temperature_celsius", ">", 70),),
              alert_note="tx power or module temperature outside the module's own thresholds; the alert "
                         "pages a module over a fixed 70 C (the thresholds are not exported)"),
    Threshold("roce_errors_rising", "roce_errors", WARN, 0, "errors",
              alert_note="diagnose samples the counters twice; no alert pages a rise alone"),
    Threshold("roce_error_counters", "roce_errors", WARN, 0, "errors",
              alert_note="non-zero since boot: a bundle's single reading, weighed by triage only"),
    Threshold("net_health", "net_health", FAIL, "Success", None, alert="NPURoCENetHealthFailed",
              severity="warning", bounds=(AlertBound("npu_roce_net_healthy", "==", 0),),
              alert_note="pages as a warning after 10 minutes: net_health flips while a switch reconverges"),
    Threshold("net_health_init", "net_health", WARN, "Success", None,
              alert_note="Init means no detect address is configured: a setup gap, not a fault to page"),
    Threshold("hbm_dbe", "hbm_ecc", FAIL, 0, "errors", alert="NPUHBMDoubleBitECC", severity="critical",
              bounds=(AlertBound("npu_hbm_ecc_current_errors", ">", 0),
                      AlertBound("npu_hbm_ecc_errors_total", ">", 0, "15m"))),
    Threshold("hbm_pages_over", "hbm_ecc", FAIL, 60, "pages",
              alert_note="isolated pages are not exported as a series of their own; the double-bit errors "
                         "that isolate them page NPUHBMDoubleBitECC"),
    Threshold("hbm_pages_isolated", "hbm_ecc", WARN, 0, "pages",
              alert_note="history, not a page: the errors behind the pages paged when they happened"),
    Threshold("chip_unhealthy", "chip_health", FAIL, "OK", None, alert="NPUUnhealthy", severity="critical",
              bounds=(AlertBound("npu_health_state", "==", 1),)),
    Threshold("chip_warning", "chip_health", WARN, "OK", None, alert="NPUUnhealthy", severity="warning",
              bounds=(AlertBound("npu_healthy", "==", 0),)),
    Threshold("chip_fault_isolate", "chip_health", FAIL, "OK", None, alert="NPUFaultIsolate", severity="critical",
              alert_note=_LEVEL_NOTE),
    Threshold("chip_fault_reset", "chip_health", FAIL, "OK", None, alert="NPUFaultResetWhenIdle", severity="warning",
              alert_note=_LEVEL_NOTE + "; it pages as a warning: a reset when the chip is idle clears it, the job on "
                                       "it has failed already or can finish"),
    Threshold("chip_fault_drain", "chip_health", WARN, "OK", None, alert="NPUFaultDrainAfterJob",
              severity="warning", alert_note=_LEVEL_NOTE),
    Threshold("hccs_unhealthy", "hccs", FAIL, "OK", None, alert="NPUHCCSLinkUnhealthy", severity="critical",
              bounds=(AlertBound("npu_hccs_healthy", "==", 0),)),
    Threshold("chip_hot", "temperature", WARN, 85.0, "celsius", alert="NPUTemperatureHigh", severity="warning",
              bounds=(AlertBound("npu_temperature_celsius", ">", 85),)),
    Threshold("chip_too_hot", "temperature", FAIL, 95.0, "celsius", alert="NPUTemperatureHigh",
              severity="critical", bounds=(AlertBound("npu_temperature_celsius", ">", 95),)),
    Threshold("chip_missing", "chip_count", FAIL, "expected_chips", "chips", alert="NPUChipMissing",
              severity="critical",
              alert_note="the alert holds npu_chips to npuwatch_expected_chips, the same config value, and also "
                         "pages a chip listed an hour ago and gone now, which a one-off check cannot see"),
    Threshold("device_lost", "hccl_errors", FAIL, 0, "heartbeats lost",
              alert_note="read from the kernel log by check and diagnose; the agent exports no series for it"),
    Threshold("ip_mismatch", "roce_ip", FAIL, "/etc/hccn.conf", None,
              alert_note="hccn.conf is read by the commands only; the agent exports no series for it"),
)}


def threshold_of(kind: str) -> Threshold:
    try:
        return THRESHOLDS[kind]
    except KeyError:
        raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(THRESHOLDS)}") from None


def flap_window_s(config: Any) -> float:
    """``check.flap_window`` when the config sets it, else the table's look-back for ``link_flap``."""
    value = config.check.flap_window
    return float(value) if value is not None else float(threshold_of("link_flap").window_s or 0.0)


def max_isolated_pages(config: Any) -> int:
    """``check.max_isolated_pages`` when the config sets it, else the table's ``hbm_pages_over``."""
    value = config.check.max_isolated_pages
    return int(value) if value is not None else int(threshold_of("hbm_pages_over").threshold or 0)


def fault_table(config: Any) -> FaultTable:
    """The handling-level table of ``faults.codes_file`` and ``faults.escalation_file``; the packaged one when they
    are unset or cannot be loaded (the agent logs why)."""
    return configured_table(config.faults.codes_file, config.faults.escalation_file)[0]
