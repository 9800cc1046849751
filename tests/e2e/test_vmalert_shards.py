"""The VictoriaMetrics layout's per-node tier split over several vmalerts (deploy/prometheus/layouts.py), on the
real engines: each shard's vmalert reads and records only its share of the nodes, and together the shards name
the same culprit, with the same evidence, as one per-node vmalert over the whole fleet.

Two layouts side by side, each its own stores, vmagent relay and vmalerts as ``flags.txt`` has them: one with a
single per-node shard, one with three. Both are written the same synthetic fleet (bench/fleet_rules.py's
``Fleet``: 12 nodes of 16 NPUs, one hung job whose culprit is node 5 NPU 9), by remote write, once, each node's
series labelled with its shard as the layout's scrape job labels them (here node i is on shard i % shards: the
layout's hashmod is vmagent's, tested in tests/integration/test_vm_shards.py). The per-node tier runs the
fleet-wide rules' per-node halves, the fleet tier the fleet-wide files; every second.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from bench._remote_write import labels_blob, remote_write
from bench.fleet_rules import Fleet, layouts
from tests.support.paths import REPO
from tests.support.prom_harness import PromProcess, _Process, start_victoriametrics, start_vmagent, start_vmalert

pytestmark = pytest.mark.slow

NODES = 12
SHARDED = 3
INTERVAL = "1s"
CULPRIT_S = 150.0  # the chain through storage: node faults, the fleet's questions, the nodes' answers, the culprit
# one written sample stays visible for the whole test (nothing scrapes again)
STORE_ARGS = ["-search.maxStalenessInterval=30m"]
NODE_RECORDS = ("hccl:node_comm:rank_timeouts", "npuwatch:npu_probe_gemm_flops:node_median_by_model_dtype",
                "npuwatch:npu_probe_gemm_efficiency_ratio:node_median_by_model_dtype")


@dataclass
class Layout:
    shards: int
    store: PromProcess
    fleet_store: PromProcess
    processes: list[_Process]

    def diagnostics(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log_tail(2000)}" for p in self.processes)


def _write(layout: Layout, fleet: Fleet) -> None:
    now = time.time()
    series = fleet.series(now, labelled=True)
    remote_write(layout.store.url + "/api/v1/write", series, int(now * 1000))
    # what the scraping vmagent sends the fleet store: the raw series the fleet-wide groups read
    raw = tuple(labels_blob((("__name__", s.split("{", 1)[0]),)) for s in sorted(layouts.FEDERATE))
    remote_write(layout.fleet_store.url + "/api/v1/write", [s for s in series if s[0].startswith(raw)],
                 int(now * 1000))


def _start(tmp: Path, shards: int, stops: list[Callable[[], None]]) -> Layout:
    store = start_victoriametrics(tmp / "victoria-metrics", STORE_ARGS)
    stops.append(store.stop)
    fleet_store = start_victoriametrics(tmp / "victoria-metrics-fleet", STORE_ARGS)
    stops.append(fleet_store.stop)
    relabel = tmp / "fleet-store-relabel.yml"
    relabel.write_text(yaml.safe_dump(layouts.fleet_store_relabel()), encoding="utf-8")
    back = []
    for index in range(shards):
        back.append(tmp / f"shard-{index}-back-relabel.yml")
        back[-1].write_text(yaml.safe_dump(layouts.shard_back_relabel(index)), encoding="utf-8")
    relay = start_vmagent(tmp / "vmagent", {"scrape_configs": []}, make_args=lambda _scrape, queue, listen: (
        layouts.vmagent_args(store.url, fleet_store.url, str(relabel), shard_back=[str(p) for p in back],
                             listen=listen, queue_dir=queue)))
    stops.append(relay.stop)
    rules = REPO / "alerts"
    node = [str(rules / name) for name in layouts.SHARD_HALVES]
    fleet = [str(rules / name) for name in layouts.FLEET_RULE_FILES]
    rulers = [start_vmalert(tmp / f"vmalert-node-{index}", layouts.vmalert_args(
        node, store.url, "http://127.0.0.1:9", evaluation_interval=INTERVAL, write_url=relay.url, shard=index))
        for index in range(shards)]
    rulers.append(start_vmalert(tmp / "vmalert-fleet", layouts.vmalert_args(
        fleet, fleet_store.url, "http://127.0.0.1:9", evaluation_interval=INTERVAL, write_url=relay.url)))
    stops.extend(ruler.stop for ruler in rulers)
    return Layout(shards, store, fleet_store, [store, fleet_store, relay, *rulers])


@pytest.fixture(scope="module")
def layouts_(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Layout, Layout]]:
    tmp = tmp_path_factory.mktemp("vmalert-shards")
    stops: list[Callable[[], None]] = []
    try:
        one = _start(tmp / "unsharded", 1, stops)
        many = _start(tmp / "sharded", SHARDED, stops)
        for layout in (one, many):
            _write(layout, Fleet(NODES, layout.shards))
        yield one, many
    finally:
        for stop in reversed(stops):
            stop()


def _culprits(layout: Layout) -> set[tuple[str, ...]]:
    deadline = time.monotonic() + CULPRIT_S
    while True:
        found = layout.fleet_store.query("hccl:culprit:info")
        evidence = layout.fleet_store.query("hccl:culprit_evidence:info")
        if found and len(evidence) >= 3:  # the rank blamed, the device IP blamed, the link down
            return {(s["metric"]["node"], s["metric"]["npu"], s["metric"]["comm"]) for s in found} | {
                (s["metric"]["node"], s["metric"]["npu"], s["metric"]["evidence"]) for s in evidence}
        assert time.monotonic() < deadline, f"no culprit with {layout.shards} shards\n{layout.diagnostics()}"
        time.sleep(1)


def test_the_shards_together_name_the_culprit_one_vmalert_names(layouts_: tuple[Layout, Layout]) -> None:
    one, many = layouts_
    expected = _culprits(one)
    assert ("node-00005", "9", "its RoCE link is down") in expected, expected
    assert _culprits(many) == expected


def test_each_shard_reads_and_records_only_its_nodes(layouts_: tuple[Layout, Layout]) -> None:
    _, many = layouts_
    _culprits(many)  # the chain has run through every group
    nodes = {f"node-{index:05d}": str(index % SHARDED) for index in range(NODES)}
    for name in NODE_RECORDS:
        found = many.store.wait_for(f"count({name}) >= {NODES}", timeout=CULPRIT_S) and many.store.query(name)
        placed = {(s["metric"]["node"], s["metric"].get("shard")) for s in found}
        # every node recorded once, by its own shard: a shard that read every node would record the others too
        assert placed == set(nodes.items()), (name, sorted(placed))
    # the incident's answers come from the culprit's shard only (the fleet asked every shard about its rank)
    owners = many.store.query("hccl:node_rank:owner_last_seen_timestamp_seconds")
    assert {(s["metric"]["node"], s["metric"]["shard"]) for s in owners} == {("node-00005", nodes["node-00005"])}
    assert {s["metric"]["shard"] for s in many.store.query("hccl:node_comm:rank_timeouts")} == {"0", "1", "2"}
