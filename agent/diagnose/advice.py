"""What to do next: the action and the alert runbook for each cause a verdict can name.

The runbooks are the alerts' own (``alerts/runbooks/<Alert>.md``, linked as the alert rules'
``runbook_url`` is), so the page an alert sends and the verdict ``diagnose`` prints lead to the same
page. The local causes' actions live beside their names in ``results.CAUSES``; the causes only a
verdict names (a remote peer, log errors, a node that could not be checked) and the log categories
have theirs here.
"""

from __future__ import annotations

from agent.diagnose.results import CAUSES

__all__ = ["RUNBOOKS", "RUNBOOK_BASE", "action", "category_action", "category_runbook", "runbook"]

from agent.core.runbooks import RUNBOOK_BASE  # the one setting: agent/core/runbooks.py

# The alert whose runbook covers each cause (file name under alerts/runbooks/).
RUNBOOKS: dict[str, str] = {
    "link_down": "NPURoCELinkDown.md",
    "link_flapping": "NPURoCELinkFlapping.md",
    "optics_no_light": "NPUOpticalModuleDegraded.md",
    "net_health": "NPURoCENetHealthFailed.md",
    "ecc_double_bit": "NPUHBMDoubleBitECC.md",
    "chip_isolate": "NPUFaultIsolate.md",
    "chip_reset": "NPUFaultResetWhenIdle.md",
    "chip_drain": "NPUFaultDrainAfterJob.md",
    "chip_unhealthy": "NPUUnhealthy.md",
    "chip_missing": "NPUChipMissing.md",
    "heartbeat_lost": "NPUUnhealthy.md",
    "ip_mismatch": "HCCLTimeout.md",  # ranks cannot connect: its "connect timeouts" steps
    "probe_failed": "HCCLTimeout.md",  # replaced by the probe's own runbook when the check is known
    "packet_errors": "HCCLRoCECQEError.md",
    "optics_weak": "NPUOpticalModuleDegraded.md",
    "optics_out_of_range": "NPUOpticalModuleDegraded.md",
    "hccs_unhealthy": "NPUHCCSLinkUnhealthy.md",
    "chip_too_hot": "NPUTemperatureHigh.md",
    "chip_hot": "NPUTemperatureHigh.md",
    "ecc_pages_over": "NPUHBMDoubleBitECC.md",
    "link_down_recently": "NPURoCELinkDown.md",
    "net_health_init": "NPURoCENetHealthFailed.md",
    "ecc_history": "NPUHBMDoubleBitECC.md",
    "chip_warning": "NPUUnhealthy.md",
    "probe_degraded": "NPUGEMMProbeSlow.md",
    # causes only a verdict names
    "remote_peer": "HCCLTimeout.md",
    "log_errors": "HCCLTimeout.md",
    "no_chip_list": "NPUCollectorFailing.md",
    "tool_hung": "NPUCollectorFailing.md",
    "not_checked": "NPUCollectorFailing.md",
}
# A probe's finding leads to that probe's runbook.
_PROBE_RUNBOOKS = {
    ("probe_failed", "probe_gemm"): "NPUGEMMProbeWrongResult.md",
    ("probe_failed", "probe_allreduce"): "NPUAllReduceProbeWrongResult.md",
    ("probe_degraded", "probe_gemm"): "NPUGEMMProbeSlow.md",
    ("probe_degraded", "probe_allreduce"): "NPUAllReduceBandwidthLow.md",
}

_VERDICT_ACTIONS = {
    "remote_peer": "run `npuwatch diagnose` on that node; for the whole job, `npuwatch bundle` on every node "
                   "and `npuwatch triage` over the bundles",
    "log_errors": "compare with the other ranks' logs: `npuwatch bundle` on every node of the job, then "
                  "`npuwatch triage *.tar.gz` names the rank that stopped first",
    "no_chip_list": "npu-smi must answer first: run `npu-smi info` by hand and check dmesg for driver (dcmi) "
                    "errors",
    "tool_hung": "a hung npu-smi or hccn_tool points at the driver: check dmesg, then run the command shown "
                 "by hand",
    "not_checked": "run the check that could not judge by hand (its evidence says which call failed); a node "
                   "that cannot be checked is not vouched for",
    "nothing_checked": "check the tool paths (collectors.npu_smi.path, collectors.hccn_tool.path) and the log "
                       "directory ($ASCEND_PROCESS_LOG_PATH)",
}

_CATEGORY_ACTIONS = {
    "exec_timeout": "HCCL_EXEC_TIMEOUT expired: a rank stopped taking part; start with the rank named",
    "connect_timeout": "links were never set up: check the peer's RoCE port, IP and firewall",
    "rendezvous_timeout": "not every rank reached the rendezvous: look for a rank that crashed or was late",
    "roce_cqe": "RoCE completion errors: check link, optics and PFC on this and the peer's port",
    "heartbeat": "a rank or device stopped its heartbeat: find the rank that died first",
    "watchdog_timeout": "torch_npu's watchdog hit a collective timeout: find the rank that stopped first",
}
_CATEGORY_DEFAULT = "read the first error: `npuwatch scan-logs` on the log directory"


def runbook(cause: str | None, check: str | None = None) -> str | None:
    """The runbook URL for ``cause`` (``check``: the check that found it, for the probes); None if none fits."""
    if cause is None:
        return None
    name = _PROBE_RUNBOOKS.get((cause, check or "")) or RUNBOOKS.get(cause)
    return RUNBOOK_BASE + name if name else None


def action(cause: str | None) -> str:
    """The next thing to do about ``cause``; empty when there is nothing to do."""
    if cause is None:
        return ""
    if cause in CAUSES:
        return CAUSES[cause][1]
    return _VERDICT_ACTIONS.get(cause, "")


def category_action(category: str, default: str = _CATEGORY_DEFAULT) -> str:
    """What to do first about HCCL/CANN log errors of ``category`` (``default`` for a category without advice)."""
    return _CATEGORY_ACTIONS.get(category, default)


def category_runbook(category: str) -> str:
    return RUNBOOK_BASE + ("HCCLRoCECQEError.md" if category == "roce_cqe" else "HCCLTimeout.md")
