"""Interconnect and HCCL: RoCE ports, optics, all-reduce bandwidth and HCCL error triage."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dashboard_b

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
    HEALTHY,
    INFO,
    ZERO_IS_GOOD,
    hccl_error_age,
    link_downs,
    optical_rx_power,
    optical_temperature,
)

__all__ = ["UID", "build"]

UID = "npuwatch-interconnect-hccl"

PORT = "{{node}} npu{{npu}}"
LANE = "{{node}} npu{{npu}} lane{{lane}}"


def port(metric: str, *matchers: str) -> str:
    """Selector for a per-RoCE-port metric on the chosen nodes and NPUs."""
    return sel(metric, NPU, *matchers)


def _links_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    transitions = port("npu_roce_link_up_transitions_total")
    flaps_in_range = f"increase({transitions}[$__range])"
    return (
        dash.with_row(dashboard_b.Row("RoCE links"))
        .with_panel(stat("Ports down", "RoCE ports whose link is not UP.", unit="short",
                         thresholds=ZERO_IS_GOOD, width=6,
                         queries=[Query(f"count({port('npu_roce_link_up')} == 0) or vector(0)")]))
        .with_panel(stat("Ports failing net health", "Ports where hccn_tool -net_health is not Success.",
                         unit="short", thresholds=ZERO_IS_GOOD, width=6,
                         queries=[Query(f"count({port('npu_roce_net_healthy')} == 0) or vector(0)")]))
        .with_panel(stat("Optics losing signal", "Optical modules flagging LOS or LoL.", unit="short",
                         thresholds=ZERO_IS_GOOD, width=6,
                         queries=[Query(f"count({port('npu_optical_signal_lost')} == 1) or vector(0)")]))
        .with_panel(stat("Most flaps on one port", "The most link-up transitions the driver counted on one port "
                         "in the range (the agent counts link-downs in its flap window: Verdict on the node "
                         "detail).",
                         unit="short", thresholds=link_downs(), width=6,
                         queries=[Query(f"max({flaps_in_range}) or vector(0)")]))
        .with_panel(state_timeline(
            "RoCE link state", "Link state per port.", unit="short", thresholds=HEALTHY, width=12,
            height=10, mapping={"1": ("UP", "green"), "0": ("DOWN", "red")},
            queries=[Query(port("npu_roce_link_up"), PORT)]))
        .with_panel(state_timeline(
            "RoCE net health", "hccn_tool -net_health per port (a failing check means the port "
            "cannot reach its configured detect IP).",
            unit="short", thresholds=HEALTHY, width=12, height=10,
            mapping={"1": ("Success", "green"), "0": ("failing", "red")},
            queries=[Query(port("npu_roce_net_healthy"), PORT)]))
        .with_panel(timeseries(
            "Link flaps", "Link-up transitions per interval; any flap during a job can time out HCCL.",
            unit="short", thresholds=link_downs(), width=12, bars=True,
            queries=[Query(f"increase({transitions}[$__rate_interval]) > 0", PORT)]))
        .with_panel(table(
            "Flappiest ports", "Ports with the most link flaps in the range, and the age of their "
            "newest link change record.",
            unit="short", thresholds=INFO, width=12, sort_by="Flaps", link_to_node=True,
            queries=[
                Query(f"topk(10, {flaps_in_range}) > 0"),
                Query(f"(time() - {port('npu_roce_link_last_change_timestamp_seconds')}) "
                      f"and on(node, npu) (topk(10, {flaps_in_range}) > 0)"),
            ],
            columns=[Column("Flaps", "short", link_downs()),
                     Column("Since last change", "s")]))
    )


def _optics_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    return (
        dash.with_row(dashboard_b.Row("Optics"))
        .with_panel(timeseries("Optical TX power", "Transmit power per lane.", unit="watt",
                               thresholds=INFO, width=8,
                               queries=[Query(port("npu_optical_tx_power_watts"), LANE)]))
        .with_panel(timeseries("Optical RX power", "Receive power per lane; a falling lane points at "
                               "a dirty or failing fibre or module.",
                               unit="watt", thresholds=optical_rx_power(), width=8,
                               queries=[Query(port("npu_optical_rx_power_watts"), LANE)]))
        .with_panel(timeseries("Optical module temperature", "Module temperature per port.",
                               unit="celsius", thresholds=optical_temperature(),
                               width=8, queries=[Query(port("npu_optical_temperature_celsius"), PORT)]))
        .with_panel(state_timeline(
            "Optical signal", "LOS/LoL flags per port.", unit="short", thresholds=ZERO_IS_GOOD,
            width=12, mapping={"0": ("ok", "green"), "1": ("LOS/LoL", "red")},
            queries=[Query(port("npu_optical_signal_lost"), PORT)]))
        .with_panel(timeseries("Port speed", "Negotiated RoCE port speed.", unit="Bps", thresholds=INFO,
                               width=12,
                               queries=[Query(port("npu_roce_link_speed_bytes_per_second"), PORT)]))
    )


def _packet_errors_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    errors = port("npu_roce_errors_total")
    return (
        dash.with_row(dashboard_b.Row("Packet errors"))
        .with_panel(timeseries(
            "RoCE error counters", "Rate of each non-zero hccn_tool -stat error/retry counter.",
            unit="cps", thresholds=ZERO_IS_GOOD, width=16, legend_table=True,
            queries=[Query(f"sum by (node, npu, counter) (rate({errors}[$__rate_interval])) > 0",
                           f"{PORT} {{{{counter}}}}")]))
        .with_panel(table(
            "Top error counters", "Counters that grew most in the range.", unit="short",
            thresholds=ZERO_IS_GOOD, width=8, sort_by="Increase", link_to_node=True,
            queries=[Query(f"topk(15, sum by (node, npu, counter) (increase({errors}[$__range]))) > 0")],
            columns=[Column("Increase", "short", ZERO_IS_GOOD)]))
    )


def _allreduce_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    busbw = sel("npu_probe_allreduce_bus_bandwidth_bytes_per_second")
    algbw = sel("npu_probe_allreduce_algo_bandwidth_bytes_per_second")
    return (
        dash.with_row(dashboard_b.Row("All-reduce probe"))
        .with_panel(timeseries(
            "All-reduce bus bandwidth per node", "Best busbw over message sizes, per node and scope; "
            "a node below its peers drags every collective it joins.",
            unit="Bps", thresholds=INFO, width=12,
            queries=[Query(f"max by (node, scope) ({busbw})", "{{node}} {{scope}}")]))
        .with_panel(timeseries(
            "All-reduce algorithm bandwidth per node", "Best algbw (bytes / time) per node and scope.",
            unit="Bps", thresholds=INFO, width=12,
            queries=[Query(f"max by (node, scope) ({algbw})", "{{node}} {{scope}}")]))
        .with_panel(state_timeline(
            "All-reduce result check", "Whether the all-reduce sums were correct.", unit="short",
            thresholds=HEALTHY, width=12, mapping={"1": ("correct", "green"), "0": ("WRONG", "red")},
            queries=[Query(sel("npu_probe_allreduce_correct"), "{{node}} {{scope}}")]))
        .with_panel(timeseries(
            "Probe timeouts", "Probe runs killed at the deadline, by stage (connect = rendezvous).",
            unit="short", thresholds=ZERO_IS_GOOD, width=12, bars=True,
            queries=[Query("sum by (node, probe, stage) "
                           f"(increase({sel('npuwatch_probe_timeouts_total')}[$__rate_interval])) > 0",
                           "{{node}} {{probe}} {{stage}}")]))
    )


def _culprit_queries() -> list[Query]:
    errors = f"sum by (node) (increase({sel('npu_hccl_errors_total')}[$__range])) > 0"
    only_erroring = f"and on(node) ({errors})"
    return [
        Query(errors),
        Query(f"sum by (node) (increase({port('npu_roce_link_up_transitions_total')}[$__range])) "
              f"{only_erroring}"),
        Query(f"sum by (node) (1 - {port('npu_roce_link_up')}) {only_erroring}"),
        Query(f"sum by (node) (increase({port('npu_roce_errors_total')}[$__range])) {only_erroring}"),
        Query(f"sum by (node) (1 - {sel('npu_healthy')}) {only_erroring}"),
        Query(f"sum by (node) (1 - {sel('npu_hccs_healthy')}) {only_erroring}"),
    ]


def _incident_queries() -> list[Query]:
    """One row per communicator with an incident in the agents' window, and its suspected culprit.

    The culprit column is the core of HCCLCulpritSuspected (alerts/triage.rules.yml) in plain
    PromQL: the newest owner of a rank that peers' logs blame and that did not report the failure.
    """
    timeouts = sel("npu_hccl_rank_timeout_timestamp_seconds")
    reporting = f"count by (comm) ({timeouts})"
    size = f"max by (comm) ({sel('npu_hccl_comm_ranks')})"
    owner = f"topk by (comm, rank) (1, {sel('npu_hccl_rank_last_seen_timestamp_seconds')})"
    blamed = sel("npu_hccl_peer_blamed_timestamp_seconds", 'rank!=""')
    return [
        Query(f"{size} and on(comm) {reporting}"),
        Query(reporting),
        Query(f"{size} - on(comm) {reporting}"),
        Query(f"min by (comm) ({timeouts}) * 1000"),
        Query(f"count by (comm, node, npu) (({owner} unless on(comm, rank) {timeouts}) "
              f"* on(comm, rank) group_right(node, npu) {blamed})"),
    ]


def _hccl_row(dash: dashboard_b.Dashboard) -> dashboard_b.Dashboard:
    errors = sel("npu_hccl_errors_total")
    last_error = sel("npu_hccl_last_error_timestamp_seconds")
    return (
        dash.with_row(dashboard_b.Row("HCCL errors"))
        .with_panel(timeseries(
            "HCCL errors timeline", "New HCCL/CANN log errors per interval, by node and category.",
            unit="short", thresholds=ZERO_IS_GOOD, width=24, bars=True, stack=True,
            queries=[Query(f"sum by (node, category) (increase({errors}[$__rate_interval])) > 0",
                           "{{node}} {{category}}")]))
        .with_panel(table(
            "HCCL errors by code", "Errors per node, category and code in the range.",
            unit="short", thresholds=ZERO_IS_GOOD, width=12, sort_by="Errors", link_to_node=True,
            queries=[Query(f"topk(20, sum by (node, category, code) (increase({errors}[$__range]))) > 0")],
            columns=[Column("Errors", "short", ZERO_IS_GOOD)]))
        .with_panel(table(
            "Newest HCCL error per category", "When each node last logged each category of error.",
            unit="short", thresholds=INFO, width=12, sort_by="Since last error", sort_desc=False,
            link_to_node=True,
            queries=[Query(f"time() - {last_error}"), Query(f"{last_error} * 1000")],
            columns=[Column("Since last error", "s", hccl_error_age()),
                     Column("Last error at", "dateTimeAsIso")]))
        .with_panel(table(
            "Culprit hints",
            "Nodes with HCCL errors in the range, next to the local faults that usually cause them. "
            "A node whose errors come with RoCE flaps, a port down, RoCE error counters, an unhealthy "
            "chip or HCCS is the likely culprit; a node with errors and none of these is usually a "
            "victim waiting on a peer.",
            unit="short", thresholds=ZERO_IS_GOOD, width=24, height=10, sort_by="HCCL errors",
            link_to_node=True,
            queries=_culprit_queries(),
            columns=[
                Column("HCCL errors", "short", ZERO_IS_GOOD),
                Column("RoCE link flaps", "short", ZERO_IS_GOOD),
                Column("RoCE ports down", "short", ZERO_IS_GOOD),
                Column("RoCE error counters", "short", ZERO_IS_GOOD),
                Column("Unhealthy chips", "short", ZERO_IS_GOOD),
                Column("HCCS unhealthy chips", "short", ZERO_IS_GOOD),
            ]))
        .with_panel(table(
            "HCCL incidents and culprits",
            "Communicators whose ranks reported a failed collective within the agents' incident window "
            "(collectors.hccl_logs.incident_window, 1h): ranks, how many reported, how many stayed silent, "
            "when the first report came; and the suspected culprit, the node and NPU of a silent rank that "
            "the reporting ranks' logs blame (heartbeat lost or stuck, waited on, missing), with how many "
            "blame series name it. HCCLCulpritSuspected pages on that node; `npuwatch triage --prometheus` "
            "ranks every suspect with its evidence.",
            unit="short", thresholds=INFO, width=24, height=8, sort_by="First report", link_to_node=True,
            queries=_incident_queries(),
            columns=[
                Column("Ranks", "short"),
                Column("Reporting ranks", "short"),
                Column("Silent ranks", "short", ZERO_IS_GOOD),
                Column("First report", "dateTimeAsIso"),
                Column("Blames on culprit", "short", ZERO_IS_GOOD),
            ]))
    )


def build() -> dashboard_b.Dashboard:
    dash = (
        new_dashboard(UID, "NPU interconnect and HCCL",
                      "RoCE ports, optics, all-reduce bandwidth and HCCL errors across the fleet.")
        .with_variable(datasource_variable())
        .with_variable(job_variable())
        .with_variable(cluster_variable())
        .with_variable(label_variable("node", "Node", NODE_VALUES))
        .with_variable(label_variable("npu", "NPU", f"label_values(npu_roce_link_up{{{JOB},{CLUSTER},{NODE}}}, npu)"))
    )
    for add_row in (_links_row, _optics_row, _packet_errors_row, _allreduce_row, _hccl_row):
        dash = add_row(dash)
    return dash
