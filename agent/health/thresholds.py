"""The one fault vocabulary: per fault kind, the check that judges it, its status, threshold, look-back, alert,
triage weight and cause group, what a person calls it, what to do about it and the runbook that says more.

Every judgement of ``agent.health.faults`` takes its threshold and status from here; ``npuwatch check``,
``diagnose``, ``top`` and ``triage`` name, order and explain a fault by its record. The node-fault alerts
(``alerts/faults.rules.yml``) are generated from it by ``python -m alerts.generate``: a kind's ``alert`` fires
on its exported finding (``npu_fault_since_timestamp_seconds{kind}``) after ``for_s``, with the severity of
``alert_severity``; ``alert_note`` says why a kind pages otherwise than its status says, or not at all.
A ``fleet`` kind is judged once by the fleet's rules, which need every rank of a job (``job_straggler``:
NPUJobStraggler, whose ``cause`` label is one of the kind's ``causes``); no agent or command judges it, and
``triage --prometheus`` reads its alert. Its numbers are its ``fleet_limits`` (``agent.health.failslow_limits``):
``alerts/failslow.rules.yml`` is generated from them and the hand-written expressions of
``alerts/failslow.rules.in.yml``, and its ``threshold`` and ``for_s`` are stated from them.
``check.flap_window`` and ``check.max_isolated_pages`` override ``window_s`` of ``link_flap`` and
``threshold`` of ``hbm_pages_over`` for every consumer that reads the config (``check`` and ``diagnose``).

The weight says how well the fault alone explains an HCCL timeout on the ranks that use that NPU or
node, most convincing first: a dead or flapping link, a dark optic, a failing net_health, HBM
double-bit errors, a chip taken out of service, unhealthy, missing or without a heartbeat (3.6-5.0);
HCCS, a wrong RoCE address, a chip too hot, too many isolated pages, a failed probe, RoCE completion
errors (3.0-3.5); then what slows or breaks some traffic (2.0-2.5) and background that rarely stops a
job alone (1.0 and less). Every kind that fails weighs at least ``FAIL_WEIGHT`` and every kind that
warns less, but for a job's own failure (cause ``process_exit``: memory, an operator, a port), which stops
its rank as surely as a fault but does not fail the node that ran it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.handling.levels import table_of
from agent.health.failslow_limits import FAILSLOW_LIMITS, FailSlowLimits
from agent.health.status import FAIL, WARN
from collectors.fault_levels import FaultTable

if TYPE_CHECKING:
    from agent.core.config import Config

__all__ = ["CAUSE_GROUPS", "FAIL_WEIGHT", "FAULT_KINDS", "HOT_OPTICS_C", "INCIDENT_LOOK_BACK_S", "WEAK_RX_POWER_W",
           "FaultKind", "RuleCause", "fault_kind", "fault_table", "flap_window_s", "log_window_s", "max_isolated_pages"]

# The culprit causes a triage report names (JSON ``cause``): each fault kind belongs to one.
CAUSE_GROUPS = ("link_down", "link_flap", "roce_errors", "optics", "chip_fault", "hbm_ecc", "process_hang",
                "process_exit", "desync", "slow_chip", "unknown")
FAIL_WEIGHT = 3.0


@dataclass(frozen=True)
class RuleCause:
    """One value of a fleet rule's ``cause`` label: what a person calls it and what to do about it."""

    cause: str
    label: str
    hint: str


@dataclass(frozen=True)
class FaultKind:
    kind: str
    check: str  # the check that judges it (npu_check_result{check}, --only, check.skip)
    status: str  # FAIL or WARN
    threshold: float | str | None  # what a value is held to
    unit: str | None
    label: str  # what a person calls it: "RoCE link down"
    weight: float  # how well it explains an HCCL timeout (triage's and every verdict's order)
    cause: str  # its culprit cause group, one of CAUSE_GROUPS
    hint: str  # what to do about it
    window_s: float | None = None  # look-back (a consumer may pass its own window)
    alert: str | None = None  # the shipped alert that pages it (alerts/faults.rules.yml, generated from here)
    severity: str | None = None  # that alert's severity, where it is not the status's (FAIL critical, WARN warning)
    for_s: float = 0.0  # how long the finding is exported before its alert fires (the rule's ``for:``)
    hand_written: bool = False  # the alert is a hand-written rule over raw series, not over the exported finding
    alert_note: str = ""  # why the kind pages otherwise than its status says, or not at all
    runbook: str | None = None  # the alert whose runbook covers it, when it is not ``alert``
    runbooks: tuple[tuple[str, str], ...] = ()  # (check, runbook): where the check that found it has its own
    hints: tuple[tuple[str, str], ...] = ()  # (check, hint): the same for what to do
    # Judged once by the fleet's rules over every rank of a job (``alert``'s rule, in ``check``'s rule file), never
    # by an agent or a command: no node alert is generated for it, and only what reads the fleet (triage
    # --prometheus) reports it.
    fleet: bool = False
    causes: tuple[RuleCause, ...] = ()  # the values of the fleet rule's ``cause`` label, what each is and its action
    fleet_limits: FailSlowLimits | None = None  # the numbers of the fleet rule (its file is generated from them)

    @property
    def short(self) -> str:
        """At most 8 characters, for a narrow cell (``npuwatch top``'s Health column)."""
        return _SHORT[self.kind]

    @property
    def name(self) -> str:
        return self.kind

    @property
    def alert_severity(self) -> str:
        """The severity label of this kind's alert: the entry's own, else critical for FAIL and warning for WARN."""
        return self.severity or ("critical" if self.status == FAIL else "warning")

    @property
    def runbook_alert(self) -> str | None:
        """The alert whose runbook (``alerts/runbooks/<alert>.md``) explains this kind."""
        return self.runbook or self.alert

    def runbook_for(self, check: str | None) -> str | None:
        """The runbook of this kind found by ``check``: ``Alert`` or ``Alert#section`` under alerts/runbooks/."""
        return dict(self.runbooks).get(check or "", self.runbook_alert)

    def hint_for(self, check: str | None) -> str:
        """What to do about this kind found by ``check``."""
        return dict(self.hints).get(check or "", self.hint)

    def rule_cause(self, cause: str | None) -> RuleCause | None:
        """The fleet rule's ``cause`` of this kind named ``cause`` (None: not one of them)."""
        return next((entry for entry in self.causes if entry.cause == cause), None)


_FLAP_WINDOW_S = 900.0
# A lane's receive power under its module's own rx-low threshold is optics_weak, but that threshold is not exported
# (one series per module and lane would double the optics series): what reads the exported power alone (a dashboard,
# the predictive NPUOpticalRxPowerFalling) holds it to a fixed 0.1 mW (-10 dBm), under what modules commonly program.
WEAK_RX_POWER_W = 1e-4
# The same for a module's temperature (optics_out_of_range holds it to the module's own thresholds).
HOT_OPTICS_C = 70.0
# How far back an HCCL timeout's investigation looks (`diagnose --window`, `check --window`, triage of saved
# link_stat output): a job hangs for up to its HCCL timeouts before it dies, and the cause comes before that.
INCIDENT_LOOK_BACK_S = 7200.0
# The handling-level alerts read npu_fault_handling, a label rather than a number the table could bound.
_LEVEL_NOTE = ("the alert reads the chip's level from npu_fault_handling, which adds the agent's history "
               "(repeated and lasting codes, held separations) to what one reading shows")
_LINK_HINT = ("check the cable or optical module and the switch port of this NPU "
              "(hccn_tool -i N -optical -g, -link_stat -g)")
_OPTICS = "NPUOpticalModuleDegraded"
# Each probe's own runbook: a failed probe is explained by its section of NPUCheckFailed (a wrong result or a
# slow one, which the section tells apart), a slow one by the alert that pages that probe's slowness.
_BANDWIDTH_CHECKS = ("hbm_bandwidth", "h2d_bandwidth", "d2h_bandwidth", "p2p_bandwidth")
_PROBE_FAILED_RUNBOOKS = (
    ("gemm", "NPUCheckFailed#gemm"), ("probe_gemm", "NPUCheckFailed#gemm"),
    ("allreduce", "NPUCheckFailed#allreduce"), ("probe_allreduce", "NPUCheckFailed#allreduce"),
    ("sustained_gemm", "NPUCheckFailed#sustained_gemm"),
    *((check, "NPUCheckFailed#bandwidth-checks") for check in _BANDWIDTH_CHECKS))
_PROBE_SLOW_RUNBOOKS = (
    ("gemm", "NPUGEMMProbeSlow"), ("probe_gemm", "NPUGEMMProbeSlow"), ("sustained_gemm", "NPUGEMMProbeSlow"),
    ("allreduce", "NPUAllReduceBandwidthLow"), ("probe_allreduce", "NPUAllReduceBandwidthLow"),
    *((check, "NPUCheckFailed#bandwidth-checks") for check in _BANDWIDTH_CHECKS))
_THROTTLE_HINT = ("a chip that throttles under load: check its cooling (fans, airflow, inlet temperature) and power "
                  "supply; compare its clock with the other chips'")
_ALLREDUCE_HINT = "check HCCS between the chips (p2p_bandwidth) and npu-smi -t hccs"
_PROBE_HINTS = (("sustained_gemm", _THROTTLE_HINT), ("allreduce", _ALLREDUCE_HINT),
                ("probe_allreduce", _ALLREDUCE_HINT))
_PROBE_NOTE = ("each probe has its own alerts (alerts/probes.rules.yml, probes-fleet.rules.yml), which hold it to "
               "the probe limits (agent.health.probe_limits)")
_LOG_NOTE = ("read from the HCCL/CANN logs (npu_hccl_errors_total{category}); no alert of its own: the HCCL "
             "timeouts it causes page HCCLTimeout and HCCLCulpritSuspected names the rank")
_STRAGGLER_CAUSES = (
    RuleCause("compute", "its AI Cores are busy longer than the job's other chips on its node, which wait for it",
              "compare the chip's AI Core clock, temperature and power with its node's other chips (npu-smi info -t "
              "common -i N): fix a throttled chip where it is; one slow at its full clock fails its GEMM probe once "
              "the job moves away: take it out of service"),
    RuleCause("link", "its RoCE port counts pause frames and errors far above the job's other ports",
              "read the port's counters twice (hccn_tool -i N -stat -g) and its optics (-optical -g); reseat or "
              "replace the optic or cable, or look at the switch port that pauses it"),
    RuleCause("host", "its host CPU is saturated while the job's other nodes' are not, so it feeds its chips late",
              "find what takes the node's CPUs (top, pidstat: the job's data loader or another process); stop it or "
              "give the loader more workers, or move the job off the node"),
)
FAULT_KINDS: dict[str, FaultKind] = {k.kind: k for k in (
    FaultKind("link_down", "roce_link", FAIL, "UP", None, "RoCE link down", 5.0, "link_down", _LINK_HINT,
              alert="NPURoCELinkDown", for_s=300.0),
    # Two downs in the window flap (at least three state changes: down, up, down); one that came
    # back up is a warning.
    FaultKind("link_flap", "roce_flaps", FAIL, 2, "link-down events", "RoCE link flapping", 4.5, "link_flap",
              "a flapping port breaks HCCL links mid-job: reseat or replace the optical module/cable and check the "
              "switch port's error counters", _FLAP_WINDOW_S, "NPURoCELinkFlapping", "warning",
              alert_note="pages as a warning: the port is up between flaps, so jobs may still run; the node's own "
              "check fails it so a scheduler stops placing jobs there"),
    FaultKind("link_down_once", "roce_flaps", WARN, 1, "link-down events", "RoCE link went down", 2.0, "link_flap",
              "one outage in the window: if jobs failed then, that was why; watch for more", _FLAP_WINDOW_S,
              alert_note="no alert: one down and up is two state changes, under NPURoCELinkFlapping's three; "
                         "a port still down pages NPURoCELinkDown", runbook="NPURoCELinkDown"),
    FaultKind("optics_dark", "optics", FAIL, 1e-5, "watts", "optical module receives no light", 4.2, "optics",
              "the fibre is unplugged or broken, or the far-end module is off: clean, reseat or swap the module "
              "and fibre", alert=_OPTICS, severity="warning", for_s=60.0,
              alert_note="a warning, because a dark port also pages NPURoCELinkDown (critical)"),
    FaultKind("optics_weak", "optics", WARN, "the module's rx power low threshold", "watts",
              "weak optical receive power", 2.2, "optics",
              "rx power is below the module's low threshold: clean the fibre ends, check the far end",
              alert=_OPTICS, for_s=600.0),
    FaultKind("optics_out_of_range", "optics", WARN, "the module's thresholds", None,
              "optical module reading outside its thresholds", 1.0, "optics",
              "tx power or module temperature is outside the module's own thresholds: reseat or swap the module",
              alert=_OPTICS, for_s=600.0),
    FaultKind("roce_errors_rising", "roce_errors", WARN, 0, "errors", "RoCE packet errors rising", 2.5,
              "roce_errors", "errors grew while they were watched: check optics, cable and the switch's PFC/ECN "
              "settings", alert_note="the commands sample the counters twice; no alert pages a rise alone",
              runbook="HCCLRoCECQEError"),
    FaultKind("roce_error_counters", "roce_errors", WARN, 0, "errors", "RoCE error counters non-zero", 0.8,
              "roce_errors", "non-zero since boot: compare with a second reading before acting",
              alert_note="non-zero since boot: a bundle's single reading, weighed by triage only",
              runbook="NPURoCEErrorsRising"),
    FaultKind("roce_cqe", "hccl_errors", FAIL, 0, "errors", "RoCE completion (CQE) errors", 3.0, "roce_errors",
              "RoCE completion errors: check link, optics and PFC on this and the peer's port",
              alert="HCCLRoCECQEError", hand_written=True,
              alert_note="pages each new error in the HCCL logs (npu_hccl_errors_total{category=\"roce_cqe\"}) "
                         "as it comes, where the finding lasts the logs' look-back"),
    FaultKind("net_health", "net_health", FAIL, "Success", None, "RoCE network health check failing", 4.0,
              "roce_errors", "the port cannot reach its detect address: check netdetect/gateway in hccn.conf and "
              "the switch or VLAN path", alert="NPURoCENetHealthFailed", severity="warning", for_s=600.0,
              alert_note="pages as a warning after 10 minutes: net_health flips while a switch reconverges"),
    FaultKind("net_health_init", "net_health", WARN, "Success", None, "RoCE network health not configured", 1.0,
              "roce_errors", "no detect address: set netdetect_N in hccn.conf (hccn_tool -i N -netdetect -s ...)",
              alert_note="Init means no detect address is configured: a setup gap, not a fault to page",
              runbook="NPURoCENetHealthFailed"),
    FaultKind("hbm_dbe", "hbm_ecc", FAIL, 0, "errors", "HBM double-bit ECC errors", 3.8, "hbm_ecc",
              "uncorrectable HBM errors: drain the node, reset the chip, replace it if they return",
              alert="NPUHBMDoubleBitECC"),
    FaultKind("hbm_pages_over", "hbm_ecc", FAIL, 60, "pages", "too many HBM pages isolated", 3.1, "hbm_ecc",
              "the chip has retired more HBM pages than the threshold: drain the node and replace the chip",
              alert_note="no alert of its own: the double-bit errors that retire the pages page "
                         "NPUHBMDoubleBitECC as they come; the count past the threshold fails the node's check",
              runbook="NPUHBMDoubleBitECC"),
    FaultKind("hbm_pages_isolated", "hbm_ecc", WARN, 0, "pages", "HBM pages isolated after ECC errors", 1.0,
              "hbm_ecc", "pages were retired after earlier errors; plan a chip check if the count grows",
              alert_note="history, not a page: the errors behind the pages paged when they happened",
              runbook="NPUHBMDoubleBitECC"),
    FaultKind("chip_unhealthy", "chip_health", FAIL, "OK", None, "unhealthy chip", 3.7, "chip_fault",
              "look up the error codes (npu-smi info -t health -i N) and dmesg; reset or replace the chip",
              alert="NPUUnhealthy", for_s=60.0),
    FaultKind("chip_warning", "chip_health", WARN, "OK", None, "chip health warning", 1.0, "chip_fault",
              "look up the error codes (npu-smi info -t health -i N); usually not fatal",
              alert="NPUUnhealthy", for_s=300.0),
    FaultKind("chip_fault_isolate", "chip_health", FAIL, "OK", None, "chip fault: take the chip out of service",
              3.9, "chip_fault", "drain the chip now, collect `npuwatch bundle`, repair or replace it; after the "
              "repair of a ManuallySeparateNPU chip, `npuwatch faults clear --npu N`",
              alert="NPUFaultIsolate", alert_note=_LEVEL_NOTE),
    FaultKind("chip_fault_reset", "chip_health", FAIL, "OK", None, "chip fault: reset the chip", 3.4, "chip_fault",
              "reset the chip once no job uses it (npu-smi set -t reset -i N -c C), then check the codes are gone",
              alert="NPUFaultResetWhenIdle", severity="warning", for_s=300.0,
              alert_note=_LEVEL_NOTE + "; it pages as a warning: a reset when the chip is idle clears it, the job on "
                                       "it has failed already or can finish"),
    FaultKind("chip_fault_drain", "chip_health", WARN, "OK", None, "chip fault: isolate the chip after its job",
              2.4, "chip_fault", "give the chip no new job, let the running one finish, then reset or repair it",
              alert="NPUFaultDrainAfterJob", for_s=60.0, alert_note=_LEVEL_NOTE),
    # A chip the agent holds out of service though it has read healthy, with no code, for window_s: the recovery
    # event that would release it was lost (MindCluster #375); a person checks it and clears the hold.
    FaultKind("held_while_healthy", "chip_health", WARN, 1800.0, "seconds", "chip held out of service while healthy",
              1.0, "chip_fault", "the chip reads OK with no code but the agent still holds it: check `npu-smi info -t "
              "health -i N` and the repair records, then `npuwatch faults clear --npu N` to return it to service",
              1800.0, alert="NPUChipHeldWhileHealthy"),
    # The same chip faulting threshold times in window_s: resetting it again will not help (MindCluster #365).
    FaultKind("repeat_offender", "chip_health", FAIL, 3, "faults", "chip faults again and again", 3.0, "chip_fault",
              "the chip keeps faulting: take it out for repair or replacement instead of resetting it again "
              "(`npuwatch faults show --npu N` lists its faults)", 7 * 86400.0, alert="NPUChipRepeatedFaults"),
    FaultKind("hccs_unhealthy", "hccs", FAIL, "OK", None, "HCCS link unhealthy", 3.5, "chip_fault",
              "check the HCCS error counters (npu-smi info -t hccs -i N); a persistent NOK needs a reset or repair",
              alert="NPUHCCSLinkUnhealthy", for_s=300.0),
    FaultKind("chip_hot", "temperature", WARN, 85.0, "celsius", "chip running hot", 1.0, "chip_fault",
              "check the fans and the air flow before the chip reaches the failing degrees",
              alert="NPUTemperatureHigh", for_s=600.0),
    FaultKind("chip_too_hot", "temperature", FAIL, 95.0, "celsius", "chip too hot", 3.3, "chip_fault",
              "check the fans, the air flow and the inlet temperature; a chip this hot throttles or stops",
              alert="NPUTemperatureHigh", for_s=120.0),
    FaultKind("chip_missing", "chip_count", FAIL, "expected_chips", "chips", "chip missing from npu-smi", 3.6,
              "chip_fault", "npu-smi no longer lists the chip: check dmesg and PCIe; a reboot or repair is needed",
              alert="NPUChipMissing", for_s=300.0,
              alert_note="a hand-written rule of the same name also pages a chip npu-smi listed an hour ago and "
                         "does not list now, which the agent cannot see across its own restart"),
    FaultKind("device_lost", "hccl_errors", FAIL, 0, "heartbeats lost", "device heartbeat lost (kernel log)", 3.6,
              "chip_fault", "the driver lost the device: check dmesg around that time; reset or replace the chip",
              alert_note="read from the kernel log by check and diagnose; the agent exports no series for it",
              runbook="NPUUnhealthy"),
    FaultKind("ip_mismatch", "roce_ip", FAIL, "/etc/hccn.conf", None, "RoCE address differs from hccn.conf", 3.4,
              "roce_errors", "the rank table uses the configured address: reapply it with hccn_tool -i N -ip -s ...",
              alert_note="hccn.conf is read by the commands only; the agent exports no series for it",
              runbook="HCCLTimeout"),
    FaultKind("firmware_mismatch", "versions", FAIL, "one version", None, "driver or firmware version differs",
              3.2, "chip_fault", "upgrade the odd card (or the node) to the fleet's versions; mixed versions break "
              "HCCL links", alert_note="versions are read by the commands only (npu-smi info -t board)",
              runbook="HCCLTimeout"),
    FaultKind("tool_hung", "tools", FAIL, 0, "failed calls", "npu-smi or hccn_tool hung or failed", 3.0,
              "chip_fault", "a hung or crashing npu-smi or hccn_tool points at the driver: check dmesg, then run "
              "the command shown by hand", alert="NPUCollectorFailing", severity="warning", hand_written=True,
              alert_note="the agent's own rule pages a collector whose tool keeps failing (npuwatch_collector_up), "
                         "as a warning: the readings it would give are missing, the node may be fine"),
    # What a rank's own logs show stopped it while its peers timed out (agent.health.log_categories): a
    # device or copy fault fails the node; a job's own failure (memory, an operator, a port) weighs on the
    # rank in triage as a failure does, but does not fail the node that ran it.
    FaultKind("device_dropped", "hccl_errors", FAIL, 0, "errors", "device or driver dropped out", 3.6, "chip_fault",
              "the device or its driver dropped out: check `npu-smi info`, dmesg and the driver; the chip may need a "
              "reset", alert_note=_LOG_NOTE, runbook="HCCLTimeout"),
    FaultKind("sdma_fault", "hccl_errors", FAIL, 0, "errors", "SDMA copy fault", 3.2, "chip_fault",
              "an SDMA copy failed on this device: check `npu-smi info` and dmesg for the chip, then the memory the "
              "copy used", alert_note=_LOG_NOTE, runbook="HCCLTimeout"),
    FaultKind("device_oom", "hccl_errors", WARN, 0, "errors", "device out of memory", 3.4, "process_exit",
              "the device ran out of memory: lower the batch or sequence length, or set PYTORCH_NPU_ALLOC_CONF; the "
              "peers' HCCL timeouts follow from it", alert_note=_LOG_NOTE, runbook="HCCLTimeout"),
    FaultKind("aicore_fault", "hccl_errors", WARN, 0, "errors", "AI Core / vector core exception or timeout", 3.4,
              "process_exit", "an AI Core task failed: find the operator in the plog's error block and check its "
              "inputs; a repeat on one chip only points at the chip", alert_note=_LOG_NOTE, runbook="HCCLTimeout"),
    FaultKind("operator_fault", "hccl_errors", WARN, 0, "errors", "operator or kernel package error", 3.0,
              "process_exit", "an operator or its kernel package failed: check that the CANN toolkit, kernels and "
              "torch_npu versions match", alert_note=_LOG_NOTE, runbook="HCCLTimeout"),
    FaultKind("port_listen_failed", "hccl_errors", WARN, 0, "errors", "could not listen on its HCCL port", 3.0,
              "process_exit", "another process holds the HCCL port or the address is wrong: free the port range "
              "(HCCL_IF_BASE_PORT) and check HCCL_IF_IP", alert_note=_LOG_NOTE, runbook="HCCLTimeout"),
    # From the packaged CANN error table (collectors/fault_data/cann_errors.json): link and memory faults of the
    # device that a job's log reports (HCCS LINK ERROR 507056, UCE ERROR 507053) while npu-smi may show nothing yet.
    FaultKind("link_fault", "hccl_errors", FAIL, 0, "errors", "HCCS / UB / network link error (job log)", 3.5,
              "link_down", "a link of this NPU failed under the job: check `npu-smi info -t hccs`, hccn_tool "
              "-link_stat and the optics of its port; the peers' HCCL timeouts follow from it", alert_note=_LOG_NOTE,
              runbook="NPURoCELinkDown"),
    FaultKind("hbm_ecc_fault", "hccl_errors", FAIL, 0, "errors", "HBM memory error (job log)", 3.8, "hbm_ecc",
              "the device's memory failed under the job (UCE, multi-bit ECC): check `npu-smi info -t ecc`; drain the "
              "node and reset the chip, replace it if it returns", alert_note=_LOG_NOTE, runbook="NPUHBMDoubleBitECC"),
    # A program or configuration error stops its rank as surely as a fault, so triage weighs it on that rank; it is
    # never a fault of the node: the node's hccl_errors check reports it and passes (agent.health.checks_node).
    FaultKind("program_error", "hccl_errors", WARN, 0, "errors", "the program failed (a program error; the node is "
              "fine)", 3.0, "process_exit", "the program called an API wrongly (an invalid argument, handle or "
              "unsupported feature): fix the call or the model it names; nothing on the node needs doing",
              alert_note=_LOG_NOTE, runbook="HCCLTimeout"),
    FaultKind("config_error", "hccl_errors", WARN, 0, "errors", "the program failed (its configuration; the node is "
              "fine)", 3.0, "process_exit", "the job's configuration or environment is wrong (a file, path, option, "
              "environment variable or permission): fix what the error names; nothing on the node needs doing",
              alert_note=_LOG_NOTE, runbook="HCCLTimeout"),
    # What a probe's measurement is held to is agent.health.probe_limits: past a FAIL limit is probe_failed, past a
    # WARN limit probe_slow.
    FaultKind("probe_failed", "probes", FAIL, "correct, finished and within the FAIL probe limits", None,
              "probe failed", 3.2, "chip_fault",
              "rerun `npuwatch probe ...` on this node alone; compare with a healthy node",
              alert_note=_PROBE_NOTE, runbook="HCCLTimeout", runbooks=_PROBE_FAILED_RUNBOOKS, hints=_PROBE_HINTS),
    FaultKind("probe_slow", "probes", WARN, "within the WARN probe limits", None, "probe below its threshold", 1.0,
              "slow_chip",
              "compare with a healthy node of the same model (npuwatch probe ...); a chip far below needs a reset",
              alert_note=_PROBE_NOTE, runbook="NPUGEMMProbeSlow", runbooks=_PROBE_SLOW_RUNBOOKS, hints=_PROBE_HINTS),
    # The fleet's finding (alerts/failslow.rules.yml, docs/failslow.md): one rank, port or host of a training job
    # slower than the job's others. It slows a job rather than stopping it, so it weighs as background.
    FaultKind("job_straggler", "failslow", WARN, FAILSLOW_LIMITS.threshold, None,
              "rank, port or host slowing its training job", 1.5, "slow_chip",
              "tell the job's owner (the job is slowed, not failed: a checkpoint now keeps the work), then see what "
              "the cause says", alert="NPUJobStraggler", for_s=FAILSLOW_LIMITS.alert_for_s, fleet=True,
              causes=_STRAGGLER_CAUSES, fleet_limits=FAILSLOW_LIMITS,
              alert_note="judged by the fleet's rules, which compare every rank of a job (no agent sees the others); "
                         "`npuwatch triage --prometheus` reports its alert"),
)}


_SHORT = {
    "link_down": "link dn", "link_flap": "flapping", "link_down_once": "link was", "optics_dark": "no light",
    "optics_weak": "weak rx", "optics_out_of_range": "optics", "roce_errors_rising": "pkt errs",
    "roce_error_counters": "pkt errs", "roce_cqe": "cqe errs", "net_health": "net fail", "net_health_init": "net init",
    "hbm_dbe": "HBM DBE", "hbm_pages_over": "HBM pgs", "hbm_pages_isolated": "HBM pgs", "chip_unhealthy": "alarm",
    "chip_warning": "warning", "chip_fault_isolate": "isolate", "chip_fault_reset": "reset",
    "chip_fault_drain": "drain", "held_while_healthy": "held ok", "repeat_offender": "repeats",
    "hccs_unhealthy": "HCCS NOK", "chip_hot": "hot", "chip_too_hot": "too hot", "chip_missing": "missing",
    "device_lost": "lost", "ip_mismatch": "bad IP", "firmware_mismatch": "version", "tool_hung": "tool",
    "probe_failed": "probe", "probe_slow": "slow", "device_dropped": "dropped", "sdma_fault": "SDMA",
    "device_oom": "OOM", "aicore_fault": "AI Core", "operator_fault": "operator", "port_listen_failed": "port",
    "link_fault": "link err", "hbm_ecc_fault": "HBM err", "program_error": "program", "config_error": "config",
    "job_straggler": "straggle",
}


def fault_kind(kind: str) -> FaultKind:
    try:
        return FAULT_KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown fault kind {kind!r}; one of {', '.join(FAULT_KINDS)}") from None


def flap_window_s(config: Config) -> float:
    """``check.flap_window`` when the config sets it, else the table's look-back for ``link_flap``."""
    value = config.check.flap_window
    return float(value) if value is not None else float(fault_kind("link_flap").window_s or 0.0)


def log_window_s(config: Config) -> float:
    """``check.hccl_window`` when the config sets it, else ``INCIDENT_LOOK_BACK_S``: the logs' look-back."""
    value = config.check.hccl_window
    return float(value) if value is not None else INCIDENT_LOOK_BACK_S


def max_isolated_pages(config: Config) -> int:
    """``check.max_isolated_pages`` when the config sets it, else the table's ``hbm_pages_over``."""
    value = config.check.max_isolated_pages
    return int(value) if value is not None else int(fault_kind("hbm_pages_over").threshold or 0)


def fault_table(config: Config) -> FaultTable:
    """The handling-level table of ``faults.codes_file`` and ``faults.escalation_file``, loaded as the agent loads it
    (``agent.handling.levels.table_of``: the packaged one for a file that cannot be loaded, which is logged, as
    each skipped rule is)."""
    return table_of(config)
