"""What diagnose's checks return: local causes, ``Check`` (the results of ``agent.health`` plus findings), ``Finding``.

Which local cause outranks which is not decided here: each cause is a fault kind of
``agent.triage.faults`` (``CAUSE_KINDS``), whose weights order the node view and the cluster view
(``npuwatch triage``) alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.core.humanize import duration
from agent.health.results import Result
from agent.health.status import FAIL, PASS, UNKNOWN, WARN, worst
from agent.health.thresholds import INCIDENT_LOOK_BACK_S
from agent.triage.faults import fault_kind

__all__ = ["CAUSES", "CAUSE_KINDS", "DEFAULT_SAMPLE_GAP_S", "DEFAULT_WINDOW_S", "FAIL", "KIND_CAUSES", "PASS",
           "UNKNOWN", "WARN", "Check", "Finding", "window_text", "worst"]

# Local causes, each with what it is called in the verdict and what to do about it (listed most
# convincing first, as agent.triage.faults weighs them).
CAUSES: dict[str, tuple[str, str]] = {
    "link_down": ("RoCE link down",
                  "check the cable or optical module and the switch port of this NPU "
                  "(hccn_tool -i N -optical -g, -link_stat -g)"),
    "link_flapping": ("RoCE link flapping",
                      "a flapping port breaks HCCL links mid-job: reseat or replace the optical module/cable "
                      "and check the switch port's error counters"),
    "optics_no_light": ("optical module receives no light",
                        "the fibre is unplugged or broken, or the far-end module is off: clean, reseat or "
                        "swap the module and fibre"),
    "net_health": ("RoCE network health check failing",
                   "the port cannot reach its detect address: check netdetect/gateway in hccn.conf and the "
                   "switch or VLAN path"),
    "ecc_double_bit": ("HBM double-bit ECC errors",
                       "uncorrectable HBM errors: drain the node, reset the chip, replace it if they return"),
    "chip_isolate": ("chip fault that takes the chip out of service",
                     "drain the chip now, collect `npuwatch bundle`, repair or replace it; after the repair of a "
                     "ManuallySeparateNPU chip, `npuwatch faults clear --npu N`"),
    "chip_unhealthy": ("unhealthy chip",
                       "look up the error codes (npu-smi info -t health -i N) and dmesg; reset or replace "
                       "the chip"),
    "chip_missing": ("chip missing from npu-smi",
                     "npu-smi no longer lists the chip: check dmesg and PCIe; a reboot or repair is needed"),
    "heartbeat_lost": ("device heartbeat lost (kernel log)",
                       "the driver lost the device: check dmesg around that time; reset or replace the chip"),
    "ip_mismatch": ("RoCE address differs from hccn.conf",
                    "the rank table uses the configured address: reapply it with hccn_tool -i N -ip -s ..."),
    "probe_failed": ("probe failed on this node",
                     "rerun `npuwatch probe ...` on this node alone; compare with a healthy node"),
    "packet_errors": ("RoCE packet errors rising",
                      "errors grew while diagnose watched: check optics, cable and the switch's PFC/ECN "
                      "settings"),
    "hccs_unhealthy": ("HCCS link unhealthy",
                       "check the HCCS error counters (npu-smi info -t hccs -i N); a persistent NOK needs a reset "
                       "or repair"),
    "chip_reset": ("chip fault that a chip reset clears",
                   "reset the chip once no job uses it (npu-smi set -t reset -i N -c C), then check the codes "
                   "are gone"),
    "chip_too_hot": ("chip too hot",
                     "check the fans, the air flow and the inlet temperature; a chip this hot throttles or stops"),
    "ecc_pages_over": ("too many HBM pages isolated",
                       "the chip has retired more HBM pages than the threshold: drain the node and replace the chip"),
    "chip_drain": ("chip fault: isolate the chip after its job",
                   "give the chip no new job, let the running one finish, then reset or repair it"),
    "optics_weak": ("weak optical receive power",
                    "rx power is below the module's low threshold: clean the fibre ends, check the far end"),
    "optics_out_of_range": ("optical module reading outside its thresholds",
                            "tx power or module temperature is outside the module's own thresholds: reseat or "
                            "swap the module"),
    "chip_hot": ("chip running hot", "check the fans and the air flow before the chip reaches the failing degrees"),
    "link_down_recently": ("RoCE link went down recently",
                           "one outage in the window: if jobs failed then, that was why; watch for more"),
    "net_health_init": ("RoCE network health not configured",
                        "no detect address: set netdetect_N in hccn.conf (hccn_tool -i N -netdetect -s ...)"),
    "ecc_history": ("HBM pages isolated after ECC errors",
                    "pages were retired after earlier errors; plan a chip check if the count grows"),
    "chip_warning": ("chip health warning",
                     "look up the error codes (npu-smi info -t health -i N); usually not fatal"),
    "probe_degraded": ("probe below its warning threshold", "compare with a healthy node of the same model"),
}
# Each cause as the shared fault vocabulary names it (agent.triage.faults.FAULT_KINDS).
CAUSE_KINDS: dict[str, str] = {
    "link_down": "link_down",
    "link_flapping": "link_flap",
    "optics_no_light": "optics_dark",
    "net_health": "net_health",
    "ecc_double_bit": "hbm_dbe",
    "chip_isolate": "chip_fault_isolate",
    "chip_reset": "chip_fault_reset",
    "chip_drain": "chip_fault_drain",
    "chip_unhealthy": "chip_unhealthy",
    "chip_missing": "chip_missing",
    "heartbeat_lost": "device_lost",
    "ip_mismatch": "ip_mismatch",
    "probe_failed": "probe_failed",
    "packet_errors": "roce_errors_rising",
    "hccs_unhealthy": "hccs_unhealthy",
    "chip_too_hot": "chip_too_hot",
    "ecc_pages_over": "hbm_pages_over",
    "optics_weak": "optics_weak",
    "optics_out_of_range": "optics_out_of_range",
    "chip_hot": "chip_hot",
    "link_down_recently": "link_down_once",
    "net_health_init": "net_health_init",
    "ecc_history": "hbm_pages_isolated",
    "chip_warning": "chip_warning",
    "probe_degraded": "probe_slow",
}
KIND_CAUSES: dict[str, str] = {kind: cause for cause, kind in CAUSE_KINDS.items()}

DEFAULT_WINDOW_S = INCIDENT_LOOK_BACK_S
DEFAULT_SAMPLE_GAP_S = 3.0


# ----------------------------------------------------------------------------- results


@dataclass(frozen=True)
class Finding:
    """A local cause found by a check: what, where, and the evidence in one phrase."""

    cause: str  # a key of CAUSES
    status: str  # FAIL or WARN
    npu: int | None
    label: str  # "NPU 3" / "NPU 3 chip 1"
    detail: str  # "hccn_tool -i 3 -link -g says DOWN"

    @property
    def rank(self) -> float:
        """Sort key: the more convincing the cause, the lower (minus its fault kind's weight)."""
        return -fault_kind(CAUSE_KINDS[self.cause]).weight


@dataclass(frozen=True)
class Check:
    """One check as diagnose shows it: its results (``agent.health.results.Result``, one per device, the
    same records ``npuwatch check`` prints), the local causes found, and the device it points at."""

    name: str
    status: str
    evidence: str
    hint: str = ""
    device: int | None = None
    findings: tuple[Finding, ...] = ()
    results: tuple[Result, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The check's part of the shared JSON schema (docs/health-checks.md#json-output), with ``device``."""
        top = next((result for result in self.results if result.status == self.status), None)
        return {"name": self.name, "status": self.status, "evidence": self.evidence, "hint": self.hint,
                "device": self.device, "value": top.value if top else None,
                "threshold": top.threshold if top else None, "unit": top.unit if top else None,
                "basis": top.basis if top else None, "results": [result.to_dict() for result in self.results]}


def window_text(window_s: float) -> str:
    """``2 h``, ``28 h``, ``90 min``: a window as a person writes it."""
    return duration(window_s)
