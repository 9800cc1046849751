"""Shared panel, query and variable factories for the npuwatch dashboards.

Every factory takes a unit and a thresholds config, so no panel can be built
without them, and every panel and query points at the ``${datasource}``
variable instead of a datasource uid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dashboard_b
from grafana_foundation_sdk.builders import heatmap as heatmap_b
from grafana_foundation_sdk.builders import prometheus as prometheus_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import statetimeline as statetimeline_b
from grafana_foundation_sdk.builders import table as table_b
from grafana_foundation_sdk.builders import timeseries as timeseries_b
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dashboard_m
from grafana_foundation_sdk.models import heatmap as heatmap_m
from grafana_foundation_sdk.models import prometheus as prometheus_m

__all__ = [
    "CLUSTER",
    "DATASOURCE",
    "JOB",
    "NODE",
    "NODE_VALUES",
    "NPU",
    "Column",
    "Query",
    "cluster_variable",
    "datasource_variable",
    "heatmap_distribution",
    "heatmap_per_series",
    "job_variable",
    "label_variable",
    "new_dashboard",
    "node_detail_link",
    "sel",
    "stat",
    "state_timeline",
    "steps",
    "table",
    "timeseries",
]

DATASOURCE = dashboard_m.DataSourceRef(type_val="prometheus", uid="${datasource}")

# The scrape job(s) of the agents and the config's `cluster` label (`labels: {cluster: ...}`): both are
# dashboard variables, so one Grafana serves any job name and several clusters. A series without a
# `cluster` label matches "All" (``.*`` matches the empty value).
JOB = 'job=~"$job"'
CLUSTER = 'cluster=~"$cluster"'
NODE = 'node=~"$node"'
NPU = 'npu=~"$npu"'
NODE_VALUES = f"label_values(npu_chips{{{JOB},{CLUSTER}}}, node)"  # the $node variable's query

NODE_DETAIL_UID = "npuwatch-node-detail"

# Columns a table never needs: the scrape target is already identified by `node`.
_TABLE_HIDDEN = ("Time", "__name__", "job", "instance")


def sel(metric: str, *matchers: str) -> str:
    """``metric{job=~"$job",cluster=~"$cluster",node=~"$node",...}``: the selector every query starts from."""
    return f"{metric}{{{','.join((JOB, CLUSTER, NODE, *matchers))}}}"


@dataclass(frozen=True, slots=True)
class Query:
    """One PromQL target. ``instant`` queries feed tables and stats of "now"."""

    expr: str
    legend: str = ""
    instant: bool = False


def steps(base: str, *levels: tuple[float, str]) -> dashboard_b.ThresholdsConfig:
    """Absolute thresholds: ``base`` colour below the first level, then each (value, colour)."""
    items = [dashboard_m.Threshold(value=None, color=base)]
    items += [dashboard_m.Threshold(value=value, color=color) for value, color in levels]
    return dashboard_b.ThresholdsConfig().mode(dashboard_m.ThresholdsMode.ABSOLUTE).steps(items)


def _target(query: Query, ref_id: str, *, table_format: bool) -> prometheus_b.Dataquery:
    target = (
        prometheus_b.Dataquery()
        .expr(query.expr)
        .ref_id(ref_id)
        .datasource(DATASOURCE)
    )
    if query.legend:
        target = target.legend_format(query.legend)
    target = target.instant() if query.instant else target.range()
    if table_format:
        target = target.format(prometheus_m.PromQueryFormat.TABLE)
    return target


def _targets(panel: object, queries: Sequence[Query], *, table_format: bool = False) -> None:
    for index, query in enumerate(queries):
        panel.with_target(_target(query, chr(ord("A") + index), table_format=table_format))  # type: ignore[attr-defined]


def _value_mappings(mapping: dict[str, tuple[str, str]]) -> list[dashboard_m.ValueMapping]:
    options = {
        value: dashboard_m.ValueMappingResult(text=text, color=color, index=index)
        for index, (value, (text, color)) in enumerate(mapping.items())
    }
    return [dashboard_m.ValueMap(options=options)]


def _legend(*, table: bool = False) -> common_b.VizLegendOptions:
    legend = (
        common_b.VizLegendOptions()
        .show_legend(True)
        .placement(common_m.LegendPlacement.BOTTOM)
        .display_mode(common_m.LegendDisplayMode.TABLE if table else common_m.LegendDisplayMode.LIST)
    )
    if table:
        legend = legend.calcs(["lastNotNull", "max"]).sort_by("Last *").sort_desc(True)
    return legend


def _common(panel: Any, *, title: str, description: str, unit: str,
            thresholds: dashboard_b.ThresholdsConfig, width: int, height: int) -> Any:
    """What every panel sets: title, description, the datasource variable, unit, thresholds, size."""
    return (panel.title(title).description(description).datasource(DATASOURCE).unit(unit)
            .thresholds(thresholds).span(width).height(height))


def timeseries(
    title: str,
    description: str,
    *,
    unit: str,
    thresholds: dashboard_b.ThresholdsConfig,
    queries: Sequence[Query],
    width: int = 12,
    height: int = 8,
    bars: bool = False,
    stack: bool = False,
    min_value: float | None = None,
    max_value: float | None = None,
    legend_table: bool = False,
) -> timeseries_b.Panel:
    panel = (
        _common(timeseries_b.Panel(), title=title, description=description, unit=unit,
                thresholds=thresholds, width=width, height=height)
        .legend(_legend(table=legend_table))
        .tooltip(common_b.VizTooltipOptions().mode(common_m.TooltipDisplayMode.MULTI)
                 .sort(common_m.SortOrder.DESCENDING))
        .fill_opacity(10)
        .line_width(1)
        .span_nulls(False)
    )
    if bars:
        panel = panel.draw_style(common_m.GraphDrawStyle.BARS).fill_opacity(80)
    if stack:
        panel = panel.stacking(common_b.StackingConfig().mode(common_m.StackingMode.NORMAL))
    if min_value is not None:
        panel = panel.min(min_value)
    if max_value is not None:
        panel = panel.max(max_value)
    _targets(panel, queries)
    return panel


def stat(
    title: str,
    description: str,
    *,
    unit: str,
    thresholds: dashboard_b.ThresholdsConfig,
    queries: Sequence[Query],
    width: int = 6,
    height: int = 4,
    mapping: dict[str, tuple[str, str]] | None = None,
    series_colours: dict[str, str] | None = None,
) -> stat_b.Panel:
    """A big value per query (per series). ``mapping``: value -> (text, colour); ``series_colours``: a fixed
    colour per series name (its legend), for a count whose colour is what it counts, not how many."""
    panel = (
        _common(stat_b.Panel(), title=title, description=description, unit=unit,
                thresholds=thresholds, width=width, height=height)
        .color_mode(common_m.BigValueColorMode.BACKGROUND)
        .graph_mode(common_m.BigValueGraphMode.NONE if mapping or series_colours else common_m.BigValueGraphMode.AREA)
        .text_mode(common_m.BigValueTextMode.VALUE_AND_NAME if mapping or series_colours
                   else common_m.BigValueTextMode.AUTO)
        .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    )
    if mapping is not None:
        panel = panel.mappings(_value_mappings(mapping))
    for name, colour in (series_colours or {}).items():
        panel = panel.override_by_name(name, [dashboard_m.DynamicConfigValue(
            id_val="color", value={"mode": "fixed", "fixedColor": colour})])
    _targets(panel, queries)
    return panel


@dataclass(frozen=True, slots=True)
class Column:
    """How a table shows one query's value: header, unit, and optional colouring."""

    title: str
    unit: str
    thresholds: dashboard_b.ThresholdsConfig | None = None
    mapping: dict[str, tuple[str, str]] | None = None


def _label_overrides(panel: table_b.Panel, label_colours: dict[str, dict[str, tuple[str, str]]]) -> table_b.Panel:
    """Colour a label's column by its words (e.g. ``status``: "fail" -> ("FAIL", "red"))."""
    for label, mapping in label_colours.items():
        panel = panel.override_by_name(label, [
            dashboard_m.DynamicConfigValue(id_val="mappings", value=_value_mappings(mapping)),
            dashboard_m.DynamicConfigValue(id_val="custom.cellOptions", value={"type": "color-background"}),
        ])
    return panel


def _column_overrides(panel: table_b.Panel, columns: Sequence[Column]) -> table_b.Panel:
    # Grafana names the value field "Value" for one query and "Value #<refId>" for several.
    for index, column in enumerate(columns):
        field = "Value" if len(columns) == 1 else f"Value #{chr(ord('A') + index)}"
        properties = [
            dashboard_m.DynamicConfigValue(id_val="displayName", value=column.title),
            dashboard_m.DynamicConfigValue(id_val="unit", value=column.unit),
        ]
        if column.thresholds is not None:
            properties += [
                dashboard_m.DynamicConfigValue(id_val="thresholds", value=column.thresholds.build()),
                dashboard_m.DynamicConfigValue(id_val="custom.cellOptions",
                                               value={"type": "color-background"}),
            ]
        if column.mapping is not None:
            properties.append(dashboard_m.DynamicConfigValue(
                id_val="mappings", value=_value_mappings(column.mapping)))
        panel = panel.override_by_name(field, properties)
    return panel


def table(
    title: str,
    description: str,
    *,
    unit: str,
    thresholds: dashboard_b.ThresholdsConfig,
    queries: Sequence[Query],
    columns: Sequence[Column] = (),
    width: int = 12,
    height: int = 8,
    sort_by: str | None = None,
    sort_desc: bool = True,
    link_to_node: bool = False,
    label_colours: dict[str, dict[str, tuple[str, str]]] | None = None,
    hide_value: bool = False,
) -> table_b.Panel:
    """A table of instant queries merged on their labels: one row per series, one column per query.

    ``unit``/``thresholds`` are the panel defaults; ``columns`` (one per query)
    name each value column and may give it its own unit and colours. ``label_colours`` colours label columns by
    their words; ``hide_value`` drops the value column of a one-query table whose value says nothing (always 1).
    """
    if columns and len(columns) != len(queries):
        raise ValueError(f"{title}: {len(columns)} columns for {len(queries)} queries")
    if hide_value and (columns or len(queries) != 1):
        raise ValueError(f"{title}: only a one-query table without columns can hide its value")
    hidden = (*_TABLE_HIDDEN, "Value") if hide_value else _TABLE_HIDDEN
    panel = (
        _common(table_b.Panel(), title=title, description=description, unit=unit,
                thresholds=thresholds, width=width, height=height)
        .show_header(True)
        .with_transformation(dashboard_m.DataTransformerConfig(id_val="merge", options={}))
        .with_transformation(dashboard_m.DataTransformerConfig(
            id_val="organize",
            options={"excludeByName": dict.fromkeys(hidden, True)},
        ))
    )
    panel = _column_overrides(panel, columns)
    panel = _label_overrides(panel, label_colours or {})
    if sort_by is not None:
        panel = panel.sort_by([common_b.TableSortByFieldState().display_name(sort_by).desc(sort_desc)])
    if link_to_node:
        panel = panel.data_links([node_detail_link()])
    _targets(panel, [Query(q.expr, q.legend, instant=True) for q in queries], table_format=True)
    return panel


def state_timeline(
    title: str,
    description: str,
    *,
    unit: str,
    thresholds: dashboard_b.ThresholdsConfig,
    queries: Sequence[Query],
    mapping: dict[str, tuple[str, str]],
    width: int = 12,
    height: int = 8,
) -> statetimeline_b.Panel:
    """Per-series state over time; ``mapping`` is value -> (text, colour), e.g. "1" -> ("UP", "green")."""
    panel = (
        _common(statetimeline_b.Panel(), title=title, description=description, unit=unit,
                thresholds=thresholds, width=width, height=height)
        .mappings(_value_mappings(mapping))
        .color_scheme(dashboard_b.FieldColor().mode(dashboard_m.FieldColorModeId.THRESHOLDS))
        .show_value(common_m.VisibilityMode.NEVER)
        .merge_values(True)
        .row_height(0.9)
        .legend(_legend())
    )
    _targets(panel, queries)
    return panel


def _heatmap_colors() -> heatmap_b.HeatmapColorOptions:
    return (
        heatmap_b.HeatmapColorOptions()
        .mode(heatmap_m.HeatmapColorMode.SCHEME)
        .scheme("Spectral")
        .fill("dark-orange")
        .scale(heatmap_m.HeatmapColorScale.EXPONENTIAL)
        .exponent(0.5)
        .steps(64)
        .reverse(True)
    )


def heatmap_distribution(
    title: str,
    description: str,
    *,
    unit: str,
    thresholds: dashboard_b.ThresholdsConfig,
    queries: Sequence[Query],
    width: int = 8,
    height: int = 8,
) -> heatmap_b.Panel:
    """Grafana buckets the raw values itself: how many chips sit at each value, over time."""
    panel = (
        _common(heatmap_b.Panel(), title=title, description=description, unit=unit,
                thresholds=thresholds, width=width, height=height)
        .calculate(True)
        .color(_heatmap_colors())
        .y_axis(heatmap_b.YAxisConfig().unit(unit))
        .cell_values(heatmap_b.CellValues().unit("short"))
        .show_tooltip()
        .show_legend()
    )
    _targets(panel, queries)
    return panel


def heatmap_per_series(
    title: str,
    description: str,
    *,
    unit: str,
    thresholds: dashboard_b.ThresholdsConfig,
    queries: Sequence[Query],
    width: int = 24,
    height: int = 10,
    min_value: float = 0,
    max_value: float = 1,
) -> heatmap_b.Panel:
    """One heatmap row per series (e.g. per node and chip), coloured by its value."""
    colors = _heatmap_colors().scale(heatmap_m.HeatmapColorScale.LINEAR).min(min_value).max(max_value)
    panel = (
        _common(heatmap_b.Panel(), title=title, description=description, unit=unit,
                thresholds=thresholds, width=width, height=height)
        .calculate(False)
        .color(colors)
        .rows_frame(heatmap_b.RowsHeatmapOptions().layout(common_m.HeatmapCellLayout.UNKNOWN))
        # The default hides cells <= 1e-9; an idle chip (0) must still show as a cell.
        .filter_values(heatmap_b.FilterValueRange())
        .cell_values(heatmap_b.CellValues().unit(unit))
        .y_axis(heatmap_b.YAxisConfig().unit("short"))
        .show_tooltip()
        .show_legend()
    )
    _targets(panel, queries)
    return panel


def node_detail_link() -> dashboard_b.DashboardLink:
    """A data link from a row that carries a ``node`` label to the node detail dashboard."""
    return (
        dashboard_b.DashboardLink("Open node detail")
        .url(f"/d/{NODE_DETAIL_UID}?var-node=${{__data.fields.node}}&${{datasource:queryparam}}"
             "&${job:queryparam}&${cluster:queryparam}&${__url_time_range}")
        .type(dashboard_m.DashboardLinkType.LINK)
        .target_blank(False)
    )


def datasource_variable() -> dashboard_b.DatasourceVariable:
    return (
        dashboard_b.DatasourceVariable("datasource")
        .label("Data source")
        .type("prometheus")
        .regex("")
    )


def job_variable() -> dashboard_b.QueryVariable:
    """The agents' scrape job(s), from the jobs that export npuwatch_build_info; ``npuwatch`` until one is
    picked. "All" is every such job (Grafana writes the alternation), never every job of the Prometheus."""
    return (
        dashboard_b.QueryVariable("job")
        .label("Job")
        .query("label_values(npuwatch_build_info, job)")
        .datasource(DATASOURCE)
        .refresh(dashboard_m.VariableRefresh.ON_DASHBOARD_LOAD)
        .sort(dashboard_m.VariableSort.ALPHABETICAL_CASE_INSENSITIVE_ASC)
        .multi(True)
        .include_all(True)
        .current(dashboard_m.VariableOption(selected=True, text=["npuwatch"], value=["npuwatch"]))
    )


def cluster_variable() -> dashboard_b.QueryVariable:
    """The config's ``cluster`` label (``labels: {cluster: ...}``); "All" also matches agents without one."""
    return label_variable("cluster", "Cluster", f"label_values(npuwatch_build_info{{{JOB}}}, cluster)")


def label_variable(
    name: str,
    label: str,
    query: str,
    *,
    multi: bool = True,
    include_all: bool = True,
) -> dashboard_b.QueryVariable:
    """A query variable filled from ``label_values(...)``; "All" matches any value (``.*``)."""
    variable = (
        dashboard_b.QueryVariable(name)
        .label(label)
        .query(query)
        .datasource(DATASOURCE)
        .refresh(dashboard_m.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dashboard_m.VariableSort.ALPHABETICAL_CASE_INSENSITIVE_ASC)
        .multi(multi)
        .include_all(include_all)
    )
    if include_all:
        variable = variable.all_value(".*")
    return variable


def new_dashboard(uid: str, title: str, description: str) -> dashboard_b.Dashboard:
    """Settings shared by every npuwatch dashboard; links join the three by their common tag."""
    return (
        dashboard_b.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(["npuwatch", "npu", "ascend"])
        .editable()
        .timezone("browser")
        .time("now-6h", "now")
        .refresh("1m")
        .tooltip(dashboard_m.DashboardCursorSync.CROSSHAIR)
        .annotations([])
        .link(
            dashboard_b.DashboardLink("npuwatch dashboards")
            .type(dashboard_m.DashboardLinkType.DASHBOARDS)
            .tags(["npuwatch"])
            .as_dropdown(True)
            .include_vars(True)
            .keep_time(True)
        )
    )
