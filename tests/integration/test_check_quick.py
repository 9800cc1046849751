"""`npuwatch check --level quick` against the demo node's fake tools, run as real subprocesses.

One healthy run shows every quick check passing; each check then fails (or warns, where that is
its verdict) on the demo fault that breaks what it looks at, and the verdict and the exit code
follow in both styles.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from agent.demo.node import DemoNode
from tests.support.check_harness import CHIPS, by_name, check_config, failing_npus, run_check

QUICK = ["tools", "chip_count", "chip_health", "hbm_ecc", "hccs", "temperature", "roce_link", "roce_flaps",
         "net_health", "optics", "roce_errors", "roce_ip", "versions", "hccl_errors", "agent"]



@pytest.fixture
def node(tmp_path: Path) -> DemoNode:
    return DemoNode(tmp_path / "demo").create(chips=CHIPS)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any]]:
    demo = DemoNode(tmp_path_factory.mktemp("healthy") / "demo").create(chips=CHIPS)
    return run_check(demo.directory, check_config())


def test_a_healthy_node_passes_every_quick_check_but_the_absent_agent(healthy: tuple[int, dict[str, Any]]) -> None:
    code, report = healthy
    checks = by_name(report)
    assert list(checks) == QUICK
    assert {name: check["status"] for name, check in checks.items() if name != "agent"} == dict.fromkeys(
        [name for name in QUICK if name != "agent"], "PASS")
    # no agent listens on the configured port: that check could not look, which is never a pass
    assert checks["agent"]["status"] == "UNKNOWN"
    assert report["verdict"]["status"] == "unknown" and code == 3
    assert report["chips"] == CHIPS and report["model"] == "910B3"
    assert checks["chip_count"]["value"] == CHIPS and checks["chip_count"]["threshold"] == CHIPS


@pytest.mark.parametrize(("check", "fault", "chip", "params"), [
    ("chip_health", "health", 2, {"state": "Alarm"}),
    ("hbm_ecc", "hbm_dbe", 1, {}),
    ("hccs", "hccs_error", 3, {}),
    ("roce_link", "link_down", 2, {}),
    ("net_health", "net_health_fail", 1, {}),
    ("optics", "optics_no_light", 3, {}),
    ("versions", "firmware_mismatch", 2, {}),
])
def test_a_chip_fault_fails_its_check_on_that_chip_only(node: DemoNode, check: str, fault: str, chip: int,
                                                         params: dict[str, Any]) -> None:
    node.set_fault(fault, chip=chip, **params)
    code, report = run_check(node.directory, check_config(), only=(check,))
    result = by_name(report)[check]
    assert result["status"] == "FAIL", result
    assert failing_npus(result) == {chip}
    assert report["verdict"]["status"] == "fail" and code == 2
    assert report["message"].startswith(f"FAIL {check}")


def test_a_vanished_chip_fails_the_count_against_expected_chips(node: DemoNode) -> None:
    node.set_fault("vanish", chip=1)
    code, report = run_check(node.directory, check_config(), only=("chip_count",))
    result = by_name(report)["chip_count"]
    assert (result["status"], result["value"], result["threshold"]) == ("FAIL", CHIPS - 1, CHIPS)
    assert result["basis"] == "config expected_chips" and code == 2


def test_chip_count_without_expected_chips_is_unknown_not_a_pass(node: DemoNode) -> None:
    config = check_config({"expected_chips": 0})
    from agent.check.runner import RunOptions, run_level

    report = run_level(config, RunOptions(only=("chip_count",), tool_env=node.env()),)
    assert report.checks[0].status == "UNKNOWN"  # (outside the demo setup, which fills in its chip count)


def test_a_warning_health_state_warns(node: DemoNode) -> None:
    node.set_fault("health", chip=0, state="Warning", codes="80CB8002")  # RestartRequest: a level that warns
    for style, expected in (("nagios", 1), ("npd", 0)):
        code, report = run_check(node.directory, check_config(), only=("chip_health",), exit_codes=style)
        assert by_name(report)["chip_health"]["status"] == "WARN"
        assert report["verdict"]["status"] == "warn" and code == expected


@pytest.mark.parametrize(("tool_fault", "kind"), [
    ("npu_smi_crash", "npu-smi"), ("hccn_tool_crash", "hccn_tool"), ("hccn_tool_garbage", "hccn_tool"),
    ("hccn_tool_hang", "hccn_tool"),
])
def test_a_broken_tool_fails_the_tools_check(node: DemoNode, tool_fault: str, kind: str) -> None:
    node.set_fault(tool_fault)
    started = time.monotonic()
    code, report = run_check(node.directory, check_config(), only=("tools", "roce_link"))
    elapsed = time.monotonic() - started
    tools = by_name(report)["tools"]
    assert tools["status"] == "FAIL", tools
    assert any(r["status"] == "FAIL" and r["evidence"].startswith(kind) for r in tools["results"]), tools
    assert code == 2
    if tool_fault == "hccn_tool_hang":  # one timeout (2 s), not one per call
        assert "no answer within 2s" in tools["evidence"]
        assert elapsed < 60


def test_npu_smi_crash_leaves_the_chip_checks_unknown_not_passing(node: DemoNode) -> None:
    node.set_fault("npu_smi_crash")
    code, report = run_check(node.directory, check_config(), only=("chip_health", "hbm_ecc", "roce_link"))
    assert {c["name"]: c["status"] for c in report["checks"]} == dict.fromkeys(
        ("chip_health", "hbm_ecc", "roce_link"), "UNKNOWN")
    assert code == 3


def test_hbm_isolated_pages_warn_up_to_the_threshold_and_fail_above(node: DemoNode) -> None:
    node.set_fault("hbm_dbe", chip=2)
    node.clear_fault("hbm_dbe", chip=2)  # no current double-bit error; its pages stay isolated
    _, report = run_check(node.directory, check_config(), only=("hbm_ecc",))
    result = by_name(report)["hbm_ecc"]
    pages = next(r["value"] for r in result["results"] if r["npu"] == 2)
    assert pages >= 1 and result["status"] == "WARN"
    _, at_limit = run_check(node.directory, check_config({"check": {"max_isolated_pages": pages}}),
                            only=("hbm_ecc",))
    assert by_name(at_limit)["hbm_ecc"]["status"] == "WARN"
    _, above = run_check(node.directory, check_config({"check": {"max_isolated_pages": pages - 1}}),
                         only=("hbm_ecc",))
    assert by_name(above)["hbm_ecc"]["status"] == "FAIL"
    assert failing_npus(by_name(above)["hbm_ecc"]) == {2}


def test_one_link_down_event_warns_inside_the_flap_window_two_fail_and_none_outside(node: DemoNode) -> None:
    now = time.time()
    node.set_fault("link_down", chip=1, since=now - 7200)
    node.clear_fault("link_down", chip=1, at=now - 6600)  # up again 110 minutes ago
    _, outside = run_check(node.directory, check_config({"check": {"flap_window": "1h"}}), only=("roce_flaps",))
    assert by_name(outside)["roce_flaps"]["status"] == "PASS"
    _, inside = run_check(node.directory, check_config({"check": {"flap_window": "3h"}}), only=("roce_flaps",))
    flaps = by_name(inside)["roce_flaps"]
    assert flaps["status"] == "WARN" and failing_npus(flaps, "WARN") == {1}
    assert next(r["value"] for r in flaps["results"] if r["npu"] == 1) == 1
    node.set_fault("link_down", chip=1, since=now - 3000)
    node.clear_fault("link_down", chip=1, at=now - 2900)  # a second episode, 48 minutes ago
    _, twice = run_check(node.directory, check_config({"check": {"flap_window": "3h"}}), only=("roce_flaps",))
    flaps = by_name(twice)["roce_flaps"]
    assert flaps["status"] == "FAIL" and failing_npus(flaps) == {1}
    assert next(r["value"] for r in flaps["results"] if r["npu"] == 1) == 2


def test_net_health_init_warns(node: DemoNode) -> None:
    node.set_fault("net_health_fail", chip=0, status="Init")
    _, report = run_check(node.directory, check_config(), only=("net_health",))
    assert by_name(report)["net_health"]["status"] == "WARN"


def test_an_address_that_differs_from_hccn_conf_fails(node: DemoNode) -> None:
    run_check(node.directory, check_config(), only=("roce_ip",))  # writes DIR/hccn.conf
    conf = node.directory / "hccn.conf"
    text = conf.read_text()
    conf.write_text(text.replace("address_3=", "address_3=10.9.9.9\n#was=", 1))
    code, report = run_check(node.directory, check_config(), only=("roce_ip",))
    result = by_name(report)["roce_ip"]
    assert result["status"] == "FAIL" and failing_npus(result) == {3} and code == 2
    assert next(r["threshold"] for r in result["results"] if r["npu"] == 3) == "10.9.9.9"


def test_roce_ip_without_hccn_conf_is_unknown(node: DemoNode, tmp_path: Path) -> None:
    from agent.check.runner import RunOptions, run_level

    config = check_config({"collectors": {"hccn_tool": {"hccn_conf": str(tmp_path / "missing.conf")}}})
    from agent.core.config import apply_overrides

    config = apply_overrides(config, {"collectors.npu_smi.path": str(node.tool_path("npu-smi")),
                                      "collectors.hccn_tool.path": str(node.tool_path("hccn_tool"))})
    report = run_level(config, RunOptions(only=("roce_ip",), tool_env=node.env()))
    assert report.checks[0].status == "UNKNOWN" and "missing" in report.checks[0].evidence


def test_expected_versions_fail_every_card_on_another_version(node: DemoNode) -> None:
    _, report = run_check(node.directory, check_config({"check": {"expected_firmware": "7.9.9.9.999"}}),
                          only=("versions",))
    result = by_name(report)["versions"]
    assert result["status"] == "FAIL" and failing_npus(result) == set(range(CHIPS))
    assert result["threshold"] == "7.9.9.9.999" and result["basis"] == "config check.expected_firmware"


def test_recent_hccl_errors_warn_and_age_out_of_the_window(node: DemoNode) -> None:
    node.set_fault("hccl_timeout", chip=2, time=time.time() - 1800, peer_ips="29.1.7.17", peer_ranks="7")
    _, inside = run_check(node.directory, check_config(), only=("hccl_errors",))
    result = by_name(inside)["hccl_errors"]
    assert result["status"] == "WARN" and result["value"] >= 1
    _, outside = run_check(node.directory, check_config({"check": {"hccl_window": "10m"}}), only=("hccl_errors",))
    assert by_name(outside)["hccl_errors"]["status"] == "PASS"


def test_the_agent_check_reads_the_running_agent(node: DemoNode, tmp_path: Path) -> None:
    from agent.daemon.assemble import build_agent
    from agent.web.server import make_server

    config = check_config({"probes": {"enabled": False}})
    bundle = build_agent(config, node.directory, CHIPS)
    server = make_server("127.0.0.1", config.web.port, bundle.agent.cache, bundle.agent.health)
    server.start()
    try:
        bundle.agent.collect_once()
        _, up = run_check(node.directory, config, only=("agent",))
        assert by_name(up)["agent"]["status"] == "PASS", by_name(up)["agent"]
        node.set_fault("npu_smi_crash")
        bundle.agent.collect_once()
        code, down = run_check(node.directory, config, only=("agent",))
        agent = by_name(down)["agent"]
        assert agent["status"] == "FAIL"
        assert "collector npu_smi_info down (exit)" in [r["evidence"] for r in agent["results"]]
        assert code == 2
    finally:
        server.stop()
        bundle.agent.stop()


def test_conditions_select_their_group(node: DemoNode) -> None:
    node.set_fault("link_down", chip=0)
    code, network = run_check(node.directory, check_config(), condition="NPUNetworkHealthy", exit_codes="npd",
                              as_json=False)
    assert code == 1  # NonOK
    assert network.count("\n") == 1 and len(network.strip()) <= 80
    assert network.startswith("FAIL roce_link")
    code, memory = run_check(node.directory, check_config(), condition="NPUMemoryHealthy", exit_codes="npd",
                             as_json=False)
    assert code == 0 and memory.startswith("OK: 1 quick checks pass")


def test_a_hung_tool_costs_one_round_of_timeouts_not_one_per_waiting_call(node: DemoNode) -> None:
    """Calls that waited for their turn behind the hung ones are skipped, not run into the same hang."""
    from agent.check.runner import _tool_config
    from agent.core.config import apply_overrides
    from agent.health.quick import read_quick
    from agent.health.reader import HCCN_PARALLEL, ToolReader

    node.set_fault("hccn_tool_hang")
    config = apply_overrides(check_config(), {"collectors.npu_smi.path": str(node.tool_path("npu-smi")),
                                              "collectors.hccn_tool.path": str(node.tool_path("hccn_tool"))})
    tools = ToolReader(_tool_config(config, 1.0, 4), node.env())
    readings = read_quick(tools, want_hccs=False, want_boards=False, want_roce=True, scan=None, agent=None)
    calls = [reading for port in readings.node.roce.values()
             for reading in (port.link, port.link_stat, port.net_health, port.ip, *port.optical, *port.stat)]
    hung = [reading for reading in calls if reading.error and "no answer within" in reading.error]
    assert len(calls) == CHIPS * 6
    assert 1 <= len(hung) <= HCCN_PARALLEL, [reading.error for reading in hung]
    assert all("skipped, hccn_tool hung earlier" in (r.error or "") for r in calls if r not in hung)
