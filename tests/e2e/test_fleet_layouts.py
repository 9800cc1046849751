"""The fleet beyond one Prometheus, on the real engines: the two layouts of deploy/prometheus/ side by side,
scraping the same four demo agents of one HCCL communicator, with the culprit's node alone on its shard.

- Sharded: two Prometheus shards on ``layouts.shard_config`` (hashmod over the target address: the
  ports are drawn until node-3 hashes to shard 1 and the three others to shard 0), a global
  Prometheus on ``layouts.global_config`` federating what the fleet-wide groups read, one
  Alertmanager. No shard holds both sides of the incident (the blames are on shard 0, the culprit's
  device IP and link on shard 1); the global joins what the shards record per node (it holds no
  per-NPU series of the healthy fleet), and the shards federate back what it asks about.
- VictoriaMetrics, as ``flags.txt``: vmagent (``layouts.vmagent_args``) scrapes the agents, labels each
  with its shard (vmagent's hashmod: node-3 on shard 1 here too), and remote-writes everything into one
  VictoriaMetrics and the fleet tier's share (``layouts.fleet_store_relabel``) into a second, the fleet
  store; three vmalerts run the shipped rule files (``layouts.vmalert_args``: the per-node files on the big
  store, one vmalert per shard restricted to its nodes; the fleet-wide ones on the fleet store), write back
  through vmagent and send to a second Alertmanager. The fleet store holds no per-NPU series of the
  healthy fleet.

One coordinated hang (``npuwatch demo fleet hccl-hang``) makes node-3 NPU 1 the culprit. Checked:
HCCLCulpritSuspected reaches each Alertmanager's webhook for the culprit, once, and for nothing else;
no alert of the sharded layout is notified twice (each group runs on one tier); ``npuwatch triage
--prometheus`` over both shards and over VictoriaMetrics names the culprit, over one shard it cannot.

What differs from production (CI time): every ``for:`` is 1s (``shortened_rules``), scrape,
federation and evaluation every second, VictoriaMetrics' ``-search.latencyOffset`` 1s, vmagent and
vmalert flush every second.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from agent.web.server import make_server
from tests.support.agent_harness import demo_bundle
from tests.support.hccl_fleet import (
    CHIPS,
    CULPRIT,
    CULPRIT_NPU,
    CULPRIT_RANK,
    NODES,
    Driver,
    node_config,
    run_fleet_fault,
    triage_json,
)
from tests.support.paths import REPO
from tests.support.prom_harness import (
    PromProcess,
    WebhookReceiver,
    _Process,
    shortened_rules,
    start_alertmanager,
    start_prometheus_with,
    start_victoriametrics,
    start_vmagent,
    start_vmalert,
)
from tests.support.vm_hashmod import vmagent_shard

pytestmark = pytest.mark.slow

_SPEC = importlib.util.spec_from_file_location("npuwatch_layouts", REPO / "deploy" / "prometheus" / "layouts.py")
assert _SPEC is not None and _SPEC.loader is not None
layouts = importlib.util.module_from_spec(_SPEC)
sys.modules["npuwatch_layouts"] = layouts
_SPEC.loader.exec_module(layouts)

RULE_FILES = sorted((REPO / "alerts").glob("*.rules.yml"))
SHARDS = 2
INTERVAL = "1s"
RULE_FOR = "1s"
READY_S = 90.0  # everything scraped and evaluated on a loaded 2-core machine
PAGE_S = 120.0  # the hang -> the culprit's notification (vmalert's chain of recording rules goes through storage)


def shard_of(address: str, shards: int = SHARDS) -> int:
    """Prometheus's ``hashmod``: the last 8 bytes of the MD5 of the value, big-endian, modulo."""
    return int.from_bytes(hashlib.md5(address.encode()).digest()[8:], "big") % shards


@dataclass
class Layouts:
    shards: list[PromProcess]
    global_: PromProcess
    vm: PromProcess
    fleet_vm: PromProcess
    vmalert: _Process
    sharded_hook: WebhookReceiver
    vm_hook: WebhookReceiver
    targets: dict[str, dict[str, str]]
    summary: dict[str, Any]
    fault_at: float

    def diagnostics(self) -> str:
        parts = [f"targets {self.targets}"]
        for process in (*self.shards, self.global_, self.vm, self.fleet_vm, self.vmalert):
            parts.append(f"--- {process.name} log tail ---\n{process.log_tail(3000)}")
        return "\n".join(parts)


def _agent_server(bundle: Any, shard: int) -> Any:
    """The agent's HTTP server on a port whose address hashes to ``shard`` in both layouts (Prometheus' hashmod
    and vmagent's)."""
    for _attempt in range(400):
        server = make_server("127.0.0.1", 0, bundle.agent.cache, bundle.agent.health)
        address = f"127.0.0.1:{server.port}"
        if shard_of(address) == shard == vmagent_shard(address, SHARDS):
            server.start()
            return server
        server.server_close()
    raise AssertionError(f"no port hashing to shard {shard} in 400 tries")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layouts]:
    tmp = tmp_path_factory.mktemp("layouts")
    stops: list[Callable[[], None]] = []
    try:
        targets: dict[str, dict[str, str]] = {}
        agents = {}
        dirs = []
        for name in NODES:
            bundle = demo_bundle(tmp / name, node_config(name), chips=CHIPS)
            stops.append(bundle.agent.stop)
            server = _agent_server(bundle, 1 if name == CULPRIT else 0)
            stops.append(server.stop)
            targets[f"127.0.0.1:{server.port}"] = {"node": name}
            agents[name] = bundle.agent
            assert bundle.demo is not None
            dirs.append(bundle.demo.directory)
        rules, changes = shortened_rules(RULE_FILES, tmp / "rules", RULE_FOR)
        assert ("triage.rules.yml", "HCCLCulpritSuspected", "1m", RULE_FOR) in {
            (c.file, c.alert, c.old_for, c.new_for) for c in changes}
        rules_dir = str(tmp / "rules")
        sharded_hook, vm_hook = WebhookReceiver().start(), WebhookReceiver().start()
        stops += [sharded_hook.stop, vm_hook.stop]
        sharded_am = start_alertmanager(tmp / "am-sharded", sharded_hook.url)
        stops.append(sharded_am.stop)
        vm_am = start_alertmanager(tmp / "am-vm", vm_hook.url)
        stops.append(vm_am.stop)
        am_host = urllib.parse.urlparse(sharded_am.url).netloc

        shards = []

        def shard_config(index: int, global_address: str) -> dict[str, Any]:
            return dict(layouts.shard_config(index, SHARDS, static_targets=targets, rules_dir=rules_dir,
                                             alertmanagers=[am_host], scrape_interval=INTERVAL,
                                             evaluation_interval=INTERVAL, global_address=global_address))

        for index in range(SHARDS):  # the global's port is known once it runs: the shards reload then
            shards.append(start_prometheus_with(shard_config(index, "127.0.0.1:9"), tmp / f"shard-{index}",
                                                f"prometheus-shard-{index}"))
            stops.append(shards[-1].stop)
        config = layouts.global_config([f"127.0.0.1:{shard.port}" for shard in shards], rules_dir=rules_dir,
                                       alertmanagers=[am_host], scrape_interval=INTERVAL,
                                       evaluation_interval=INTERVAL)
        global_ = start_prometheus_with(config, tmp / "global", "prometheus-global")
        stops.append(global_.stop)
        for index, shard in enumerate(shards):
            _reload(shard, shard_config(index, f"127.0.0.1:{global_.port}"))

        vm = start_victoriametrics(tmp / "victoria-metrics")
        stops.append(vm.stop)
        fleet_vm = start_victoriametrics(tmp / "victoria-metrics-fleet")
        stops.append(fleet_vm.stop)
        relabel = tmp / "fleet-store-relabel.yml"
        relabel.write_text(yaml.safe_dump(layouts.fleet_store_relabel()), encoding="utf-8")
        back = [tmp / f"shard-{index}-back-relabel.yml" for index in range(SHARDS)]
        for index, path in enumerate(back):
            path.write_text(yaml.safe_dump(layouts.shard_back_relabel(index)), encoding="utf-8")
        vmagent = start_vmagent(
            tmp / "vmagent", layouts.scrape_config(static_targets=targets, scrape_interval=INTERVAL, shards=SHARDS),
            make_args=lambda scrape, queue, listen: layouts.vmagent_args(
                vm.url, fleet_vm.url, str(relabel), shard_back=[str(path) for path in back],
                scrape_config_path=scrape, listen=listen, queue_dir=queue))
        stops.append(vmagent.stop)
        # as flags.txt: the per-node groups on the big store, one vmalert per shard of the nodes, the fleet-wide
        # ones (which read what those record) on the fleet store; all write back through vmagent
        fleet_names = set(layouts.FLEET_RULE_FILES)
        vmalerts = [start_vmalert(tmp / f"vmalert-node-{index}", layouts.vmalert_args(
            [str(path) for path in rules if path.name not in fleet_names], vm.url, vm_am.url,
            evaluation_interval=INTERVAL, write_url=vmagent.url, shard=index)) for index in range(SHARDS)]
        vmalerts.append(start_vmalert(tmp / "vmalert-fleet", layouts.vmalert_args(
            [str(path) for path in rules if path.name in fleet_names], fleet_vm.url, vm_am.url,
            evaluation_interval=INTERVAL, write_url=vmagent.url)))
        stops += [process.stop for process in vmalerts]
        vmalert = vmalerts[-1]

        driver = Driver(agents)
        driver.start()
        stops.append(driver.stop)

        # the healthy fleet on both layouts: every target up where it belongs, the triage inputs in place
        shards[0].wait_for(f'count(up{{job="npuwatch"}} == 1) == {len(NODES) - 1}', timeout=READY_S)
        shards[1].wait_for('count(up{job="npuwatch"} == 1) == 1', timeout=READY_S)
        vm.wait_for(f'count(up{{job="npuwatch", shard="0"}} == 1) == {len(NODES) - 1}', timeout=READY_S)
        vm.wait_for(f'count(up{{job="npuwatch", shard="1", node="{CULPRIT}"}} == 1) == 1', timeout=READY_S)
        # the global federates no `up` (no fleet-wide rule reads it): every node's log scanner instead
        global_.wait_for(f'count(npuwatch_collector_up{{job="npuwatch", collector="hccl_logs"}} == 1) == {len(NODES)}',
                         timeout=READY_S)
        vm.wait_for(f'count(npu_roce_ip_info{{job="npuwatch"}}) == {len(NODES) * CHIPS}', timeout=READY_S)
        fleet_vm.wait_for(f'count(npuwatch_collector_up{{job="npuwatch"}} == 1) == {len(NODES)}', timeout=READY_S)
        for store in (global_, vm, fleet_vm):
            assert store.query("hccl:culprit:info") == [], store.name
        # a healthy fleet: the per-node tier reduces every NPU's series to nothing the fleet tier needs
        per_npu = "npu_roce_ip_info|npu_hccl_rank_last_seen_timestamp_seconds|hccl:node_.*"
        for store in (global_, fleet_vm):
            assert store.query(f'{{__name__=~"{per_npu}"}}') == [], store.name
        # the fleet store keeps only the log scanner of the agents' self-metrics, and no per-node alert
        assert {s["metric"]["collector"] for s in fleet_vm.query("npuwatch_collector_up")} == {"hccl_logs"}
        assert fleet_vm.query('up{job="npuwatch"}') == []

        summary = run_fleet_fault(dirs)
        assert summary["culprit"]["rank"] == CULPRIT_RANK
        yield Layouts(shards, global_, vm, fleet_vm, vmalert, sharded_hook, vm_hook, targets, summary, time.time())
    finally:
        for stop in reversed(stops):
            stop()


def _reload(prometheus: PromProcess, config: dict[str, Any]) -> None:
    prometheus.config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    request = urllib.request.Request(prometheus.url + "/-/reload", method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200, prometheus.name


def _culprits(hook: WebhookReceiver) -> list[tuple[str, str]]:
    return sorted((a.labels.get("node", ""), a.labels.get("npu", "")) for a in hook.alerts()
                  if a.name == "HCCLCulpritSuspected")


def _twice(hook: WebhookReceiver) -> list[str]:
    """Alerts notified firing more than once."""
    seen: dict[tuple[tuple[str, str], ...], int] = {}
    for alert in hook.alerts():
        key = tuple(sorted(alert.labels.items()))
        seen[key] = seen.get(key, 0) + 1
    return [f"{dict(key)} x{count}" for key, count in seen.items() if count > 1]


def _settle(hook: WebhookReceiver, victims: set[str], timeout: float) -> None:
    """Until every victim node's HCCLTimeout has been notified, then a few cycles more."""
    deadline = time.monotonic() + timeout
    while {a.labels.get("node") for a in hook.alerts() if a.name == "HCCLTimeout"} < victims:
        assert time.monotonic() < deadline, f"HCCLTimeout not notified for all of {victims}: {hook.alerts()}"
        time.sleep(0.5)
    time.sleep(5)


def test_the_sharded_layout_pages_the_culprit_once(fleet: Layouts) -> None:
    # no shard can join the incident: the blames are on shard 0, the culprit's device IP on shard 1
    assert fleet.shards[0].query(f'npu_roce_ip_info{{node="{CULPRIT}"}}') == []
    assert fleet.shards[1].query("npu_hccl_peer_blamed_timestamp_seconds") == []
    alert = fleet.sharded_hook.wait_for("HCCLCulpritSuspected", timeout=PAGE_S, node=CULPRIT, npu=str(CULPRIT_NPU))
    assert alert is not None, ("no HCCLCulpritSuspected from the global; its alerts: "
                               f"{fleet.global_.alerts()}\n{fleet.diagnostics()}")
    assert alert.labels["comm"] == fleet.summary["comm"]
    # what reached the global: the ranks the incident asked about and the culprit's fault, no NPU's device IP
    assert fleet.global_.query("npu_roce_ip_info") == []
    owners = fleet.global_.query("hccl:node_rank:owner_last_seen_timestamp_seconds")
    assert {(o["metric"]["node"], o["metric"]["rank"]) for o in owners} == {(CULPRIT, str(CULPRIT_RANK))}, owners
    print(f"\nsharded: HCCLCulpritSuspected {alert.received_at - fleet.fault_at:.1f} s after the hang was written")
    _settle(fleet.sharded_hook, set(NODES) - {CULPRIT}, PAGE_S)
    assert _culprits(fleet.sharded_hook) == [(CULPRIT, str(CULPRIT_NPU))]
    assert not _twice(fleet.sharded_hook), _twice(fleet.sharded_hook)
    # each group on one tier: the global pages only fleet-wide alerts, the shards only per-node ones
    fleet_alerts = {rule["alert"] for name in layouts.FLEET_RULE_FILES
                    for group in _groups(name) for rule in group["rules"] if "alert" in rule}
    assert {a["labels"]["alertname"] for a in fleet.global_.alerts()} <= fleet_alerts
    for shard in fleet.shards:
        assert not {a["labels"]["alertname"] for a in shard.alerts()} & {"HCCLCulpritSuspected"}
    # the victims' HCCLTimeout come from the shards, each node's once (node-3's other NPU times out too)
    victims = {a.labels["node"] for a in fleet.sharded_hook.alerts() if a.name == "HCCLTimeout"}
    assert victims >= set(NODES) - {CULPRIT}, victims


def test_vmalert_pages_the_culprit_once(fleet: Layouts) -> None:
    alert = fleet.vm_hook.wait_for("HCCLCulpritSuspected", timeout=PAGE_S, node=CULPRIT, npu=str(CULPRIT_NPU))
    assert alert is not None, f"no HCCLCulpritSuspected from vmalert\n{fleet.diagnostics()}"
    assert alert.labels["comm"] == fleet.summary["comm"]
    assert f"NPU {CULPRIT_NPU} of {CULPRIT}" in alert.annotations["description"]
    print(f"\nvmalert: HCCLCulpritSuspected {alert.received_at - fleet.fault_at:.1f} s after the hang was written")
    _settle(fleet.vm_hook, set(NODES) - {CULPRIT}, PAGE_S)
    assert _culprits(fleet.vm_hook) == [(CULPRIT, str(CULPRIT_NPU))]
    assert not _twice(fleet.vm_hook), _twice(fleet.vm_hook)
    # the fleet store held the incident's share only: the culprit's rank, no NPU's device IP, no per-node alert
    assert fleet.fleet_vm.query("npu_roce_ip_info") == []
    owners = fleet.fleet_vm.query("hccl:node_rank:owner_last_seen_timestamp_seconds")
    assert {(o["metric"]["node"], o["metric"]["rank"]) for o in owners} == {(CULPRIT, str(CULPRIT_RANK))}, owners
    held = {s["metric"]["alertname"] for s in fleet.fleet_vm.query("ALERTS")}
    assert "HCCLCulpritSuspected" in held and "HCCLTimeout" not in held, held
    # the per-node tier in two vmalerts: the culprit's rank answered by its shard, the victims paged by theirs
    assert {(o["metric"]["node"], o["metric"]["shard"]) for o in owners} == {(CULPRIT, "1")}, owners
    timeouts = fleet.vm.query('ALERTS{alertname="HCCLTimeout", alertstate="firing"}')
    assert {(a["metric"]["node"], a["metric"]["shard"]) for a in timeouts} >= {
        (node, "0") for node in NODES if node != CULPRIT}, timeouts


def _groups(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load((REPO / "alerts" / name).read_text(encoding="utf-8"))["groups"])


def _incident(report: dict[str, Any]) -> tuple[Any, ...]:
    [incident] = report["incidents"]
    best = incident["culprits"][0]
    return (incident["comm"], tuple(incident["reporting_ranks"]), tuple(incident["silent_ranks"]),
            best["node"], best["npu"], best["rank"], best["cause"])


def test_triage_over_the_shards_and_over_victoriametrics_names_the_culprit(fleet: Layouts) -> None:
    expected = (fleet.summary["comm"], tuple(r for r in range(CHIPS * len(NODES)) if r != CULPRIT_RANK),
                (CULPRIT_RANK,), CULPRIT, CULPRIT_NPU, CULPRIT_RANK, "link_down")
    deadline = time.monotonic() + PAGE_S
    while True:  # until the link-down has reached the stores (a few scrapes after the hang)
        both, code = triage_json(*[a for shard in fleet.shards for a in ("--prometheus", shard.url)], "--since", "1h")
        victoria, vm_code = triage_json("--prometheus", fleet.vm.url, "--since", "1h")
        if code == vm_code == 2 and _incident(both) == expected and _incident(victoria) == expected:
            break
        assert time.monotonic() < deadline, (f"shards: {code} {both.get('incidents')}\n"
                                             f"VictoriaMetrics: {vm_code} {victoria.get('incidents')}")
        time.sleep(2)
    assert not both["problems"] and not victoria["problems"], (both["problems"], victoria["problems"])
    # one shard alone holds the victims but not the culprit's node: it cannot locate the link-down
    alone, _ = triage_json("--prometheus", fleet.shards[0].url, "--since", "1h")
    lone = _incident(alone)
    assert (lone[3], lone[6]) != (CULPRIT, "link_down"), alone
