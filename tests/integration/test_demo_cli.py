"""``npuwatch demo``: faults switched from the command line, and the errors a first-time user meets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.demo.faults import FAULTS
from agent.demo.node import DemoNode
from tests.support.agent_harness import wait_for
from tests.support.daemon import Daemon
from tests.support.paths import REPO


def demo(directory: Path, *args: str) -> int:
    return main(["demo", "--demo-dir", str(directory), *args])


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("npuwatch demo: ")
    return lines[0]


@pytest.mark.parametrize("action", [["set", "link_down", "--npu", "3"], ["clear", "all"], ["show"]])
def test_a_directory_without_a_demo_node_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    action: list[str]) -> None:
    empty = tmp_path / "nothing-here"
    assert demo(empty, *action) == 2
    assert one_line_error(capsys) == (
        f"npuwatch demo: no demo node at {empty} (start one with npuwatch run --demo --demo-dir {empty})"
    )
    assert not empty.exists()  # no new state was created on the way


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["set", "link_down"], "fault 'link_down' applies to one chip: pass --npu N (0..7)"),
        (["set", "link_down", "--npu", "99"], "fault 'link_down': --npu 99 is not a chip of this node (0..7)"),
        (["clear", "link_down", "--npu", "99"], "fault 'link_down': --npu 99 is not a chip of this node (0..7)"),
        (["set", "npu_smi_hang", "--npu", "1"], "fault 'npu_smi_hang' is node-wide; do not pass --npu"),
        (["set", "hbm_dbe", "--npu", "1", "--param", "interval=5"],
         "fault 'hbm_dbe' takes no parameter 'interval' (it takes: interval_s, since)"),
        (["set", "hbm_dbe", "--npu", "1", "--param", "interval_s=often"],
         "fault 'hbm_dbe': interval_s='often' is not a valid float"),
        (["set", "vanish", "--npu", "1", "--param", "quietly"], "--param expects KEY=VALUE, got 'quietly'"),
        (["set", "hccl_timeout"], "fault 'hccl_timeout' applies to one chip: pass --npu N (0..7)"),
    ],
)
def test_bad_requests_are_one_line_errors_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      args: list[str], message: str) -> None:
    node = DemoNode(tmp_path / "demo").create()
    assert demo(node.directory, *args) == 2
    assert one_line_error(capsys) == f"npuwatch demo: {message}"
    assert node.read().chip_faults == {} and node.read().node_faults == {}


def test_faults_are_set_shown_and_cleared(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = DemoNode(tmp_path / "demo").create()
    assert demo(node.directory, "set", "link_down", "--npu", "3") == 0
    assert demo(node.directory, "set", "health", "--npu", "5", "--param", "state=Alarm",
                "--param", "codes=8C084E00,A4025021") == 0
    assert demo(node.directory, "set", "hbm_dbe", "--npu", "1", "--param", "interval_s=5") == 0
    capsys.readouterr()
    assert demo(node.directory, "show") == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["chip_faults"]["3"]["link_down"]["since"] > 0
    assert shown["chip_faults"]["5"]["health"]["codes"] == ["8C084E00", "A4025021"]
    assert shown["chip_faults"]["1"]["hbm_dbe"]["interval_s"] == 5.0  # declared float, not the text "5"
    assert demo(node.directory, "clear", "link_down") == 0  # without --npu: on every chip
    assert "3" not in json.loads(capsys.readouterr().out)["chip_faults"]
    assert demo(node.directory, "clear", "all") == 0
    after = json.loads(capsys.readouterr().out)
    assert after["chip_faults"] == {}
    assert [event for _, event in after["carried"]["3"]["link_records"]] == ["LINK DOWN", "LINK UP"]
    assert after["carried"]["1"]["counters"]["hbm_dbe"] >= 1


def test_log_faults_write_plog_lines_the_scanner_classifies(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    node = DemoNode(tmp_path / "demo").create()
    assert demo(node.directory, "set", "hccl_timeout", "--npu", "2", "--param", "rank=10",
                "--param", "rank_size=16", "--param", "group=29.1.0.10%enp_60000_0_1761275812718970",
                "--param", "peer_ips=29.1.5.15,29.1.6.16", "--param", "peer_ranks=13,14") == 0
    plog = Path(json.loads(capsys.readouterr().out)["plog"])
    assert plog.parent == node.directory / "log" / "debug" / "plog"
    assert demo(node.directory, "set", "roce_cqe", "--npu", "2", "--param", "peer_ip=29.1.3.13") == 0
    assert Path(json.loads(capsys.readouterr().out)["plog"]) == plog  # the same process keeps its plog
    scan = subprocess.run([sys.executable, "-m", "agent", "scan-logs", str(node.directory / "log"), "--json"],
                          capture_output=True, text=True, timeout=60)
    assert scan.returncode == 1, scan.stderr  # 1: errors found
    report = json.loads(scan.stdout)
    assert report["counts_by_category"]["exec_timeout"] >= 1
    assert report["counts_by_category"]["roce_cqe"] >= 1
    hints = {(hint["kind"], hint["value"]) for hint in report["hints"]}
    assert ("exception_location", "29.1.5.15/13") in hints and ("peer", "29.1.3.13") in hints
    assert demo(node.directory, "clear", "hccl_timeout") == 2
    assert one_line_error(capsys).endswith("is a log event: it was written once, there is nothing to clear")


def test_clearing_a_log_fault_is_refused_by_the_api(tmp_path: Path) -> None:
    node = DemoNode(tmp_path / "demo").create()
    with pytest.raises(ValueError, match="log event"):
        node.clear_fault("roce_cqe", chip=0)


def test_once_on_the_demo_prints_the_exposition(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    DemoNode(directory).create(chips=4)
    subprocess.run([sys.executable, "-m", "agent", "demo", "--demo-dir", str(directory), "set", "link_down",
                    "--npu", "1"], check=True, capture_output=True, timeout=60)
    result = subprocess.run([sys.executable, "-m", "agent", "once", "--demo", "--demo-dir", str(directory)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert 'npu_roce_link_up{chip="0",npu="1"} 0.0' in result.stdout
    assert 'npu_roce_link_up{chip="0",npu="0"} 1.0' in result.stdout
    assert "npu_chips 4.0" in result.stdout  # the existing node and its fault were kept, not recreated


def test_the_demo_page_lists_every_fault_and_its_parameters() -> None:
    page = (REPO / "docs" / "demo.md").read_text(encoding="utf-8")
    section = page.split("\n## Demo faults\n", 1)[1].split("\n## ", 1)[0]
    listed: dict[str, tuple[str, set[str]]] = {}
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        params = set(re.findall(r"`([a-z_]+)`", cells[2]))
        for name in re.findall(r"`([a-z_]+)`", cells[0]):
            listed[name] = (cells[1], params)
    assert sorted(listed) == sorted(FAULTS)
    for name, spec in FAULTS.items():
        assert listed[name] == (spec.kind, set(spec.params)), name


def npuwatch_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run([sys.executable, "-m", "agent", *args], capture_output=True, text=True, timeout=120,
                          cwd=REPO, env={**os.environ, **(env or {})})


def test_the_running_demo_is_found_its_agent_checked_and_it_expects_its_chips(daemon: Daemon,
                                                                              tmp_path: Path) -> None:
    from agent.demo.discovery import AGENT_FILE, running_agent_url

    assert wait_for(lambda: running_agent_url(daemon.demo_dir) is not None, timeout=10)  # written after /healthz
    assert running_agent_url(daemon.demo_dir) == f"http://127.0.0.1:{daemon.port}/metrics"
    assert re.search(r"^npuwatch_expected_chips(\{[^}]*\})? 4(\.0)?$", daemon.metrics(), re.MULTILINE)
    env = {"NPUWATCH_DEMO_DIR": str(daemon.demo_dir), "TMPDIR": str(tmp_path)}
    assert npuwatch_cli("demo", "set", "hot", "--npu", "1", env=env).returncode == 0  # no --demo-dir
    found = npuwatch_cli("check", "--demo", "--json", env=env)
    report = json.loads(found.stdout)
    by_name = {check["name"]: check for check in report["checks"]}
    assert by_name["agent"]["status"] == "PASS", by_name["agent"]
    assert str(daemon.port) in json.dumps(by_name["agent"])  # this demo's agent, not one on the default port
    assert by_name["temperature"]["status"] == "FAIL"  # the running demo's fault, not a fresh node
    assert found.stderr == ""  # no INFO lines without -v
    top = npuwatch_cli("top", "--demo", "--once", env=env)
    assert top.returncode == 0 and top.stdout.startswith("npuwatch top  demo-node  ")
    assert "in this process" not in top.stdout  # the running agent's page, not one of its own
    daemon.kill()  # a crashed agent's file is left behind: discovery must not trust it
    assert running_agent_url(daemon.demo_dir) is None and (daemon.demo_dir / AGENT_FILE).exists()
    alone = json.loads(npuwatch_cli("check", "--demo", "--json", env=env).stdout)
    assert "agent" not in {check["name"] for check in alone["checks"]}  # no agent serves this node: not asked


def test_a_demo_command_without_a_running_demo_leaves_nothing_behind(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"NPUWATCH_DEMO_DIR": str(tmp_path / "none"), "TMPDIR": str(scratch)}
    result = npuwatch_cli("check", "--demo", "--only", "chip_count", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == ""  # no WARNING (nor INFO) without -v
    assert list(scratch.iterdir()) == []
    assert not (tmp_path / "none").exists()
    told = npuwatch_cli("check", "--demo", "--only", "chip_count", "-v", env=env)
    assert "no demo node in" in told.stderr and "fresh, fault-free node" in told.stderr
