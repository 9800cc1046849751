"""The demo node's faults: what each one does, the parameters it takes, and the alert it fires.

Three kinds:

- chip faults change what the fake tools print for one chip while they are on (``--npu`` needed);
- node faults make a whole fake tool misbehave, or the demo's probe interpreter (no ``--npu``);
- log faults are events: switching one on appends HCCL/CANN plog lines to ``<demo-dir>/log`` once
  (``--npu`` is the device that logs them); there is nothing to clear.

Every parameter a fault takes is declared here: an undeclared one is an error, not a typo
silently ignored. ``since`` (demo-clock seconds) is accepted by every chip and node fault.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ALERT_FAULTS",
    "CHIP_FAULTS",
    "FAULTS",
    "LOG_FAULTS",
    "NODE_FAULTS",
    "AlertTrigger",
    "FaultSpec",
    "Param",
    "check_params",
    "fault_spec",
    "parse_param",
]

_KINDS = ("float", "int", "str", "list")


@dataclass(frozen=True)
class Param:
    """One declared parameter: its kind (float, int, str, list of str), default and meaning."""

    kind: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown parameter kind {self.kind!r}")

    def coerce(self, fault: str, key: str, value: Any) -> Any:
        """``value`` as this parameter's kind; ValueError naming the fault and key otherwise."""
        try:
            if self.kind == "list":
                items = value.split(",") if isinstance(value, str) else list(value)
                result: Any = [str(item).strip() for item in items if str(item).strip()]
            elif self.kind == "float":
                if isinstance(value, bool):
                    raise TypeError
                result = float(value)
            elif self.kind == "int":
                if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                    raise TypeError
                result = int(value)
            else:
                result = str(value)
        except (TypeError, ValueError):
            raise ValueError(f"fault {fault!r}: {key}={value!r} is not a valid {self.kind}") from None
        if self.choices and result not in self.choices:
            raise ValueError(f"fault {fault!r}: {key}={value!r} is not one of {', '.join(self.choices)}")
        return result


@dataclass(frozen=True)
class FaultSpec:
    name: str
    kind: str  # "chip", "node" or "log"
    help: str
    params: Mapping[str, Param] = field(default_factory=dict)


_SINCE = Param("float", None, "demo-clock seconds when the fault started (default: now)")


def _chip(fault: str, help_text: str, /, **params: Param) -> FaultSpec:
    return FaultSpec(fault, "chip", help_text, params)


def _node(fault: str, help_text: str, /, **params: Param) -> FaultSpec:
    return FaultSpec(fault, "node", help_text, params)


_TOOL_KINDS = {
    "hang": "sleeps for ever (the agent's timeout must kill it)",
    "crash": "exits 1 with a driver error on stderr",
    "garbage": "prints random junk and exits 0",
    "truncate": "prints its normal output cut in the middle and exits 0",
}
_TOOLS = {"npu_smi": "npu-smi", "hccn_tool": "hccn_tool", "ascend_dmi": "ascend-dmi"}

_SPECS: list[FaultSpec] = [
    _chip("health", "npu-smi health turns Alarm/Warning/Critical with error codes (a code of each handling "
                    "level: docs/fault-codes.md)",
          state=Param("str", "Alarm", "health word", ("Alarm", "Warning", "Critical")),
          codes=Param("list", ["8C084E00"], "comma-separated hex error codes")),
    _chip("hbm_dbe", "uncorrectable (double-bit) HBM ECC errors: one now, one more every interval_s",
          interval_s=Param("float", 30.0, "seconds between two double-bit errors")),
    _chip("hbm_sbe_rate", "corrected (single-bit) HBM ECC errors at a steady rate",
          per_s=Param("float", 0.5, "single-bit errors per second")),
    _chip("hbm_sbe_rising", "corrected (single-bit) HBM ECC errors at a rate that rises steadily from 0 to per_h "
                            "over ramp_s, then stays there (HBM wearing out: NPUHBMSingleBitECCRising before "
                            "NPUHBMSingleBitECCRate)",
          per_h=Param("float", 30.0, "single-bit errors per hour at the end of the ramp"),
          ramp_s=Param("float", 7200.0, "seconds the rate takes to rise from 0 to per_h")),
    _chip("hccs_error", "HCCS health NOK and CRC errors counting on link 0",
          per_s=Param("float", 2.0, "errors per second")),
    _chip("hot", "chip temperature at `celsius` (table, -t temp, -t common; HBM 3 degrees above)",
          celsius=Param("float", 97.0, "chip temperature in degrees C (alerts: > 85 warning, > 95 critical)")),
    _chip("vanish", "the chip disappears from every tool's output"),
    _chip("process", "a training process is listed on the chip (probes then skip: the node is busy)",
          pid=Param("int", None, "process id (default: a fixed pid per chip)"),
          name=Param("str", "python3", "process name"),
          memory_mb=Param("int", 20480, "HBM the process holds, MB")),
    _chip("link_down", "the RoCE port is link DOWN (speed unknown, net_health Fault)"),
    _chip("link_flap", "the RoCE port goes DOWN and UP once every period_s",
          period_s=Param("float", 6.0, "seconds of one DOWN+UP cycle")),
    _chip("optics_no_light", "the optical module receives no light: LOS/LoL flags, link DOWN, RoCE errors"),
    _chip("optics_degrading", "the optical module's received light fades: Rx power falls in a straight line "
                              "(in dBm) from healthy (~0 dBm) to -20 dBm over duration_s while RoCE CRC/error and "
                              "retransmission counts rise; then it is `optics_no_light` (LOS/LoL, link DOWN)",
          duration_s=Param("float", 3600.0, "seconds from healthy light to loss of signal")),
    _chip("firmware_mismatch", "the card reports another firmware version (npu-smi info -t board)",
          version=Param("str", "7.5.0.1.120", "the firmware version the card prints")),
    _chip("net_health_fail", "hccn_tool net_health reports a failure while the link stays UP",
          status=Param("str", "Fault", "the status word, e.g. Fault or 'Socket failed'")),
    *(
        _node(f"{tool}_{kind}", f"{binary} {what}")
        for tool, binary in _TOOLS.items()
        for kind, what in _TOOL_KINDS.items()
    ),
    _node("probe_corrupt", "the probe worker corrupts one element of its result: the probe fails as wrong",
          probe=Param("str", "gemm", "which probe", ("gemm", "allreduce", "membw", "h2d", "p2p"))),
    _node("probe_slow", "the probe worker's clock runs fast, so GEMM FLOP/s and all-reduce bandwidth "
                        "read `factor` times the real figure",
          factor=Param("float", 0.5, "measured speed as a fraction of the real one (0 < factor <= 1)")),
    _node("probe_error", "the probe interpreter cannot import torch: every probe ends in error"),
    FaultSpec("hccl_timeout", "log", "appends an EI0002 HCCL execution timeout block ([TaskExecStage][Timeout] "
              "base/groupRank/opData lines, and one heartbeat line per peer) to a plog", {
                  "group": Param("str", None, "communicator name, the cross-node join key "
                                              "(default: <device ip>%enp_60000_0_<time in us>)"),
                  "rank": Param("int", None, "this rank's id in the group (default: the device id)"),
                  "rank_size": Param("int", 8, "ranks in the group"),
                  "time": Param("float", None, "epoch seconds of the timeout (default: the demo clock)"),
                  "peer_ips": Param("list", [], "device IPs of the peers blamed, comma-separated"),
                  "peer_ranks": Param("list", [], "their rank ids, in the same order (default: 0, 1, ...)"),
                  "peer_state": Param("str", "stuck", "what the heartbeat says of each peer", ("stuck", "lost")),
                  "op": Param("str", "AllReduce", "collective of the tag, e.g. AllReduce or AllGather"),
                  "pid": Param("int", None, "process id in the lines and file name (default: the chip's "
                                            "`process` fault pid, else a fixed pid per chip)"),
              }),
    FaultSpec("roce_cqe", "log", "appends a RoCE error-CQE sequence (ROCE/HCCP/HCCL [ROCE CQE ERROR]) to a plog", {
        "time": Param("float", None, "epoch seconds of the error (default: the demo clock)"),
        "peer_ip": Param("str", "29.1.9.19", "device IP of the peer"),
        "peer_device": Param("int", 1, "the peer's device id"),
        "status": Param("int", 12, "CQE status HCCP reports"),
        "pid": Param("int", None, "process id (default as for hccl_timeout)"),
    }),
]

FAULTS: dict[str, FaultSpec] = {spec.name: spec for spec in _SPECS}
CHIP_FAULTS = frozenset(name for name, spec in FAULTS.items() if spec.kind == "chip")
NODE_FAULTS = frozenset(name for name, spec in FAULTS.items() if spec.kind == "node")
LOG_FAULTS = frozenset(name for name, spec in FAULTS.items() if spec.kind == "log")


def fault_spec(name: str) -> FaultSpec:
    try:
        return FAULTS[name]
    except KeyError:
        raise ValueError(f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}") from None


def check_params(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with each value coerced to its declared kind; ValueError for an undeclared key."""
    spec = fault_spec(name)
    declared = dict(spec.params)
    if spec.kind != "log":
        declared["since"] = _SINCE
    checked: dict[str, Any] = {}
    for key, value in params.items():
        param = declared.get(key)
        if param is None:
            takes = ", ".join(sorted(declared)) or "none"
            raise ValueError(f"fault {name!r} takes no parameter {key!r} (it takes: {takes})")
        checked[key] = param.coerce(name, key, value)
    if name == "probe_slow" and not 0 < checked.get("factor", 0.5) <= 1:
        raise ValueError(f"fault 'probe_slow': factor must be in (0, 1], got {checked['factor']}")
    return checked


def parse_param(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` from the command line (the value stays text: check_params coerces it)."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise ValueError(f"--param expects KEY=VALUE, got {text!r}")
    return key.strip(), value


@dataclass(frozen=True)
class AlertTrigger:
    """How to make the demo fire an alert: a fault (and parameters), or a step that is not a fault."""

    fault: str | None
    params: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""


# Every alert in alerts/*.rules.yml, and how the demo fires it (tests/integration/test_demo_alerts.py holds
# this table to the rule files). Durations are the rules' own `for:` and windows; the node-fault alerts
# (alerts/faults.rules.yml) fire on the agent's finding, which its next round exports.
ALERT_FAULTS: dict[str, AlertTrigger] = {
    "NPUWatchDown": AlertTrigger(None, note="stop the agent (Ctrl-C `npuwatch run --demo`); fires after 5 min"),
    "NPUCollectorFailing": AlertTrigger("npu_smi_crash", note="any <tool>_crash/_garbage/_hang; 10 min"),
    "NPUDCMIHelperFailing": AlertTrigger(None, note="set collectors.dcmi.library to a file that is not a DCMI "
                                                    "library (the helper cannot start; npu-smi keeps serving); "
                                                    "15 min"),
    "NPUDCMIEventsDown": AlertTrigger(None, note="needs a DCMI library (the demo has none): with the tests' fake "
                                                 "libdcmi.so (tests/support/fake_dcmi.py), start the agent with "
                                                 "FAKE_DCMI_FAIL naming dcmi_subscribe_fault_event (a subscribe "
                                                 "that fails); 10 min"),
    "NPUFaultTableEntriesSkipped": AlertTrigger(None, note="set faults.escalation_file to a faultCustomization.json "
                                                           "with a rule outside the device plugin's limits (say "
                                                           "TimeWindow 30) and reload; 5 min"),
    "NPUWatchConfigReloadFailed": AlertTrigger(None, note="run the demo with `--config FILE`, break the file "
                                                          "(`interval: fast`) and `kill -HUP` the agent; 10 min"),
    "NPUWatchTextfileStale": AlertTrigger(None, note="textfile mode (`textfile.enabled: true`, a directory a "
                                                     "node_exporter reads): stop the agent, which empties "
                                                     "npuwatch.prom, or fill the disk under it; 15 min"),
    "HCCLTimeout": AlertTrigger("hccl_timeout", note="fires on the next evaluation, resolves ~15 min later "
                                                     "(5 min of increase, then held 10 min)"),
    "HCCLRoCECQEError": AlertTrigger("roce_cqe", note="fires on the next evaluation, resolves ~15 min later "
                                                       "(5 min of increase, then held 10 min)"),
    "HCCLCulpritSuspected": AlertTrigger(None, note="`npuwatch demo fleet hccl-hang --culprit node-3 --npu 1 DIR1 "
                                                    "DIR2 DIR3 DIR4` over demo nodes one Prometheus scrapes; 1 min"),
    "NPUHCCSLinkUnhealthy": AlertTrigger("hccs_error", note="warning at once (errors counted), critical after 5 min "
                                                            "(the finding hccs_unhealthy)"),
    "NPURoCELinkDown": AlertTrigger("link_down", note="5 min"),
    "NPURoCELinkFlapping": AlertTrigger("link_flap", {"period_s": 60.0}, note="2 link-downs in 15 min (the finding "
                                                                             "link_flap); at once"),
    "NPURoCENetHealthFailed": AlertTrigger("net_health_fail", note="10 min"),
    "NPUOpticalModuleDegraded": AlertTrigger("optics_no_light", note="the finding optics_dark; 1 min"),
    "NPUChipMissing": AlertTrigger("vanish", note="5 min (the demo sets expected_chips to its chip "
                                                  "count unless the config sets it)"),
    "NPUUnhealthy": AlertTrigger("health", {"state": "Alarm", "codes": ["8C204E00"]},
                                 note="a code whose level pages nothing of its own (RestartBusiness): the "
                                      "finding chip_warning, 5 min"),
    "NPUFaultIsolate": AlertTrigger("health", {"state": "Alarm", "codes": ["80E18402"]},
                                    note="a SeparateNPU code; at once"),
    "NPUFaultResetWhenIdle": AlertTrigger("health", {"state": "Alarm", "codes": ["8C084E00"]},
                                          note="a FreeRestartNPU code (the `health` fault's default); 5 min"),
    "NPUFaultDrainAfterJob": AlertTrigger("health", {"state": "Warning", "codes": ["8118043C"]},
                                          note="a PreSeparateNPU code; 1 min"),
    "NPUChipRepeatedFaults": AlertTrigger("health", {"state": "Alarm", "codes": ["8C084E00"]},
                                          note="set and clear it three times, each for one health poll or more "
                                               "(a FreeRestartNPU code: a fault of the agent's fault history); "
                                               "at once after the third"),
    "NPUChipHeldWhileHealthy": AlertTrigger(None, note="a chip escalated to ManuallySeparateNPU (the `health` "
                                                       "fault with a code repeated past its escalation rule), "
                                                       "then the fault cleared: 30 min healthy with no code "
                                                       "while held"),
    "NPUJobStraggler": AlertTrigger(None, note="a job across nodes, which one demo node cannot run: replay a "
                                               "scenario through the simulator and the shipped rules with "
                                               "`python bench/failslow.py --scenario "
                                               "bench/failslow_scenarios/compute-1024.json` (docs/failslow.md); "
                                               "30 s after the straggler persists"),
    "NPUHBMDoubleBitECC": AlertTrigger("hbm_dbe", note="at once"),
    "NPUHBMSingleBitECCRate": AlertTrigger("hbm_sbe_rate", note="more than 10 an hour, for 15 min"),
    "NPUHBMSingleBitECCRising": AlertTrigger("hbm_sbe_rising", note="~65 min in at the defaults (the first error "
                                                                  "comes ~22 min in), ~23 min before "
                                                                  "NPUHBMSingleBitECCRate (~88 min)"),
    "NPUOpticalRxPowerFalling": AlertTrigger("optics_degrading", note="~23 min in at the defaults, ~13 min before "
                                                                    "NPUOpticalModuleDegraded optics_weak (~36 "
                                                                    "min) and ~38 min before the LOS (60 min)"),
    "NPURoCEErrorsRising": AlertTrigger("optics_degrading", note="~33 min in at the defaults, ~32 min before "
                                                               "NPURoCELinkDown (65 min)"),
    "NPUTemperatureHigh": AlertTrigger("hot", note="97 C by default: critical after 2 min"),
    "NPUGEMMProbeSlow": AlertTrigger("probe_slow", note="on one node of a demo fleet (the fleet median stays "
                                                         "healthy); 90 min"),
    "NPUGEMMFleetBelowPeak": AlertTrigger("probe_slow", note="on every node, with probes.peaks giving the "
                                                              "demo CPU's healthy fp32 GEMM rate as its "
                                                              "measured peak (the CPU has no built-in peak); 90 min"),
    "NPUGEMMProbeWrongResult": AlertTrigger("probe_corrupt", {"probe": "gemm"}, note="on the next GEMM run"),
    "NPUAllReduceProbeWrongResult": AlertTrigger("probe_corrupt", {"probe": "allreduce"},
                                                 note="on the next all-reduce run"),
    "NPUAllReduceBandwidthLow": AlertTrigger("probe_slow", note="on one node of a demo fleet; 15 min"),
    "NPUProbeStale": AlertTrigger("probe_corrupt", note="set before the first probe run (3 failures, no "
                                                         "pass), else after 3 h without a pass; 15 min"),
    "NPUProbeCannotRun": AlertTrigger("probe_error", note="2 runs in error and none passed"),
    "NPUCheckFailed": AlertTrigger("link_down", note="with check.schedule.quick.enabled: true in the config (every "
                                                     "5 min, first after 1 min); 10 min"),
    "NPUCheckStale": AlertTrigger("process", note="with check.schedule.medium enabled: after one medium run, a "
                                                  "process on the NPUs keeps the level from running again; "
                                                  "6 days"),
}
