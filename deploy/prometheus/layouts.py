"""The fleet beyond one Prometheus: the sharded layout and the VictoriaMetrics (remote write) layout, as data.

    python deploy/prometheus/layouts.py           # rewrite the example files beside this script
    python deploy/prometheus/layouts.py --check   # exit 1 when a committed example differs
    python deploy/prometheus/layouts.py sharded --shards 4 --out DIR   # a sharded layout of 4 shards
    python deploy/prometheus/layouts.py victoriametrics --shards 16 --out DIR   # 16 per-node vmalerts

The end-to-end tests (tests/e2e/test_fleet_layouts.py) start the engines on these very configs (with
their own targets, intervals and ports), so what is shipped is what is tested.

Sharded (``sharded/``): N shards scrape the agents, each keeping the targets whose address hashes to
its index (``hashmod`` over ``__address__``), and evaluate the per-node rule groups, among them the
per-node halves of the fleet-wide rules (``SHARD_HALVES``), which reduce the per-NPU series to one per
node (or per NPU in an incident, per chip that may be slow). A global Prometheus federates from every shard exactly
the series the fleet-wide groups read (``FEDERATE``; the alerts' hold reads the ruler's own ``ALERTS``)
and evaluates those groups (``FLEET_RULE_FILES``: triage and probes-fleet); each shard federates back the
few fleet records its halves read (``FEDERATE_BACK``: the ranks and device IPs an incident asks about,
the GEMM flops fleet median). Each group runs on one tier only, so no alert fires twice and none is lost;
all of them send to the same Alertmanager.

VictoriaMetrics (``victoriametrics/``): vmagent (or Prometheus in agent mode, writing to vmagent) scrapes
the agents, labels each target with its shard (``shard``: ``hashmod`` over ``__address__``, as the sharded
layout keeps its targets), and remote-writes everything to the fleet's VictoriaMetrics, and the share the
fleet-wide groups read (``FEDERATE``, what they record, their alerts' state; ``fleet_store_relabel``) to a
second, small VictoriaMetrics: the fleet store, the Prometheus global's role. The per-node rule files run in
one vmalert per shard against the big store, each restricted to its shard's nodes (``extra_label=shard=<i>``
on every query, ``-external.label=shard=<i>`` on what it records, so it reads its own records back); the
fleet-wide files run in one vmalert against the fleet store, so their queries never wait behind the
per-node tier's reads of every NPU. All write their records and alerts' state through vmagent, which routes
them the same way and writes the few fleet records the per-node halves read (``FEDERATE_BACK``) into the
big store once per shard, labelled with it (``shard_back_relabel``), and send to Alertmanager.
"""

from __future__ import annotations

import argparse
import copy
import sys
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ALERTS = REPO / "alerts"
JOB = "npuwatch"

# The groups that join nodes with each other: on the global Prometheus of a sharded layout.
FLEET_RULE_FILES = ("probes-fleet.rules.yml", "triage.rules.yml")
# Their per-node halves, on the shards with the other per-node groups (they read FEDERATE_BACK).
SHARD_HALVES = ("probes-shard.rules.yml", "triage-shard.rules.yml")

# What the global federates: every series the fleet-wide groups read (tests/unit/test_prometheus_layouts.py
# holds this list to the rule files), each from the agents' job only. One series per node, or per NPU that
# is part of an incident or slow; none per NPU of the fleet: the per-node halves of the two files
# (triage-shard.rules.yml, probes-shard.rules.yml) run on the shards and reduce those.
FEDERATE = (
    # triage.rules.yml: the peers' blames, the log scanners' state, and what the shards record per node
    "npu_hccl_peer_blamed_timestamp_seconds",
    'npuwatch_collector_up{collector="hccl_logs"}',
    "hccl:node_comm:rank_timeouts",
    "hccl:npu_fault:roce_link_down",
    "hccl:npu_fault:unhealthy",
    "hccl:node_rank:held_by_faulty_npu",
    "hccl:node_rank:owner_last_seen_timestamp_seconds",
    "hccl:node_rank:timeout_timestamp_seconds",
    "hccl:node_npu:blamed_address_info",
    "hccl:node_npu:blamed_address_rank_timeouts",
    # probes-fleet.rules.yml: each node's median chip, the all-reduce results, the chips that may be slow
    "npuwatch:npu_probe_gemm_flops:node_median_by_model_dtype",
    "npuwatch:npu_probe_gemm_efficiency_ratio:node_median_by_model_dtype",
    "npu_probe_allreduce_bus_bandwidth_bytes_per_second",
    "npuwatch:npu_probe_gemm_efficiency_ratio:below_peak_with_model",
    "npuwatch:npu_probe_gemm_flops:slow_chip_to_node_median_ratio",
)

# What each shard federates back from the global: the fleet's records that the per-node halves read (the
# ranks and device IPs the fleet asks about, the GEMM flops fleet median that picks the chips the global
# compares again). A few series per incident and per chip model; a shard that cannot reach the global
# records no candidates and picks no chip below the fleet median.
FEDERATE_BACK = (
    "hccl:fleet_incident:rank",
    "hccl:fleet_incident:blamed_address",
    "npuwatch:npu_probe_gemm_flops:median_by_model_dtype",
)
FLEET_JOB = f"{JOB}-fleet"  # a shard's job federating FEDERATE_BACK from the global

# Fail-slow (alerts/failslow.rules.yml, docs/failslow.md#signals) takes rates and 15-30 s means of a few per-chip
# series that need a sample every 5 s; scraping every agent's whole /metrics that often would cost the fleet 6
# times the samples. A second job scrapes /metrics/failslow (those series alone) every 5 s and writes them
# under the agents' job (``job="npuwatch"``, which the rules select); the full job drops them, so each series
# comes from one scrape job only (agent.core.exporter.FAILSLOW_METRICS lists the same names).
FAILSLOW_JOB = f"{JOB}-failslow"
FAILSLOW_PATH = "/metrics/failslow"
FAILSLOW_INTERVAL = "5s"
FAILSLOW_METRICS = (
    "npu_aicore_utilization_ratio",
    "npu_aicore_frequency_hertz",
    "npu_roce_transmitted_bytes_total",
    "npu_roce_pfc_pause_frames_total",
    "npu_roce_errors_total",
    "npuwatch_host_cpu_utilization_ratio",
)
GLOBAL = "prometheus-global:9090"

# The VictoriaMetrics layout's hosts: the store of every series, the fleet tier's own store, and vmagent, which
# scrapes the agents and relays both vmalerts' writes to the two stores.
STORE = "http://victoriametrics:8428"
FLEET_STORE = "http://victoriametrics-fleet:8428"
VMAGENT = "http://vmagent:8429"
FLEET_STORE_RELABEL = "/etc/vmagent/fleet-store-relabel.yml"
_FLEET_MARK = "__tmp_fleet_store"  # set by fleet_store_relabel on what the fleet store keeps, then dropped

# The VictoriaMetrics layout's per-node tier: one vmalert per shard of the nodes, each seeing only the series
# labelled with its shard. The example has two; about 1,000 nodes a shard keep every per-node group within a
# 20 s interval (docs/fleet-scale.md).
SHARD_LABEL = "shard"
NODE_SHARDS = 2
SHARD_BACK_RELABEL = "/etc/vmagent/shard-{index}-back-relabel.yml"

TARGETS_FILE = "/etc/prometheus/npuwatch-targets/*.yml"  # file_sd: `- targets: [host:9611]\n  labels: {node: n}`
RULES_DIR = "/etc/prometheus/npuwatch"  # where alerts/*.rules.yml are installed
ALERTMANAGER = "alertmanager:9093"


def rule_files() -> list[str]:
    return sorted(path.name for path in ALERTS.glob("*.rules.yml"))


def node_rule_files() -> list[str]:
    """The per-node groups: every shipped rule file but the fleet-wide ones."""
    return [name for name in rule_files() if name not in FLEET_RULE_FILES]


def _selector(text: str) -> tuple[str, dict[str, str]]:
    """``name{label="value", ...}`` (equality matchers only, as ``FEDERATE`` has) -> (name, labels)."""
    name, _, rest = text.partition("{")
    labels = {}
    for matcher in filter(None, (part.strip() for part in rest.rstrip("}").split(","))):
        label, _, value = matcher.partition("=")
        labels[label.strip()] = value.strip().strip('"')
    return name, labels


def _rules(names: Sequence[str]) -> list[dict[str, Any]]:
    return [rule for name in names for group in yaml.safe_load((ALERTS / name).read_text(encoding="utf-8"))["groups"]
            for rule in group["rules"]]


def fleet_records() -> list[str]:
    """The series the fleet-wide files record (their own later groups and the per-node halves read them)."""
    return sorted({rule["record"] for rule in _rules(FLEET_RULE_FILES) if "record" in rule})


def fleet_alerts() -> list[str]:
    """The alerts of the fleet-wide files: their hold reads the ruler's own ``ALERTS`` of these."""
    return sorted({rule["alert"] for rule in _rules(FLEET_RULE_FILES) if "alert" in rule})


def fleet_store_relabel() -> list[dict[str, Any]]:
    """Relabelling (Prometheus syntax, vmagent's ``-remoteWrite.urlRelabelConfig``) keeping what the fleet store
    holds: the series of ``FEDERATE`` (their label matchers included), the fleet-wide files' records, and the
    ``ALERTS``/``ALERTS_FOR_STATE`` of their alerts (the hold; vmalert's restore). Everything else, every
    per-NPU series among it, stays out."""
    plain = [name for name, labels in map(_selector, FEDERATE) if not labels]
    marks: list[dict[str, Any]] = [
        {"source_labels": ["__name__"], "regex": "|".join([*plain, *fleet_records()]),
         "target_label": _FLEET_MARK, "replacement": "1"}]
    for name, labels in map(_selector, FEDERATE):
        if labels:
            marks.append({"source_labels": ["__name__", *labels], "regex": ";".join([name, *labels.values()]),
                          "target_label": _FLEET_MARK, "replacement": "1"})
    marks.append({"source_labels": ["__name__", "alertname"],
                  "regex": f"(ALERTS|ALERTS_FOR_STATE);({'|'.join(fleet_alerts())})",
                  "target_label": _FLEET_MARK, "replacement": "1"})
    return [*marks, {"source_labels": [_FLEET_MARK], "regex": "1", "action": "keep"},
            {"regex": _FLEET_MARK, "action": "labeldrop"}]


def shard_label_relabel(shards: int) -> list[dict[str, Any]]:
    """The scrape job's relabelling that labels each target with its shard, ``hashmod`` over the address: every
    series of a node carries the same ``shard``, the label a per-node vmalert's queries are restricted by."""
    if shards < 1:
        raise ValueError(f"a layout needs at least one shard, not {shards}")
    return [{"source_labels": ["__address__"], "modulus": shards, "target_label": SHARD_LABEL, "action": "hashmod"}]


def shard_back_relabel(index: int) -> list[dict[str, Any]]:
    """vmagent's relabelling for the store's copy of shard ``index``: the fleet records the per-node halves read
    (``FEDERATE_BACK``, which carry no shard), labelled with it, so the shard's restricted queries see them."""
    return [{"source_labels": ["__name__"], "regex": "|".join(FEDERATE_BACK), "action": "keep"},
            {"target_label": SHARD_LABEL, "replacement": str(index)}]


def agent_jobs(discovery: Mapping[str, Any], relabel: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    """The agents' two scrape jobs over the same targets: the full /metrics at the global interval without the
    fail-slow series, and those alone every 5 s (``FAILSLOW_JOB``), labelled as the full job's."""
    targets: dict[str, Any] = {**discovery, **({"relabel_configs": list(relabel)} if relabel else {})}
    return [{
        "job_name": JOB,
        **targets,
        "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": "|".join(FAILSLOW_METRICS),
                                    "action": "drop"}],
    }, {
        "job_name": FAILSLOW_JOB,
        "scrape_interval": FAILSLOW_INTERVAL,
        "scrape_timeout": FAILSLOW_INTERVAL,
        "metrics_path": FAILSLOW_PATH,
        **copy.deepcopy(targets),  # no YAML anchors in the written files
        "metric_relabel_configs": [{"target_label": "job", "replacement": JOB}],
    }]


def federate_match(job: str = JOB) -> list[str]:
    """``match[]`` of the global's federation: each of ``FEDERATE`` from the agents' job."""
    matchers = []
    for name, labels in map(_selector, FEDERATE):
        pairs = ", ".join(f'{label}="{value}"' for label, value in {"job": job, **labels}.items())
        matchers.append(f"{name}{{{pairs}}}")
    return matchers


def _alerting(alertmanagers: Sequence[str]) -> dict[str, Any]:
    return {"alertmanagers": [{"static_configs": [{"targets": list(alertmanagers)}]}]}


def shard_config(index: int, shards: int, *, static_targets: Mapping[str, Mapping[str, str]] | None = None,
                 rules_dir: str = RULES_DIR, alertmanagers: Sequence[str] = (ALERTMANAGER,),
                 scrape_interval: str = "30s", evaluation_interval: str = "30s",
                 rule_file_names: Sequence[str] | None = None, global_address: str = GLOBAL) -> dict[str, Any]:
    """Shard ``index`` of ``shards``: scrapes its share of the agents, evaluates the per-node groups, and
    federates ``FEDERATE_BACK`` from the global (``global_address``) for the fleet-wide rules' per-node halves.

    Every shard is given the same targets (file_sd, or ``static_targets``: address -> labels) and keeps
    those whose address hashes to its index, so adding a node never needs a shard chosen by hand.
    """
    if not 0 <= index < shards:
        raise ValueError(f"shard index {index} is not in 0..{shards - 1}")
    if static_targets is None:
        discovery: dict[str, Any] = {"file_sd_configs": [{"files": [TARGETS_FILE]}]}
    else:
        discovery = {"static_configs": [{"targets": [address], "labels": dict(labels)}
                                        for address, labels in static_targets.items()]}
    names = node_rule_files() if rule_file_names is None else list(rule_file_names)
    return {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval},
        "rule_files": [f"{rules_dir}/{name}" for name in names],
        "alerting": _alerting(alertmanagers),
        "scrape_configs": [*agent_jobs(discovery, [
            {"source_labels": ["__address__"], "modulus": shards, "target_label": "__tmp_hash", "action": "hashmod"},
            {"source_labels": ["__tmp_hash"], "regex": str(index), "action": "keep"},
        ]), {
            "job_name": FLEET_JOB,
            "honor_labels": True,  # the records' own job="npuwatch" stays, so they join the agents' series
            "metrics_path": "/federate",
            "params": {"match[]": [f'{{__name__="{name}"}}' for name in FEDERATE_BACK]},
            "static_configs": [{"targets": [global_address]}],
        }],
    }


def global_config(shard_addresses: Sequence[str], *, rules_dir: str = RULES_DIR,
                  alertmanagers: Sequence[str] = (ALERTMANAGER,), scrape_interval: str = "30s",
                  evaluation_interval: str = "30s", rule_file_names: Sequence[str] | None = None) -> dict[str, Any]:
    """The global Prometheus: federates ``FEDERATE`` from every shard, evaluates the fleet-wide groups.

    ``honor_labels`` keeps the agents' ``job``, ``instance`` and ``node``, so the rules see the series as a
    single Prometheus scraping the agents would. One job per shard: a shard that is down is its own
    ``up{job="npuwatch-federate-<i>"} == 0``.
    """
    names = list(FLEET_RULE_FILES) if rule_file_names is None else list(rule_file_names)
    return {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval},
        "rule_files": [f"{rules_dir}/{name}" for name in names],
        "alerting": _alerting(alertmanagers),
        "scrape_configs": [{
            "job_name": f"{JOB}-federate-{index}",
            "honor_labels": True,
            "metrics_path": "/federate",
            "params": {"match[]": federate_match()},
            "static_configs": [{"targets": [address]}],
        } for index, address in enumerate(shard_addresses)],
    }


def scrape_config(*, static_targets: Mapping[str, Mapping[str, str]] | None = None,
                  scrape_interval: str = "30s", shards: int | None = None) -> dict[str, Any]:
    """The agents' scrape job alone: vmagent's ``-promscrape.config``; with ``shards``, each target labelled
    with its shard (``shard_label_relabel``)."""
    if static_targets is None:
        discovery: dict[str, Any] = {"file_sd_configs": [{"files": [TARGETS_FILE]}]}
    else:
        discovery = {"static_configs": [{"targets": [address], "labels": dict(labels)}
                                        for address, labels in static_targets.items()]}
    relabel = shard_label_relabel(shards) if shards is not None else []
    return {"global": {"scrape_interval": scrape_interval}, "scrape_configs": agent_jobs(discovery, relabel)}


def prometheus_agent_config(remote_write_url: str, **options: Any) -> dict[str, Any]:
    """Prometheus in agent mode (``--enable-feature=agent``): scrape and remote-write, no rules, no queries."""
    return {**scrape_config(**options), "remote_write": [{"url": remote_write_url}]}


def vmagent_args(store: str, fleet_store: str, fleet_relabel: str, *, shard_back: Sequence[str] = (),
                 scrape_config_path: str | None = None, listen: str = ":8429",
                 queue_dir: str = "/var/lib/vmagent") -> list[str]:
    """vmagent's flags: scrape the agents (``scrape_config_path``; none: a relay only) and take remote writes
    (the vmalerts', a Prometheus agent's) on ``listen``; send everything to ``store``, the fleet tier's share
    (``fleet_relabel``: ``fleet_store_relabel`` as a file) to ``fleet_store``, and for each per-node shard its
    copy of the fleet records it reads back (``shard_back``: ``shard_back_relabel(i)`` as files, in shard order)
    to ``store``. ``-remoteWrite.urlRelabelConfig`` applies to the URL of the same position: the plain
    ``store`` comes last."""
    scrape = [f"-promscrape.config={scrape_config_path}"] if scrape_config_path else []
    back = [flag for path in shard_back
            for flag in (f"-remoteWrite.url={store}/api/v1/write", f"-remoteWrite.urlRelabelConfig={path}")]
    return [*scrape,
            f"-remoteWrite.url={fleet_store}/api/v1/write", f"-remoteWrite.urlRelabelConfig={fleet_relabel}",
            *back,
            f"-remoteWrite.url={store}/api/v1/write",
            f"-remoteWrite.tmpDataPath={queue_dir}", f"-httpListenAddr={listen}"]


def vmalert_args(rule_files: Sequence[str], datasource: str, alertmanager_url: str, *,
                 evaluation_interval: str = "30s", write_url: str | None = None,
                 shard: int | None = None) -> list[str]:
    """vmalert's flags: the shipped rule files against VictoriaMetrics (``datasource``), results and state
    written back (to ``write_url``, the vmagent that routes them to both stores; default the datasource).

    ``shard``: a per-node vmalert of that shard. Every query it sends (rules and templates) carries
    ``extra_label=shard=<i>``, which VictoriaMetrics adds to each series selector, so it reads its nodes only;
    what it records and its alerts carry ``shard=<i>`` (``-external.label``), so it reads them back."""
    query_url = datasource
    labels: list[str] = []
    if shard is not None:
        query_url = f"{datasource}/?{urllib.parse.urlencode({'extra_label': f'{SHARD_LABEL}={shard}'})}"
        labels = [f"-external.label={SHARD_LABEL}={shard}"]
    return [*(f"-rule={path}" for path in rule_files),
            f"-datasource.url={query_url}", *labels,
            f"-remoteWrite.url={write_url or datasource}",  # recorded series and ALERTS go back into the stores
            f"-remoteRead.url={datasource}",  # the alerts' state is restored from it after a restart
            f"-notifier.url={alertmanager_url}",
            f"-evaluationInterval={evaluation_interval}"]


def victoriametrics_args(data_dir: str, listen: str, *, latency_offset: str = "5s") -> list[str]:
    """VictoriaMetrics single node. ``-search.latencyOffset`` (default 30s) hides samples younger than it
    from queries: vmalert and ``npuwatch triage --prometheus`` would not see the newest scrape; keep it at
    the scrape interval or less (docs/fleet-scale.md)."""
    return [f"-storageDataPath={data_dir}", f"-httpListenAddr={listen}", f"-search.latencyOffset={latency_offset}"]


# ----------------------------------------------------------------------------- the shipped examples

HEADER = """\
# Generated by deploy/prometheus/layouts.py: do not edit, edit that script and run
#   python deploy/prometheus/layouts.py
# {what}
"""


def examples() -> dict[Path, str]:
    files = {
        HERE / "sharded" / f"shard-{index}.yml": _dump(
            f"Shard {index} of 2 (prometheus --config.file=shard-{index}.yml): the agents whose address hashes "
            f"to {index}, the per-node rule groups.", shard_config(index, 2))
        for index in range(2)
    }
    files[HERE / "sharded" / "global.yml"] = _dump(
        "The global Prometheus: federates what the fleet-wide rule groups read from every shard, evaluates them.",
        global_config(["prometheus-shard-0:9090", "prometheus-shard-1:9090"]))
    files.update(victoriametrics_files(HERE / "victoriametrics", NODE_SHARDS))
    return files


def _dump(what: str, data: Any) -> str:
    return HEADER.format(what=what) + yaml.safe_dump(data, sort_keys=False, width=1000)


def victoriametrics_files(out: Path, shards: int) -> dict[Path, str]:
    """The VictoriaMetrics layout with ``shards`` per-node vmalerts: its flags and vmagent's files, under ``out``."""
    files = {
        out / "vmagent-scrape.yml": _dump(
            f"vmagent -promscrape.config=vmagent-scrape.yml, with the other flags of flags.txt: the agents, each "
            f"labelled with its shard of {shards}", scrape_config(shards=shards)),
        out / "fleet-store-relabel.yml": _dump(
            f"vmagent -remoteWrite.urlRelabelConfig={FLEET_STORE_RELABEL} (flags.txt): what the fleet store keeps.",
            fleet_store_relabel()),
        out / "prometheus-agent.yml": _dump(
            "Instead of vmagent's scraping: prometheus --enable-feature=agent --config.file=prometheus-agent.yml, "
            "writing to vmagent (flags.txt without -promscrape.config), which routes to both stores.",
            prometheus_agent_config(f"{VMAGENT}/api/v1/write", shards=shards)),
    }
    back = [SHARD_BACK_RELABEL.format(index=index) for index in range(shards)]
    for index, path in enumerate(back):
        files[out / Path(path).name] = _dump(
            f"vmagent -remoteWrite.urlRelabelConfig={path} (flags.txt): the fleet records shard {index}'s "
            f"per-node vmalert reads back, written to the store labelled {SHARD_LABEL}=\"{index}\".",
            shard_back_relabel(index))
    node_files = [f"{RULES_DIR}/{name}" for name in node_rule_files()]
    fleet_args = vmalert_args([f"{RULES_DIR}/{name}" for name in FLEET_RULE_FILES], FLEET_STORE,
                              "http://alertmanager:9093", write_url=VMAGENT)
    agent = vmagent_args(STORE, FLEET_STORE, FLEET_STORE_RELABEL, shard_back=back,
                         scrape_config_path="/etc/vmagent/vmagent-scrape.yml")
    store = victoriametrics_args("/var/lib/victoria-metrics", ":8428")

    def command(comment: str, name: str, flags: Sequence[str]) -> str:
        return f"# {comment}\n{name}\n" + "".join(f"  {flag}\n" for flag in flags)

    files[out / "flags.txt"] = (
        HEADER.format(what=f"The command lines of the VictoriaMetrics layout ({shards} per-node shards), one flag "
                           "a line.")
        + command("the store of every series (host victoriametrics)", "victoria-metrics", store)
        + command("the fleet store (host victoriametrics-fleet): what the fleet-wide groups read and record, "
                  "a few series per node", "victoria-metrics", store)
        + command("scrapes the agents (each labelled with its shard) and relays the vmalerts' writes: everything "
                  "to the store, the fleet tier's share to the fleet store, each shard's copy of the fleet records "
                  "it reads back to the store (host vmagent)", "vmagent", agent)
        + "".join(command(f"the per-node groups (every rule file but the fleet-wide ones) of shard {index}'s nodes, "
                          f"on the store (host vmalert-shard-{index})", "vmalert",
                          vmalert_args(node_files, STORE, "http://alertmanager:9093", write_url=VMAGENT, shard=index))
                  for index in range(shards))
        + command("the fleet-wide groups, on the fleet store: they read a few series per node", "vmalert",
                  fleet_args))
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a committed example differs")
    sub = parser.add_subparsers(dest="layout")
    sharded = sub.add_parser("sharded", help="write a sharded layout of --shards shards into --out")
    sharded.add_argument("--shards", type=int, required=True)
    sharded.add_argument("--out", type=Path, required=True)
    sharded.add_argument("--global-address", default=GLOBAL,
                         help=f"host:port of the global, for the shards' federation of its records (default {GLOBAL})")
    sharded.add_argument("--shard-address", action="append", default=[],
                         help="host:port of each shard, for the global's federation "
                              "(default prometheus-shard-<i>:9090)")
    victoria = sub.add_parser("victoriametrics",
                              help="write the VictoriaMetrics layout with --shards per-node vmalerts into --out")
    victoria.add_argument("--shards", type=int, required=True)
    victoria.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.layout == "victoriametrics":
        if args.shards < 1:
            parser.error("--shards must be at least 1")
        args.out.mkdir(parents=True, exist_ok=True)
        for path, text in victoriametrics_files(args.out, args.shards).items():
            path.write_text(text, encoding="utf-8")
        return 0
    if args.layout == "sharded":
        addresses = args.shard_address or [f"prometheus-shard-{i}:9090" for i in range(args.shards)]
        if len(addresses) != args.shards:
            parser.error("give one --shard-address per shard")
        args.out.mkdir(parents=True, exist_ok=True)
        for index in range(args.shards):
            config = shard_config(index, args.shards, global_address=args.global_address)
            (args.out / f"shard-{index}.yml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
        (args.out / "global.yml").write_text(yaml.safe_dump(global_config(addresses), sort_keys=False),
                                             encoding="utf-8")
        return 0
    stale = []
    for path, text in examples().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(path)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
    for path in stale:
        print(f"{'stale' if args.check else 'wrote'} {path.relative_to(REPO)}", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
