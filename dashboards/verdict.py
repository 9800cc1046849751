"""The agent's verdict on the dashboards: what it judged the node and its chips to be, and the active findings.

The agent judges every collection round and exports the result (docs/health-checks.md#the-agents-verdict):
``npu_node_status``, ``npu_chip_status`` and ``npu_fault_since_timestamp_seconds``. These panels show that
judgement and judge nothing: a status is coloured by a value mapping of its word (or of its Nagios exit code,
where a panel needs a number), never by comparing a reading.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import statetimeline as statetimeline_b
from grafana_foundation_sdk.builders import table as table_b

from agent.health.status import EXIT_CODES
from dashboards.panels import NPU, Column, Query, sel, stat, state_timeline, table
from dashboards.thresholds import INFO, STATUS_COLOURS, STATUS_MAPPING, STATUS_STEPS, status_text

__all__ = ["chip_status_table", "findings_table", "node_status_stat", "node_status_timeline", "nodes_by_status",
           "problem_nodes_table", "status_code"]

_STATUS_LABEL = {"status": status_text()}


def status_code(metric: str, *matchers: str) -> str:
    """``metric``'s series valued as the Nagios exit code of their ``status`` label (0 ok ... 3 unknown)."""
    codes = sorted(EXIT_CODES["nagios"].items(), key=lambda item: item[1])
    return " or ".join(f"({sel(metric, *matchers, _status_is(word))} * {code})" for word, code in codes)


def _status_is(word: str) -> str:
    return 'status="' + word + '"'


def node_status_stat(*, width: int = 8) -> stat_b.Panel:
    return stat(
        "Node verdict", "The node's status as `npuwatch check` prints it now, judged by the agent every round "
        "(npu_node_status), named by its lead cause.",
        unit="short", thresholds=STATUS_STEPS, mapping=STATUS_MAPPING, width=width, height=6,
        queries=[Query(status_code("npu_node_status"), "{{cause}} {{npu}}")])


def node_status_timeline(*, width: int = 16) -> statetimeline_b.Panel:
    return state_timeline(
        "Node verdict over time", "The agent's verdict of the node, round by round (npu_node_status).",
        unit="short", thresholds=STATUS_STEPS, mapping=STATUS_MAPPING, width=width, height=6,
        queries=[Query(f"max({status_code('npu_node_status')})", "verdict")])


def chip_status_table(*, width: int = 10) -> table_b.Panel:
    return table(
        "Chip verdicts", "Each chip's status and the cause that leads on it, as the agent judged it "
        "(npu_chip_status).",
        unit="short", thresholds=INFO, width=width, height=8, sort_by="status", sort_desc=False,
        queries=[Query(sel("npu_chip_status", NPU))], label_colours=_STATUS_LABEL, hide_value=True)


def findings_table(*, width: int = 14) -> table_b.Panel:
    return table(
        "Active findings", "What the agent finds wrong now, one row per finding: its fault kind (or the check, "
        "for a problem without one), fail or warn, and since when (npu_fault_since_timestamp_seconds). "
        "Node-wide findings have no npu.",
        unit="short", thresholds=INFO, width=width, height=8, sort_by="status", sort_desc=False,
        queries=[Query(f"{sel('npu_fault_since_timestamp_seconds')} * 1000")],
        columns=[Column("Since", "dateTimeAsIso")], label_colours=_STATUS_LABEL)


def nodes_by_status(*, width: int = 8) -> stat_b.Panel:
    return stat(
        "Nodes by verdict", "How many nodes the agents judge ok, warn, fail or unknown now (npu_node_status).",
        unit="short", thresholds=INFO, width=width, height=6, series_colours=STATUS_COLOURS,
        queries=[Query(f"count by (status) ({sel('npu_node_status')})", "{{status}}")])


def problem_nodes_table(*, width: int = 16) -> table_b.Panel:
    return table(
        "Nodes not ok", "Every node whose agent judges it warn, fail or unknown, with the lead cause and the NPU "
        "it leads on; click a row for the node.",
        unit="short", thresholds=INFO, width=width, height=6, sort_by="status", sort_desc=False, link_to_node=True,
        queries=[Query(sel("npu_node_status", 'status!="ok"'))], label_colours=_STATUS_LABEL, hide_value=True)
