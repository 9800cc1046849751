"""Every alert from its demo fault, on a live fleet: agents -> Prometheus -> Alertmanager -> webhook.

Real ``npuwatch run`` processes, one per demo node and one fault per node (the fault
``agent.demo.faults.ALERT_FAULTS`` names for the alert), are scraped by a real Prometheus that
evaluates a copy of the shipped rule files and sends to a real Alertmanager (``repeat_interval``
4 h, ``group_wait`` 0 s, ``group_interval`` 1 s), which posts to a webhook here. All scenarios
run at once, so the test lasts as long as the slowest one. It checks that:

- the healthy fleet raises nothing, not even a pending alert, for the longest ``for:`` plus a
  margin (and until the probes that run from the start have reported);
- every alert fires from its fault with ``node`` (and ``npu`` for a per-chip alert) and is
  resolved after the fault is cleared (a log fault is an event: its alert ends on its own);
- every alert fingerprint is notified exactly once firing, then once resolved, and each node gets
  only the alerts its fault explains;
- an agent SIGKILLed while its alert fires and restarted within the scrape-gap hold pages no
  second time: HCCLTimeout from a plog incident (whose counter must come back as 1, neither lost
  nor counted twice) and NPUHBMDoubleBitECC (whose condition holds throughout).

The clock, and everything else that differs from production (alerts/README.md says the same):

- The rule copy runs 60 times faster: every ``for:``, range selector and ``offset`` is divided
  by 60 (``tests.support.prom_harness.time_scaled_rules``; a minute becomes a second), so windows keep
  their proportions: ``for: 10m`` over ``increase(...[15m])`` becomes ``for: 10s`` over
  ``[15s]``. The scrape-gap hold's window (10m, written in the expression since vmalert 1.79 has
  no ``keep_firing_for``) becomes 30 s, not 10 s: it must outlast an agent restart,
  which does not run 60 times faster (on a loaded 2-core machine the killed agents' series were
  back 9.8 s after the kill, so a 10 s hold passed by luck). Thresholds stay: they
  count per window, so the single-bit ECC rule is now "more than 10 in 60 s" (the demo fault
  runs at 2 per second instead of 0.5).
- The probe speed alerts hold for two test probe runs (``for:`` 1.5 probe intervals): the GEMM
  ones' ``for: 90m`` means two hourly runs; the all-reduce one's ``for: 15m`` is one 6-hourly run,
  but a CPU timing next to ~20 busy agents can be 40 % off from one run to the next, and one
  noisy reference run would page. Numbers inside expressions stay as shipped, so
  NPUProbeStale{reason="no_recent_pass"} (``time() - last pass > 3 * 3600``) cannot fire here.
- Scrape and evaluation every second. Each agent runs the npu-smi table plus only the sources its
  fault needs, every 2 s (two CPU cores for ~20 agents, the probes and both servers), except
  ``e2e-healthy``, which runs every collector on two chips and must stay silent throughout.
- The probes run on the CPU under the demo's probe interpreter, on a schedule from the agent's
  config: ``--demo`` fixes it at 30 s / 2 min, so every agent runs ``npuwatch run --config``
  with the demo's overrides written into the file (``tests.support.agent_harness.demo_agent_config``).
  The agent exports probe results with its 15 s probe snapshot, so the test probe interval is
  15 s too. The npu-smi chip model keeps the GEMM fleet comparisons apart (a reference and a slow
  node share 910B3, the fleet-wide slowdown is the only 910B4, the corrupt node the only 910B2),
  the message size the all-reduce ones; ``probes.peaks`` gives the CPU a peak far under what it
  reaches, so efficiency is far above 0.8 when healthy and far below it at ``probe_slow`` factor
  0.001. Nodes whose alert needs a probe history that starts with the fault (slow from the first
  run, errors only, never passed) get their probes with the fault, through a config reload
  (SIGHUP); a probe node's probes stop the same way once its scenario is over, so later runs
  cannot compare CPU timings that other processes disturb. A reference node's probes (and so its
  series) stop as soon as the slow node it was compared with measures healthy again after the clear:
  two healthy CPU timings next to ~20 busy agents can differ by more than the fleet-median threshold
  for a whole ``for:`` (seen once on a machine loaded by other test runs: the reference paged).
- Not fired here, each covered by promtool cases in alerts/tests/: NPUWatchDown{node="all"} (no
  target at all), NPUOpticalModuleDegraded{kind="optics_out_of_range"} and {kind="optics_weak"} (no
  demo fault heats the optic; a dark lane is optics_dark), NPUTemperatureHigh{severity="warning"}
  (the agent finds one temperature fault a chip), NPUChipHeldWhileHealthy and NPUChipRepeatedFaults
  (the agent's fault history runs on the real clock), NPUAllReduceBandwidthLow{reference="floor"} (a
  CPU all-reduce of 10 MB or more is under the NPU floors healthy or not),
  NPUProbeStale{reason="no_recent_pass"} (hours without a pass), NPUDCMIHelperFailing (the demo
  agents read no DCMI library) and the probe-timeout branch of HCCLTimeout.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.demo.faults import LOG_FAULTS
from agent.demo.node import DemoNode
from tests.support import hold_cases
from tests.support.agent_harness import AgentProcess, demo_agent_config, free_port, merged
from tests.support.paths import REPO
from tests.support.prom_harness import (
    AMProcess,
    HarnessError,
    PromProcess,
    ReceivedAlert,
    ScaledDuration,
    WebhookReceiver,
    duration_ms,
    scale_duration,
    scale_promql_durations,
    start_alertmanager,
    start_prometheus,
    time_scaled_rules,
)

RULE_FILES = sorted((REPO / "alerts").glob("*.rules.yml"))

CLOCK = 60  # the rule copy runs this many times faster: a production minute is a test second
SCRAPE_S = 1.0
PROBE_INTERVAL_S = 15.0  # GEMM and all-reduce: the agent's probe snapshot interval
# The probe speed alerts hold for 1.5 test probe intervals, i.e. two runs: for: 90m of the GEMM
# ones is 1.5 hourly runs; the all-reduce one (for: 15m, one 6-hourly run) gets two runs here
# because a CPU timing next to ~20 busy agents can be 40 % off from one run to the next.
PROBE_FOR = f"{int(1500 * PROBE_INTERVAL_S)}ms"
PROBE_SPEED_ALERTS = ("NPUGEMMProbeSlow", "NPUGEMMFleetBelowPeak", "NPUAllReduceBandwidthLow")
FOR_OVERRIDES = {alert: PROBE_FOR for alert in PROBE_SPEED_ALERTS}
# Longer than the slowest restart measured here (see the docstring), with room for a busier machine.
HOLD = "30s"
HEALTHY_MARGIN_S = 5.0
PROBES_SEEN_S = 3.0  # healthy probe results on show this long before the faults (alerts would be pending)
DEADLINE_S = 420.0  # from the faults to the last resolution (~250 s on a 2-core machine busy with other tests)
STARTUP_S = 120.0  # ~20 agents and their first tool runs starting at once on two cores
# The CPU's "peak" for probes.peaks: a 1024 fp32 matmul on one core runs at several GFLOP/s or
# more, so healthy efficiency is >> 0.8, and at probe_slow factor 0.001 << 0.8 (below 1.6 TFLOP/s).
CPU_PEAK_FLOPS = 2e9
SLOW = {"factor": 0.001}

NPU_SMI_CHIP_SOURCES = ("npu_smi_usages", "npu_smi_common", "npu_smi_ecc", "npu_smi_health", "npu_smi_memory",
                        "npu_smi_board", "npu_smi_hccs", "npu_smi_hccs_bw")
HCCN_SOURCES = ("hccn_link", "hccn_link_stat", "hccn_net_health", "hccn_optical", "hccn_stat", "hccn_speed")
# Alerts about one chip: each must carry `npu`.
PER_CHIP = frozenset({
    "NPUUnhealthy", "NPUHBMDoubleBitECC", "NPUHBMSingleBitECCRate", "NPUTemperatureHigh", "NPUHCCSLinkUnhealthy",
    "NPURoCELinkDown", "NPURoCELinkFlapping", "NPURoCENetHealthFailed", "NPUOpticalModuleDegraded",
    "NPUGEMMProbeSlow", "NPUGEMMProbeWrongResult",
})


def collecting(npu_smi: Sequence[str] = (), hccn: Sequence[str] = (), *, logs: bool = False,
               interval: str = "2s", hccn_interval: str = "2s") -> dict[str, Any]:
    """The npu-smi table (chips, health, temperature) plus only the named per-chip sources; no probes."""
    return {
        "collectors": {
            "npu_smi": {"interval": interval, "usages_interval": interval, "health_interval": interval,
                        "timeout": "5s", "disable": [s for s in NPU_SMI_CHIP_SOURCES if s not in npu_smi]},
            "hccn_tool": {"enabled": bool(hccn), "interval": hccn_interval, "timeout": "5s",
                          "disable": [s for s in HCCN_SOURCES if s not in hccn]},
            "hccl_logs": {"enabled": logs, "interval": "1s"},
            "host": {"interval": "15s"},
        },
        "probes": {"enabled": False},
    }


def probing(*, gemm: Mapping[str, Any] | None = None, allreduce: Mapping[str, Any] | None = None,
            model: str | None = None) -> dict[str, Any]:
    """The given probe(s) on the given schedule, no jitter; ``model``: its peak is CPU_PEAK_FLOPS."""
    # A generous deadline: an all-reduce that times out is an HCCLTimeout page, and two CPU ranks next to
    # ~20 busy agents (and whatever else loads the machine) can take many times their usual second.
    section: dict[str, Any] = {"enabled": True, "deadline": "180s"}
    if model is not None:
        section["model"] = model
        section["peaks"] = {model: {"fp32": CPU_PEAK_FLOPS}}
    for name, schedule in (("gemm", gemm), ("allreduce", allreduce)):
        section[name] = {"enabled": False} if schedule is None else {"enabled": True, "jitter": "0s", **schedule}
    return {"probes": section}


PROBE_EVERY = {"interval": f"{PROBE_INTERVAL_S:g}s"}


@dataclass(frozen=True)
class Expect:
    """An alert that must fire: its name and labels it must carry (``node`` defaults to the scenario's)."""

    alert: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class KillCheck:
    """SIGKILL the agent once its alerts fire (and ``when`` answers), restart it, and wait for
    ``back`` to answer again before clearing; ``value``: what ``back`` must read then. Both are
    PromQL with ``{node}`` filled in."""

    back: str
    value: float | None = None
    when: str | None = None


@dataclass(frozen=True)
class Scenario:
    node: str
    fault: str | None  # None: a reference node (no fault), or the agent is stopped (stop=True)
    expect: tuple[Expect, ...] = ()
    npu: int | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=collecting)
    chips: int = 1
    model: str = "910B3"
    stop: bool = False
    kill: KillCheck | None = None
    probes_with_fault: Mapping[str, Any] | None = None  # probe config switched on (SIGHUP) with the fault
    reference_for: str | None = None  # a reference node: its probes stop once that scenario's node recovered
    # Alerts the fault also explains without being sure to raise them on the test clock: a link that flaps
    # every 2 s is down past NPURoCELinkDown's scaled for: (5 s) whenever a busy agent polls it late.
    may_also: tuple[str, ...] = ()
    # PromQL ({node} filled in) that answers once this node's probes measure healthy again after the clear.
    # Its reference node's probes stop then, before the two healthy nodes are compared for a whole for:
    # two CPU timings beside ~20 busy agents can differ by more than the fleet-median threshold.
    recovered: str | None = None

    def labels(self, expect: Expect) -> dict[str, str]:
        return {"node": self.node, **expect.labels}

    @property
    def probes_from_start(self) -> bool:
        return bool(self.config.get("probes", {}).get("enabled"))


SCENARIOS: tuple[Scenario, ...] = (
    # Every collector on two chips, hccl logs read: a healthy node that must stay silent.
    Scenario("e2e-healthy", None, chips=2, config=merged(
        collecting(NPU_SMI_CHIP_SOURCES, HCCN_SOURCES, logs=True, interval="5s", hccn_interval="5s"),
        {"expected_chips": 2})),
    Scenario("e2e-down", None, (Expect("NPUWatchDown", {"severity": "warning"}),), stop=True),
    Scenario("e2e-collector", "npu_smi_crash", (Expect("NPUCollectorFailing", {"tool": "npu_smi"}),)),
    # The demo's EI0002 block has no screen line, so its code is the log's own: a new series.
    Scenario("e2e-hccl", "hccl_timeout",
             (Expect("HCCLTimeout", {"category": "exec_timeout", "code": "task_exec_timeout"}),),
             npu=0, config=collecting(logs=True),
             kill=KillCheck('npu_hccl_errors_total{{node="{node}",code="task_exec_timeout"}}', value=1.0)),
    Scenario("e2e-cqe", "roce_cqe", (Expect("HCCLRoCECQEError", {"category": "roce_cqe", "code": "cqe_error"}),),
             npu=0, config=collecting(logs=True)),
    Scenario("e2e-hccs", "hccs_error", (Expect("NPUHCCSLinkUnhealthy", {"npu": "0", "severity": "critical"}),
                                        Expect("NPUHCCSLinkUnhealthy", {"npu": "0", "severity": "warning"})),
             npu=0, config=collecting(["npu_smi_hccs"])),
    Scenario("e2e-linkdown", "link_down", (Expect("NPURoCELinkDown", {"npu": "0"}),), npu=0,
             config=collecting(hccn=["hccn_link"])),
    # A 2 s flap read every 1.3 s: the samples alternate (never 5 s of DOWN), the driver's link-up
    # counter climbs by one per period.
    # The agent's own flap window runs on the test clock too (15 min -> 15 s), so the finding ends after the clear.
    Scenario("e2e-flap", "link_flap", (Expect("NPURoCELinkFlapping", {"npu": "0"}),), npu=0,
             params={"period_s": 2.0}, may_also=("NPURoCELinkDown",),
             config=merged(collecting(hccn=["hccn_link", "hccn_link_stat"], hccn_interval="1300ms"),
                           {"check": {"flap_window": "15s"}})),
    # The agent judges a node's RoCE ports only where it reads their links (hccn_link).
    Scenario("e2e-nethealth", "net_health_fail", (Expect("NPURoCENetHealthFailed", {"npu": "0"}),), npu=0,
             config=collecting(hccn=["hccn_link", "hccn_net_health"])),
    Scenario("e2e-optics", "optics_no_light",
             (Expect("NPUOpticalModuleDegraded", {"npu": "0", "kind": "optics_dark"}),), npu=0,
             may_also=("NPURoCELinkDown",), config=collecting(hccn=["hccn_link", "hccn_optical"])),
    Scenario("e2e-vanish", "vanish", (Expect("NPUChipMissing", {"severity": "critical"}),), npu=1, chips=2,
             config=merged(collecting(), {"expected_chips": 2})),
    # Alarm with a code whose level asks nothing of its own: the agent's finding is the chip's health.
    Scenario("e2e-health", "health", (Expect("NPUUnhealthy", {"npu": "0"}),),
             npu=0, params={"state": "Alarm", "codes": ["8C204E00"]}, config=collecting(["npu_smi_health"])),
    # A code whose handling level pages (FreeRestartNPU): one page, by the level; NPUUnhealthy stays
    # quiet for the chip. Warning, not Alarm: the table sees the word a health read before the codes
    # come, and NPUUnhealthy's warning rule (for: 5 s here) outlasts that gap where the critical
    # one's 1 s might not on a loaded machine.
    Scenario("e2e-fault-level", "health", (Expect("NPUFaultResetWhenIdle", {"npu": "0",
                                                                           "kind": "chip_fault_reset"}),),
             npu=0, params={"state": "Warning", "codes": ["8C084E00"]}, config=collecting(["npu_smi_health"])),
    # One uncorrectable error that stays counted (the agent's hbm_dbe finding lasts while it does). The kill
    # waits until the error is older than 15 s, so nothing new comes with the restart: the scrape gap would
    # end the alert but for the hold.
    Scenario("e2e-dbe", "hbm_dbe", (Expect("NPUHBMDoubleBitECC", {"npu": "0"}),), npu=0,
             params={"interval_s": 3600.0}, config=collecting(["npu_smi_ecc"]),
             kill=KillCheck('npu_hbm_ecc_current_errors{{node="{node}",bit="double"}} > 0',
                            when='increase(npu_hbm_ecc_errors_total{{node="{node}",bit="double"}}[15s]) == 0')),
    Scenario("e2e-sbe", "hbm_sbe_rate", (Expect("NPUHBMSingleBitECCRate", {"npu": "0"}),), npu=0,
             params={"per_s": 2.0}, config=collecting(["npu_smi_ecc"])),
    # 97 C: the agent's finding is chip_too_hot (one finding a chip), the critical rule.
    Scenario("e2e-hot", "hot", (Expect("NPUTemperatureHigh", {"npu": "0", "severity": "critical"}),), npu=0),
    # --- probes (the all-reduce on the CPU: two gloo ranks)
    Scenario("e2e-gemm-ref", None, config=merged(collecting(), probing(
        gemm={**PROBE_EVERY, "first_run": "2s"}, model="910B3")), reference_for="e2e-gemm-slow"),
    # Slow from its first run. min_efficiency 0 keeps the probe itself passing, so only the speed
    # alerts judge it (three slow fails and never a pass would also be NPUProbeStale).
    Scenario("e2e-gemm-slow", "probe_slow", (
        Expect("NPUGEMMProbeSlow", {"npu": "0", "reference": "peak", "dtype": "fp32", "model": "910B3"}),
        Expect("NPUGEMMProbeSlow", {"npu": "0", "reference": "fleet_median", "dtype": "fp32", "model": "910B3"})),
        params=SLOW, probes_with_fault=probing(gemm={**PROBE_EVERY, "first_run": "1s", "min_efficiency": 0},
                                               model="910B3"),
        recovered='npu_probe_gemm_efficiency_ratio{{node="{node}"}} >= 0.8'),
    # The only 910B4 node: its slowdown is the whole model's, one fleet-wide alert.
    Scenario("e2e-gemm-fleet", "probe_slow", (
        Expect("NPUGEMMFleetBelowPeak", {"node": "all", "model": "910B4", "dtype": "fp32"}),), params=SLOW,
        model="910B4", config=merged(collecting(), probing(gemm={**PROBE_EVERY, "first_run": "4s"}, model="910B4"))),
    # Wrong from its first run: three fails and never a pass is NPUProbeStale too.
    Scenario("e2e-gemm-corrupt", "probe_corrupt", (
        Expect("NPUGEMMProbeWrongResult", {"npu": "0"}),
        Expect("NPUProbeStale", {"probe": "gemm", "reason": "never_passed"})),
        params={"probe": "gemm"}, model="910B2", probes_with_fault=probing(gemm={"interval": "5s", "first_run": "1s"})),
    Scenario("e2e-probe-error", "probe_error", (Expect("NPUProbeCannotRun", {"probe": "gemm"}),),
             probes_with_fault=probing(gemm={"interval": "5s", "first_run": "1s"})),
    Scenario("e2e-allreduce-ref", None, config=merged(collecting(), probing(
        allreduce={**PROBE_EVERY, "first_run": "6s"})), reference_for="e2e-allreduce-slow"),
    Scenario("e2e-allreduce-slow", "probe_slow", (
        Expect("NPUAllReduceBandwidthLow", {"reference": "fleet_median", "scope": "node"}),), params=SLOW,
        probes_with_fault=probing(allreduce={**PROBE_EVERY, "first_run": "1s"}),
        recovered=('npu_probe_allreduce_bus_bandwidth_bytes_per_second{{node="{node}"}} > on (scope, size_bytes)'
                   ' (0.5 * max by (scope, size_bytes) (npu_probe_allreduce_bus_bandwidth_bytes_per_second'
                   '{{node="e2e-allreduce-ref"}}))')),
    # 4 MiB: a message size of its own, out of the other nodes' all-reduce median.
    Scenario("e2e-allreduce-corrupt", "probe_corrupt", (Expect("NPUAllReduceProbeWrongResult", {"scope": "node"}),),
             params={"probe": "allreduce"},
             probes_with_fault=probing(allreduce={"interval": "10s", "first_run": "1s", "size": "4MiB"})),
)
BY_NODE = {scenario.node: scenario for scenario in SCENARIOS}


def scenario_of(labels: Mapping[str, str]) -> Scenario | None:
    """The scenario an alert belongs to: by its node, or the one expecting it on another node ("all")."""
    node = labels.get("node", "")
    if node in BY_NODE:
        return BY_NODE[node]
    for scenario in SCENARIOS:
        if any(scenario.labels(e)["node"] == node and e.alert == labels.get("alertname") for e in scenario.expect):
            return scenario
    return None


Fingerprint = tuple[tuple[str, str], ...]


def fingerprint(labels: Mapping[str, str]) -> Fingerprint:
    return tuple(sorted(labels.items()))


def show(labels: Mapping[str, str]) -> str:
    inner = ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k not in ("alertname", "job", "instance"))
    return f"{labels.get('alertname', '?')}{{{inner}}}"


# ----------------------------------------------------------------------------- the fleet


@dataclass
class Fleet:
    agents: dict[str, AgentProcess]
    demos: dict[str, DemoNode]
    configs: dict[str, dict[str, Any]]
    prom: PromProcess
    am: AMProcess
    hook: WebhookReceiver
    scaled: list[ScaledDuration]
    started: float

    def scaled_for_s(self, alert: str) -> float:
        return min(duration_ms(s.new) for s in self.scaled if s.rule == alert and s.where == "for") / 1000

    def reconfigure(self, node: str, extra: Mapping[str, Any]) -> None:
        """A new config for a running agent: written, then SIGHUP (the agent's own reload)."""
        agent = self.agents[node]
        agent.write_config(merged(self.configs[node], dict(extra)))
        agent.signal(signal.SIGHUP)


def _agent_env(demo: DemoNode) -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {
        **demo.env(),
        "PYTHONPATH": f"{REPO}{os.pathsep}{path}" if path else str(REPO),
        # One thread per probe worker: steadier CPU timings next to ~20 agents on two cores.
        "OMP_NUM_THREADS": "1",
    }


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    assert importlib.util.find_spec("torch") is not None, (
        "torch is needed for the probe alerts (CI installs the CPU build; see README 'Run the tests')")
    started = time.monotonic()
    stops: list[Callable[[], None]] = []
    try:
        hook = WebhookReceiver().start()
        stops.append(hook.stop)
        agents: dict[str, AgentProcess] = {}
        demos: dict[str, DemoNode] = {}
        configs: dict[str, dict[str, Any]] = {}
        for scenario in SCENARIOS:
            # create + open: what `npuwatch run --demo` does (open adds the log directory).
            demo = DemoNode(tmp_path / scenario.node / "demo").create(chips=scenario.chips, model=scenario.model)
            demo.open()
            base = merged({"web": {"listen_address": "127.0.0.1", "port": free_port()},
                           "labels": {"node": scenario.node}}, dict(scenario.config))
            configs[scenario.node] = demo_agent_config(demo, base)
            agent = AgentProcess(scenario.node, tmp_path / scenario.node, configs[scenario.node], _agent_env(demo))
            agent.start()
            stops.append(agent.stop)
            agents[scenario.node], demos[scenario.node] = agent, demo
        am = start_alertmanager(tmp_path, hook.url)
        stops.append(am.stop)
        rules, scaled = time_scaled_rules(RULE_FILES, tmp_path / "rules", CLOCK, FOR_OVERRIDES, HOLD)
        prom = start_prometheus(tmp_path, [agent.target for agent in agents.values()], rules,
                                scrape_interval=f"{SCRAPE_S:g}s", evaluation_interval=f"{SCRAPE_S:g}s",
                                alertmanager_url=am.url)
        stops.append(prom.stop)
        yield Fleet(agents, demos, configs, prom, am, hook, scaled, started)
    finally:
        for stop in reversed(stops):
            stop()


# ----------------------------------------------------------------------------- one scenario's run


@dataclass
class Run:
    """Where one scenario stands: fault -> fired -> (killed -> restarted -> back) -> cleared -> done."""

    scenario: Scenario
    phase: str = "healthy"
    times: dict[str, float] = field(default_factory=dict)  # phase -> time.time() it began
    notes: list[str] = field(default_factory=list)
    down_s: float = 0.0  # a killed agent: how long Prometheus saw it down (up == 0), in seconds
    references_stopped: bool = False

    def mark(self, phase: str) -> None:
        self.phase = phase
        self.times[phase] = time.time()

    def since(self, phase: str, start: str = "fault") -> str:
        if phase not in self.times or start not in self.times:
            return "-"
        return f"{self.times[phase] - self.times[start]:.1f}s"


def _start_fault(run: Run, fleet: Fleet) -> None:
    scenario = run.scenario
    if scenario.probes_with_fault is not None:
        ran = fleet.prom.query(f'npuwatch_probe_runs_total{{node="{scenario.node}"}} > 0')
        assert not ran, f"{scenario.node}: probes ran before the fault: {ran}"
    if scenario.stop:
        fleet.agents[scenario.node].stop()
    elif scenario.fault is not None:
        fleet.demos[scenario.node].set_fault(scenario.fault, chip=scenario.npu, **dict(scenario.params))
    if scenario.probes_with_fault is not None:
        fleet.reconfigure(scenario.node, scenario.probes_with_fault)
    run.mark("fault")


def _clear_fault(run: Run, fleet: Fleet) -> None:
    scenario = run.scenario
    if scenario.stop:
        fleet.agents[scenario.node].start()
    elif scenario.fault is not None and scenario.fault not in LOG_FAULTS:  # a log fault is an event
        fleet.demos[scenario.node].clear_fault(scenario.fault, chip=scenario.npu)
    run.mark("cleared")


def _references_of(scenario: Scenario) -> list[str]:
    return [s.node for s in SCENARIOS if s.reference_for == scenario.node]


def _stop_probes(fleet: Fleet, nodes: Sequence[str]) -> None:
    for node in nodes:
        if BY_NODE[node].probes_from_start or BY_NODE[node].probes_with_fault is not None:
            fleet.reconfigure(node, {"probes": {"enabled": False}})


def _stop_references_once_recovered(run: Run, fleet: Fleet) -> None:
    """After the clear: the reference nodes' probes stop (their series go) once this node measures
    healthy again, so the fleet median is its own and no healthy pair is compared for a whole for:."""
    scenario = run.scenario
    if run.references_stopped or not _references_of(scenario):
        return
    if scenario.recovered is None or fleet.prom.query(scenario.recovered.format(node=scenario.node)):
        _stop_probes(fleet, _references_of(scenario))
        run.references_stopped = True
        run.times["references stopped"] = time.time()


def _finish(run: Run, fleet: Fleet) -> None:
    """Done: its probes (and its reference nodes', if still running) stop."""
    run.mark("done")
    _stop_probes(fleet, [run.scenario.node] + ([] if run.references_stopped else _references_of(run.scenario)))


def _fired(run: Run, received: Sequence[ReceivedAlert]) -> bool:
    firing = [a for a in received if a.status == "firing"]
    return all(any(a.matches(e.alert, run.scenario.labels(e)) for a in firing) for e in run.scenario.expect)


def _notified(run: Run, received: Sequence[ReceivedAlert]) -> list[ReceivedAlert]:
    return [a for a in received if scenario_of(a.labels) is run.scenario]


def _all_resolved(run: Run, received: Sequence[ReceivedAlert], active: Sequence[Mapping[str, str]]) -> bool:
    """Every alert of this scenario that fired was resolved after its last firing, and Prometheus
    holds none of its alerts (pending or firing)."""
    if any(scenario_of(labels) is run.scenario for labels in active):
        return False
    last: dict[Fingerprint, str] = {}
    for alert in sorted(_notified(run, received), key=lambda a: a.received_at):
        last[fingerprint(alert.labels)] = alert.status
    return all(status == "resolved" for status in last.values())


def _step(run: Run, fleet: Fleet, received: Sequence[ReceivedAlert], active: Sequence[Mapping[str, str]]) -> None:
    scenario = run.scenario
    agent = fleet.agents[scenario.node]
    if run.phase == "fault":
        if not scenario.expect:  # a reference node: nothing to fire, nothing to clear
            run.mark("cleared")
        elif _fired(run, received):
            run.mark("fired")
            if scenario.kill is None:
                _clear_fault(run, fleet)
    elif run.phase == "fired":
        assert scenario.kill is not None
        if scenario.kill.when is None or fleet.prom.query(scenario.kill.when.format(node=scenario.node)):
            agent.kill()
            run.mark("killed")
    elif run.phase == "killed":
        if fleet.prom.query(f'up{{instance="{agent.target}"}} == 0'):  # Prometheus saw it gone
            agent.start()
            run.mark("restarted")
    elif run.phase == "restarted":
        assert scenario.kill is not None
        back = fleet.prom.query(scenario.kill.back.format(node=scenario.node))
        if back:
            run.mark("back")
            value = float(back[0]["value"][1])
            if scenario.kill.value is not None and value != scenario.kill.value:
                run.notes.append(f"after the restart {scenario.kill.back.format(node=scenario.node)} "
                                 f"read {value}, expected {scenario.kill.value}")
            _clear_fault(run, fleet)
    elif run.phase == "cleared":
        if scenario.reference_for is not None:
            return  # stopped by the scenario it is the reference for
        _stop_references_once_recovered(run, fleet)
        if _all_resolved(run, received, active):
            _finish(run, fleet)


def _wait_chips_scraped(fleet: Fleet, scenario: Scenario, timeout: float = STARTUP_S) -> None:
    """Until Prometheus holds the node's chip count; else a failure that says where it stopped: the
    target's scrape health, the agent's collector state, and the agent's log."""
    expr = f'npu_chips{{node="{scenario.node}"}} == {scenario.chips}'
    try:
        fleet.prom.wait_for(expr, timeout=timeout)
    except HarnessError:
        agent = fleet.agents[scenario.node]
        targets = fleet.prom.api("targets", {"state": "active"})["activeTargets"]
        target = [{k: t.get(k) for k in ("health", "lastError", "lastScrapeDuration")}
                  for t in targets if t.get("scrapeUrl", "").startswith(f"http://{agent.target}/")]
        collectors = fleet.prom.query(f'{{node="{scenario.node}",__name__=~"npu_chips|npuwatch_collector_up|'
                                      f'npuwatch_collector_down_reason"}}')
        shown = [f"{show(item['metric'])}={item['value'][1]}" for item in collectors]
        pytest.fail(f"{scenario.node}: no {expr!r} after {timeout:.0f}s; target {target}; series {shown}; "
                    f"agent running={agent.running()}\n--- {agent.log_path} (tail) ---\n{agent.log_tail()}")


def _missed_scrape(labels: Mapping[str, str]) -> bool:
    """NPUWatchDown pending: a scrape failed (one that took over the 1 s scrape timeout while ~20 agents
    share two cores). It fires only after its scaled for: of failed scrapes, and a firing one fails the
    healthy phase like any other alert."""
    return labels.get("alertname") == "NPUWatchDown" and labels.get("alertstate") == "pending"


def _active_alerts(prom: PromProcess) -> list[dict[str, str]]:
    return [dict(alert["labels"], alertstate=alert["state"]) for alert in prom.alerts()]


def _status(runs: Sequence[Run], fleet: Fleet) -> str:
    received = fleet.hook.alerts(status=None)
    lines = []
    for run in runs:
        got = sorted({f"{show(a.labels)} {a.status}" for a in _notified(run, received)})
        lines.append(f"{run.scenario.node}: phase {run.phase}; webhook: {', '.join(got) or 'nothing'}")
    active = [show(labels) for labels in _active_alerts(fleet.prom)]
    lines.append("Prometheus alerts now: " + (", ".join(sorted(active)) or "none"))
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the test


@pytest.mark.slow
def test_every_alert_fires_from_its_fault_and_resolves_once(fleet: Fleet) -> None:
    prom, hook = fleet.prom, fleet.hook
    runs = [Run(scenario) for scenario in SCENARIOS]

    for agent in fleet.agents.values():
        agent.wait_serving(timeout=60)
    for scenario in SCENARIOS:
        _wait_chips_scraped(fleet, scenario)
    # Alerts are judged from here on only once every rule has been evaluated on a fleet that is all
    # up: a scrape from before an agent listened leaves NPUWatchDown pending until the next evaluation.
    prom.wait_for(f'count(up{{job="npuwatch"}} == 1) == {len(SCENARIOS)}', timeout=60)
    prom.wait_rules_evaluated_after(time.time())
    ready = time.monotonic()

    # Healthy: nothing pending, nothing firing, nothing notified for the longest for: plus a
    # margin, and until the probes that run from the start have shown healthy results a while.
    longest_for_s = max(duration_ms(s.new) for s in fleet.scaled if s.where == "for") / 1000
    early = [s.node for s in SCENARIOS if s.probes_from_start]
    probes_shown = f'count(npuwatch_probe_last_success_timestamp_seconds{{node=~"{"|".join(early)}"}}) == {len(early)}'
    probes_seen: float | None = None
    missed_scrapes: set[str] = set()
    while True:
        now = time.monotonic()
        active = _active_alerts(prom)
        missed_scrapes.update(labels["node"] for labels in active if _missed_scrape(labels))
        active = [labels for labels in active if not _missed_scrape(labels)]
        assert not active, f"alerts on the healthy fleet: {[show(labels) for labels in active]}"
        if probes_seen is None and prom.query(probes_shown):
            probes_seen = now
        if probes_seen is not None and now >= max(ready + longest_for_s + HEALTHY_MARGIN_S,
                                                  probes_seen + PROBES_SEEN_S):
            break
        assert now < ready + 120, f"no probe pass from {early} within 120 s"
        time.sleep(0.5)
    assert hook.alerts(status=None) == [], [show(a.labels) for a in hook.alerts(status=None)]
    if missed_scrapes:
        print(f"\nscrapes missed while healthy (NPUWatchDown pending, never firing): {sorted(missed_scrapes)}")

    faults_at = time.monotonic()
    for run in runs:
        _start_fault(run, fleet)
    while any(run.phase != "done" and run.scenario.reference_for is None for run in runs):
        if time.monotonic() > faults_at + DEADLINE_S:
            pytest.fail(f"not done {DEADLINE_S:.0f} s after the faults:\n{_status(runs, fleet)}")
        received = hook.alerts(status=None)
        active = _active_alerts(prom)
        for run in runs:
            _step(run, fleet, received, active)
        time.sleep(0.25)
    finished = time.monotonic()
    time.sleep(2.0)  # a notification from the last evaluation

    received = hook.alerts(status=None)
    down_allowed = _down_allowed(runs, fleet)
    _report(runs, received, fleet, ready=ready, faults_at=faults_at, finished=finished)
    problems = [f"{run.scenario.node}: {note}" for run in runs for note in run.notes]
    problems += _label_problems(received, down_allowed)
    problems += _sequence_problems(received) + _kill_problems(runs, received, fleet)
    problems += [f"still active at the end: {show(labels)}" for labels in _active_alerts(prom)]
    assert not problems, "\n".join(problems) + "\n" + _status(runs, fleet)


def _down_allowed(runs: Sequence[Run], fleet: Fleet) -> set[str]:
    """Killed nodes that Prometheus saw down for NPUWatchDown's (scaled) for: or longer."""
    allowed = set()
    for run in runs:
        if run.scenario.kill is None:
            continue
        target = fleet.agents[run.scenario.node].target
        samples = fleet.prom.api("query", {"query": f'up{{instance="{target}"}}[10m]'})["result"][0]["values"]
        run.down_s = SCRAPE_S * sum(1 for _at, value in samples if float(value) == 0)
        if run.down_s >= fleet.scaled_for_s("NPUWatchDown"):
            allowed.add(run.scenario.node)
    return allowed


def _label_problems(received: Sequence[ReceivedAlert], down_allowed: set[str]) -> list[str]:
    """Every notification names its node (one with a scenario) and, for a per-chip alert, its npu;
    each node gets only the alerts its fault explains."""
    problems = []
    for alert in received:
        labels = alert.labels
        scenario = scenario_of(labels)
        if not labels.get("node"):
            problems.append(f"no node: {show(labels)}")
        elif scenario is None:
            problems.append(f"alert on a node without a scenario: {show(labels)}")
        elif alert.name not in {e.alert for e in scenario.expect} | set(scenario.may_also) and not (
                alert.name == "NPUWatchDown" and scenario.node in down_allowed):
            problems.append(f"{show(labels)}: not an alert that {scenario.fault or 'no fault'} explains")
        if alert.name in PER_CHIP and not labels.get("npu"):
            problems.append(f"per-chip alert without npu: {show(labels)}")
    return sorted(set(problems))


def _sequence_problems(received: Sequence[ReceivedAlert]) -> list[str]:
    """Each fingerprint: one firing notification, then one resolved - no repeat, no flap."""
    by_fingerprint: dict[Fingerprint, list[str]] = {}
    for alert in sorted(received, key=lambda a: a.received_at):
        by_fingerprint.setdefault(fingerprint(alert.labels), []).append(alert.status)
    return [f"{show(dict(key))}: notified {' -> '.join(statuses)}"
            for key, statuses in sorted(by_fingerprint.items()) if statuses != ["firing", "resolved"]]


def _kill_problems(runs: Sequence[Run], received: Sequence[ReceivedAlert], fleet: Fleet) -> list[str]:
    """The killed agents were back within the hold, and nothing was resolved meanwhile."""
    problems = []
    for run in runs:
        if run.scenario.kill is None:
            continue
        away = run.times["back"] - run.times["killed"]
        keep_s = min(duration_ms(s.new) for s in fleet.scaled if s.where == "hold") / 1000
        if away >= keep_s:
            problems.append(f"{run.scenario.node}: back {away:.1f} s after the kill, not within "
                            f"the hold ({keep_s:g} s): the machine is too slow for this check")
        for alert in _notified(run, received):
            # NPUWatchDown is about the agent itself: it may page for a slow restart and resolves with `up`,
            # before the agent's series are back; the other alerts must hold through the gap.
            if alert.name != "NPUWatchDown" and alert.status == "resolved" and alert.received_at < run.times["back"]:
                problems.append(f"{run.scenario.node}: {show(alert.labels)} resolved while the agent was "
                                f"away ({alert.received_at - run.times['killed']:.1f} s after the kill)")
    return problems


def _report(runs: Sequence[Run], received: Sequence[ReceivedAlert], fleet: Fleet, *, ready: float,
            faults_at: float, finished: float) -> None:
    print(f"\nfleet of {len(runs)} ready {ready - fleet.started:.1f} s after the start, faults at "
          f"{faults_at - fleet.started:.1f} s, last resolution {finished - faults_at:.1f} s after the faults "
          f"({finished - fleet.started:.1f} s in all)")
    print(f"{'node':22} {'fault':16} {'fired':>7} {'cleared':>8} {'resolved':>9}  alerts (from the fault)")
    for run in runs:
        if not run.scenario.expect:
            continue
        fired = sorted({show(a.labels) for a in _notified(run, received) if a.status == "firing"})
        kill = (f" [killed; down {run.down_s:.0f} s for Prometheus, series back {run.since('back', 'killed')} "
                f"after the kill]" if run.scenario.kill else "")
        print(f"{run.scenario.node:22} {run.scenario.fault or 'stop':16} {run.since('fired'):>7} "
              f"{run.since('cleared'):>8} {run.since('done', 'cleared'):>9}  {', '.join(fired)}{kill}")


# ----------------------------------------------------------------------------- the rule rewrite


def test_time_scaled_rules_divide_every_duration_and_nothing_else(tmp_path: Path) -> None:
    """The shipped rules on the test clock: every for/hold/range/offset divided by 60,
    the GEMM for: overridden, label regexes and numbers untouched, and promtool accepts the copy."""
    expr, changes = scale_promql_durations(
        'increase(x{size=~"[1-9][0-9]{7,}",a="[5m]"}[15m]) > 3 * 3600 unless y offset 5m or rate(z[1h:30s]) '
        'or predict_linear(rate(w{p="predict_linear(a, 1)"}[10m])[1h:1m], 2 * 3600) < 1', CLOCK)
    assert expr == ('increase(x{size=~"[1-9][0-9]{7,}",a="[5m]"}[15s]) > 3 * 3600 unless y offset 5s '
                    'or rate(z[60s:500ms]) or predict_linear(rate(w{p="predict_linear(a, 1)"}[10s])[60s:1s], '
                    '(2 * 3600) / 60) < 1')
    assert changes == [("range", "15m", "15s"), ("offset", "5m", "5s"), ("range", "1h", "60s"),
                       ("range", "30s", "500ms"), ("range", "10m", "10s"), ("range", "1h", "60s"),
                       ("range", "1m", "1s"), ("horizon", "2 * 3600", "(2 * 3600) / 60")]

    paths, scaled = time_scaled_rules(RULE_FILES, tmp_path, CLOCK, FOR_OVERRIDES)
    copies = {path.name: path for path in paths}
    assert sorted(copies) == [source.name for source in RULE_FILES]
    for source in RULE_FILES:
        shipped, ours = _rules_of(source), _rules_of(copies[source.name])
        assert len(ours) == len(shipped), source
        for index, before in enumerate(shipped):
            after = ours[index]
            name = before.get("alert") or before.get("record")
            assert set(before) == set(after), name
            assert {k: v for k, v in before.items() if k not in ("for", "expr")} == {
                k: v for k, v in after.items() if k not in ("for", "expr")}, name
            if "for" in before:
                expected = FOR_OVERRIDES.get(name) or scale_duration(before["for"], CLOCK)
                assert after["for"] == expected, name
            held = hold_cases.parse_hold(before["expr"]) if "alert" in before else None
            if held is not None:
                assert after["expr"] == hold_cases.hold_expr(held.series, held.gate,
                                                                 f"{duration_ms(held.window) // 60_000}s"), name
                continue
            assert after["expr"] == scale_promql_durations(before["expr"], CLOCK)[0], name
            # Durations are the only difference: blank them out and the expressions are equal.
            assert _blank_durations(after["expr"]) == _blank_durations(before["expr"]), name
    wheres = {s.where for s in scaled}
    assert wheres == {"for", "hold", "range", "offset", "horizon"}, wheres
    # divided to the millisecond: 20 s becomes 333 ms
    assert all(abs(duration_ms(s.new) * CLOCK - duration_ms(s.old)) < CLOCK for s in scaled
               if not (s.where == "for" and s.rule in FOR_OVERRIDES) and s.where != "horizon"), scaled
    assert {(_alert_of(s.rule), s.new) for s in scaled if s.where == "horizon"} == {
        ("NPUOpticalRxPowerFalling", f"(4 * 3600) / {CLOCK}"), ("NPURoCEErrorsRising", f"(2 * 3600) / {CLOCK}"),
        ("NPUHBMSingleBitECCRising", f"(4 * 3600) / {CLOCK}")}
    # Production's ratios hold: the hold's 10m -> 10 s, the HCCL windows 5m -> 5 s; the double-bit ECC alert
    # reads the agent's finding (alerts/faults.rules.yml), whose only window is its hold.
    assert {(s.where, s.new) for s in scaled if _alert_of(s.rule) == "NPUHBMDoubleBitECC"} == {("hold", "10s")}
    assert {s.new for s in scaled if s.where == "hold"} == {"10s"}
    assert len([s for s in scaled if s.where == "hold"]) == len(hold_cases.held_alerts())
    _, held = time_scaled_rules(RULE_FILES, tmp_path / "held", CLOCK, FOR_OVERRIDES, HOLD)
    assert {s.new for s in held if s.where == "hold"} == {HOLD}
    assert [s for s in held if s.where != "hold"] == [s for s in scaled if s.where != "hold"]
    assert {(s.where, s.new) for s in scaled if _alert_of(s.rule) == "HCCLTimeout"} == {("hold", "10s"),
                                                                            ("range", "5s"), ("offset", "5s")}
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing (Debian package prometheus)"
    checked = subprocess.run([promtool, "check", "rules", *map(str, paths)], capture_output=True, text=True,
                             timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def _alert_of(rule: str) -> str:
    """The alert a rule serves: an alert's own name, or the alert whose condition a record holds."""
    return rule.removeprefix(hold_cases.CONDITION_PREFIX)


def _rules_of(path: Path) -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"] for rule in group["rules"]]


def _blank_durations(expr: str) -> str:
    blanked = re.sub(r"\[[0-9a-z:]+\]|offset [0-9a-z]+", "<duration>", expr)
    return re.sub(r",\s*\(?([0-9 *]+?)\)?(?: / \d+)?\)", r", <horizon>)", blanked)  # predict_linear(v, h)
