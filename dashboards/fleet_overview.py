"""NPU fleet overview: is every chip there and healthy, and where to look first."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dashboard_b

from dashboards.panels import (
    JOB,
    NODE_VALUES,
    Column,
    Query,
    cluster_variable,
    datasource_variable,
    heatmap_distribution,
    heatmap_per_series,
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
    HEALTHY,
    INFO,
    PROBE_PASS_RATE,
    ZERO_IS_GOOD,
    chip_temperature,
    gemm_efficiency,
)
from dashboards.verdict import nodes_by_status, problem_nodes_table

__all__ = ["UID", "build"]

UID = "npuwatch-fleet-overview"

CHIP_LEGEND = "{{node}} npu{{npu}}/{{chip}}"
HEALTH_MAPPING = {"1": ("OK", "green"), "0": ("Unhealthy", "red")}


def _verdict_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Verdict"))
        .with_panel(nodes_by_status())
        .with_panel(problem_nodes_table())
    )


def _fleet_health_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    healthy = sel("npu_healthy")
    return (
        dash.with_row(dashboard_b.Row("Fleet health"))
        .with_panel(stat(
            "Chips healthy", "Chips whose npu-smi health is OK.",
            unit="short", thresholds=INFO, width=4,
            queries=[Query(f"count({healthy} == 1) or vector(0)")]))
        .with_panel(stat(
            "Chips unhealthy", "Chips whose npu-smi health is anything but OK.",
            unit="short", thresholds=ZERO_IS_GOOD, width=4,
            queries=[Query(f"count({healthy} == 0) or vector(0)")]))
        .with_panel(stat(
            "Chips missing",
            "Chips a node should have (npuwatch_expected_chips) but npu-smi does not list. "
            "Nodes with expected_chips = 0 (unknown) never count.",
            unit="short", thresholds=ZERO_IS_GOOD, width=4,
            queries=[Query(
                f"sum(clamp_min({sel('npuwatch_expected_chips')} - {sel('npu_chips')}, 0)) or vector(0)")]))
        .with_panel(stat(
            "Nodes reporting", "Nodes whose agent exports a chip count.",
            unit="short", thresholds=INFO, width=4,
            queries=[Query(f"count(count by (node) ({sel('npu_chips')})) or vector(0)")]))
        .with_panel(stat(
            "Agents down", "npuwatch scrape targets Prometheus cannot reach (up == 0), but those whose agent "
            "said in the last day that it is in another cluster than $cluster.",
            unit="short", thresholds=ZERO_IS_GOOD, width=4,
            # `up` has no cluster label (an agent's labels are on what it exports): a target drops out only
            # when it is known to be elsewhere, so one never seen still counts
            queries=[Query(f"count(up{{{JOB}}} == 0 unless on (job, instance) last_over_time("
                           f'npuwatch_build_info{{{JOB},cluster!~"$cluster"}}[1d])) or vector(0)')]))
        .with_panel(stat(
            "Collectors failing", "Collectors whose last run failed, across all nodes.",
            unit="short", thresholds=ZERO_IS_GOOD, width=4,
            queries=[Query(f"count({sel('npuwatch_collector_up')} == 0) or vector(0)")]))
    )


def _chips_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    healthy = sel("npu_healthy")
    util = sel("npu_aicore_utilization_ratio")
    hbm_ratio = f"{sel('npu_hbm_used_bytes')} / {sel('npu_hbm_total_bytes')}"
    return (
        dash.with_row(dashboard_b.Row("Chips by node"))
        .with_panel(state_timeline(
            "Chips that were unhealthy in the time range",
            "Only chips whose health dropped at least once in the range, so the panel stays "
            "readable for a large fleet.",
            unit="short", thresholds=HEALTHY, mapping=HEALTH_MAPPING, width=24, height=8,
            queries=[Query(
                f"{healthy} and on(node, npu, chip) (min_over_time({healthy}[$__range]) == 0)",
                CHIP_LEGEND)]))
        .with_panel(table(
            "Chips with a handling level",
            "Each chip whose error codes ask for action, with its most severe handling level "
            "(docs/fault-codes.md); click a row for the node.",
            unit="short", thresholds=ZERO_IS_GOOD, width=24, height=6, link_to_node=True,
            queries=[Query(sel("npu_fault_handling", 'handling!="NotHandleFault"'))],
            columns=[Column("Level", "short")]))
        .with_panel(heatmap_per_series(
            "AI Core utilization per node and chip",
            "One row per chip; filter $node for a large fleet.",
            unit="percentunit", thresholds=BUSY_CHIP, width=24, height=10,
            queries=[Query(f"avg by (node, npu, chip) ({util})", CHIP_LEGEND)]))
        .with_panel(table(
            "Chips now",
            "Health, utilization, HBM, temperature and power of every chip; click a row for the node.",
            unit="short", thresholds=INFO, width=24, height=10, sort_by="Temperature",
            link_to_node=True,
            queries=[Query(healthy), Query(util), Query(hbm_ratio),
                     Query(sel("npu_temperature_celsius")), Query(sel("npu_power_watts"))],
            columns=[
                Column("Health", "short", HEALTHY, HEALTH_MAPPING),
                Column("AI Core", "percentunit"),
                Column("HBM used", "percentunit", HBM_FILL),
                Column("Temperature", "celsius", chip_temperature()),
                Column("Power", "watt"),
            ]))
    )


def _distributions_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Distributions"))
        .with_panel(heatmap_distribution(
            "HBM use", "How many chips sit at each HBM fill level.",
            unit="percentunit", thresholds=HBM_FILL,
            queries=[Query(f"{sel('npu_hbm_used_bytes')} / {sel('npu_hbm_total_bytes')}")]))
        .with_panel(heatmap_distribution(
            "Power", "How many chips draw each power level.",
            unit="watt", thresholds=INFO,
            queries=[Query(sel("npu_power_watts"))]))
        .with_panel(heatmap_distribution(
            "Temperature", "How many chips run at each temperature.",
            unit="celsius", thresholds=chip_temperature(),
            queries=[Query(sel("npu_temperature_celsius"))]))
    )


def _hccl_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    errors = sel("npu_hccl_errors_total")
    return (
        dash.with_row(dashboard_b.Row("HCCL errors"))
        .with_panel(timeseries(
            "HCCL errors by category", "New HCCL/CANN log errors per interval, all selected nodes.",
            unit="short", thresholds=ZERO_IS_GOOD, width=16, bars=True, stack=True,
            queries=[Query(f"sum by (category) (increase({errors}[$__rate_interval]))", "{{category}}")]))
        .with_panel(table(
            "Nodes with the most HCCL errors", "HCCL errors per node over the time range.",
            unit="short", thresholds=ZERO_IS_GOOD, width=8, sort_by="Errors", link_to_node=True,
            queries=[Query(f"topk(10, sum by (node) (increase({errors}[$__range]))) > 0")],
            columns=[Column("Errors", "short", ZERO_IS_GOOD)]))
    )


def _probes_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    passed = sel("npuwatch_probe_runs_total", 'outcome="pass"')
    attempted = sel("npuwatch_probe_runs_total", 'outcome!="skipped"')
    pass_rate = (
        f"sum by (probe) (increase({passed}[$__range]))"
        f" / sum by (probe) (increase({attempted}[$__range]))"
    )
    busbw = sel("npu_probe_allreduce_bus_bandwidth_bytes_per_second", 'scope="node"')
    return (
        dash.with_row(dashboard_b.Row("Probes"))
        .with_panel(stat(
            "Probe pass rate", "Passing runs over runs that were not skipped, per probe, in the range.",
            unit="percentunit", thresholds=PROBE_PASS_RATE,
            width=6, height=8, queries=[Query(pass_rate, "{{probe}}")]))
        .with_panel(table(
            "Slowest chips (GEMM efficiency)", "The 10 chips furthest below their model's GEMM peak.",
            unit="percentunit", thresholds=gemm_efficiency(),
            width=9, height=8, sort_by="Efficiency", sort_desc=False, link_to_node=True,
            queries=[Query(f"bottomk(10, {sel('npu_probe_gemm_efficiency_ratio')})")],
            columns=[Column("Efficiency", "percentunit", gemm_efficiency())]))
        .with_panel(table(
            "Slowest nodes (all-reduce bus bandwidth)",
            "The 10 nodes with the lowest intra-node all-reduce bus bandwidth (best message size).",
            unit="Bps", thresholds=INFO, width=9, height=8, sort_by="Bus bandwidth", sort_desc=False,
            link_to_node=True,
            queries=[Query(f"bottomk(10, max by (node) ({busbw}))")],
            columns=[Column("Bus bandwidth", "Bps")]))
    )


def _agent_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    up = sel("npuwatch_collector_up")
    last = sel("npuwatch_collector_last_success_timestamp_seconds")
    return (
        dash.with_row(dashboard_b.Row("Agent"))
        .with_panel(table(
            "Collectors failing", "Collectors whose last run failed, and how long ago one last succeeded.",
            unit="short", thresholds=INFO, width=12, sort_by="Since last success", link_to_node=True,
            queries=[Query(f"{up} == 0"),
                     Query(f"(time() - {last}) and on(node, collector) ({up} == 0)")],
            columns=[Column("Up", "short", HEALTHY, {"1": ("up", "green"), "0": ("failing", "red")}),
                     Column("Since last success", "s")]))
        .with_panel(table(
            "Collector errors by reason", "Failures per collector and reason over the time range.",
            unit="short", thresholds=ZERO_IS_GOOD, width=12, sort_by="Errors", link_to_node=True,
            queries=[Query("sum by (node, collector, reason) "
                           f"(increase({sel('npuwatch_collector_errors_total')}[$__range])) > 0")],
            columns=[Column("Errors", "short", ZERO_IS_GOOD)]))
    )


def build() -> dashboard_b.Dashboard:
    dash = (
        new_dashboard(UID, "NPU fleet overview",
                      "Health, utilization and errors of every Ascend NPU chip that npuwatch reports.")
        .with_variable(datasource_variable())
        .with_variable(job_variable())
        .with_variable(cluster_variable())
        .with_variable(label_variable("node", "Node", NODE_VALUES))
    )
    for add_row in (_verdict_row, _fleet_health_row, _chips_row, _distributions_row, _hccl_row, _probes_row,
                    _agent_row):
        dash = add_row(dash)
    return dash
