"""NPU node detail: every chip of one node, metric by metric ($node, $npu)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from grafana_foundation_sdk.builders import dashboard as dashboard_b

from agent.health.status import EXIT_CODES
from dashboards.panels import (
    CLUSTER,
    JOB,
    NODE,
    NODE_VALUES,
    NPU,
    Column,
    Query,
    cluster_variable,
    datasource_variable,
    job_variable,
    label_variable,
    new_dashboard,
    sel,
    stat,
    state_timeline,
    table,
    timeseries,
)
from dashboards.thresholds import (
    BUSY_CHIP,
    HBM_FILL,
    HBM_TEMPERATURE,
    HEALTHY,
    HOST_BUSY,
    INFO,
    STATUS_MAPPING,
    STATUS_STEPS,
    ZERO_IS_GOOD,
    chip_temperature,
    clock_ratio,
    gemm_efficiency,
    isolated_pages,
)
from dashboards.verdict import chip_status_table, findings_table, node_status_stat, node_status_timeline

if TYPE_CHECKING:
    from grafana_foundation_sdk.builders import timeseries as timeseries_b

__all__ = ["UID", "build", "sick_chip_pods_query"]

UID = "npuwatch-node-detail"

CHIP = "npu{{npu}}/{{chip}}"
LINK = "link{{link}}"


def chip(metric: str, *matchers: str) -> str:
    """Selector for a per-chip metric on the chosen node and NPUs."""
    return sel(metric, NPU, *matchers)


def _verdict_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Verdict"))
        .with_panel(node_status_stat())
        .with_panel(node_status_timeline())
        .with_panel(chip_status_table())
        .with_panel(findings_table())
    )


def _node_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Node"))
        .with_panel(stat("Chips", "Chips npu-smi lists now.", unit="short", thresholds=INFO, width=4,
                         queries=[Query(sel("npu_chips"))]))
        .with_panel(stat("Expected chips", "Chips this node should have (config; 0 = unknown).",
                         unit="short", thresholds=INFO, width=4,
                         queries=[Query(sel("npuwatch_expected_chips"))]))
        .with_panel(stat("Unhealthy chips", "Chips whose npu-smi health is not OK.",
                         unit="short", thresholds=ZERO_IS_GOOD, width=4,
                         queries=[Query(f"count({chip('npu_healthy')} == 0) or vector(0)")]))
        .with_panel(stat("Active error codes", "Error codes npu-smi reports active on any chip.",
                         unit="short", thresholds=ZERO_IS_GOOD, width=4,
                         queries=[Query(f"count({chip('npu_error_code_active')}) or vector(0)")]))
        .with_panel(stat("Collectors failing", "npuwatch collectors whose last run failed.",
                         unit="short", thresholds=ZERO_IS_GOOD, width=4,
                         queries=[Query(f"count({sel('npuwatch_collector_up')} == 0) or vector(0)")]))
        .with_panel(stat("Host CPU", "Host CPU utilization.", unit="percentunit",
                         thresholds=HOST_BUSY, width=4,
                         queries=[Query(sel("npuwatch_host_cpu_utilization_ratio"))]))
        .with_panel(table(
            "Chips", "Static facts per chip: model, bus, serial, firmware and driver.",
            unit="short", thresholds=INFO, width=12, height=8,
            queries=[Query(chip("npu_info"))], columns=[Column("Listed", "short")]))
        .with_panel(table(
            "Active error codes", "Error codes as npu-smi prints them (hex), each with its handling level: "
            "what to do about it (docs/fault-codes.md).",
            unit="short", thresholds=ZERO_IS_GOOD, width=12, height=8,
            queries=[Query(chip("npu_error_code_active"))], columns=[Column("Active", "short")]))
        .with_panel(table(
            "Handling level per chip", "Each chip's most severe handling level: SeparateNPU or "
            "ManuallySeparateNPU isolate it now (a ManuallySeparateNPU stays until `npuwatch faults clear` after "
            "the repair), RestartNPU or FreeRestartNPU reset it when idle, PreSeparateNPU isolate it after its "
            "job. No row: no level.",
            unit="short", thresholds=ZERO_IS_GOOD, width=24, height=6,
            queries=[Query(chip("npu_fault_handling"))], columns=[Column("Level", "short")]))
    )


def _health_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    mapping = {"1": ("OK", "green"), "0": ("not OK", "red")}
    return (
        dash.with_row(dashboard_b.Row("Health"))
        .with_panel(state_timeline("Chip health", "npu-smi health per chip over time.",
                                   unit="short", thresholds=HEALTHY, mapping=mapping,
                                   queries=[Query(chip("npu_healthy"), CHIP)]))
        .with_panel(state_timeline("HCCS health", "HCCS link health per chip over time.",
                                   unit="short", thresholds=HEALTHY, mapping=mapping,
                                   queries=[Query(chip("npu_hccs_healthy"), CHIP)]))
    )


def sick_chip_pods_query() -> str:
    """Each pod holding a chip that is not healthy, by the join the README documents (the pod side first,
    so a chip split into vNPUs for several pods gives one row per pod)."""
    return f"{chip('npu_pod_info')} * on (node, npu, chip) group_left () ({chip('npu_healthy')} == 0)"


def _pods_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    held = {"1": ("held", "blue")}
    return (
        dash.with_row(dashboard_b.Row("Pods (Kubernetes)"))
        .with_panel(table(
            "Who is on the sick chip", "The pods and containers holding a chip whose npu-smi health is not OK "
            "(npu_pod_info from the kubelet's pod-resources API; empty outside Kubernetes or when no sick "
            "chip is held).",
            unit="short", thresholds=HEALTHY, width=12, height=8,
            queries=[Query(sick_chip_pods_query())],
            columns=[Column("Health", "short", HEALTHY, {"0": ("not OK", "red")})]))
        .with_panel(table(
            "Pods on the chips", "Every container holding a chip of this node, by the device plugin's "
            "allocation.",
            unit="short", thresholds=INFO, width=12, height=8,
            queries=[Query(chip("npu_pod_info"))], columns=[Column("Held", "short", INFO, held)]))
    )


def _utilization_panel(title: str, metric: str, width: int) -> timeseries_b.Panel:
    return timeseries(title, f"{title} per chip (0-100%).", unit="percentunit", thresholds=BUSY_CHIP,
                      width=width, min_value=0, max_value=1,
                      queries=[Query(chip(metric), CHIP)])


def _utilization_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Utilization"))
        .with_panel(_utilization_panel("AI Core utilization", "npu_aicore_utilization_ratio", 12))
        .with_panel(_utilization_panel("AI Vector utilization", "npu_aivector_utilization_ratio", 12))
        .with_panel(_utilization_panel("AI CPU utilization", "npu_aicpu_utilization_ratio", 8))
        .with_panel(_utilization_panel("Control CPU utilization", "npu_ctrlcpu_utilization_ratio", 8))
        .with_panel(_utilization_panel("HBM bandwidth utilization", "npu_hbm_bandwidth_utilization_ratio", 8))
    )


def _memory_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Memory"))
        .with_panel(timeseries("HBM used", "HBM in use per chip.", unit="bytes", thresholds=INFO, width=8,
                               queries=[Query(chip("npu_hbm_used_bytes"), CHIP)]))
        .with_panel(timeseries(
            "HBM used (fraction)", "HBM in use over capacity per chip.", unit="percentunit",
            thresholds=HBM_FILL, width=8, min_value=0, max_value=1,
            queries=[Query(f"{chip('npu_hbm_used_bytes')} / {chip('npu_hbm_total_bytes')}", CHIP)]))
        .with_panel(timeseries("Device DDR used", "Device DDR memory in use per chip.", unit="bytes",
                               thresholds=INFO, width=8,
                               queries=[Query(chip("npu_memory_used_bytes"), CHIP)]))
    )


def _thermal_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    frequency_ratio = f"{chip('npu_aicore_frequency_hertz')} / {chip('npu_aicore_max_frequency_hertz')}"
    return (
        dash.with_row(dashboard_b.Row("Power, temperature and clocks"))
        .with_panel(timeseries("Power", "Chip power draw.", unit="watt",
                               thresholds=INFO, width=12,
                               queries=[Query(chip("npu_power_watts"), CHIP)]))
        .with_panel(timeseries("Chip temperature", "SoC temperature per chip.", unit="celsius",
                               thresholds=chip_temperature(), width=12,
                               queries=[Query(chip("npu_temperature_celsius"), CHIP)]))
        .with_panel(timeseries("HBM temperature", "HBM temperature per chip.", unit="celsius",
                               thresholds=HBM_TEMPERATURE, width=8,
                               queries=[Query(chip("npu_hbm_temperature_celsius"), CHIP)]))
        .with_panel(timeseries("AI Core frequency", "Current AI Core clock.", unit="hertz",
                               thresholds=INFO, width=8,
                               queries=[Query(chip("npu_aicore_frequency_hertz"), CHIP)]))
        .with_panel(timeseries(
            "AI Core clock vs rated", "Current over rated AI Core clock; below 1 under load hints at "
            "power or thermal throttling (the sustained GEMM check warns under its clock limit).",
            unit="percentunit", thresholds=clock_ratio(), width=8, min_value=0,
            queries=[Query(frequency_ratio, CHIP)]))
    )


def _errors_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    ecc_total = chip("npu_hbm_ecc_errors_total")
    hccs_errors = chip("npu_hccs_errors_total")
    hccs_retries = chip("npu_hccs_retries_total")
    return (
        dash.with_row(dashboard_b.Row("ECC and HCCS"))
        .with_panel(timeseries(
            "HBM ECC errors (current)", "ECC errors the driver counted since its last reset.",
            unit="short", thresholds=ZERO_IS_GOOD, width=8,
            queries=[Query(chip("npu_hbm_ecc_current_errors"), f"{CHIP} {{{{bit}}}}")]))
        .with_panel(timeseries(
            "New HBM ECC errors", "Lifetime ECC error counter, increase per interval.",
            unit="short", thresholds=ZERO_IS_GOOD, width=8, bars=True,
            queries=[Query(f"increase({ecc_total}[$__rate_interval])", f"{CHIP} {{{{bit}}}}")]))
        .with_panel(timeseries(
            "HBM isolated pages", "Pages isolated after ECC errors; a growing count means a failing HBM.",
            unit="short", thresholds=isolated_pages(), width=8,
            queries=[Query(chip("npu_hbm_ecc_isolated_pages"), f"{CHIP} {{{{bit}}}}")]))
        .with_panel(timeseries(
            "HCCS errors and retries", "HCCS link error and retry counters, increase per interval.",
            unit="short", thresholds=ZERO_IS_GOOD, width=12, bars=True,
            queries=[Query(f"increase({hccs_errors}[$__rate_interval])", f"{CHIP} {LINK} errors"),
                     Query(f"increase({hccs_retries}[$__rate_interval])", f"{CHIP} {LINK} retries")]))
        .with_panel(timeseries(
            "HCCS bandwidth", "HCCS link bandwidth per link and direction.", unit="Bps", thresholds=INFO,
            width=12,
            queries=[Query(chip("npu_hccs_bandwidth_bytes_per_second"),
                           f"{CHIP} {LINK} {{{{direction}}}}")]))
    )


def _processes_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Processes"))
        .with_panel(timeseries("Processes per chip", "Processes npu-smi lists on each chip.",
                               unit="short", thresholds=INFO, width=12,
                               queries=[Query(chip("npu_processes"), CHIP)]))
        .with_panel(table(
            "Process device memory", "Device memory per process (only when per-process metrics are "
            "enabled in the agent config).",
            unit="bytes", thresholds=INFO, width=12, sort_by="Device memory",
            queries=[Query(chip("npu_process_memory_bytes"))], columns=[Column("Device memory", "bytes")]))
    )


def _probes_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Probes"))
        .with_panel(timeseries("GEMM throughput", "GEMM probe rate per chip and dtype.", unit="flops",
                               thresholds=INFO, width=8,
                               queries=[Query(chip("npu_probe_gemm_flops"), f"{CHIP} {{{{dtype}}}}")]))
        .with_panel(timeseries(
            "GEMM efficiency", "GEMM probe rate over the chip model's expected peak.",
            unit="percentunit", thresholds=gemm_efficiency(), width=8,
            min_value=0,
            queries=[Query(chip("npu_probe_gemm_efficiency_ratio"), f"{CHIP} {{{{dtype}}}}")]))
        .with_panel(state_timeline(
            "GEMM result check", "Whether the GEMM product matched the reference.",
            unit="short", thresholds=HEALTHY, width=8,
            mapping={"1": ("correct", "green"), "0": ("MISMATCH", "red")},
            queries=[Query(chip("npu_probe_gemm_correct"), f"{CHIP} {{{{dtype}}}}")]))
        .with_panel(timeseries(
            "All-reduce bus bandwidth", "busbw = algbw x 2(n-1)/n, per scope and message size.",
            unit="Bps", thresholds=INFO, width=8,
            queries=[Query(sel("npu_probe_allreduce_bus_bandwidth_bytes_per_second"),
                           "{{scope}} {{size_bytes}} B")]))
        .with_panel(timeseries(
            "Probe runs by outcome", "Probe runs per interval by outcome.", unit="short",
            thresholds=INFO, width=8, bars=True, stack=True,
            queries=[Query(f"sum by (probe, outcome) (increase({sel('npuwatch_probe_runs_total')}"
                           "[$__rate_interval]))", "{{probe}} {{outcome}}")]))
        .with_panel(timeseries(
            "Probe duration and age", "Duration of the last run, and time since the last passing run.",
            unit="s", thresholds=INFO, width=8,
            queries=[Query(sel("npuwatch_probe_duration_seconds"), "{{probe}} duration"),
                     Query(f"time() - {sel('npuwatch_probe_last_success_timestamp_seconds')}",
                           "{{probe}} since last pass")]))
    )


def _check_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    """The levels of `npuwatch check` the agent runs (check.schedule): verdicts, results, measurements."""

    def verdict(name: str) -> str:
        matcher = 'verdict="' + name + '"'
        return f"sum by (level) ({sel('npu_check_verdict', matcher)})"

    # one series per level, valued as its Nagios exit code: 0 ok, 1 warn, 2 fail, 3 unknown
    code = " + ".join(f"{number} * {verdict(word)}" for word, number in EXIT_CODES["nagios"].items() if number)
    return (
        dash.with_row(dashboard_b.Row("npuwatch check"))
        .with_panel(state_timeline(
            "Level verdict", "The verdict of each level the agent runs (npuwatch check, check.schedule).",
            unit="short", thresholds=STATUS_STEPS, width=12, mapping=STATUS_MAPPING,
            queries=[Query(code, "{{level}}")]))
        .with_panel(table(
            "Levels", "Run time of each level's last run (budget: quick 10 s, medium 2 min, long 15 min) "
            "and how long ago it finished.",
            unit="s", thresholds=INFO, width=12, height=8,
            queries=[Query(sel("npu_check_duration_seconds")),
                     Query(f"time() - {sel('npu_check_last_run_timestamp_seconds')}")],
            columns=[Column("Run time", "s"), Column("Since last run", "s")]))
        .with_panel(table(
            "Check results", "Every check result of the last run of each level, failures first "
            "(absent: the check could not tell).",
            unit="short", thresholds=HEALTHY, width=8, height=10, sort_by="Result", sort_desc=False,
            queries=[Query(sel("npu_check_result"))],
            columns=[Column("Result", "short", HEALTHY, {"1": ("pass", "green"), "0": ("FAIL", "red")})]))
        .with_panel(timeseries(
            "Measured bandwidth", "HBM copy, host link, chip pairs, all-reduce and ascend-dmi bandwidths the "
            "checks measured.", unit="Bps", thresholds=INFO, width=8,
            queries=[Query(chip("npu_check_bandwidth_bytes_per_second"),
                           "{{level}} {{measure}} npu{{npu}}/{{chip}} {{peer}}")]))
        .with_panel(timeseries(
            "Measured GEMM rate", "GEMM and sustained GEMM rate the checks measured.", unit="flops",
            thresholds=INFO, width=8,
            queries=[Query(chip("npu_check_flops"), "{{level}} {{measure}} " + CHIP)]))
    )


def _host_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    memory = f"{sel('npuwatch_host_memory_used_bytes')} / {sel('npuwatch_host_memory_total_bytes')}"
    disk = f"{sel('npuwatch_host_disk_used_bytes')} / {sel('npuwatch_host_disk_total_bytes')}"
    busy = HOST_BUSY
    return (
        dash.with_row(dashboard_b.Row("Host"))
        .with_panel(timeseries("Host CPU", "Host CPU utilization.", unit="percentunit", thresholds=busy,
                               width=6, min_value=0, max_value=1,
                               queries=[Query(sel("npuwatch_host_cpu_utilization_ratio"), "cpu")]))
        .with_panel(timeseries("Host load (1m)", "1-minute load average.", unit="short", thresholds=INFO,
                               width=6, queries=[Query(sel("npuwatch_host_load1"), "load1")]))
        .with_panel(timeseries("Host memory used", "Host memory in use over capacity.",
                               unit="percentunit", thresholds=busy, width=6, min_value=0, max_value=1,
                               queries=[Query(memory, "memory")]))
        .with_panel(timeseries("Disk used", "Used over size per filesystem.", unit="percentunit",
                               thresholds=busy, width=6, min_value=0, max_value=1,
                               queries=[Query(disk, "{{mountpoint}}")]))
    )


def _agent_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    up = sel("npuwatch_collector_up")
    return (
        dash.with_row(dashboard_b.Row("Agent"))
        .with_panel(table(
            "Collectors", "Every npuwatch collector on this node: last result, run time, and age of "
            "its last success.",
            unit="short", thresholds=INFO, width=16, sort_by="Since last success",
            queries=[Query(up), Query(sel("npuwatch_collector_duration_seconds")),
                     Query(f"time() - {sel('npuwatch_collector_last_success_timestamp_seconds')}")],
            columns=[Column("Up", "short", HEALTHY, {"1": ("up", "green"), "0": ("failing", "red")}),
                     Column("Run time", "s"),
                     Column("Since last success", "s")]))
        .with_panel(table(
            "Agent version", "npuwatch and Python versions.", unit="short", thresholds=INFO, width=8,
            queries=[Query(sel("npuwatch_build_info"))], columns=[Column("Running", "short")]))
    )


def build() -> dashboard_b.Dashboard:
    dash = (
        new_dashboard(UID, "NPU node detail", "Every metric npuwatch exports for the chips of one node.")
        .with_variable(datasource_variable())
        .with_variable(job_variable())
        .with_variable(cluster_variable())
        .with_variable(label_variable("node", "Node", NODE_VALUES,
                                      multi=False, include_all=False))
        .with_variable(label_variable("npu", "NPU", f"label_values(npu_info{{{JOB},{CLUSTER},{NODE}}}, npu)"))
    )
    for add_row in (_verdict_row, _node_row, _health_row, _pods_row, _utilization_row, _memory_row, _thermal_row,
                    _errors_row, _processes_row, _probes_row, _check_row, _host_row, _agent_row):
        dash = add_row(dash)
    return dash
