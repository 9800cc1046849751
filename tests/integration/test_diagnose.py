"""``npuwatch diagnose`` against the demo node's fake tools, run as real subprocesses.

Each test creates a small demo node in tmp_path, switches faults on, runs ``diagnose.main`` with
a short sampling gap and reads the JSON it prints. Time-dependent faults (link flaps) run with
the fakes' clock frozen so the link state is known.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent.demo.node import DemoNode
from agent.diagnose import engine as diagnose
from agent.health.checks import NODE_CHECKS
from tests.support.diagnose_harness import GAP_S, by_name, make_config, run
from tests.support.paths import REPO


@pytest.fixture
def node(tmp_path: Path) -> DemoNode:
    return DemoNode(tmp_path / "demo").create(chips=4)


def write_clean_plog(node: DemoNode) -> Path:
    """A plog of a healthy job (INFO lines only), written a minute ago."""
    stamp = _plog_time(time.time() - 60)
    plog = node.directory / "log" / "debug" / "plog" / "plog-4141_20250101000000000.log"
    plog.parent.mkdir(parents=True, exist_ok=True)
    plog.write_text(f"[INFO] HCCL(4141,python3):{stamp} [hccl_communicator.cc:100] [4141]AllReduce entry\n"
                    f"[INFO] HCCL(4141,python3):{stamp} [hccl_communicator.cc:120] [4141]AllReduce exit\n",
                    encoding="utf-8")
    return plog


def test_healthy_node_is_ok(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_clean_plog(node)
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 0
    assert report["exit_code"] == 0
    assert report["verdict"]["status"] == "ok"
    assert report["verdict"]["npu"] is None
    checks = by_name(report)
    assert list(checks) == ["tools", *NODE_CHECKS]  # the one check set, in npuwatch check's order
    for check in report["checks"]:  # the schema npuwatch check shares (docs/health-checks.md)
        assert list(check) == ["name", "status", "evidence", "hint", "npu", "duration_s", "value", "threshold", "unit",
                               "basis", "results"]
        assert check["results"] and all(result["status"] == "PASS" for result in check["results"])
    assert {c["status"] for c in checks.values()} == {"PASS"}
    # the demo node's hccn.conf holds its ports' addresses; the clean plog and the demo job's log are read
    assert checks["roce_ip"]["evidence"] == f"4 port addresses match {node.directory / 'hccn.conf'}"
    assert checks["hccl_errors"]["evidence"].startswith("no HCCL errors in the last 2 h (2 files read, ")
    assert report["verdict"]["text"] == "ok: no local cause of HCCL timeouts found"


def test_text_output_is_an_aligned_table(node: DemoNode, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    node.set_fault("link_down", chip=3)
    code, text = run(node, capsys, make_config(tmp_path), as_json=False)
    assert code == 2
    table, verdict = text.split("\n\n")
    lines = table.splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "DEVICE", "EVIDENCE"]
    status_column = lines[0].index("STATUS")
    rows = [line for line in lines[1:] if not line.startswith(" ")]
    assert len(rows) == 1 + len(NODE_CHECKS)
    assert {row[status_column:].split()[0] for row in rows} <= {"PASS", "WARN", "FAIL", "UNKNOWN"}
    assert any(line.strip().startswith("hint: ") for line in lines)
    assert "\x1b" not in text  # not a terminal: no colour
    # the verdict leads with its severity word, then the other causes, the next step and the runbook
    assert verdict.splitlines() == [
        "FAIL: RoCE link down on NPU 3 (hccn_tool -i 3 -link -g says DOWN)",
        "  also     RoCE network health check failing on NPU 3",
        "  next     check the cable or optical module and the switch port of this NPU (hccn_tool -i N -optical -g,",
        "           -link_stat -g)",
        "  runbook  https://github.com/npuwatch/npuwatch/blob/main/alerts/runbooks/NPURoCELinkDown.md",
    ]


def test_link_down_fails_and_names_the_device(node: DemoNode, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    node.set_fault("link_down", chip=3)
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 2
    checks = by_name(report)
    assert checks["roce_link"]["status"] == "FAIL"
    assert checks["roce_link"]["npu"] == 3
    assert checks["roce_link"]["hint"]
    assert checks["optics"]["status"] == "PASS"
    verdict = report["verdict"]
    assert (verdict["status"], verdict["cause"], verdict["npu"]) == ("fail", "link_down", 3)
    assert verdict["text"].startswith("RoCE link down on NPU 3 (hccn_tool -i 3 -link -g says DOWN)")


def test_flapping_link(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    node.freeze_time(now)
    # transitions every 2 s since now-11: DOWN, UP, DOWN, UP, DOWN, UP -> up right now, 3 downs
    node.set_fault("link_flap", chip=2, period_s=4, since=now - 11)
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 2
    checks = by_name(report)
    assert checks["roce_link"]["status"] == "PASS"
    assert checks["roce_flaps"]["status"] == "FAIL"
    assert checks["roce_flaps"]["npu"] == 2
    assert "3 link-down events" in checks["roce_flaps"]["evidence"]
    assert (report["verdict"]["cause"], report["verdict"]["npu"]) == ("link_flap", 2)
    assert "NPU 2" in report["verdict"]["text"]


def test_optics_without_light(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node.set_fault("optics_no_light", chip=1)
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 2
    checks = by_name(report)
    optics = checks["optics"]
    assert (optics["status"], optics["npu"]) == ("FAIL", 1)
    assert "rx_los_flag" in optics["evidence"]
    # the dark port's error counters rise between the two samples
    assert (checks["roce_errors"]["status"], checks["roce_errors"]["npu"]) == ("WARN", 1)
    verdict = report["verdict"]
    assert (verdict["status"], verdict["npu"]) == ("fail", 1)
    # no light takes the link down; the verdict leads with the link and names the optics too
    assert verdict["cause"] == "link_down"
    assert "optical module receives no light on NPU 1" in verdict["text"]


def test_double_bit_ecc(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node.set_fault("hbm_dbe", chip=2)
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 2
    ecc = by_name(report)["hbm_ecc"]
    assert (ecc["status"], ecc["npu"]) == ("FAIL", 2)
    assert "double-bit" in ecc["evidence"]
    assert (report["verdict"]["cause"], report["verdict"]["npu"]) == ("hbm_dbe", 2)


def test_local_hardware_outranks_other_local_causes(node: DemoNode, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    node.set_fault("health", chip=1, state="Alarm", codes=["80E18005"])
    node.set_fault("hbm_dbe", chip=0)
    node.set_fault("link_down", chip=3)
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 2
    checks = by_name(report)
    assert (checks["chip_health"]["status"], checks["chip_health"]["npu"]) == ("FAIL", 1)
    assert "80E18005" in checks["chip_health"]["evidence"]
    assert (report["verdict"]["cause"], report["verdict"]["npu"]) == ("link_down", 3)


def _plog_time(ts: float) -> str:
    return time.strftime("%Y-%m-%d-%H:%M:%S", time.localtime(ts)) + ".123.456"


def write_remote_timeout_plog(node: DemoNode, rank: int, peer_ip: str) -> Path:
    """A synthetic plog of an HCCL execution timeout that blames a remote rank, written a minute ago."""
    stamp = _plog_time(time.time() - 60)
    plog = node.directory / "log" / "debug" / "plog" / "plog-4242_20250101000000000.log"
    plog.parent.mkdir(parents=True, exist_ok=True)
    plog.write_text(
        f"[INFO] HCCL(4242,python3):{stamp} [hccl_communicator.cc:100] [4300]AllReduce entry\n"
        f"[ERROR] HCCL(4242,python3):{stamp} [task_exception_handler.cc:812] [4300]"
        f"[TaskExceptionHandler] Task from HCCL run failed.\n"
        f"EI0002: [PID: 4242] {stamp} The wait execution of the Notify register times out. Reason: "
        f"The Notify register has not received the Notify record from remote rank [{rank}].base "
        f"information: [streamID:[14], taskID[4], taskType[Notify Wait], tag[AllReduce_1].] task "
        f"information: [notify id:[0x1], stage:[ffffffff], remote rank:[{rank}].\n"
        f"[ERROR] HCCL(4242,python3):{stamp} [hccl_impl.cc:90] [4300]Cluster Exception "
        f"Location[IP/ID]:[{peer_ip}/{rank}]\n",
        encoding="utf-8",
    )
    return plog


def test_logs_blaming_a_remote_rank_on_a_healthy_node(node: DemoNode, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    write_remote_timeout_plog(node, rank=5, peer_ip="29.7.0.15")
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 1
    logs = by_name(report)["hccl_errors"]
    assert logs["status"] == "WARN"
    assert "exec_timeout" in logs["evidence"]
    assert "EI0002" in logs["evidence"]
    verdict = report["verdict"]
    assert (verdict["status"], verdict["cause"], verdict["npu"]) == ("warn", "remote_peer", None)
    assert verdict["text"].startswith("look at remote rank 5 / IP 29.7.0.15, not this node")


def test_local_fault_beats_the_log_symptom(node: DemoNode, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    write_remote_timeout_plog(node, rank=5, peer_ip="29.7.0.15")
    node.set_fault("net_health_fail", chip=2)
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 2
    assert (report["verdict"]["cause"], report["verdict"]["npu"]) == ("net_health", 2)


def test_old_log_errors_are_outside_the_window(node: DemoNode, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    plog = write_remote_timeout_plog(node, rank=5, peer_ip="29.7.0.15")
    old = time.time() - 3 * 3600
    os.utime(plog, (old, old))
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 0
    # the timeout's plog is older than the window: only the demo job's fresh log is read
    logs = by_name(report)["hccl_errors"]
    assert logs["status"] == "PASS"
    assert logs["evidence"].startswith("no HCCL errors in the last 2 h (1 file read, ")
    assert report["verdict"]["text"] == "ok: no local cause of HCCL timeouts found"


def test_hccn_conf_mismatch(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # the fake's addresses are 29.1.<dev>.<10+dev>; device 2 is configured differently in the demo's hccn.conf
    conf = "".join(f"address_{dev}=29.1.{dev}.{10 + dev}\nnetmask_{dev}=255.255.0.0\n" for dev in (0, 1, 3))
    (node.directory / "hccn.conf").write_text(conf + "address_2=29.1.2.99\nnetmask_2=255.255.0.0\n")
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 2
    ip = by_name(report)["roce_ip"]
    assert (ip["status"], ip["npu"]) == ("FAIL", 2)
    assert "29.1.2.99" in ip["evidence"]
    assert report["verdict"]["cause"] == "ip_mismatch"


def test_npu_smi_hang_fails_quickly(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A hung npu-smi is the driver's symptom: it fails the tools check on every command (check's policy)."""
    node.set_fault("npu_smi_hang")
    started = time.monotonic()
    code, report = run(node, capsys, make_config(tmp_path, timeout="0.5s"))
    assert time.monotonic() - started < 5
    assert code == 2
    health = by_name(report)["chip_health"]
    assert health["status"] == "UNKNOWN"
    assert "no answer within 0.5s" in health["evidence"]
    assert (report["verdict"]["status"], report["verdict"]["cause"]) == ("fail", "tool_hung")


def test_hccn_tool_hang_fails_quickly(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node.set_fault("hccn_tool_hang")
    started = time.monotonic()
    code, report = run(node, capsys, make_config(tmp_path, timeout="0.5s"))
    # at most one round of parallel calls waits for the timeout; the rest are skipped
    assert time.monotonic() - started < 5
    assert code == 2
    checks = by_name(report)
    assert checks["roce_link"]["status"] == "UNKNOWN"
    assert checks["chip_health"]["status"] == "PASS"
    assert (report["verdict"]["status"], report["verdict"]["cause"]) == ("fail", "tool_hung")


class _FakeResult:
    def __init__(self, outcome: str, message: str = "", stage: str | None = None) -> None:
        self.outcome, self.message, self.stage = outcome, message, stage
        self.warnings: list[str] = []
        self.gemm: list[Any] = []
        self.allreduce = None


@pytest.mark.parametrize("case", [("error", "UNKNOWN", 3), ("timeout", "FAIL", 2)], ids=["error", "timeout"])
def test_probe_outcomes(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch, case: tuple[str, str, int]) -> None:
    """--probes: a probe that could not run is UNKNOWN (the node is not vouched for: exit 3, as from check);
    a timeout is FAIL."""
    from agent.probes import runner as probe_runner
    from agent.probes.records import ProbeSettings

    outcome, status, code = case

    calls: list[str] = []

    def fake(probe: str) -> Any:
        def runner(settings: Any, *args: Any, **kwargs: Any) -> _FakeResult:
            assert isinstance(settings, ProbeSettings)
            calls.append(probe)
            return _FakeResult(outcome, "torch_npu import failed" if outcome == "error" else "no answer",
                               "exec" if outcome == "timeout" else None)
        return runner

    monkeypatch.setattr(probe_runner, "run_gemm", fake("gemm"))
    monkeypatch.setattr(probe_runner, "run_allreduce", fake("allreduce"))
    got, report = run(node, capsys, make_config(tmp_path), probes=True)
    assert calls == ["gemm", "allreduce"]
    checks = by_name(report)
    assert checks["probe_gemm"]["status"] == status
    assert checks["probe_allreduce"]["status"] == status
    assert got == code
    if outcome == "error":
        assert "torch_npu import failed" in checks["probe_gemm"]["evidence"]
        assert (report["verdict"]["status"], report["verdict"]["cause"]) == ("unknown", "not_checked")
        assert report["verdict"]["text"].startswith("could not check probe_gemm, probe_allreduce: ")
    else:
        assert report["verdict"]["cause"] == "probe_failed"
        # the failed probe's own section: the GEMM probe's, where it leads the all-reduce one
        assert report["verdict"]["check"] == "probe_gemm"
        assert report["verdict"]["runbook"].endswith("/NPUCheckFailed.md#gemm")


def test_cli_json(tmp_path: Path) -> None:
    demo_dir = tmp_path / "demo"
    DemoNode(demo_dir).create(chips=2).set_fault("link_down", chip=1)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NPUWATCH_DIAGNOSE_SAMPLE_GAP": str(GAP_S)}
    proc = subprocess.run(
        [sys.executable, "-m", "agent", "diagnose", "--demo", "--demo-dir", str(demo_dir), "--json"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 2, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"format", "checks", "verdict", "exit_code"}
    assert report["exit_code"] == 2
    assert set(report["verdict"]) == {"status", "cause", "npu", "check", "text", "summary", "also", "action", "runbook"}
    assert (report["verdict"]["cause"], report["verdict"]["npu"]) == ("link_down", 1)


# ----------------------------------------------------------------------------- what a person reads


def test_the_verdict_names_every_failing_device(node: DemoNode, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    for chip in range(4):
        node.set_fault("link_down", chip=chip)
    node.set_fault("hbm_dbe", chip=2)
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 2
    text = report["verdict"]["text"]
    assert text.startswith("RoCE link down on NPU 0 (hccn_tool -i 0 -link -g says DOWN) and on NPUs 1, 2 and 3")
    assert "RoCE network health check failing on NPUs 0, 1, 2 and 3" in text
    assert "HBM double-bit ECC errors on NPU 2" in text
    assert "more" not in text
    code, printed = run(node, capsys, make_config(tmp_path), as_json=False)
    table, verdict = printed.split("\n\n")
    assert re.search(r"^roce_link +FAIL +NPU 0-3 +NPU 0: hccn_tool -i 0 -link -g says DOWN; NPU 1: ", table, re.M)
    assert verdict.startswith("FAIL: RoCE link down on NPU 0")
    assert "  runbook  https://github.com/npuwatch/npuwatch/blob/main/alerts/runbooks/NPURoCELinkDown.md" in verdict


def _job_logs(root: Path, node: DemoNode) -> Path:
    """A log directory away from the demo's own, holding one HCCL execution timeout."""
    plog = write_remote_timeout_plog(node, rank=5, peer_ip="29.7.0.15")
    moved = root / "debug" / "plog" / plog.name
    moved.parent.mkdir(parents=True)
    plog.rename(moved)
    return root


def test_demo_reads_the_configured_log_paths(node: DemoNode, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    logs_dir = _job_logs(tmp_path / "job-logs", node)
    code, report = run(node, capsys, make_config(tmp_path, log_paths=[str(logs_dir)]))
    assert code == 1
    logs = by_name(report)["hccl_errors"]
    assert logs["status"] == "WARN" and "exec_timeout" in logs["evidence"]


def test_demo_reads_ascend_process_log_path(node: DemoNode, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASCEND_PROCESS_LOG_PATH", str(_job_logs(tmp_path / "env-logs", node)))
    code, report = run(node, capsys, make_config(tmp_path))
    assert code == 1
    assert by_name(report)["hccl_errors"]["status"] == "WARN"


def test_a_long_window_reads_as_a_person_writes_it(node: DemoNode, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    write_clean_plog(node)
    args = argparse.Namespace(json=True, probes=False, verbose=False, sample_gap=GAP_S, window=100800,
                              flap_window=100800)
    assert diagnose.main(args, make_config(tmp_path), node.directory) == 0
    checks = by_name(json.loads(capsys.readouterr().out))
    assert checks["hccl_errors"]["evidence"].startswith("no HCCL errors in the last 28 h (2 files read, ")
    assert checks["roce_flaps"]["evidence"] == "no port flapped in the last 28 h (4 ports)"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("case", [
    ("always", "", False, True),
    ("never", "", True, False),
    ("auto", "", True, True),
    ("auto", "1", True, False),
    ("auto", "", False, False),
], ids=["always", "never", "auto-tty", "auto-NO_COLOR", "auto-piped"])
def test_colour_on_a_terminal_only(node: DemoNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   case: tuple[str, str, bool, bool]) -> None:
    color, no_color, tty, coloured = case
    monkeypatch.setenv("NO_COLOR", no_color)
    monkeypatch.delenv("TERM", raising=False)
    node.set_fault("link_down", chip=3)
    out = _Tty() if tty else io.StringIO()
    args = argparse.Namespace(json=False, probes=False, verbose=False, sample_gap=GAP_S, color=color)
    assert diagnose.main(args, make_config(tmp_path), node.directory, out=out, err=io.StringIO()) == 2
    text = out.getvalue()
    assert ("\x1b[1;31mFAIL\x1b[0m: RoCE link down on NPU 3" in text) is coloured
    assert ("\x1b[" in text) is coloured


def test_progress_goes_to_a_terminals_stderr_only(node: DemoNode, tmp_path: Path) -> None:
    args = argparse.Namespace(json=True, probes=False, verbose=False, sample_gap=1.0)
    for err, shown in ((_Tty(), True), (io.StringIO(), False)):
        out = io.StringIO()
        diagnose.main(args, make_config(tmp_path), node.directory, out=out, err=err)
        json.loads(out.getvalue())  # stdout holds the report and nothing else
        progress = err.getvalue()
        assert bool(progress) is shown
        if shown:
            assert "diagnose: " in progress and "npu-smi and hccn_tool calls" in progress
            assert progress.endswith("\r\x1b[K")
