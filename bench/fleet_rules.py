"""What the fleet-wide rules cost as the fleet grows: each group's evaluation time, the ruler's memory, the
series that reach it and the time from a hang to HCCLCulpritSuspected, on Prometheus and on VictoriaMetrics +
vmalert, with the per-NPU work on the per-node tier (alerts/*-shard.rules.yml).

    python bench/fleet_rules.py                         # 1k, 4k and 16k nodes of 16 chips, both engines
    python bench/fleet_rules.py --sizes 1000 --engines prometheus
    python bench/fleet_rules.py --sizes 16000 --shards 16 --engines victoriametrics
    python bench/fleet_rules.py --sizes 16000 --engines prometheus --failslow-shards 2
    python bench/fleet_rules.py --quick   # 64 nodes, 2 shards (smoke; tests/e2e/test_bench_fleet_rules.py)

A synthetic fleet of N nodes x 16 NPUs holds the raw series the fleet-wide rules' two halves read: per NPU
its device IP (``npu_roce_ip_info``), link and chip state, chip model (``npu_info``), GEMM probe flops and
efficiency, and the rank it holds in its job's communicator (jobs of 64 nodes, 1024 ranks); per node the
log scanner's ``npuwatch_collector_up``, two all-reduce bandwidths and ``up``. One job is hung: its culprit
NPU's link is down and the 1023 other ranks report a timeout, each node blaming the culprit's rank and
address. The series are written by remote write (protobuf, uncompressed snappy framing), once (the
fleet tier's ranges, the hold's, read its own records and ``ALERTS``, not this history), into:

- Prometheus 2.42: "shard" Prometheus (``--web.enable-remote-write-receiver``; one per ``NODES_PER_SHARD``
  nodes, or ``--shards``), each written its share of the nodes (node i on shard i % shards) and evaluating the
  per-node halves (``triage-shard``, ``probes-shard``), and a global Prometheus on ``layouts.global_config``:
  it federates ``FEDERATE`` from every shard, evaluates the fleet-wide files, and each shard federates
  ``FEDERATE_BACK`` from it (``layouts.shard_config``), as in the shipped layout. The shards' rules are loaded
  once the fleet is written, so the writes do not compete with them.
- VictoriaMetrics 1.79 (``/api/v1/write``), as ``flags.txt``: every series in one store, each node's labelled
  with its shard; a per-node vmalert per shard restricted to its nodes (``layouts.vmalert_args(shard=i)``)
  and one for the fleet-wide files, which reads a VictoriaMetrics of its own holding only what it reads and
  records (the Prometheus global's role); all write through a vmagent (``layouts.vmagent_args``) that sends
  everything to the big store, the fleet tier's share (``layouts.fleet_store_relabel``) to the fleet store
  and each shard's copy of the fleet records it reads back (``layouts.shard_back_relabel``) to the big store.

Where the tiers run: in a real fleet the fleet tier (the global Prometheus; the fleet store and its vmalert)
is a machine of its own, and the per-node tier is the shards, many machines (or a store with cores for its
shards' queries). Here every process shares one machine, whose per-node work alone keeps a core busy. So by
default the fleet tier runs on a core of its own (the last CPU; CPU affinity, inherited by each process and
its threads) and the per-node tier, the writer and the relay on the others; ``--shared-cores`` lets every
process take any core. Every shard runs until the culprit is named and the fleet-wide groups are timed; then
each shard's per-node groups are timed with its ruler alone (the other shards' rulers stopped, or their
Prometheus reloaded without rules), ``--shard-evaluations`` evaluations each.

The fail-slow groups (alerts/failslow.rules.yml) are per-node groups too, whose every chip's readings every 5 s
would double a shard's series: only the first ``--failslow-shards`` shards (1) are written them, those of
their own nodes (bench/failslow_scale.py's: per chip the AI Core busy fraction, two pause frame counters, four
error counters, bytes sent and ``npu_job_info``; per node its host CPU; a sample every 5 s from a minute before),
once their per-node groups are timed, and the three groups are then timed beside those groups, on each shard's
ruler alone, against the 2 s of issue 43. Every shard holds as many nodes as the others, so the first is each.

Measured per group: Prometheus' own ``evaluationTime`` (``/api/v1/rules``) or vmalert's
``vmalert_iteration_duration_seconds`` (its queries to VictoriaMetrics included), the median and the worst
of ``--evaluations`` evaluations once the culprit is named (fleet-wide groups) or of each shard's
evaluations alone (per-node groups). Memory: the resident set of each process (the largest shard's). The
series reaching the fleet ruler: what the global's federation scrapes returned (Prometheus), or the
series of ``FEDERATE`` in VictoriaMetrics. The time from the hang (the last round written) to
``hccl:culprit:info`` on the fleet tier and to HCCLCulpritSuspected firing (``for: 1m``). Target: each
fleet-wide group under 2 s at 16k nodes, each per-node group of each shard within the evaluation interval,
the culprit named.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence, Sized
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # first: bench/agent.py must not shadow the agent package

from bench._cpus import Placement, on_cpus, placement  # noqa: E402
from bench._remote_write import labels_blob, remote_write  # noqa: E402
from bench._util import MB, Table, rss_bytes  # noqa: E402
from bench.failslow_scale import BEHIND_S as FAILSLOW_BEHIND_S  # noqa: E402
from bench.failslow_scale import SCRAPE_S as FAILSLOW_SCRAPE_S  # noqa: E402
from bench.failslow_scale import fleet_labels as failslow_labels  # noqa: E402
from bench.failslow_scale import write_fleet as write_failslow  # noqa: E402
from tests.support.paths import REPO  # noqa: E402
from tests.support.prom_harness import (  # noqa: E402
    PromProcess,
    _Process,
    _start,
    find_binary,
    rfc3339_epoch,
    start_prometheus_with,
    start_victoriametrics,
    start_vmalert,
)

NPUS = 16
JOB_NODES = 64  # nodes per training job (one communicator each)
JOB = "npuwatch"
_SPEC = importlib.util.spec_from_file_location("npuwatch_layouts", REPO / "deploy" / "prometheus" / "layouts.py")
assert _SPEC is not None and _SPEC.loader is not None
layouts = importlib.util.module_from_spec(_SPEC)
sys.modules["npuwatch_layouts"] = layouts
_SPEC.loader.exec_module(layouts)

FLEET_RULE_FILES = tuple(layouts.FLEET_RULE_FILES)
NODE_RULE_FILES = tuple(layouts.SHARD_HALVES)
# group -> (tier, what the table calls it)
GROUPS = {
    "npuwatch-hccl-triage-incident": ("fleet", "triage: incident"),
    "npuwatch-hccl-triage": ("fleet", "triage: culprit"),
    "npuwatch-probes-fleet-medians": ("fleet", "probes: medians"),
    "npuwatch-probes-fleet": ("fleet", "probes: alerts"),
    "npuwatch-hccl-triage-node": ("node", "triage: node faults"),
    "npuwatch-hccl-triage-node-incident": ("node", "triage: node answers"),
    "npuwatch-probes-fleet-node": ("node", "probes: node medians, slow chips"),
    # alerts/failslow.rules.yml, a per-node file too: each shard compares the chips of the jobs it holds
    "npuwatch-failslow-jobs": ("failslow", "fail-slow: jobs and ranks"),
    "npuwatch-failslow": ("failslow", "fail-slow: compute, host"),
    "npuwatch-failslow-links": ("failslow", "fail-slow: links"),
}
FAILSLOW_FILE = "failslow.rules.yml"
FAILSLOW_ERROR_COUNTERS = 4  # error counters a port, as bench/failslow_scale.py writes by default
FAILSLOW_INTERVAL_S = 10.0  # the file's groups' own interval
# each fleet-wide group's evaluation, and each fail-slow group's per shard (issue 43); each per-node group's, per
# shard: within the interval
TARGET_S = 2.0
NODES_PER_SHARD = 1000  # the per-node tier's default shard size (docs/fleet-scale.md)
# The fleet is written once, not scraped again: keep its newest samples visible to queries for this long
# (Prometheus' lookback, VictoriaMetrics' staleness, vmalert's query step), or the raw series of a large fleet,
# whose write takes minutes on a busy machine, go stale before the per-node tier has read them.
LOOKBACK = "30m"
# vmalert's instant queries see no sample older than their step (-datasource.queryStep, 5m by default in 1.79)
VMALERT_LOOKBACK = [f"-datasource.queryStep={LOOKBACK}"]
ROUND_GAP_S = 180.0
ROUNDS = 1  # the fleet tier's ranges read its own records and ALERTS, not the written history


# ----------------------------------------------------------------------------- the synthetic fleet


@dataclass(frozen=True)
class Fleet:
    nodes: int
    shards: int = 1  # of the per-node tier: node i is on shard i % shards (the layouts hash the address instead)

    @property
    def culprit(self) -> tuple[int, int]:
        return (5, 9)  # node index, NPU: in job 0

    def node(self, index: int) -> tuple[tuple[str, str], ...]:
        return (("job", JOB), ("instance", f"10.{index // 250}.{index % 250}.1:9101"), ("node", f"node-{index:05d}"))

    @staticmethod
    def address(index: int, npu: int) -> str:
        return f"29.{index // 256 % 256}.{index % 256}.{npu + 10}"

    def series(self, now: float, shard: int | None = None, labelled: bool = False) -> list[tuple[bytes, float]]:
        """(encoded labels, value) of every series (of the nodes of ``shard``: all when None); timestamps in the
        values where they are times. ``labelled``: each node's series carry its ``shard`` label, as the
        VictoriaMetrics layout's scrape job adds it."""
        out: list[tuple[bytes, float]] = []
        culprit_node, culprit_npu = self.culprit
        culprit_rank = culprit_node % JOB_NODES * NPUS + culprit_npu
        for index in range(self.nodes):
            if shard is not None and index % self.shards != shard:
                continue
            base = self.node(index)
            if labelled:
                base = (*base, (layouts.SHARD_LABEL, str(index % self.shards)))
            job, position = index // JOB_NODES, index % JOB_NODES
            comm = f"29.{job // 256}.{job % 256}.10%enp_60000_0_{job}"
            hung = job == 0
            out.append((labels_blob((("__name__", "up"), *base)), 1.0))
            out.append((labels_blob((("__name__", "npuwatch_collector_up"), ("collector", "hccl_logs"), *base)), 1.0))
            for scope in ("node", "cluster"):
                out.append((labels_blob((("__name__", "npu_probe_allreduce_bus_bandwidth_bytes_per_second"),
                                          ("scope", scope), ("size_bytes", "268435456"), *base)),
                            4.0e10 + (index % 7) * 1e8))
            if hung and index != culprit_node:
                out.append((labels_blob((("__name__", "npu_hccl_peer_blamed_timestamp_seconds"), ("comm", comm),
                                          ("how", "lost"), ("rank", str(culprit_rank)),
                                          ("address", self.address(culprit_node, culprit_npu)), *base)), now - 300))
            for npu in range(NPUS):
                chip = (("npu", str(npu)), ("chip", "0"))
                rank = position * NPUS + npu
                down = hung and (index, npu) == (culprit_node, culprit_npu)
                out.append((labels_blob((("__name__", "npu_roce_ip_info"), ("npu", str(npu)),
                                          ("address", self.address(index, npu)), *base)), 1.0))
                out.append((labels_blob((("__name__", "npu_roce_link_up"), ("npu", str(npu)), *base)),
                            0.0 if down else 1.0))
                out.append((labels_blob((("__name__", "npu_healthy"), *chip, *base)), 1.0))
                out.append((labels_blob((("__name__", "npu_info"), *chip, ("model", "910B3"), *base)), 1.0))
                out.append((labels_blob((("__name__", "npu_probe_gemm_flops"), *chip, ("dtype", "fp16"), *base)),
                            3.0e14 * (1 + (index * NPUS + npu) % 11 / 100)))
                out.append((labels_blob((("__name__", "npu_probe_gemm_efficiency_ratio"), *chip, ("dtype", "fp16"),
                                          *base)), 0.9 + (index * NPUS + npu) % 7 / 100))
                out.append((labels_blob((("__name__", "npu_hccl_rank_last_seen_timestamp_seconds"), ("comm", comm),
                                          ("rank", str(rank)), ("npu", str(npu)), *base)), now - 900))
                if hung and not down:
                    out.append((labels_blob((("__name__", "npu_hccl_rank_timeout_timestamp_seconds"),
                                              ("comm", comm), ("rank", str(rank)), ("npu", str(npu)), *base)),
                                now - 240))
        return out


# ----------------------------------------------------------------------------- the engines


def _metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                values[name] = float(value)
            except ValueError:
                continue
    return values


def _rule_files(tmp: Path, names: Sequence[str]) -> list[str]:
    rules = tmp / "rules"
    rules.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(ROOT / "alerts" / name, rules / name)
    return [str(rules / name) for name in names]


@dataclass
class Result:
    engine: str
    nodes: int
    series: int
    write_s: float
    evaluations: dict[str, list[float]]
    memory: dict[str, int]
    culprits: list[tuple[str, str]]
    fleet_series: int  # what reaches the fleet-wide ruler
    culprit_s: float  # the hang written -> hccl:culprit:info on the fleet tier
    alert_s: float  # ... -> HCCLCulpritSuspected firing
    shards: list[dict[str, list[float]]]  # the per-node groups' times, per shard, each shard measured alone
    failslow: list[dict[str, list[float]]]  # the fail-slow groups' times, per shard timed (the first ones)
    failslow_series: int  # written to each of those shards


def _prometheus_evaluations(proms: Sequence[PromProcess], after: float, count: int,
                            timeout: float, tier: str) -> dict[str, list[float]]:
    """The ``tier``'s groups' evaluation times, from their evaluations after ``after``."""
    seen: dict[str, dict[str, float]] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for prom in proms:
            for group in _groups(prom):
                at = group.get("lastEvaluation", "")
                if GROUPS.get(group["name"], ("",))[0] == tier and at.startswith("2") and rfc3339_epoch(at) > after:
                    seen.setdefault(group["name"], {})[at] = float(group["evaluationTime"])
        if _enough(seen, count, tier):
            break
        time.sleep(1.0)
    return {name: list(values.values())[:count] for name, values in seen.items()}


def _stop(process: _Process) -> None:
    """Stop, and wait as long as a store of millions of series takes to go after its SIGKILL."""
    try:
        process.stop()
    except subprocess.TimeoutExpired:
        process.popen.wait(timeout=120)


def _query(store: PromProcess, expr: str) -> list[dict[str, Any]]:
    """An instant query's result; none while a busy store does not answer within a minute."""
    url = f"{store.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            return list(json.load(response)["data"]["result"])
    except (OSError, ValueError, KeyError):
        return []


def _groups(prom: PromProcess) -> list[dict[str, Any]]:
    """``/api/v1/rules``' groups; none while a busy Prometheus does not answer within a minute."""
    try:
        with urllib.request.urlopen(prom.url + "/api/v1/rules", timeout=60) as response:
            return list(json.load(response)["data"]["groups"])
    except (OSError, ValueError, KeyError):
        return []


def _enough(seen: Mapping[str, Sized], count: int, tier: str) -> bool:
    """Every group of ``tier`` timed ``count`` times."""
    return all(len(seen.get(name, ())) >= count for name, (where, _) in GROUPS.items() if where == tier)


def _vmalert_evaluations(vmalerts: Sequence[_Process], count: int, timeout: float,
                         tier: str) -> dict[str, list[float]]:
    """Per group of ``tier``, the mean evaluation time of each interval in which it ran (sum and count deltas)."""
    def sample() -> dict[str, tuple[float, float]]:
        out = {}
        for vmalert in vmalerts:
            values = _metrics(vmalert.url)
            for name in (name for name, (where, _) in GROUPS.items() if where == tier):
                total = next((v for k, v in values.items() if k.startswith("vmalert_iteration_duration_seconds_sum")
                              and f'group="{name}"' in k), None)
                runs = next((v for k, v in values.items() if k.startswith("vmalert_iteration_duration_seconds_count")
                             and f'group="{name}"' in k), None)
                if total is not None and runs is not None:
                    out[name] = (total, runs)
        return out

    found: dict[str, list[float]] = {}
    last = sample()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = sample()
        for name, (total, runs) in now.items():
            before = last.get(name, (0.0, 0.0))
            if runs > before[1]:
                found.setdefault(name, []).append((total - before[0]) / (runs - before[1]))
        last = now
        if _enough(found, count, tier):
            break
    return {name: values[:count] for name, values in found.items()}


def _write_rounds(url: str, fleet: Fleet, keep: tuple[bytes, ...] = (), shard: int | None = None,
                  labelled: bool = False) -> tuple[int, float]:
    """The history rounds, ``ROUND_GAP_S`` apart before the start, then one round stamped when it starts (the
    writes of a large fleet take a while: the newest samples must be fresh when the ruler reads them).
    ``keep``: only the series whose encoded labels start so (their ``__name__``, sorted first); ``shard`` and
    ``labelled`` as ``Fleet.series``."""
    started = time.monotonic()
    first = time.time()
    series = fleet.series(first, shard, labelled)
    if keep:
        series = [item for item in series if item[0].startswith(keep)]
    for k in range(ROUNDS - 1, 0, -1):
        remote_write(url, series, int((first - k * ROUND_GAP_S) * 1000))
    remote_write(url, series, None)
    return len(series), time.monotonic() - started


def _wait_culprit(store: PromProcess, written: float, timeout: float) -> tuple[list[tuple[str, str]], float, float]:
    """``hccl:culprit:info`` once the chain of recording rules has produced it, and when HCCLCulpritSuspected
    fires: (culprits, seconds from ``written`` to the culprit, to the alert; nan when it did not come)."""
    deadline = time.monotonic() + timeout
    found: list[tuple[str, str]] = []
    culprit_s = alert_s = float("nan")
    while time.monotonic() < deadline:
        if not found:
            found = [(r["metric"].get("node", ""), r["metric"].get("npu", ""))
                     for r in _query(store, "hccl:culprit:info")]
            if found:
                culprit_s = time.time() - written
        if found and _query(store, 'ALERTS{alertname="HCCLCulpritSuspected", alertstate="firing"}'):
            alert_s = time.time() - written
            break
        time.sleep(1.0)
    return found, culprit_s, alert_s


def _failslow_window_s(evaluations: int) -> float:
    """How long the fail-slow groups' evaluations are collected on a shard."""
    return 60.0 + FAILSLOW_INTERVAL_S * (evaluations + 2)


def _write_failslow(url: str, fleet: Fleet, shard: int, evaluations: int, labelled: bool = False) -> int:
    """The fail-slow series of ``shard``'s nodes (bench/failslow_scale.py's: per chip its busy fraction, pause
    frames, error counters, bytes sent and job, per node its host CPU), a sample every 5 s from a minute before
    the groups load to past the evaluations timed (samples ahead of the clock become visible as it reaches
    them). Written only when that shard is timed: each ruler evaluates its own shard's, so the others' would
    change nothing but this machine's memory. Returns the series written."""
    nodes = [index for index in range(fleet.nodes) if index % fleet.shards == shard]
    labels = failslow_labels(nodes, FAILSLOW_ERROR_COUNTERS,
                             ((layouts.SHARD_LABEL, str(shard)),) if labelled else ())
    began = time.time()
    first = began - FAILSLOW_BEHIND_S
    last = began + len(labels) / 3000.0 + 60.0 + _failslow_window_s(evaluations)  # ~3,000 series a second here
    stamps = [int((first + k * FAILSLOW_SCRAPE_S) * 1000) for k in range(int((last - first) / FAILSLOW_SCRAPE_S) + 1)]
    write_failslow(url, labels, stamps)
    return len(labels)


def _reload(prom: PromProcess, config: dict[str, Any]) -> None:
    prom.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    with urllib.request.urlopen(urllib.request.Request(prom.url + "/-/reload", method="POST"), timeout=60):
        pass


def run_prometheus(fleet: Fleet, tmp: Path, interval: str, evaluations: int, cpus: Placement, *,
                   shard_evaluations: int, failslow_shards: int, failslow_evaluations: int) -> Result:
    """``fleet.shards`` shard Prometheus, each written its share of the nodes, and the global federating from all."""
    node_files = _rule_files(tmp, NODE_RULE_FILES)
    fleet_files = _rule_files(tmp, FLEET_RULE_FILES)
    failslow_file = _rule_files(tmp, (FAILSLOW_FILE,))

    def shard_config(index: int, global_address: str, rules: Sequence[str] = ()) -> dict[str, Any]:
        config = layouts.shard_config(index, fleet.shards, static_targets={}, scrape_interval=interval,
                                      evaluation_interval=interval, alertmanagers=["127.0.0.1:9"],
                                      global_address=global_address)
        config["rule_files"] = list(rules)
        config["scrape_configs"] = config["scrape_configs"][1:]  # the fleet is remote-written, not scraped
        for job in config["scrape_configs"]:
            job["scrape_timeout"] = interval
        return dict(config)

    shards: list[PromProcess] = []
    global_: PromProcess | None = None
    try:
        with on_cpus(cpus.node):
            for index in range(fleet.shards):
                shards.append(start_prometheus_with(
                    shard_config(index, "127.0.0.1:9"), tmp / f"shard-{index}", f"prometheus-shard-{index}",
                    extra_args=["--web.enable-remote-write-receiver", f"--query.lookback-delta={LOOKBACK}"]))
        config = layouts.global_config([f"127.0.0.1:{shard.port}" for shard in shards], scrape_interval=interval,
                                       evaluation_interval=interval, alertmanagers=["127.0.0.1:9"])
        config["rule_files"] = fleet_files
        for job in config["scrape_configs"]:
            job["scrape_timeout"] = interval
        with on_cpus(cpus.fleet):
            global_ = start_prometheus_with(config, tmp / "global", "prometheus-global")
        count, write_s = 0, 0.0
        for index, shard in enumerate(shards):
            written_count, seconds = _write_rounds(shard.url + "/api/v1/write", fleet, shard=index)
            count, write_s = count + written_count, write_s + seconds
        written = time.time()
        # the per-node groups start once the data is in (as the vmalerts do): the writes do not compete with them
        global_address = f"127.0.0.1:{global_.port}"
        for index, shard in enumerate(shards):
            _reload(shard, shard_config(index, global_address, node_files))
        culprits, culprit_s, alert_s = _wait_culprit(global_, written, timeout=900)
        times = _prometheus_evaluations([global_], time.time(), evaluations, _window_s(evaluations), "fleet")
        federated = _query(global_, 'scrape_samples_scraped{job=~"npuwatch-federate-.*"}')
        memory = {"global": rss_bytes(global_.popen.pid),
                  "shard (largest)": max(rss_bytes(shard.popen.pid) for shard in shards)}
        # each shard's per-node groups alone, as on a machine of its own
        for index, shard in enumerate(shards):
            _reload(shard, shard_config(index, global_address))
        per_shard = []
        for index, shard in enumerate(shards):
            _reload(shard, shard_config(index, global_address, node_files))
            per_shard.append(_prometheus_evaluations([shard], time.time(), shard_evaluations,
                                                     _window_s(shard_evaluations), "node"))
            _reload(shard, shard_config(index, global_address))
        # the fail-slow groups beside the shard's per-node groups, as the layout loads them
        failslow, failslow_series = [], 0
        for index, shard in enumerate(shards[:failslow_shards]):
            failslow_series = _write_failslow(shard.url + "/api/v1/write", fleet, index, failslow_evaluations)
            _reload(shard, shard_config(index, global_address, [*node_files, *failslow_file]))
            failslow.append(_prometheus_evaluations([shard], time.time(), failslow_evaluations,
                                                    _failslow_window_s(failslow_evaluations), "failslow"))
            _reload(shard, shard_config(index, global_address))
        return Result("Prometheus 2.42", fleet.nodes, count, write_s, times, memory, culprits,
                      int(sum(float(r["value"][1]) for r in federated)), culprit_s, alert_s, per_shard, failslow,
                      failslow_series)
    finally:
        if global_ is not None:
            _stop(global_)
        for shard in reversed(shards):
            _stop(shard)


def _start_relay(workdir: Path, store: str, fleet_store: str, shards: int) -> _Process:
    """vmagent taking the vmalerts' writes as the layout's does (``layouts.vmagent_args``, a relay without
    scraping): everything to ``store``, the fleet tier's share (``layouts.fleet_store_relabel``) to ``fleet_store``,
    and each shard's copy of the fleet records it reads back (``layouts.shard_back_relabel``) to ``store``."""
    binary = find_binary("vmagent", package="victoria-metrics")
    workdir.mkdir(parents=True, exist_ok=True)
    keep = workdir / "fleet-store-relabel.yml"
    keep.write_text(yaml.safe_dump(layouts.fleet_store_relabel()), encoding="utf-8")
    back = []
    for index in range(shards):
        back.append(workdir / f"shard-{index}-back-relabel.yml")
        back[-1].write_text(yaml.safe_dump(layouts.shard_back_relabel(index)), encoding="utf-8")

    def argv(port: int) -> list[str]:
        return [binary, *layouts.vmagent_args(store, fleet_store, str(keep), shard_back=[str(p) for p in back],
                                              listen=f"127.0.0.1:{port}", queue_dir=str(workdir / "queue")),
                "-remoteWrite.flushInterval=1s"]

    return _start("vmagent", argv, workdir / "vmagent.log", ready_path="/health")


def run_victoriametrics(fleet: Fleet, tmp: Path, interval: str, evaluations: int, cpus: Placement, *,
                        shard_evaluations: int, failslow_shards: int, failslow_evaluations: int) -> Result:
    """A per-node vmalert per shard on the store holding every NPU (each restricted to its shard's nodes), the
    fleet-wide one on a store of its own that holds only what it reads and records (the Prometheus global's
    role): its queries do not queue behind the per-node tier's. All write through a vmagent that sends
    everything to the big store, the fleet's share to the small, and each shard's copy of the fleet records."""
    options = ["-search.latencyOffset=5s", f"-search.maxStalenessInterval={LOOKBACK}"]
    with on_cpus(cpus.node):
        vm = start_victoriametrics(tmp / "victoria-metrics", options)
    stores: list[_Process] = [vm]
    node_tier: list[_Process] = []
    fleet_ruler: _Process | None = None
    try:
        with on_cpus(cpus.fleet):
            fleet_vm = start_victoriametrics(tmp / "victoria-metrics-fleet", options)
        stores.append(fleet_vm)
        with on_cpus(cpus.node):
            relay = _start_relay(tmp / "vmagent", vm.url, fleet_vm.url, fleet.shards)
        stores.append(relay)
        count, write_s = _write_rounds(vm.url + "/api/v1/write", fleet, labelled=True)
        # the fleet store gets the agents' series the fleet tier reads, as the scraping vmagent would send them
        raw = {selector.split("{", 1)[0] for selector in layouts.FEDERATE}
        _write_rounds(fleet_vm.url + "/api/v1/write", fleet, labelled=True,
                      keep=tuple(labels_blob((("__name__", name),)) for name in sorted(raw)))
        written = time.time()
        node_files = _rule_files(tmp, NODE_RULE_FILES)
        failslow_file = _rule_files(tmp, (FAILSLOW_FILE,))

        def node_ruler(index: int, files: Sequence[str] = node_files, name: str = "node") -> _Process:
            with on_cpus(cpus.node):
                return start_vmalert(tmp / f"vmalert-{name}-{index}", [*layouts.vmalert_args(
                    files, vm.url, "http://127.0.0.1:9", evaluation_interval=interval, write_url=relay.url,
                    shard=index), *VMALERT_LOOKBACK])

        # the vmalerts start once the data is in: their first evaluations are measured, as Prometheus' are
        node_tier.extend(node_ruler(index) for index in range(fleet.shards))
        with on_cpus(cpus.fleet):
            fleet_ruler = start_vmalert(tmp / "vmalert-fleet", [*layouts.vmalert_args(
                _rule_files(tmp, FLEET_RULE_FILES), fleet_vm.url, "http://127.0.0.1:9",
                evaluation_interval=interval, write_url=relay.url), *VMALERT_LOOKBACK])
        culprits, culprit_s, alert_s = _wait_culprit(fleet_vm, written, timeout=900)
        times = _vmalert_evaluations([fleet_ruler], evaluations, _window_s(evaluations), "fleet")
        fleet_read = "|".join(sorted(raw))
        read = _query(fleet_vm, f'count({{__name__=~"{fleet_read}", job="npuwatch"}})')
        memory = {"victoria-metrics": rss_bytes(vm.popen.pid),
                  "victoria-metrics (fleet)": rss_bytes(fleet_vm.popen.pid),
                  "vmalert (fleet)": rss_bytes(fleet_ruler.popen.pid),
                  "vmalert (node, largest)": max(rss_bytes(ruler.popen.pid) for ruler in node_tier),
                  "vmagent": rss_bytes(relay.popen.pid)}
        # each shard's per-node groups alone, as with a store that has a core for each shard's queries
        while node_tier:
            _stop(node_tier.pop())
        per_shard = []
        for index in range(fleet.shards):
            node_tier.append(node_ruler(index))
            per_shard.append(_vmalert_evaluations(node_tier, shard_evaluations, _window_s(shard_evaluations), "node"))
            _stop(node_tier.pop())
        # the fail-slow groups beside the shard's per-node groups, in its per-node vmalert
        failslow, failslow_series = [], 0
        for index in range(min(failslow_shards, fleet.shards)):
            failslow_series = _write_failslow(vm.url + "/api/v1/write", fleet, index, failslow_evaluations,
                                              labelled=True)
            node_tier.append(node_ruler(index, [*node_files, *failslow_file], "failslow"))
            failslow.append(_vmalert_evaluations(node_tier, failslow_evaluations,
                                                 _failslow_window_s(failslow_evaluations), "failslow"))
            _stop(node_tier.pop())
        return Result("VictoriaMetrics 1.79 + vmalert", fleet.nodes, count, write_s, times, memory, culprits,
                      int(float(read[0]["value"][1])) if read else 0, culprit_s, alert_s, per_shard, failslow,
                      failslow_series)
    finally:
        for ruler in [*node_tier, *([fleet_ruler] if fleet_ruler else [])]:
            _stop(ruler)
        for store in reversed(stores):
            _stop(store)


ENGINES = {"prometheus": run_prometheus, "victoriametrics": run_victoriametrics}


def _window_s(evaluations: int) -> float:
    """How long the groups' evaluations are collected once the culprit is named."""
    return 120.0 + 60.0 * evaluations


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else float("nan")


def _seconds(interval: str) -> float:
    """A Prometheus duration of one unit (``20s``, ``1m``) in seconds."""
    return float(interval[:-1]) * {"s": 1, "m": 60, "h": 3600}[interval[-1]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,4000,16000", help="fleet sizes in nodes (default 1000,4000,16000)")
    parser.add_argument("--engines", default="prometheus,victoriametrics")
    parser.add_argument("--interval", default="20s", help="the ruler's evaluation interval (default 20s)")
    parser.add_argument("--evaluations", type=int, default=3, help="evaluations timed per fleet-wide group (default 3)")
    parser.add_argument("--shards", type=int, help=f"shards of the per-node tier (default one per {NODES_PER_SHARD} "
                                                   "nodes)")
    parser.add_argument("--shard-evaluations", type=int, default=1,
                        help="evaluations timed per per-node group and shard, each shard alone (default 1)")
    parser.add_argument("--failslow-shards", type=int, default=1,
                        help="shards whose fail-slow groups (alerts/failslow.rules.yml) are timed, the first ones, "
                             "each written its nodes' fail-slow series first; 0: none (default 1)")
    parser.add_argument("--failslow-evaluations", type=int, default=6,
                        help="evaluations timed per fail-slow group and shard (default 6)")
    parser.add_argument("--quick", action="store_true",
                        help="64 nodes in 2 shards, both engines, 2 evaluations (smoke)")
    parser.add_argument("--shared-cores", action="store_true",
                        help="every process on any core (default: the fleet tier on a core of its own)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    sizes = [64] if args.quick else [int(size) for size in args.sizes.split(",")]
    evaluations = 2 if args.quick else args.evaluations
    interval = "5s" if args.quick else args.interval
    engines = [name.strip() for name in args.engines.split(",")]
    cpus = placement(args.shared_cores)
    results: list[Result] = []
    table = Table(("nodes", "series", "engine", "tier", "group", "evaluation (median / worst)", "within",
                   "memory", "to the fleet ruler", "culprit", "hang -> culprit / alert"))
    ok = True
    for size in sizes:
        fleet = Fleet(size, args.shards or (2 if args.quick else -(-size // NODES_PER_SHARD)))
        for engine in engines:
            with tempfile.TemporaryDirectory(prefix=f"npuwatch-fleet-rules-{engine}-") as tmp:
                started = time.monotonic()
                with on_cpus(cpus.node):  # the writer and the polling stay off the fleet tier's core
                    result = ENGINES[engine](fleet, Path(tmp), interval, evaluations, cpus,
                                             shard_evaluations=args.shard_evaluations,
                                             failslow_shards=args.failslow_shards,
                                             failslow_evaluations=2 if args.quick else args.failslow_evaluations)
                print(f"{size} nodes on {result.engine}: {result.series} series written in {result.write_s:.1f} s, "
                      f"measured in {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
            results.append(result)
            named = result.culprits == [(f"node-{fleet.culprit[0]:05d}", str(fleet.culprit[1]))]
            memory = ", ".join(f"{name} {value / MB:.0f} MB" for name, value in result.memory.items())
            rows = [("fleet", group, label, result.evaluations.get(group, []), TARGET_S)
                    for group, (tier, label) in GROUPS.items() if tier == "fleet"]
            rows += [(f"node, shard {index} of {fleet.shards}", group, label, times.get(group, []), _seconds(interval))
                     for index, times in enumerate(result.shards)
                     for group, (tier, label) in GROUPS.items() if tier == "node"]
            rows += [(f"fail-slow, shard {index} of {fleet.shards}", group, label, times.get(group, []), TARGET_S)
                     for index, times in enumerate(result.failslow)
                     for group, (tier, label) in GROUPS.items() if tier == "failslow"]
            for tier, _group, label, times, target in rows:
                fast = bool(times) and _median(times) < target
                ok = ok and fast and named
                shown = (f"{_median(times):.3f} s / {max(times):.3f} s (of {len(times)})" if times
                         else f"none ended in {_window_s(evaluations):.0f} s")
                table.add(size, result.series, result.engine, tier, label, shown,
                          f"{'yes' if fast else 'NO'} (< {target:g} s)", memory,
                          f"{result.fleet_series} series", "yes" if named else f"NO {result.culprits}",
                          f"{result.culprit_s:.0f} s / {result.alert_s:.0f} s")
    table.note(f"{NPUS} NPUs a node, jobs of {JOB_NODES} nodes, one hung; {ROUNDS} remote-write rounds "
               f"{ROUND_GAP_S:.0f} s apart; evaluation every {interval}; each shard's per-node groups timed with that "
               f"shard's ruler alone; the fail-slow groups (every {FAILSLOW_INTERVAL_S:g} s) beside them on the first "
               f"{args.failslow_shards} shard(s), each given its nodes' {FAILSLOW_ERROR_COUNTERS + 5} fail-slow series "
               f"a chip first; machine: {os.cpu_count()} CPUs, {cpus.describe()}")
    print(table.render())
    if args.json:
        args.json.write_text(json.dumps([r.__dict__ for r in results], indent=2, default=str), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
