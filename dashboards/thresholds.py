"""Every colour step of the dashboards, in one place.

A step that stands for a judgement is built from the registry the agent judges by: the fault kinds of
``agent.health.thresholds``, the probe limits of ``agent.health.probe_limits`` and the statuses and exit codes of
``agent.health.status``. A reading is coloured as the agent, with its default settings, judges it, in the colour
of that judgement's status; tests/unit/test_dashboard_thresholds.py holds each step to the agent's own judgement
functions. A node's overrides (``check.max_temperature``, ``check.max_isolated_pages``) judge that node only: the
verdict panels (``dashboards.verdict``) show what it judged.

Grafana colours a value at or over a step. Where the agent judges "over the limit" of a whole-number reading
(degrees as npu-smi prints them, isolated pages), the step is the next whole number (``_over``).

Every other step stands for no judgement: it is a display constant below, with why.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dashboard_b

from agent.health.probe_limits import CLOCK_WARN, REFERENCE_FAIL, REFERENCE_WARN, ProbeLimit
from agent.health.status import EXIT_CODES, VERDICT_OF
from agent.health.thresholds import HOT_OPTICS_C, INCIDENT_LOOK_BACK_S, WEAK_RX_POWER_W, FaultKind, fault_kind
from dashboards.panels import steps

__all__ = ["BUSY_CHIP", "HBM_FILL", "HBM_TEMPERATURE", "HEALTHY", "HOST_BUSY", "INFO", "PROBE_PASS_RATE",
           "STATUS_COLOURS", "STATUS_MAPPING", "STATUS_STEPS", "ZERO_IS_GOOD", "chip_temperature", "clock_ratio",
           "gemm_efficiency", "hccl_error_age", "isolated_pages", "link_downs", "optical_rx_power",
           "optical_temperature", "status_colour", "status_text"]

# --- what each status looks like ------------------------------------------------------------------------------

STATUS_COLOURS = {"ok": "green", "warn": "yellow", "fail": "red", "unknown": "purple"}
_TEXT = {"ok": "ok", "warn": "warn", "fail": "FAIL", "unknown": "unknown"}
_NAGIOS = sorted(EXIT_CODES["nagios"].items(), key=lambda item: item[1])  # (status, code), ok first
# The verdict's status as a number (its Nagios exit code, the one policy) -> what a panel shows: (text, colour).
STATUS_MAPPING = {str(code): (_TEXT[word], STATUS_COLOURS[word]) for word, code in _NAGIOS}
STATUS_STEPS = steps(STATUS_COLOURS["ok"], *((code, STATUS_COLOURS[word]) for word, code in _NAGIOS if code > 0))


def status_colour(kind: FaultKind | ProbeLimit) -> str:
    """The colour of the status a fault kind (or a probe limit's kind) gives."""
    record = fault_kind(kind.kind) if isinstance(kind, ProbeLimit) else kind
    return STATUS_COLOURS[VERDICT_OF[record.status]]


def status_text() -> dict[str, tuple[str, str]]:
    """A ``status`` label's words (ok, warn, fail, unknown) -> (text, colour), for a table's status column."""
    return {word: (_TEXT[word], STATUS_COLOURS[word]) for word, _ in _NAGIOS}


def _number(kind: FaultKind) -> float:
    if not isinstance(kind.threshold, (int, float)):
        raise TypeError(f"{kind.kind}: threshold {kind.threshold!r} is not a number")
    return _plain(kind.threshold)


def _plain(value: float) -> float:
    """A whole number as an int (the JSON reads 86, not 86.0)."""
    return int(value) if float(value).is_integer() else value


def _over(kind: FaultKind) -> float:
    """The first whole-number reading the agent judges over ``kind``'s threshold."""
    return _plain(_number(kind) + 1)


# --- steps that stand for a judgement -------------------------------------------------------------------------

def chip_temperature() -> dashboard_b.ThresholdsConfig:
    """npu_temperature_celsius: chip_hot warns and chip_too_hot fails over their degrees."""
    hot, too_hot = fault_kind("chip_hot"), fault_kind("chip_too_hot")
    return steps("green", (_over(hot), status_colour(hot)), (_over(too_hot), status_colour(too_hot)))


def isolated_pages() -> dashboard_b.ThresholdsConfig:
    """npu_hbm_ecc_isolated_pages: any page warns (hbm_pages_isolated), more than hbm_pages_over's fails."""
    isolated, over = fault_kind("hbm_pages_isolated"), fault_kind("hbm_pages_over")
    return steps("green", (_over(isolated), status_colour(isolated)), (_over(over), status_colour(over)))


def link_downs() -> dashboard_b.ThresholdsConfig:
    """Link-down events of one port: one warns (link_down_once), link_flap's count fails (both "at least")."""
    once, flap = fault_kind("link_down_once"), fault_kind("link_flap")
    return steps("green", (_number(once), status_colour(once)), (_number(flap), status_colour(flap)))


def gemm_efficiency() -> dashboard_b.ThresholdsConfig:
    """npu_probe_gemm_efficiency_ratio: under REFERENCE_FAIL fails (probe_failed), under REFERENCE_WARN warns."""
    return steps(status_colour(REFERENCE_FAIL), (REFERENCE_FAIL.value, status_colour(REFERENCE_WARN)),
                 (REFERENCE_WARN.value, "green"))


def clock_ratio() -> dashboard_b.ThresholdsConfig:
    """AI Core clock over its rated clock: the sustained GEMM warns under CLOCK_WARN (on a busy chip)."""
    return steps(status_colour(CLOCK_WARN), (CLOCK_WARN.value, "green"))


def optical_rx_power() -> dashboard_b.ThresholdsConfig:
    """Receive power per lane: under optics_dark's watts is no light (fail); under ``WEAK_RX_POWER_W`` weak.

    The agent holds a lane to its module's own low threshold, which is not exported; the fixed bound is what a
    dashboard can show."""
    dark, weak = fault_kind("optics_dark"), fault_kind("optics_weak")
    return steps(status_colour(dark), (_number(dark), status_colour(weak)),
                 (WEAK_RX_POWER_W, "green"))


def optical_temperature() -> dashboard_b.ThresholdsConfig:
    """Module temperature: over ``HOT_OPTICS_C`` warns (optics_out_of_range; the module's own limit is not exported)."""
    out = fault_kind("optics_out_of_range")
    return steps("green", (_plain(HOT_OPTICS_C), status_colour(out)))


def hccl_error_age() -> dashboard_b.ThresholdsConfig:
    """Seconds since a node's newest HCCL error: within the logs' look-back the verdict still counts it."""
    return steps(STATUS_COLOURS["warn"], (_plain(INCIDENT_LOOK_BACK_S), "green"))


# --- display constants: no judgement stands behind these ----------------------------------------------------------

INFO = steps("blue")  # no colour meaning: a fact, a rate, a size
# A 0/1 reading whose 1 is good (npu_healthy, npuwatch_collector_up, a probe's correct): the reading, not a number.
HEALTHY = steps("red", (1, "green"))
# A count of faults, errors or failing things: any is worth a look.
ZERO_IS_GOOD = steps("green", (1, "red"))
# No check judges HBM fill; allocations start to fail near full (device_oom is judged from the logs).
HBM_FILL = steps("green", (0.9, "yellow"), (0.97, "red"))
# No fault kind judges HBM temperature; HBM is rated to 85 C, 95 C in its extended range.
HBM_TEMPERATURE = steps("green", (85, "yellow"), (95, "red"))
# No check judges the host; a host this busy or full starves the agent and the jobs' data loaders.
HOST_BUSY = steps("green", (0.8, "yellow"), (0.95, "red"))
# Utilization is not judged: a well-fed chip is green.
BUSY_CHIP = steps("blue", (0.9, "green"))
# No judgement of a pass rate: a probe that fails one run in a hundred is worth a look, one in ten more so.
PROBE_PASS_RATE = steps("red", (0.9, "yellow"), (0.99, "green"))
