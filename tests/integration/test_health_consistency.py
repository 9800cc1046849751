"""``check``, ``diagnose``, ``top``, the alerts and ``triage`` judge each demo chip fault the same way.

Every chip fault a check judges is planted on its own NPU of one demo node, alone and all together;
the real ``npuwatch check --json`` and ``npuwatch diagnose --json`` run on it in child processes and
must give the same status on the same NPU for every check, and the same lead cause (the verdict's
cause and NPU). The agent's own judgement of the same node (``npuwatch once --demo``: its exported findings,
chip statuses and node verdict), read as ``npuwatch top`` reads it, must show the same kind and status on
that NPU and lead with the same cause, status and NPU as ``check``; the finding its generated alert reads
(alerts/faults.rules.yml) is exported on that NPU and on no healthy NPU. The same exposition, served to the real
``npuwatch top --once`` (its header leads as check does, each faulty NPU's Health cell names its kind) and scraped by a
real Prometheus (one for the module), gives ``npuwatch triage --prometheus`` check's verdict object with the same
status, cause and NPU, and the planted kinds among its findings; a one-node ``npuwatch bundle`` (with the
node's config) read by ``npuwatch triage`` does the same for every fault whose readings a bundle holds. A log
fault is judged alike by check, diagnose, ``scan-logs`` and the agent. That the shipped alert of each fault fires on
its NPU is the fleet end-to-end test's (tests/e2e/test_fleet_alerts.py); tests/unit/test_alert_generate.py holds the
generated alerts to the registry.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.cli import main as npuwatch_in_process
from agent.demo.node import DemoNode
from agent.health.thresholds import fault_kind
from agent.health.verdict_metrics import FAULT_METRIC
from agent.top.model import NodeView, parse_view, samples_of
from tests.support.paths import REPO
from tests.support.prom_harness import PromProcess, start_prometheus
from tests.support.static_exposition import StaticExposition

CHIPS = 10
NODE = "consistency-node"


@dataclass(frozen=True)
class Planted:
    fault: str
    npu: int
    kind: str  # the fault kind of agent.health.thresholds it is judged as
    params: tuple[tuple[str, Any], ...] = ()
    in_bundle: bool = True  # the bundle holds the tool output that shows it

    @property
    def check(self) -> str:
        return fault_kind(self.kind).check

    @property
    def status(self) -> str:
        return fault_kind(self.kind).status


PLANTED = (
    Planted("link_down", 0, "link_down"),
    Planted("link_flap", 1, "link_flap", (("period_s", 4.0), ("since", -120.0))),
    Planted("optics_no_light", 2, "optics_dark"),
    Planted("net_health_fail", 3, "net_health"),
    Planted("hbm_dbe", 4, "hbm_dbe"),
    Planted("health", 5, "chip_fault_reset", (("state", "Alarm"), ("codes", "8C084E00"))),
    Planted("hccs_error", 6, "hccs_unhealthy"),
    Planted("hot", 7, "chip_too_hot", (("celsius", 97.0),)),
    Planted("health", 8, "chip_warning", (("state", "Warning"), ("codes", "80CB8002"))),
    Planted("vanish", 9, "chip_missing"),
)
CASES = itertools.count(1)  # each case's node name, so Prometheus holds one case's series in its window


def npuwatch(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=REPO, check=False)


def plant(node: DemoNode, planted: Planted) -> None:
    params = dict(planted.params)
    if "since" in params:
        params["since"] = time.time() + float(params["since"])
    node.set_fault(planted.fault, chip=planted.npu, **params)


def statuses(document: dict[str, Any]) -> dict[tuple[str, int | None], str]:
    """(check, NPU) -> the worst status of that NPU's results in the check (None: node-wide results)."""
    order = {"PASS": 0, "WARN": 1, "UNKNOWN": 2, "FAIL": 3}
    found: dict[tuple[str, int | None], str] = {}
    for check in document["checks"]:
        for result in check["results"]:
            key = (check["name"], result["npu"])
            if key not in found or order[result["status"]] > order[found[key]]:
                found[key] = result["status"]
    return found


def run_both(tmp_path: Path, node: DemoNode) -> tuple[dict[str, Any], dict[str, Any]]:
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"expected_chips": CHIPS, "check": {"skip": ["agent"]},
                                      "labels": {"node": NODE}}))
    demo = ["--demo", "--demo-dir", str(node.directory), "--demo-chips", str(CHIPS), "--config", str(config)]
    checked = npuwatch("check", "--json", *demo)
    diagnosed = npuwatch("diagnose", "--json", "--sample-gap", "0.2", *demo)
    assert checked.stdout, checked.stderr
    assert diagnosed.stdout, diagnosed.stderr
    return json.loads(checked.stdout), json.loads(diagnosed.stdout)


@dataclass(frozen=True)
class Exported:
    """The agent's exposition of one case's node (its own node name), and the view top makes of it."""

    name: str
    text: str
    view: NodeView
    samples: list[tuple[str, dict[str, str], float]]


def exported(node: DemoNode, tmp_path: Path, settings: dict[str, Any] | None = None) -> Exported:
    """The agent's exposition of the node, one pass of every collector, and the view top makes of it."""
    name = f"{NODE}-{next(CASES)}"
    config = tmp_path / "once.yaml"
    config.write_text(yaml.safe_dump({"expected_chips": CHIPS, **(settings or {}), "labels": {"node": name}}))
    once = npuwatch("once", "--demo", "--demo-dir", str(node.directory), "--demo-chips", str(CHIPS),
                    "--config", str(config))
    assert once.stdout, once.stderr  # exit 1 when a collector is down, the exposition all the same
    samples = [(metric, dict(labels), value) for metric, labels, value in samples_of(once.stdout)]
    return Exported(name, once.stdout, parse_view(samples), samples)


def finding_on(kind: str, samples: list[tuple[str, dict[str, str], float]], npu: int | None) -> bool:
    """The exported finding the kind's generated alert (alerts/faults.rules.yml) reads, on ``npu`` (None: the node)."""
    where = "" if npu is None else str(npu)
    return any(name == FAULT_METRIC and labels.get("kind") == kind and labels.get("npu", "") == where
               for name, labels, _ in samples)


def assert_top_and_alerts_agree(view: NodeView, samples: list[tuple[str, dict[str, str], float]],
                                planted: tuple[Planted, ...]) -> None:
    rows = {row.npu: row for row in view.rows}
    faulty = {fault.npu for fault in planted}
    for fault in planted:
        if fault.kind == "chip_missing":  # a missing chip has no row: a node-wide finding
            assert view.node_faults[fault.kind].status == fault.status.lower(), (fault, view.node_faults)
            continue
        found = {(f.kind, f.status) for f in rows[fault.npu].faults.values()}
        assert (fault.kind, fault.status.lower()) in found, (fault, found)
        if fault_kind(fault.kind).alert:  # what its alert reads: on this NPU, on no healthy one
            assert finding_on(fault.kind, samples, fault.npu), fault
            assert not any(finding_on(fault.kind, samples, npu) for npu in rows if npu not in faulty), fault
    for npu, row in rows.items():
        if npu not in faulty:
            assert row.status == "ok" and not row.faults, (npu, row.status, row.faults)


def assert_agent_leads_as_check(view: NodeView, check: dict[str, Any]) -> None:
    verdict = check["verdict"]
    assert (view.status, view.cause, view.lead_npu) == (verdict["status"], verdict["cause"], verdict["npu"]), \
        (view.status, view.cause, view.lead_npu, verdict)


def assert_same_lead(check: dict[str, Any], diagnose: dict[str, Any]) -> None:
    ours, theirs = check["verdict"], diagnose["verdict"]
    assert (ours["status"], ours["cause"], ours["npu"]) == (theirs["status"], theirs["cause"], theirs["npu"]), \
        (ours, theirs)


def assert_agree(check: dict[str, Any], diagnose: dict[str, Any], planted: tuple[Planted, ...]) -> None:
    by_check, by_diagnose = statuses(check), statuses(diagnose)
    for fault in planted:
        where = None if fault.kind == "chip_missing" else fault.npu
        assert by_check.get((fault.check, where)) == fault.status, (fault, by_check)
        assert by_diagnose.get((fault.check, where)) == fault.status, (fault, by_diagnose)
    flapping = {fault.npu for fault in planted if fault.kind == "link_flap"}
    common = {name for name, _ in by_check} & {name for name, _ in by_diagnose}
    for (name, npu), status in by_check.items():
        if name not in common or npu is None or (npu in flapping and name != "roce_flaps"):
            continue  # a flapping port's link, light and net_health change between the two readings
        assert by_diagnose.get((name, npu)) == status, (name, npu, status, by_diagnose.get((name, npu)))


# ----------------------------------------------------------------------------- the surfaces that read the export


@dataclass(frozen=True)
class Fleet:
    exposition: StaticExposition
    prometheus: PromProcess


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    """One Prometheus for the module, scraping every second the exposition each case serves in turn."""
    exposition = StaticExposition()
    prometheus = start_prometheus(tmp_path_factory.mktemp("prometheus"), [exposition.target])
    try:
        yield Fleet(exposition, prometheus)
    finally:
        prometheus.stop()
        exposition.close()


def in_process(*argv: str) -> tuple[int, str]:
    """``npuwatch ARGV`` in this process (no interpreter start: the file runs many), its exit code and stdout."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = npuwatch_in_process(list(argv))
    assert out.getvalue(), err.getvalue()
    return code, out.getvalue()


def served(fleet: Fleet, export: Exported) -> float:
    """Serve the case's exposition until Prometheus has scraped it twice; the start of a window that holds this
    case's series alone (the previous case's node went stale at the first scrape of this one)."""
    fleet.exposition.body = export.text.encode()
    selector = f'timestamp(npu_node_status{{node="{export.name}"}})'
    first = float(fleet.prometheus.wait_for(selector)[0]["value"][1])
    fleet.prometheus.wait_for(f"{selector} > {first + 0.5}")
    return first + 0.5


def assert_triage_leads_as_check(report: dict[str, Any], code: int, check: dict[str, Any], *,
                                 planted: tuple[Planted, ...], source: str, lead: bool = True) -> None:
    """Triage's verdict is check's object with check's status, cause and NPU, and check's exit code (``lead``);
    each planted kind is among its findings with its status on its NPU."""
    ours, theirs = report["verdict"], check["verdict"]
    assert set(ours) >= set(theirs), (source, sorted(ours), sorted(theirs))
    if lead:
        assert (ours["status"], ours["cause"], ours["npu"]) == (theirs["status"], theirs["cause"], theirs["npu"]), \
            (source, ours, theirs)
        assert (code, report["exit_code"]) == (check["exit_code"],) * 2, (source, code, check["exit_code"])
    found = {(f["npu"], f["kind"], f["status"]) for f in report["findings"]}
    for fault in planted:
        npu = None if fault.kind == "chip_missing" else fault.npu
        assert (npu, fault.kind, fault.status.lower()) in found, (source, fault, sorted(found, key=str))


def assert_top_once_leads_as_check(fleet: Fleet, export: Exported, check: dict[str, Any],
                                   planted: tuple[Planted, ...]) -> None:
    """The real ``top --once`` over the served exposition: its verdict line leads with check's status, cause and
    NPU; each faulty NPU's Health cell names the kind that leads on that chip in the agent's export."""
    code, frame = in_process("top", "--once", "--no-color", "--url", f"http://{fleet.exposition.target}/metrics")
    assert code == 0, frame
    lines = frame.splitlines()
    verdict = check["verdict"]
    header = next((line for line in lines if re.match(r"(FAIL|WARN|UNKNOWN|ok)\b", line)), None)
    assert header is not None, frame
    label = fault_kind(verdict["cause"]).label
    assert header.startswith(f"{verdict['status'].upper() if verdict['status'] != 'ok' else 'ok'}: {label}"), \
        (header, verdict)
    if verdict["npu"] is not None:
        assert f"NPU {verdict['npu']}" in header, (header, verdict)
    columns = next(line for line in lines if line.startswith("NPU"))
    start, end = columns.index("Health"), columns.index("Link")
    health = {int(line.split()[0]): line[start:end].strip() for line in lines if re.match(r"\s*\d+ ", line)}
    rows = {row.npu: row for row in export.view.rows}
    for fault in planted:
        if fault.kind != "chip_missing":
            assert health[fault.npu] == fault_kind(rows[fault.npu].cause).short, (fault, health[fault.npu])


def assert_every_surface_agrees(fleet: Fleet, export: Exported, check: dict[str, Any], *,
                                planted: tuple[Planted, ...], tmp_path: Path, node: DemoNode,
                                config: Path | None = None) -> None:
    """top --once, triage over Prometheus and (when a bundle holds every planted fault's readings) triage over
    the node's bundle, against check."""
    since = served(fleet, export)
    assert_top_once_leads_as_check(fleet, export, check, planted)
    code, out = in_process("triage", "--json", "--prometheus", fleet.prometheus.url, "--since", f"{since:.3f}")
    report = json.loads(out)
    assert report["nodes"] == [export.name] and report["verdict"]["node"] in (export.name, None), report["nodes"]
    assert_triage_leads_as_check(report, code, check, planted=planted, source="triage --prometheus")
    held = tuple(fault for fault in planted if fault.in_bundle)
    if held:  # the lead too when the bundle holds what leads
        bundle = tmp_path / "node.tar.gz"
        made = npuwatch("bundle", "--demo", "--demo-dir", str(node.directory), "--demo-chips", str(CHIPS),
                        "--config", str(config or tmp_path / "config.yaml"), "-o", str(bundle))
        assert made.returncode == 0, made.stderr
        code, out = in_process("triage", "--json", str(bundle))
        lead = len(held) == len(planted) or check["verdict"]["cause"] in {fault.kind for fault in held}
        assert_triage_leads_as_check(json.loads(out), code, check, planted=held, source="triage over a bundle",
                                     lead=lead)


@pytest.mark.parametrize("planted", PLANTED, ids=[f"{p.fault}-{p.kind}" for p in PLANTED])
def test_each_fault_alone_has_one_status_on_every_surface(tmp_path: Path, planted: Planted, fleet: Fleet) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    plant(node, planted)
    check, diagnose = run_both(tmp_path, node)
    assert_agree(check, diagnose, (planted,))
    assert_same_lead(check, diagnose)
    verdict = check["verdict"]
    assert verdict["npu"] == (None if planted.kind == "chip_missing" else planted.npu), verdict
    # the planted kind leads, or a heavier one the same fault brings (no light also takes the link down)
    label = fault_kind(planted.kind).label
    assert verdict["cause"] == planted.kind or any(other.startswith(label) for other in verdict["also"]), verdict
    export = exported(node, tmp_path)
    assert_top_and_alerts_agree(export.view, export.samples, (planted,))
    assert_agent_leads_as_check(export.view, check)
    assert_every_surface_agrees(fleet, export, check, planted=(planted,), tmp_path=tmp_path, node=node)


def test_every_fault_together_has_one_lead_on_every_surface(tmp_path: Path, fleet: Fleet) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    for planted in PLANTED:
        plant(node, planted)
    check, diagnose = run_both(tmp_path, node)
    assert_agree(check, diagnose, PLANTED)
    assert (check["exit_code"], diagnose["exit_code"]) == (2, 2)
    assert_same_lead(check, diagnose)
    assert (check["verdict"]["cause"], check["verdict"]["npu"]) == ("link_down", 0)  # the heaviest kind
    export = exported(node, tmp_path)
    assert_top_and_alerts_agree(export.view, export.samples, PLANTED)
    assert_agent_leads_as_check(export.view, check)
    assert_every_surface_agrees(fleet, export, check, planted=PLANTED, tmp_path=tmp_path, node=node)


@pytest.mark.parametrize(("fault", "npu"), [("roce_cqe", 2), ("hccl_timeout", 1)])
def test_a_log_fault_has_one_verdict_in_check_diagnose_scan_logs_and_the_agent(tmp_path: Path, fault: str,
                                                                               npu: int) -> None:
    """HCCL errors in the node's logs: ``scan-logs`` over the log directory leads with check's verdict (status,
    cause, NPU) and exits as check does, as diagnose and the agent do. (Triage asks who stopped the job: a
    timeout is an incident there, docs/health-checks.md#exit-status.)"""
    node = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    node.set_fault(fault, chip=npu)
    check, diagnose = run_both(tmp_path, node)
    assert_same_lead(check, diagnose)
    assert check["verdict"]["check"] == "hccl_errors" and check["verdict"]["status"] != "ok", check["verdict"]
    scanned = npuwatch("scan-logs", "--json", str(node.log_root))
    scan = json.loads(scanned.stdout)
    assert (scan["verdict"]["status"], scan["verdict"]["cause"], scan["verdict"]["npu"]) == (
        check["verdict"]["status"], check["verdict"]["cause"], check["verdict"]["npu"]), (scan["verdict"], check)
    assert scanned.returncode == check["exit_code"], (scanned.returncode, check["exit_code"])
    export = exported(node, tmp_path, {"check": {"skip": ["agent"]}})
    assert_agent_leads_as_check(export.view, check)


def _exported_with(node: DemoNode, tmp_path: Path, settings: dict[str, Any]) -> tuple[Exported, dict[str, Any]]:
    config = tmp_path / "override.yaml"
    config.write_text(yaml.safe_dump({"expected_chips": CHIPS, "labels": {"node": NODE}, **settings}))
    demo = ["--demo", "--demo-dir", str(node.directory), "--demo-chips", str(CHIPS), "--config", str(config)]
    checked = npuwatch("check", "--json", *demo)
    assert checked.stdout, checked.stderr
    return exported(node, tmp_path, settings), json.loads(checked.stdout)


@pytest.mark.parametrize(("fault", "params", "settings", "kind"), [
    ("hot", {"celsius": 92.0}, {"check": {"max_temperature": 90, "skip": ["agent"]}}, "chip_too_hot"),
    ("npu_smi_crash", {}, {"check": {"skip": ["agent"]}}, "tool_hung"),
], ids=["max_temperature-override", "crashing-npu-smi"])
def test_the_agent_judges_with_the_config_and_node_checks_as_check_does(
        tmp_path: Path, fleet: Fleet, *, fault: str, params: dict[str, Any], settings: dict[str, Any], kind: str
) -> None:
    """The agent and every surface that reads it judge with the node's config: the override's bundle carries it, so
    triage over the bundle finds the 92 C chip too hot as check does (a hung tool leaves nothing to bundle)."""
    node = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    node.set_fault(fault, chip=3, **params) if fault == "hot" else node.set_fault(fault)
    export, check = _exported_with(node, tmp_path, settings)
    assert check["verdict"]["status"] == "fail" and check["verdict"]["cause"] == kind, check["verdict"]
    assert_agent_leads_as_check(export.view, check)
    planted = (Planted(fault, 3, kind, in_bundle=fault == "hot"),)
    if fault == "hot":
        assert_every_surface_agrees(fleet, export, check, planted=planted, tmp_path=tmp_path, node=node,
                                    config=tmp_path / "override.yaml")


def test_a_chip_that_faults_again_and_again_is_a_repeat_offender_to_the_agent_and_to_check(tmp_path: Path) -> None:
    """Three resets of NPU 1 in a row, as the agent's health polls see them: the agent's verdict and ``check``
    (reading the agent's fault history) both name NPU 1 a repeat offender, after the chip reads healthy again."""
    from tests.support.agent_harness import demo_bundle

    state = tmp_path / "state"
    settings = {"expected_chips": 4, "state_dir": str(state), "labels": {"node": NODE}, "check": {"skip": ["agent"]}}
    bundle = demo_bundle(tmp_path, settings, chips=4)
    assert bundle.demo is not None
    try:
        for _ in range(int(fault_kind("repeat_offender").threshold or 0)):
            bundle.demo.set_fault("health", chip=1, state="Alarm", codes=["8C084E00"])
            bundle.agent.collect_once()
            bundle.demo.clear_fault("health", chip=1)
            bundle.agent.collect_once()
        view = parse_view(samples_of(bundle.agent.cache.render().body.decode()))
    finally:
        bundle.agent.stop()
    row = next(row for row in view.rows if row.npu == 1)
    assert (row.status, row.cause) == ("fail", "repeat_offender"), (row.status, row.cause, row.faults)
    config = tmp_path / "check.yaml"
    config.write_text(yaml.safe_dump(settings))
    checked = npuwatch("check", "--json", "--demo", "--demo-dir", str(tmp_path / "demo"), "--demo-chips", "4",
                       "--config", str(config))
    assert checked.stdout, checked.stderr
    assert_agent_leads_as_check(view, json.loads(checked.stdout))


def test_collectors_turned_off_are_no_failed_tool_and_no_check(tmp_path: Path) -> None:
    """A healthy node whose config turns some collectors off reads ok to the agent: a source not collected is no
    call that failed, and the checks that read it are not run."""
    node = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    off = {"collectors": {"npu_smi": {"disable": ["npu_smi_ecc", "npu_smi_health", "npu_smi_board", "npu_smi_hccs"]},
                          "hccn_tool": {"disable": ["hccn_net_health", "hccn_optical", "hccn_stat", "hccn_speed"]}},
           "check": {"skip": ["agent"]}}
    view = _exported_with(node, tmp_path, off)[0].view
    assert (view.status, view.cause) == ("ok", None), (view.status, view.cause, view.node_faults)
    node.set_fault("link_down", chip=2)
    view = _exported_with(node, tmp_path, off)[0].view
    assert (view.status, view.cause, view.lead_npu) == ("fail", "link_down", 2)
