"""Fleet scale: 32 demo agents, one real Prometheus, the shipped rules and the fleet dashboard.

32 agents (``node`` = fleet-00 .. fleet-31, 2 simulated 910B3 chips each) run in this one
Python process, each with its own demo directory and its own HTTP server on 127.0.0.1:0.
Prometheus scrapes all 32 every 2 s and evaluates the shipped rule files every 1 s, with every
``for:`` shortened to 2 s (as in test_e2e_prometheus.py; expressions untouched). Faults go onto
five nodes and the test checks that each alert fires for exactly the faulty node (and the right
NPU), that no alert of those names fires anywhere else, and that every panel query of the fleet
overview dashboard answers across all 32 nodes.

What runs, and why (CI has 2 cores for the whole suite; the budget here is ~60 s):

- No APScheduler per agent. Measured here: one collection of every group of a 2-chip demo
  agent is 31 fake tool calls, ~1.05 s of CPU (each fake is a Python start-up, ~35 ms). At
  intervals of 5-10 s that is ~0.1 core per agent, 3+ cores for 32, and 32 schedulers would also
  start all first passes at once, so calls would run past their timeouts and healthy nodes would
  report failing collectors (not tried). Instead ``FleetDriver`` runs the agents' own
  ``collect_group`` / internal jobs: first every group of every agent (2 threads; ~1,000 tool
  calls, the bulk of the test's CPU), then one thread that re-runs each group when its
  configured interval is due. Each agent's snapshots, exposition and HTTP server are the
  production code paths; only the timer is shared.
- Intervals: npu-smi info 20 s, usages / health / hccn_tool 60 s, host 60 s, inventory at its
  default (600 s). A snapshot stays exported for 3 x its interval (60 s for the info table),
  longer than the first pass takes even on a busy machine. Steady state is ~16 tool calls/s
  for the whole fleet (~0.6 CPU core, on one thread), most of it the 60 s groups, whose repeats
  start about when the test ends.
- After a fault is switched on, the faulty node's affected groups are queued to run at once
  (what its next scheduled run would do), so the test does not wait out a 60 s interval. Fault
  to alert latency is test_e2e_prometheus.py's subject, not this test's.
- HCCL log scanning is on for one node only (fleet-23, which gets an EI0002 incident) so that
  the HCCL panels have data; probes are off everywhere (the probe panels are listed below as
  the e2e test lists them). No Alertmanager: the alerts are read from Prometheus.
"""

from __future__ import annotations

import heapq
import json
import resource
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agent.check.live import JOB_NAME as VERDICT_JOB
from agent.check.live import verdict_interval
from agent.daemon.assemble import AgentBundle
from agent.daemon.service import Agent, group_interval
from agent.web.server import AgentHTTPServer, make_server
from bench import fleet_size
from collectors.hccl.classify import StreamClassifier
from dashboards.queries import iter_panel_queries, substitute
from tests.support.agent_harness import demo_bundle
from tests.support.paths import REPO
from tests.support.prom_harness import PromProcess, RuleChange, shortened_rules, start_prometheus

JUDGE = f"internal:{VERDICT_JOB}"
RULE_FILES = sorted((REPO / "alerts").glob("*.rules.yml"))
FLEET_DASHBOARD = REPO / "dashboards" / "json" / "npu-fleet-overview.json"

NODES = 32
CHIPS = 2
SCRAPE_S = 2.0
EVAL_S = 1.0
RULE_FOR = "2s"
ALERT_TIMEOUT_S = 45.0

LINK_DOWN, DOUBLE_BIT, CRASHED, HCCL_NODE, ALARM = "fleet-03", "fleet-17", "fleet-11", "fleet-23", "fleet-29"
FAULTY = frozenset({LINK_DOWN, DOUBLE_BIT, CRASHED, HCCL_NODE, ALARM})

# Each alert that must fire: (alertname, labels it must carry).
EXPECTED: list[tuple[str, dict[str, str]]] = [
    ("NPURoCELinkDown", {"node": LINK_DOWN, "npu": "1"}),
    ("NPUHBMDoubleBitECC", {"node": DOUBLE_BIT, "npu": "0"}),
    # Alarm with a RestartBusiness code: the agent's finding is chip_warning (the job restarts, the chip stays)
    ("NPUUnhealthy", {"node": ALARM, "npu": "1", "severity": "warning", "kind": "chip_warning"}),
    ("NPUCollectorFailing", {"node": CRASHED, "tool": "npu_smi"}),
    ("HCCLTimeout", {"node": HCCL_NODE, "code": "EI0002", "category": "exec_timeout"}),
]
# Every alert allowed to be active at all: (alertname, node, npu or "" for node-level alerts).
# The dead RoCE port also fails its net_health check; every npu-smi collector on the crashed
# node fails, which is one NPUCollectorFailing{tool="npu_smi"}.
ALLOWED: frozenset[tuple[str, str, str]] = frozenset({
    ("NPURoCELinkDown", LINK_DOWN, "1"),
    ("NPURoCENetHealthFailed", LINK_DOWN, "1"),
    ("NPUHBMDoubleBitECC", DOUBLE_BIT, "0"),
    ("NPUUnhealthy", ALARM, "1"),
    ("NPUCollectorFailing", CRASHED, ""),
    ("HCCLTimeout", HCCL_NODE, ""),
})

# Panels with no data in this run, and why (the e2e test's reasoning); all others must answer.
NO_DATA_PANELS: dict[str, str] = {
    # Probes need a compute backend and run hourly; off in the demo, covered by tests/*/test_probe_*.py.
    "Probe pass rate": "probes off",
    "Slowest chips (GEMM efficiency)": "probes off",
    "Slowest nodes (all-reduce bus bandwidth)": "probes off",
}

EI0002_BLOCK = (
    "EI0002: [PID: 4242] {ts} The wait execution of the Notify register times out. Reason: The Notify "
    "register has not received the Notify record from remote rank [1].\n"
    "[ERROR] HCCL(4242,python):{ts} [task_exception_handler.cc:908] [4242][TaskExecStage][Timeout][Host]"
    "Task run failed, base information is streamID:[2], taskID[21], tag[AllReduce_10.0.0.1%eth0_60000_0_1]\n"
)


def node_name(index: int) -> str:
    return f"fleet-{index:02d}"


def node_config(name: str) -> dict[str, Any]:
    return {
        "labels": {"node": name},
        "collectors": {
            "npu_smi": {"interval": "20s", "usages_interval": "60s", "health_interval": "60s", "timeout": "10s"},
            "hccn_tool": {"interval": "60s", "timeout": "10s"},
            "hccl_logs": {"enabled": name == HCCL_NODE, "interval": "2s"},
            "host": {"interval": "60s"},
        },
    }


# ----------------------------------------------------------------------------- the shared timer


@dataclass(order=True)
class _Due:
    at: float
    seq: int
    node: str = field(compare=False)
    job: str = field(compare=False)  # "group:<name>" or "internal:<name>"


class FleetDriver:
    """One thread that runs every agent's collections when due, plus run-now requests first."""

    def __init__(self, agents: dict[str, Agent]) -> None:
        self._agents = agents
        self._heap: list[_Due] = []
        self._urgent: list[tuple[str, str]] = []
        self._seq = 0
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._loop, name="fleet-driver", daemon=True)
        self.runs = 0

    def jobs(self, name: str) -> list[tuple[str, float]]:
        """(job, interval) for every group and internal job of one agent."""
        agent = self._agents[name]
        config = agent.config.collectors
        jobs = [(f"group:{group}", group_interval(agent.config, group)) for group in agent.groups()]
        internal = {"host": config.host, "hccl_logs": config.hccl_logs}
        jobs += [(f"internal:{job}", settings.interval) for job, settings in internal.items() if settings.enabled]
        # The node's judgement over what the groups stored, as the agent schedules it (after the groups).
        jobs.append((f"internal:{VERDICT_JOB}", verdict_interval(agent.config)))
        return jobs

    def run_job(self, name: str, job: str) -> None:
        agent = self._agents[name]
        kind, _, what = job.partition(":")
        if kind == "group":
            agent.collect_group(what)
        else:
            agent.run_internal_by_name(what)
        self.runs += 1

    def collect_all_once(self, workers: int = 2) -> None:
        """Every job of every agent once (groups in the agent's order), then schedule the repeats."""

        def one(name: str) -> list[tuple[float, str, str]]:
            started = []
            for job, interval in self.jobs(name):
                started.append((time.monotonic() + interval, name, job))
                self.run_job(name, job)
            return started

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fleet-first") as pool:
            repeats = [due for node in pool.map(one, self._agents) for due in node]
        # Each repeat is due one interval after that job's first run (not after the whole first
        # pass), so the nodes collected first do not outlive their 3 x interval freshness.
        with self._wake:
            for at, name, job in repeats:
                self._seq += 1
                heapq.heappush(self._heap, _Due(at, self._seq, name, job))

    def run_now(self, name: str, *jobs: str) -> None:
        with self._wake:
            self._urgent.extend((name, job) for job in jobs)
            self._wake.notify()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join(timeout=30)

    def _loop(self) -> None:
        while True:
            with self._wake:
                while not self._stopping and not self._urgent and (
                    not self._heap or self._heap[0].at > time.monotonic()
                ):
                    self._wake.wait(timeout=(self._heap[0].at - time.monotonic()) if self._heap else None)
                if self._stopping:
                    return
                if self._urgent:
                    name, job = self._urgent.pop(0)
                else:
                    due = heapq.heappop(self._heap)
                    name, job = due.node, due.job
                    interval = dict(self.jobs(name))[job]
                    self._seq += 1
                    heapq.heappush(self._heap, _Due(max(due.at + interval, time.monotonic()), self._seq,
                                                    name, job))
            self.run_job(name, job)


# ----------------------------------------------------------------------------- the fleet


@dataclass
class Fleet:
    bundles: dict[str, AgentBundle]
    servers: dict[str, AgentHTTPServer]
    driver: FleetDriver
    prom: PromProcess
    rule_changes: list[RuleChange]
    tmp_path: Path
    timings: dict[str, float]

    def demo(self, name: str) -> Any:
        demo = self.bundles[name].demo
        assert demo is not None
        return demo


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    stops: list[Callable[[], None]] = []
    timings: dict[str, float] = {}
    started = time.monotonic()
    try:
        bundles: dict[str, AgentBundle] = {}
        servers: dict[str, AgentHTTPServer] = {}
        for index in range(NODES):
            name = node_name(index)
            bundle = demo_bundle(tmp_path / name, node_config(name), chips=CHIPS)
            bundles[name] = bundle
            stops.append(bundle.agent.stop)
            server = make_server("127.0.0.1", 0, bundle.agent.cache, bundle.agent.health)
            server.start()
            servers[name] = server
            stops.append(server.stop)
        timings["build 32 agents"] = time.monotonic() - started

        rules, changes = shortened_rules(RULE_FILES, tmp_path / "rules", RULE_FOR)
        targets = [f"127.0.0.1:{server.port}" for server in servers.values()]
        # Prometheus starts while the agents collect; an agent with no data yet just serves its
        # collector self-metrics.
        with ThreadPoolExecutor(max_workers=1) as boot:
            prom_future = boot.submit(start_prometheus, tmp_path, targets, rules,
                                      scrape_interval=f"{SCRAPE_S:g}s", evaluation_interval=f"{EVAL_S:g}s")
            driver = FleetDriver({name: bundle.agent for name, bundle in bundles.items()})
            mark = time.monotonic()
            driver.collect_all_once()
            timings["first collection, all agents"] = time.monotonic() - mark
            prom = prom_future.result()
        stops.append(prom.stop)
        driver.start()
        stops.append(driver.stop)
        yield Fleet(bundles, servers, driver, prom, changes, tmp_path, timings)
    finally:
        for stop in reversed(stops):
            stop()


# ----------------------------------------------------------------------------- helpers


def _startup_absent(labels: dict[str, str]) -> bool:
    """NPUWatchDown's absent(up) branch: true until Prometheus's first scrape."""
    return labels.get("alertname") == "NPUWatchDown" and "instance" not in labels


def _active_alerts(prom: PromProcess, state: str | None = None) -> list[dict[str, str]]:
    return [
        a["labels"] for a in prom.alerts()
        if (state is None or a["state"] == state) and not _startup_absent(a["labels"])
    ]


def _key(labels: dict[str, str]) -> tuple[str, str, str]:
    return labels["alertname"], labels.get("node", ""), labels.get("npu", "")


def _write_ei0002_plog(log_dir: Path, at: float) -> None:
    """A new CANN plog holding one EI0002 incident, written atomically."""
    micros = int(at * 1e6) % 1_000_000
    stamp = f"{time.strftime('%Y-%m-%d-%H:%M:%S', time.localtime(at))}.{micros // 1000:03d}.{micros % 1000:03d}"
    text = EI0002_BLOCK.format(ts=stamp)
    events, _ = StreamClassifier(source="check").feed_lines(text.splitlines())
    assert [(e.code, e.category) for e in events] == [("EI0002", "exec_timeout")], events
    plog_dir = log_dir / "debug" / "plog"
    plog_dir.mkdir(parents=True, exist_ok=True)
    path = plog_dir / f"plog-4242_{time.strftime('%Y%m%d%H%M%S', time.localtime(at))}000.log"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.rename(path)


def _wait_for_alerts(prom: PromProcess, expected: list[tuple[str, dict[str, str]]], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    missing = expected
    while True:
        firing = _active_alerts(prom, "firing")
        missing = [
            (name, labels) for name, labels in expected
            if not any(a["alertname"] == name and all(a.get(k) == v for k, v in labels.items()) for a in firing)
        ]
        if not missing:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"alerts not firing after {timeout:.0f}s: {missing}; active: {sorted(map(_key, firing))}")
        time.sleep(0.5)


# ----------------------------------------------------------------------------- the test


@pytest.mark.slow
def test_fleet_alerts_hit_only_faulty_nodes_and_fleet_panels_answer(fleet: Fleet) -> None:
    prom = fleet.prom
    changed = {change.alert for change in fleet.rule_changes}
    assert {"NPURoCELinkDown", "NPUUnhealthy", "NPUCollectorFailing"} <= changed, fleet.rule_changes

    # Baseline: every node scraped with all its chips, every link up, no double-bit errors.
    mark = time.monotonic()
    prom.wait_for(f'count(count by (node) (npu_chips{{job="npuwatch"}} == {CHIPS})) == {NODES}', timeout=30)
    prom.wait_for(f'count(npu_roce_link_up{{job="npuwatch"}} == 1) == {NODES * CHIPS}', timeout=30)
    prom.wait_for(f'count(npu_hbm_ecc_current_errors{{job="npuwatch",bit="double"}} == 0) == {NODES * CHIPS}',
                  timeout=30)
    prom.wait_for(f'count(npu_healthy{{job="npuwatch"}} == 1) == {NODES * CHIPS}', timeout=30)
    # The scanner's zero EI0002 series has two samples, so increase() can see the incident.
    prom.wait_for(f'count_over_time(npu_hccl_errors_total{{node="{HCCL_NODE}",code="EI0002"}}[1m]) >= 2')
    assert prom.targets_up()
    assert len(prom.query('up{job="npuwatch"} == 1')) == NODES
    quiet = _active_alerts(prom)
    assert quiet == [], f"alerts before any fault: {quiet}"
    fleet.timings["baseline in Prometheus"] = time.monotonic() - mark

    # Faults on five nodes; their affected collections run now, as their next runs would.
    mark = time.monotonic()
    fleet.demo(LINK_DOWN).set_fault("link_down", chip=1)
    fleet.driver.run_now(LINK_DOWN, "group:roce", JUDGE)
    fleet.demo(DOUBLE_BIT).set_fault("hbm_dbe", chip=0, interval_s=5)
    fleet.driver.run_now(DOUBLE_BIT, "group:health", JUDGE)
    # RestartBusiness: a level that pages nothing of its own, so NPUUnhealthy pages (80E18005, RestartNPU,
    # pages NPUFaultResetWhenIdle instead).
    fleet.demo(ALARM).set_fault("health", chip=1, state="Alarm", codes=["8C204E00"])
    fleet.driver.run_now(ALARM, "group:info", "group:health", JUDGE)
    fleet.demo(CRASHED).set_fault("npu_smi_crash")
    fleet.driver.run_now(CRASHED, "group:info", "group:usages", "group:health", JUDGE)
    _write_ei0002_plog(fleet.demo(HCCL_NODE).directory / "log", time.time())
    fleet.driver.run_now(HCCL_NODE, "internal:hccl_logs", JUDGE)

    _wait_for_alerts(prom, EXPECTED, ALERT_TIMEOUT_S)
    fleet.timings["faults -> all expected alerts firing"] = time.monotonic() - mark

    # Exactly the faulty nodes: each alert name fires on the nodes (and NPUs) expected, nowhere else.
    active = _active_alerts(prom)
    wrong = sorted(
        key for key in map(_key, active) if key not in ALLOWED and (key[0], key[1], "") not in ALLOWED
    )
    assert not wrong, f"alerts on healthy nodes, wrong NPUs or of unexpected kinds: {wrong}"
    by_name: dict[str, set[str]] = {}
    for labels in _active_alerts(prom, "firing"):
        by_name.setdefault(labels["alertname"], set()).add(labels.get("node", ""))
    for name, labels in EXPECTED:
        assert by_name[name] == {labels["node"]}, (name, by_name[name])
    # One alert for the broken npu-smi, not one per npu-smi collector.
    crashed_tools = [a["tool"] for a in active if a["alertname"] == "NPUCollectorFailing"]
    assert crashed_tools == ["npu_smi"], crashed_tools

    # The fleet view agrees: one unhealthy chip, failing collectors only on the crashed node.
    assert prom.values('npu_healthy{job="npuwatch"} == 0', "node") == {ALARM: 0.0}
    assert prom.values('count by (node) (npu_roce_link_up{job="npuwatch"} == 0)', "node") == {LINK_DOWN: 1.0}
    failing_nodes = prom.values('count by (node) (npuwatch_collector_up{job="npuwatch"} == 0'
                                ' and on (job, instance, collector) increase(npuwatch_collector_errors_total'
                                '{job="npuwatch"}[15m]) > 0)', "node")
    assert set(failing_nodes) == {CRASHED}, failing_nodes

    # Every fleet-overview panel answers over the whole fleet, except the listed no-data ones.
    mark = time.monotonic()
    document = json.loads(FLEET_DASHBOARD.read_text(encoding="utf-8"))
    empty: set[str] = set()
    unexpected: list[str] = []
    ran = 0
    for panel, expr in iter_panel_queries(document):
        ran += 1
        query = substitute(expr, {"node": ".*"})
        if prom.query(query):
            continue
        empty.add(panel)
        if panel not in NO_DATA_PANELS:
            unexpected.append(f"{panel!r}: {query}")
    assert ran >= 15, ran
    assert not unexpected, "fleet panel queries without data:\n" + "\n".join(unexpected)
    stale = sorted(set(NO_DATA_PANELS) - empty)
    assert not stale, f"these panels have data now; drop them from NO_DATA_PANELS: {stale}"
    # The Verdict row's "Nodes not ok" names the nodes the faults went onto, as their agents judged them.
    judged = prom.values('npu_node_status{job="npuwatch",status!="ok"}', "node")
    assert {LINK_DOWN, DOUBLE_BIT, ALARM, CRASHED} <= set(judged), judged
    # The crashed node's last good chip list is served until it is 3 intervals old; all others report.
    reporting = set(prom.values('count by (node) (npu_chips{job="npuwatch"})', "node"))
    assert reporting | {CRASHED} == {node_name(i) for i in range(NODES)}, reporting
    fleet.timings["dashboard queries"] = time.monotonic() - mark

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"\nfleet of {NODES} x {CHIPS} chips: {fleet.driver.runs} collection runs")
    for phase, seconds in fleet.timings.items():
        print(f"  {phase:40s} {seconds:6.1f} s")
    print(f"  CPU of the finished tool calls           {children.ru_utime + children.ru_stime:6.1f} s")


# ----------------------------------------------------------------------------- bench/fleet_size.py


def test_fleet_size_table_adds_up() -> None:
    """The sizing table's totals are the sum of its family rows, and the fleet rows follow from them."""
    big = fleet_size.exposition(16, "inprocess")
    small = fleet_size.exposition(8, "inprocess")
    families = fleet_size.families(big)
    total = sum(families.values())
    assert total == sum(1 for line in big.splitlines() if line and not line.startswith(b"#"))
    # Per-chip families scale with the chip count; node-level ones do not.
    assert families["npu_healthy"] == 16 and fleet_size.families(small)["npu_healthy"] == 8
    assert families["npu_chips"] == 1 and families["npuwatch_build_info"] == 1

    rows = {row[0].strip(): row for row in fleet_size.build_table(big, small, 1000).rows}
    assert rows["series per node"][1] == f"{total:,}"
    assert rows["fleet series, 1,000 nodes"][1] == f"{total * 1000:,}"
    assert rows["fleet samples/s, scrape 15 s"][1] == f"{total * 1000 / 15:,.0f}"
    assert rows["fleet samples/s, scrape 30 s"][1] == f"{total * 1000 / 30:,.0f}"
    family_rows = {name: int(row[1].replace(",", "")) for name, row in rows.items() if name in families}
    assert family_rows == dict(families)

    assert "npu_topology_link" not in families  # opt-in: off by default
    without_hccs_bw = fleet_size.families(fleet_size.exposition(16, "inprocess", ["npu_smi_hccs_bw"]))
    hccs_bw = "npu_hccs_bandwidth_bytes_per_second"
    assert hccs_bw in families and hccs_bw not in without_hccs_bw
    with pytest.raises(ValueError, match="cannot disable"):
        fleet_size.disable_config(["no_such_source"])
