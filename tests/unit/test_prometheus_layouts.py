"""deploy/prometheus/layouts.py against the rule files: the global federates exactly what the fleet-wide
groups read, every rule runs on exactly one tier, and the shipped examples are what the script writes.

The engines run these configs in tests/e2e/test_fleet_layouts.py."""

from __future__ import annotations

import importlib.util
import re
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from tests.support.paths import REPO
from tests.support.rule_files import load_yaml

_SPEC = importlib.util.spec_from_file_location("npuwatch_layouts", REPO / "deploy" / "prometheus" / "layouts.py")
assert _SPEC is not None and _SPEC.loader is not None
layouts = importlib.util.module_from_spec(_SPEC)
sys.modules["npuwatch_layouts"] = layouts
_SPEC.loader.exec_module(layouts)

_KEYWORDS = {"by", "on", "without", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset",
             "bool", "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_LABEL_LIST = re.compile(r"\b(?:by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)")


def series_read(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, keywords and label names left out)."""
    text = _STRING.sub('""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = _LABEL_LIST.sub(" ", text)
    names = set()
    for match in re.finditer(r"(?<![\w:.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", text):
        if match.group(2) or match.group(1).lower() in _KEYWORDS:
            continue
        names.add(match.group(1))
    return names


def template_series(text: str) -> set[str]:
    """The metric names an annotation's template queries select."""
    return {name for query in re.findall(r'printf "((?:[^"\\]|\\.)*)"', text) if "{" in query
            for name in series_read(query.replace("%q", '""').replace("%[1]q", '""').replace("%[2]q", '""')
                                    .replace("%[3]q", '""').replace("%[4]q", '""'))}


def rules_of(names: list[str] | tuple[str, ...]) -> list[dict[str, Any]]:
    return [rule for name in names for group in load_yaml(REPO / "alerts" / name)["groups"] for rule in group["rules"]]


def read_and_recorded(names: list[str] | tuple[str, ...]) -> tuple[set[str], set[str]]:
    read: set[str] = set()
    recorded = set()
    for rule in rules_of(names):
        read |= series_read(str(rule["expr"]))
        for text in (rule.get("annotations") or {}).values():
            read |= template_series(text)
        if "record" in rule:
            recorded.add(rule["record"])
        if "alert" in rule:
            recorded.add("ALERTS")  # the ruler's own series, which the hold reads
    return read, recorded


def test_the_reader_finds_metric_names() -> None:
    assert series_read('max by (job, instance) (npu_x{job="a", b=~"c|d"}[5m]) * on (job) group_left (node) '
                       'y offset 5m > 3 * 3600 unless z:rec and time() - w') == {"npu_x", "y", "z:rec", "w"}


def test_the_global_federates_exactly_what_the_fleet_groups_read() -> None:
    read, recorded = read_and_recorded(layouts.FLEET_RULE_FILES)
    federated = {selector.split("{", 1)[0] for selector in layouts.FEDERATE}
    assert read - recorded == federated
    # the one narrowed selector: only the log scanner's collector_up is read
    assert 'npuwatch_collector_up{collector="hccl_logs"}' in layouts.FEDERATE
    for rule in rules_of(layouts.FLEET_RULE_FILES):
        for found in re.findall(r"npuwatch_collector_up\{[^}]*\}", str(rule["expr"])):
            assert 'collector="hccl_logs"' in found, found


def test_the_shards_federate_back_exactly_the_global_records_they_read() -> None:
    read, recorded = read_and_recorded(layouts.node_rule_files())
    _, fleet_recorded = read_and_recorded(layouts.FLEET_RULE_FILES)
    assert read & (fleet_recorded - recorded) == set(layouts.FEDERATE_BACK)
    # only the fleet-wide rules' per-node halves read them; every other per-node group stands alone
    halves_read, _ = read_and_recorded(layouts.SHARD_HALVES)
    others_read, _ = read_and_recorded([n for n in layouts.node_rule_files() if n not in layouts.SHARD_HALVES])
    assert not others_read & set(layouts.FEDERATE_BACK)
    assert set(layouts.FEDERATE_BACK) <= halves_read
    jobs = layouts.shard_config(0, 2, global_address="g:9090")["scrape_configs"]
    [back] = [job for job in jobs if job["job_name"] == layouts.FLEET_JOB]
    assert back["honor_labels"] and back["metrics_path"] == "/federate"
    assert back["static_configs"] == [{"targets": ["g:9090"]}]
    assert back["params"]["match[]"] == [f'{{__name__="{name}"}}' for name in layouts.FEDERATE_BACK]


def test_the_global_reads_no_series_per_npu_of_the_fleet() -> None:
    """The fleet-wide groups read what the shards reduced: no raw per-NPU series of a healthy fleet."""
    read, _ = read_and_recorded(layouts.FLEET_RULE_FILES)
    per_npu = {"npu_info", "npu_roce_ip_info", "npu_roce_link_up", "npu_healthy", "npu_probe_gemm_flops",
               "npu_probe_gemm_efficiency_ratio", "npu_hccl_rank_last_seen_timestamp_seconds",
               "npu_hccl_rank_timeout_timestamp_seconds"}
    assert not read & per_npu, sorted(read & per_npu)


def test_every_rule_runs_on_exactly_one_tier() -> None:
    node, fleet = layouts.node_rule_files(), list(layouts.FLEET_RULE_FILES)
    assert sorted(node + fleet) == layouts.rule_files()
    assert not set(node) & set(fleet)
    groups = [group["name"] for name in layouts.rule_files() for group in load_yaml(REPO / "alerts" / name)["groups"]]
    assert len(groups) == len(set(groups))
    shard = layouts.shard_config(0, 2)
    glob = layouts.global_config(["a:9090", "b:9090"])
    assert [Path(p).name for p in shard["rule_files"]] == node
    assert [Path(p).name for p in glob["rule_files"]] == fleet


def test_each_shard_keeps_its_hash_of_the_address() -> None:
    for index in range(3):
        relabel = layouts.shard_config(index, 3)["scrape_configs"][0]["relabel_configs"]
        assert relabel[0] == {"source_labels": ["__address__"], "modulus": 3, "target_label": "__tmp_hash",
                              "action": "hashmod"}
        assert relabel[1] == {"source_labels": ["__tmp_hash"], "regex": str(index), "action": "keep"}
    jobs = layouts.global_config(["a:9090", "b:9090"])["scrape_configs"]
    assert [job["static_configs"][0]["targets"] for job in jobs] == [["a:9090"], ["b:9090"]]
    assert all(job["honor_labels"] and job["metrics_path"] == "/federate" for job in jobs)


def test_the_shipped_examples_are_current() -> None:
    for path, text in layouts.examples().items():
        assert path.exists() and path.read_text(encoding="utf-8") == text, (
            f"{path} is stale: run python deploy/prometheus/layouts.py")


def _relabel(rules: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str] | None:
    """Prometheus' relabelling for the actions ``fleet_store_relabel`` uses (replace, keep, labeldrop)."""
    labels = dict(labels)
    for rule in rules:
        action = rule.get("action", "replace")
        if action == "labeldrop":
            labels = {k: v for k, v in labels.items() if not re.fullmatch(rule["regex"], k)}
            continue
        value = rule.get("separator", ";").join(labels.get(name, "") for name in rule.get("source_labels", []))
        matched = re.fullmatch(rule.get("regex", "(.*)"), value) is not None
        if action == "keep" and not matched:
            return None
        if action == "replace" and matched:
            labels[rule["target_label"]] = rule["replacement"]
    return labels


def test_the_fleet_store_keeps_what_the_fleet_groups_read_and_record() -> None:
    """vmagent's relabelling for the VictoriaMetrics layout's fleet store: the series the fleet-wide groups read
    (their label matchers too), what they record and their alerts' state; nothing per NPU, no per-node alert."""
    rules = layouts.fleet_store_relabel()
    read, recorded = read_and_recorded(layouts.FLEET_RULE_FILES)
    node = {"job": "npuwatch", "instance": "10.0.0.1:9611", "node": "n1"}
    for name in sorted((read | recorded) - {"ALERTS"}):
        labels = {"__name__": name, **node, **layouts._selector(next(
            (s for s in layouts.FEDERATE if s.split("{")[0] == name), name))[1]}
        assert _relabel(rules, labels) == labels, name  # kept, unchanged (no mark left behind)
    for alert in layouts.fleet_alerts():
        for name in ("ALERTS", "ALERTS_FOR_STATE"):
            assert _relabel(rules, {"__name__": name, "alertname": alert, **node}) is not None, (name, alert)
    dropped = [{"__name__": "npu_roce_ip_info", "npu": "0", "address": "29.0.0.10", **node},
               {"__name__": "npu_probe_gemm_flops", "npu": "0", "chip": "0", "dtype": "fp16", **node},
               {"__name__": "npuwatch_collector_up", "collector": "npu_smi", **node},
               {"__name__": "up", **node},
               {"__name__": "ALERTS", "alertname": "HCCLTimeout", **node},
               {"__name__": "hccl:npu_fault:roce_link_down_total", **node}]
    for labels in dropped:
        assert _relabel(rules, labels) is None, labels
    assert "HCCLCulpritSuspected" in layouts.fleet_alerts()
    assert "npuwatch:npu_probe_gemm_flops:median_by_model_dtype" in layouts.fleet_records()


def test_the_fleet_store_is_the_url_its_relabelling_applies_to() -> None:
    """``-remoteWrite.urlRelabelConfig`` applies to the ``-remoteWrite.url`` of the same position."""
    args = layouts.vmagent_args("http://big:8428", "http://fleet:8428", "/r.yml", scrape_config_path="/s.yml")
    urls = [a.split("=", 1)[1] for a in args if a.startswith("-remoteWrite.url=")]
    relabel = [a.split("=", 1)[1] for a in args if a.startswith("-remoteWrite.urlRelabelConfig=")]
    assert urls == ["http://fleet:8428/api/v1/write", "http://big:8428/api/v1/write"] and relabel == ["/r.yml"]
    assert "-promscrape.config=/s.yml" in args
    assert not any(a.startswith("-promscrape") for a in layouts.vmagent_args("a", "b", "c"))


# ----------------------------------------------------------------------------- the VictoriaMetrics per-node shards


def _flags(args: list[str], name: str) -> list[str]:
    return [a.split("=", 1)[1] for a in args if a.startswith(f"-{name}=")]


def test_the_scrape_job_labels_each_target_with_its_shard() -> None:
    job = layouts.scrape_config(shards=4)["scrape_configs"][0]
    assert job["relabel_configs"] == [{"source_labels": ["__address__"], "modulus": 4, "target_label": "shard",
                                       "action": "hashmod"}]
    agent = layouts.prometheus_agent_config("http://vmagent:8429/api/v1/write", shards=4)
    assert agent["scrape_configs"][0]["relabel_configs"] == job["relabel_configs"]
    assert "relabel_configs" not in layouts.scrape_config()["scrape_configs"][0]
    with pytest.raises(ValueError, match="at least one shard"):
        layouts.scrape_config(shards=0)


def test_a_shard_vmalert_queries_its_nodes_only_and_labels_what_it_records() -> None:
    args = layouts.vmalert_args(["/r/a.yml"], "http://vm:8428", "http://am:9093", write_url="http://agent:8429",
                                shard=3)
    [source] = _flags(args, "datasource.url")
    url = urllib.parse.urlsplit(source)
    assert f"{url.scheme}://{url.netloc}" == "http://vm:8428"
    assert urllib.parse.parse_qs(url.query) == {"extra_label": ["shard=3"]}  # VictoriaMetrics adds it to each selector
    assert _flags(args, "external.label") == ["shard=3"]
    assert _flags(args, "remoteRead.url") == ["http://vm:8428"]  # the alerts' state, read back with its labels
    plain = layouts.vmalert_args(["/r/a.yml"], "http://vm:8428", "http://am:9093")
    assert _flags(plain, "datasource.url") == ["http://vm:8428"] and not _flags(plain, "external.label")


def test_each_shard_gets_its_copy_of_the_fleet_records_it_reads_back() -> None:
    """The per-node halves read FEDERATE_BACK, which the fleet tier records without a shard: each shard's restricted
    queries see them only through a copy labelled with the shard, written to the store by vmagent."""
    node = {"job": "npuwatch"}
    for index in range(3):
        rules = layouts.shard_back_relabel(index)
        for name in layouts.FEDERATE_BACK:
            assert _relabel(rules, {"__name__": name, **node}) == {"__name__": name, **node, "shard": str(index)}
        for name in ("npu_roce_ip_info", "hccl:culprit:info", "hccl:node_rank:owner_last_seen_timestamp_seconds",
                     "ALERTS"):
            assert _relabel(rules, {"__name__": name, **node}) is None, name
    args = layouts.vmagent_args("http://big:8428", "http://fleet:8428", "/f.yml", shard_back=["/b0.yml", "/b1.yml"])
    urls, relabel = _flags(args, "remoteWrite.url"), _flags(args, "remoteWrite.urlRelabelConfig")
    # positions pair a URL with its relabelling: the fleet store, each shard's copy, then everything to the store
    assert urls == ["http://fleet:8428/api/v1/write", *["http://big:8428/api/v1/write"] * 3]
    assert relabel == ["/f.yml", "/b0.yml", "/b1.yml"]


def test_the_shipped_victoriametrics_layout_runs_one_vmalert_per_shard() -> None:
    text = (layouts.HERE / "victoriametrics" / "flags.txt").read_text(encoding="utf-8")
    commands = [block.split("\n") for block in re.split(r"\n(?=vmalert\n)", text)[1:]]
    rulers = [[line.strip() for line in block[1:] if line.startswith("  -")] for block in commands]
    node_files = [f"{layouts.RULES_DIR}/{name}" for name in layouts.node_rule_files()]
    node = [args for args in rulers if _flags(args, "external.label")]
    assert len(node) == layouts.NODE_SHARDS == 2
    for index, args in enumerate(node):
        assert _flags(args, "rule") == node_files  # every per-node file, on every shard
        assert _flags(args, "external.label") == [f"shard={index}"]
        assert urllib.parse.parse_qs(urllib.parse.urlsplit(_flags(args, "datasource.url")[0]).query) == {
            "extra_label": [f"shard={index}"]}
    [fleet] = [args for args in rulers if not _flags(args, "external.label")]
    assert [Path(p).name for p in _flags(fleet, "rule")] == list(layouts.FLEET_RULE_FILES)
    assert _flags(fleet, "datasource.url") == [layouts.FLEET_STORE]
    for index in range(layouts.NODE_SHARDS):
        assert f"-remoteWrite.urlRelabelConfig=/etc/vmagent/shard-{index}-back-relabel.yml" in text
        assert (layouts.HERE / "victoriametrics" / f"shard-{index}-back-relabel.yml").exists()


def test_the_generator_writes_a_victoriametrics_layout_of_any_shard_count(tmp_path: Path) -> None:
    assert layouts.main(["victoriametrics", "--shards", "3", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "flags.txt").read_text(encoding="utf-8")
    assert [line.strip() for line in text.splitlines() if "external.label" in line] == [
        f"-external.label=shard={index}" for index in range(3)]
    assert "modulus: 3" in (tmp_path / "vmagent-scrape.yml").read_text(encoding="utf-8")
    assert sorted(p.name for p in tmp_path.glob("shard-*-back-relabel.yml")) == [
        f"shard-{index}-back-relabel.yml" for index in range(3)]


def test_the_failslow_series_come_from_the_5_s_job_alone_labelled_as_the_agents_job() -> None:
    from agent.core.exporter import FAILSLOW_METRICS

    assert layouts.FAILSLOW_METRICS == FAILSLOW_METRICS  # what the agent serves on /metrics/failslow
    read, recorded = read_and_recorded(["failslow.rules.yml"])
    windowed = read - recorded - {"ALERTS", "npu_job_info"}  # npu_job_info: its last minute, at any interval
    assert windowed and windowed <= set(FAILSLOW_METRICS), windowed - set(FAILSLOW_METRICS)
    for scrape in (layouts.shard_config(1, 3), layouts.scrape_config(shards=2), layouts.scrape_config()):
        full, fast = (job for job in scrape["scrape_configs"] if job["job_name"].startswith("npuwatch")
                      and job["job_name"] != layouts.FLEET_JOB)
        assert (full["job_name"], fast["job_name"]) == ("npuwatch", "npuwatch-failslow")
        assert {key: fast[key] for key in full if key not in ("job_name", "metric_relabel_configs")} == {
            key: full[key] for key in full if key not in ("job_name", "metric_relabel_configs")}  # same targets
        assert (fast["scrape_interval"], fast["metrics_path"]) == ("5s", "/metrics/failslow")
        assert fast["metric_relabel_configs"] == [{"target_label": "job", "replacement": "npuwatch"}]
        [drop] = full["metric_relabel_configs"]
        assert drop["action"] == "drop" and set(drop["regex"].split("|")) == set(FAILSLOW_METRICS)
