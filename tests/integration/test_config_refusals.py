"""check-config refuses what `run` would choke on, reports every problem, and never echoes a whole value;
cron schedules run (crontab weekdays, local time, jitter) through `run` and SIGHUP; `once` says when it
collected nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.agent_harness import wait_for
from tests.support.daemon import BASE_CONFIG, Daemon
from tests.support.paths import REPO


def check_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent", "check-config", str(path)],
                          capture_output=True, text=True, timeout=60)


# --- cron ---------------------------------------------------------------------------------------------


# --- check-config -------------------------------------------------------------------------------------


def test_check_config_reports_every_problem_at_once(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  alice: not-a-hash\n")
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "web": {"port": 0, "config_file": str(web)},
        "collectors": {"npu_smi": {"disable": ["npu_smi_hcs_bw"]}, "hccl_logs": {"byte_budget": "64 MB"}},
        "probes": {"gemm": {"cron": "0 3 * * 9"}, "allreduce": {"cron": "61 * * * *"}},
    }))
    result = check_config(config)
    assert result.returncode == 2
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 6, result.stderr
    text = result.stderr
    assert "web.port: expected an integer between 1 and 65535, got 0" in text
    assert 'collectors.npu_smi.disable: "npu_smi_hcs_bw" is not one of' in text
    assert "did you mean npu_smi_hccs_bw?" in text
    assert 'collectors.hccl_logs.byte_budget: expected a size like 64MiB' in text and '"64 MB"' in text
    assert "probes.gemm.cron: day of week '9'" in text
    assert "probes.allreduce.cron:" in text
    assert "web.config_file" in text and "basic_auth_users.alice" in text


def test_errors_never_echo_more_than_80_characters_of_a_value(tmp_path: Path) -> None:
    huge = "x" * 5000
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({huge: 1, "log_level": huge, "labels": {"node": [huge]},
                                      "collectors": {"npu_smi": {"disable": [huge]}}}))
    result = check_config(config)
    assert result.returncode == 2
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 4
    for line in problems:
        assert "x" * 81 not in line, line


# --- run and SIGHUP -----------------------------------------------------------------------------------


def test_run_with_a_cron_schedule_starts_and_survives_sighup(tmp_path: Path) -> None:
    config = {**BASE_CONFIG, "probes": {
        "enabled": True, "backend": "cpu", "lock_file": str(tmp_path / "probe.lock"),
        "gemm": {"cron": "0 3 * * 0", "jitter": "5m"},
        "allreduce": {"cron": "*/30 * * * 1-5"},
    }}
    daemon = Daemon(tmp_path, config)
    try:
        assert wait_for(lambda: daemon.proc.poll() is not None or get_ok(daemon), timeout=30), daemon.log_text()
        assert daemon.proc.poll() is None, daemon.log_text()
        config["probes"]["gemm"]["cron"] = "15 4 * * 6"
        daemon.config_path.write_text(yaml.safe_dump(config))
        daemon.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: "config reloaded" in daemon.log_text(), timeout=10), daemon.log_text()
        # A cron the scheduler cannot run is refused at reload; the agent keeps serving.
        config["probes"]["gemm"]["cron"] = "0 3 1 * 1"
        daemon.config_path.write_text(yaml.safe_dump(config))
        daemon.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: "keeping the running config" in daemon.log_text(), timeout=10), daemon.log_text()
        assert get_ok(daemon)
        assert daemon.proc.poll() is None
        assert "Traceback" not in daemon.log_text()
    finally:
        daemon.stop()


def get_ok(daemon: Daemon) -> bool:
    from tests.support.agent_harness import get

    return get(daemon.url + "/metrics", timeout=2)[0] == 200


# --- once ---------------------------------------------------------------------------------------------


def test_once_without_npu_smi_exits_non_zero_with_one_warning(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"collectors": {"npu_smi": {"path": str(tmp_path / "no-npu-smi")},
                                                     "hccn_tool": {"path": str(tmp_path / "no-hccn")},
                                                     "hccl_logs": {"enabled": False}},
                                      "probes": {"enabled": False}, "state_dir": str(tmp_path)}))
    result = subprocess.run([sys.executable, "-m", "agent", "once", "--config", str(config)],
                            capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("npu-smi: not found") == 1, result.stderr
    assert "npu_smi_info" in result.stderr.splitlines()[-1]
    assert "npuwatch_collector_up" in result.stdout  # the exposition is still printed
    verbose = subprocess.run([sys.executable, "-m", "agent", "once", "--config", str(config), "-v"],
                             capture_output=True, text=True, timeout=60, env=env, cwd=REPO)
    assert verbose.returncode == 1
    assert " DEBUG " in verbose.stderr
