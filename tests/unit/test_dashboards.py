"""Static checks of the committed Grafana dashboards (dashboards/json/*.json).

The regeneration tests need grafana-foundation-sdk (the `dashboards` extra);
the others read only the committed JSON.
"""

from __future__ import annotations

import json
import re
from itertools import combinations
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from collectors.catalogue import CATALOGUE
from dashboards.queries import (
    iter_panel_queries,
    iter_panels,
    iter_variable_queries,
    metric_names,
    selector_labels,
    substitute,
)
from tests.support.paths import REPO

JSON_DIR = REPO / "dashboards" / "json"
SCHEMA = REPO / "dashboards" / "schema" / "grafana-dashboard.schema.json"

EXPECTED_UIDS = {
    "npu-fleet-overview.json": "npuwatch-fleet-overview",
    "npu-node-detail.json": "npuwatch-node-detail",
    "npu-interconnect-hccl.json": "npuwatch-interconnect-hccl",
}
# Series Prometheus itself writes for every scrape target (the "Agents down" stat reads `up`).
PROMETHEUS_SERIES = {"up"}
# Labels every npuwatch series carries besides its catalogue labels: scrape labels + the config's `node`
# and `cluster` (docs/configuration.md, `labels`).
TARGET_LABELS = ("job", "instance", "node", "cluster")
DATASOURCE_VARIABLE = "${datasource}"


def _load(name: str) -> dict[str, Any]:
    return json.loads((JSON_DIR / name).read_text(encoding="utf-8"))


DASHBOARDS = {name: _load(name) for name in EXPECTED_UIDS}
NAMES = sorted(DASHBOARDS)


def _viz_panels(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in iter_panels(document) if p["type"] != "row"]


# --- (1) the committed JSON is what the code generates ------------------------------------------


def test_regenerated_json_is_byte_equal_to_committed(tmp_path: Path) -> None:
    from dashboards.generate import write_all

    written = write_all(tmp_path)
    assert sorted(p.name for p in written) == sorted(EXPECTED_UIDS)
    for path in written:
        committed = (JSON_DIR / path.name).read_bytes()
        assert path.read_bytes() == committed, f"{path.name} is stale: run python -m dashboards.generate"
        assert committed.endswith(b"}\n")


def test_generation_is_deterministic() -> None:
    from dashboards.generate import build_all
    from dashboards.render import dumps

    first = {name: dumps(doc) for name, doc in build_all().items()}
    second = {name: dumps(doc) for name, doc in build_all().items()}
    assert first == second


def test_check_flag_reports_a_stale_file(tmp_path: Path) -> None:
    from dashboards.generate import main, write_all

    write_all(tmp_path)
    assert main(["--check", "--out", str(tmp_path)]) == 0
    stale = tmp_path / "npu-node-detail.json"
    stale.write_text(stale.read_text(encoding="utf-8").replace("HBM used", "HBM usage"), encoding="utf-8")
    assert main(["--check", "--out", str(tmp_path)]) == 1


# --- (2) schema -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def validator() -> jsonschema.protocols.Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@pytest.mark.parametrize("name", NAMES)
def test_dashboard_matches_schema(name: str, validator: jsonschema.protocols.Validator) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(DASHBOARDS[name])]
    assert errors == []


def test_schema_rejects_a_broken_dashboard(validator: jsonschema.protocols.Validator) -> None:
    broken = json.loads(json.dumps(DASHBOARDS["npu-node-detail.json"]))
    panel = _viz_panels(broken)[0]
    panel["gridPos"]["w"] = 25
    del panel["targets"]
    broken["templating"]["list"][0]["type"] = "datasourze"
    messages = " | ".join(e.message for e in validator.iter_errors(broken))
    assert "25 is greater than the maximum of 24" in messages
    assert "'targets' is a required property" in messages
    assert "datasourze" in messages


# --- (3) every metric and label a query reads exists ------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_panel_queries_use_catalogue_metrics(name: str) -> None:
    unknown = {}
    for title, expr in iter_panel_queries(DASHBOARDS[name]):
        metrics = metric_names(expr)
        assert metrics, f"{title}: no metric found in {expr!r}"
        missing = metrics - set(CATALOGUE) - PROMETHEUS_SERIES
        if missing:
            unknown[title] = sorted(missing)
    assert unknown == {}


@pytest.mark.parametrize("name", NAMES)
def test_label_matchers_use_the_metrics_labels(name: str) -> None:
    wrong = []
    for title, expr in iter_panel_queries(DASHBOARDS[name]):
        for metric, label in selector_labels(expr):
            allowed = ("job", "instance") if metric in PROMETHEUS_SERIES else (
                *CATALOGUE[metric].labels, *TARGET_LABELS)
            if label not in allowed:
                wrong.append(f"{title}: {metric} has no label {label}")
    assert wrong == []


@pytest.mark.parametrize("name", NAMES)
def test_variable_queries_use_catalogue_metrics_and_labels(name: str) -> None:
    variables = list(iter_variable_queries(DASHBOARDS[name]))
    assert variables
    for variable, query in variables:
        assert query.startswith("label_values("), query
        metric, label = query.removeprefix("label_values(").removesuffix(")").rsplit(",", 1)
        metric_name = metric.split("{", 1)[0]
        assert metric_name in CATALOGUE, query
        assert label.strip() == variable
        assert variable in (*CATALOGUE[metric_name].labels, *TARGET_LABELS), query


def test_metric_extraction_drops_functions_labels_and_variables() -> None:
    expr = ('sum by (node, npu) (increase(npu_hccs_errors_total{job="npuwatch",node=~"$node"}'
            '[$__rate_interval])) / on(node) group_left(model) max by (node) (npu_info) > bool 0'
            ' or vector(0) and topk(3, npu:custom_rule:ratio offset 5m)')
    assert metric_names(expr) == {"npu_hccs_errors_total", "npu_info", "npu:custom_rule:ratio"}
    assert selector_labels(expr) == {("npu_hccs_errors_total", "job"), ("npu_hccs_errors_total", "node")}


# --- (4) datasource, unit, thresholds, grid -------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_datasource_is_the_variable_everywhere(name: str) -> None:
    document = DASHBOARDS[name]
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"]["uid"] == DATASOURCE_VARIABLE
    for panel in _viz_panels(document):
        assert panel["datasource"] == {"type": "prometheus", "uid": DATASOURCE_VARIABLE}, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == DATASOURCE_VARIABLE, panel["title"]
    # No uid other than the variable anywhere in the document.
    assert '"uid": "${datasource}"' in json.dumps(document)
    for line in (JSON_DIR / name).read_text(encoding="utf-8").splitlines():
        if '"uid":' in line and "${datasource}" not in line:
            assert EXPECTED_UIDS[name] in line, f"hard-coded uid: {line.strip()}"


@pytest.mark.parametrize("name", NAMES)
def test_every_panel_has_unit_thresholds_and_grid_position(name: str) -> None:
    for panel in _viz_panels(DASHBOARDS[name]):
        defaults = panel["fieldConfig"]["defaults"]
        assert defaults.get("unit"), f"{panel['title']}: no unit"
        steps = defaults["thresholds"]["steps"]
        assert steps and steps[0]["value"] is None, f"{panel['title']}: thresholds need a base step"
        assert [s["value"] for s in steps[1:]] == sorted(s["value"] for s in steps[1:]), panel["title"]
        grid = panel["gridPos"]
        assert grid["w"] >= 1 and grid["h"] >= 1 and grid["x"] + grid["w"] <= 24, panel["title"]


@pytest.mark.parametrize("name", NAMES)
def test_panels_do_not_overlap(name: str) -> None:
    boxes = [(p["title"], p["gridPos"]) for p in DASHBOARDS[name]["panels"]]
    overlapping = [
        (a, b) for (a, ga), (b, gb) in combinations(boxes, 2)
        if ga["x"] < gb["x"] + gb["w"] and gb["x"] < ga["x"] + ga["w"]
        and ga["y"] < gb["y"] + gb["h"] and gb["y"] < ga["y"] + ga["h"]
    ]
    assert overlapping == []


@pytest.mark.parametrize("name", NAMES)
def test_panels_are_grouped_in_rows(name: str) -> None:
    panels = DASHBOARDS[name]["panels"]
    assert panels[0]["type"] == "row"
    assert sum(p["type"] == "row" for p in panels) >= 3


@pytest.mark.parametrize("name", NAMES)
def test_queries_select_the_chosen_job_cluster_and_nodes(name: str) -> None:
    for title, expr in iter_panel_queries(DASHBOARDS[name]):
        for metric, body in _selectors(expr):
            assert 'job=~"$job"' in body and "npuwatch" not in body, f"{title}: {metric} without the $job filter"
            if metric in PROMETHEUS_SERIES or 'cluster!~"$cluster"' in body:
                continue  # `up` has no cluster or node label; an exclusion (`unless`) selects the others
            assert 'cluster=~"$cluster"' in body, f"{title}: {metric} without the $cluster filter"
            assert 'node=~"$node"' in body, f"{title}: {metric} without the $node filter"


@pytest.mark.parametrize("name", NAMES)
def test_every_dashboard_picks_the_job_and_the_cluster(name: str) -> None:
    variables = {v["name"]: v for v in DASHBOARDS[name]["templating"]["list"]}
    assert list(variables)[:4] == ["datasource", "job", "cluster", "node"]
    job, cluster = variables["job"], variables["cluster"]
    assert job["query"] == "label_values(npuwatch_build_info, job)" and job["current"]["value"] == ["npuwatch"]
    assert job["includeAll"] and "allValue" not in job  # "All" is the jobs listed, not every job there is
    assert cluster["query"] == 'label_values(npuwatch_build_info{job=~"$job"}, cluster)'
    assert cluster["allValue"] == ".*"  # matches the agents with no cluster label too
    for variable in variables.values():
        if variable["name"] not in ("datasource", "job"):
            assert 'job=~"$job"' in variable["query"], variable["name"]
        if variable["name"] not in ("datasource", "job", "cluster"):
            assert 'cluster=~"$cluster"' in variable["query"], variable["name"]


def _selectors(expr: str) -> list[tuple[str, str]]:
    found = re.findall(r"([a-zA-Z_:][\w:]*)\{([^}]*)\}", expr)
    names = metric_names(expr)
    assert {m for m, _ in found} == names, f"bare metric (no selector) in {expr!r}"
    return found


@pytest.mark.parametrize("name", NAMES)
def test_table_column_overrides_match_their_queries(name: str) -> None:
    for panel in _viz_panels(DASHBOARDS[name]):
        if panel["type"] != "table":
            continue
        assert all(t.get("instant") and t.get("format") == "table" for t in panel["targets"])
        names = {o["matcher"]["options"] for o in panel["fieldConfig"]["overrides"]}
        refs = [t["refId"] for t in panel["targets"]]
        expected = {"Value"} if len(refs) == 1 else {f"Value #{ref}" for ref in refs}
        hidden = {name for transformation in panel["transformations"]
                  for name in transformation["options"].get("excludeByName", {})}
        values = {name for name in names if name.startswith("Value")}
        assert values == expected - hidden, panel["title"]
        labels = {label for target in panel["targets"] for metric in metric_names(target["expr"])
                  for label in CATALOGUE[metric].labels}
        assert names - values <= labels, f"{panel['title']}: an override of a column no query has"


def test_the_dashboards_cover_the_required_views() -> None:
    types = {name: {p["type"] for p in _viz_panels(doc)} for name, doc in DASHBOARDS.items()}
    assert {"stat", "table", "heatmap", "state-timeline", "timeseries"} <= types["npu-fleet-overview.json"]
    assert {"timeseries", "state-timeline", "table"} <= types["npu-interconnect-hccl.json"]
    node_vars = {v["name"] for v in DASHBOARDS["npu-node-detail.json"]["templating"]["list"]}
    assert {"datasource", "node", "npu"} <= node_vars
    used = set().union(*(metric_names(e) for doc in DASHBOARDS.values() for _, e in iter_panel_queries(doc)))
    for metric in ("npu_hbm_ecc_current_errors", "npu_hccl_errors_total",
                   "npu_hccl_last_error_timestamp_seconds", "npu_roce_errors_total",
                   "npu_probe_allreduce_bus_bandwidth_bytes_per_second", "npu_optical_rx_power_watts",
                   "npuwatch_collector_up", "npu_probe_gemm_efficiency_ratio"):
        assert metric in used


# --- (5) uids and ids -------------------------------------------------------------------------------


def test_dashboard_uids_are_stable_and_unique() -> None:
    uids = {name: doc["uid"] for name, doc in DASHBOARDS.items()}
    assert uids == EXPECTED_UIDS
    assert len(set(uids.values())) == len(uids)


@pytest.mark.parametrize("name", NAMES)
def test_panel_ids_are_unique_and_in_layout_order(name: str) -> None:
    ids = [p["id"] for p in iter_panels(DASHBOARDS[name])]
    assert ids == list(range(1, len(ids) + 1))


# --- queries.substitute, as the end-to-end test uses it -------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_every_query_substitutes_to_plain_promql(name: str) -> None:
    for title, expr in iter_panel_queries(DASHBOARDS[name]):
        promql = substitute(expr, {"node": "demo"})
        assert "$" not in promql, title
        assert promql.count("(") == promql.count(")"), title


def test_substitute_handles_every_variable_form() -> None:
    expr = 'rate(x{node=~"$node",npu=~"${npu}",a="${node:regex}"}[$__rate_interval]) * $__range_s'
    assert substitute(expr, {"node": "n1", "npu": "0|1"}) == (
        'rate(x{node=~"n1",npu=~"0|1",a="n1"}[1m]) * 3600')
    assert substitute("increase(x[$__range])") == "increase(x[1h])"
    with pytest.raises(KeyError, match="nope"):
        substitute("x{a=\"$nope\"}")


# --- the agent's verdict ------------------------------------------------------------------------------------------


def _panels_reading(name: str, metric: str) -> list[dict[str, Any]]:
    return [p for p in _viz_panels(DASHBOARDS[name])
            if any(metric in metric_names(t["expr"]) for t in p["targets"])]


def _status_words(panel: dict[str, Any]) -> dict[str, str]:
    """The colour each status takes on a panel: by a value mapping, a status column's mapping or a series colour."""
    found: dict[str, str] = {}
    for mapping in panel["fieldConfig"]["defaults"].get("mappings", []):
        found.update({result["text"].lower(): result["color"] for result in mapping["options"].values()})
    for override in panel["fieldConfig"]["overrides"]:
        for prop in override["properties"]:
            if prop["id"] == "mappings" and override["matcher"]["options"] == "status":
                for mapping in prop["value"]:
                    found.update({word: result["color"] for word, result in mapping["options"].items()})
            if prop["id"] == "color" and prop["value"].get("mode") == "fixed":
                found[override["matcher"]["options"]] = prop["value"]["fixedColor"]
    return found


STATUS_COLOURS = {"ok": "green", "warn": "yellow", "fail": "red", "unknown": "purple"}


def test_the_node_detail_shows_the_agents_verdict() -> None:
    name = "npu-node-detail.json"
    node = _panels_reading(name, "npu_node_status")
    assert {p["type"] for p in node} == {"stat", "state-timeline"}
    chips = _panels_reading(name, "npu_chip_status")
    found = _panels_reading(name, "npu_fault_since_timestamp_seconds")
    assert [p["type"] for p in chips] == ["table"] and [p["type"] for p in found] == ["table"]
    for panel in (*node, *chips, *found):
        assert _status_words(panel).items() >= STATUS_COLOURS.items(), panel["title"]
    assert found[0]["targets"][0]["expr"].startswith("npu_fault_since_timestamp_seconds{")
    # The panels come first: the verdict is what a reader wants before the readings.
    assert _viz_panels(DASHBOARDS[name])[0] is node[0]


def test_the_fleet_overview_counts_nodes_by_verdict_and_lists_the_ones_not_ok() -> None:
    name = "npu-fleet-overview.json"
    panels = _panels_reading(name, "npu_node_status")
    by_type = {p["type"]: p for p in panels}
    assert set(by_type) == {"stat", "table"}
    assert by_type["stat"]["targets"][0]["expr"].startswith("count by (status) (npu_node_status{")
    assert 'status!="ok"' in by_type["table"]["targets"][0]["expr"]
    for panel in panels:
        assert _status_words(panel).items() >= STATUS_COLOURS.items(), panel["title"]
        assert len(panel["fieldConfig"]["defaults"]["thresholds"]["steps"]) == 1, "coloured by status, not steps"
