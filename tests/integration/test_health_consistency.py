"""``check``, ``diagnose``, ``top``, the alerts and ``triage`` judge each demo chip fault the same way.

Every chip fault a check judges is planted on its own NPU of one demo node, alone and all together;
the real ``npuwatch check --json`` and ``npuwatch diagnose --json`` run on it in child processes and
must give the same status on the same NPU for every check, and the same lead cause (the verdict's
cause and NPU). The agent's own judgement of the same node (``npuwatch once --demo``: its exported findings,
chip statuses and node verdict), read as ``npuwatch top`` reads it, must show the same kind and status on
that NPU and lead with the same cause, status and NPU as ``check``; the finding its generated alert reads
(alerts/faults.rules.yml) is exported on that NPU and on no healthy NPU. A one-node ``npuwatch bundle`` read by
``npuwatch triage`` lists the same local faults (the bundle holds no HCCL incident, so its verdict is "no
incident; local faults: ..."). That the shipped alert of each fault fires on its NPU is the fleet end-to-end
test's (tests/e2e/test_fleet_alerts.py); tests/unit/test_alert_generate.py holds the generated alerts to the
registry.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.demo.node import DemoNode
from agent.health.thresholds import fault_kind
from agent.health.verdict_metrics import FAULT_METRIC
from agent.top.model import NodeView, parse_view, samples_of
from tests.support.paths import REPO

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
    Planted("hccs_error", 6, "hccs_unhealthy", in_bundle=False),
    Planted("hot", 7, "chip_too_hot", (("celsius", 97.0),), in_bundle=False),
    Planted("health", 8, "chip_warning", (("state", "Warning"), ("codes", "80CB8002"))),
    Planted("vanish", 9, "chip_missing", in_bundle=False),
)


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


def exported(node: DemoNode, tmp_path: Path) -> tuple[NodeView, list[tuple[str, dict[str, str], float]]]:
    """The agent's exposition of the node, one pass of every collector, and the view top makes of it."""
    config = tmp_path / "once.yaml"
    config.write_text(yaml.safe_dump({"expected_chips": CHIPS, "labels": {"node": NODE}}))
    once = npuwatch("once", "--demo", "--demo-dir", str(node.directory), "--demo-chips", str(CHIPS),
                    "--config", str(config))
    assert once.returncode == 0, once.stderr
    samples = [(name, dict(labels), value) for name, labels, value in samples_of(once.stdout)]
    return parse_view(samples), samples


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


@pytest.mark.parametrize("planted", PLANTED, ids=[f"{p.fault}-{p.kind}" for p in PLANTED])
def test_each_fault_alone_has_one_status_in_check_and_diagnose(tmp_path: Path, planted: Planted) -> None:
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
    view, samples = exported(node, tmp_path)
    assert_top_and_alerts_agree(view, samples, (planted,))
    assert_agent_leads_as_check(view, check)


def test_every_fault_together_and_the_bundle_lists_the_same_local_faults(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    for planted in PLANTED:
        plant(node, planted)
    check, diagnose = run_both(tmp_path, node)
    assert_agree(check, diagnose, PLANTED)
    assert (check["exit_code"], diagnose["exit_code"]) == (2, 2)
    assert_same_lead(check, diagnose)
    assert (check["verdict"]["cause"], check["verdict"]["npu"]) == ("link_down", 0)  # the heaviest kind
    view, samples = exported(node, tmp_path)
    assert_top_and_alerts_agree(view, samples, PLANTED)
    assert_agent_leads_as_check(view, check)

    bundle = tmp_path / "node.tar.gz"
    made = npuwatch("bundle", "--demo", "--demo-dir", str(node.directory), "--demo-chips", str(CHIPS),
                    "-o", str(bundle))
    assert made.returncode == 0, made.stderr
    triaged = npuwatch("triage", "--json", str(bundle))
    report = json.loads(triaged.stdout)
    assert report["incidents"] == []
    verdict = report["verdict"]
    assert verdict.startswith("no incident; local faults: "), verdict
    listed = verdict.split(": ", 1)[1]
    for planted in PLANTED:
        if planted.in_bundle:
            label = re.escape(fault_kind(planted.kind).label)
            assert re.search(rf"(^|, ){label} on \S+ NPU {planted.npu}(,|$)", listed), (planted, listed)


def _exported_with(node: DemoNode, tmp_path: Path, settings: dict[str, Any]) -> tuple[NodeView, dict[str, Any]]:
    config = tmp_path / "override.yaml"
    config.write_text(yaml.safe_dump({"expected_chips": CHIPS, "labels": {"node": NODE}, **settings}))
    demo = ["--demo", "--demo-dir", str(node.directory), "--demo-chips", str(CHIPS), "--config", str(config)]
    once = npuwatch("once", *demo)
    assert once.stdout, once.stderr  # exit 1 when a collector is down, the exposition all the same
    checked = npuwatch("check", "--json", *demo)
    assert checked.stdout, checked.stderr
    view = parse_view([(name, dict(labels), value) for name, labels, value in samples_of(once.stdout)])
    return view, json.loads(checked.stdout)


@pytest.mark.parametrize(("fault", "params", "settings", "kind"), [
    ("hot", {"celsius": 92.0}, {"check": {"max_temperature": 90, "skip": ["agent"]}}, "chip_too_hot"),
    ("npu_smi_crash", {}, {"check": {"skip": ["agent"]}}, "tool_hung"),
], ids=["max_temperature-override", "crashing-npu-smi"])
def test_the_agent_judges_with_the_config_and_node_checks_as_check_does(
        tmp_path: Path, fault: str, params: dict[str, Any], settings: dict[str, Any], kind: str) -> None:
    node = DemoNode(tmp_path / "demo").create(chips=CHIPS)
    node.set_fault(fault, chip=3, **params) if fault == "hot" else node.set_fault(fault)
    view, check = _exported_with(node, tmp_path, settings)
    assert check["verdict"]["status"] == "fail" and check["verdict"]["cause"] == kind, check["verdict"]
    assert_agent_leads_as_check(view, check)


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
    view, _ = _exported_with(node, tmp_path, off)
    assert (view.status, view.cause) == ("ok", None), (view.status, view.cause, view.node_faults)
    node.set_fault("link_down", chip=2)
    view, _ = _exported_with(node, tmp_path, off)
    assert (view.status, view.cause, view.lead_npu) == ("fail", "link_down", 2)
