"""check-config refuses what `run` would choke on, reports every problem, and never echoes a whole value;
cron schedules run (crontab weekdays, local time, jitter) through `run` and SIGHUP; `once` says when it
collected nothing."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from agent.core.config import ConfigError, build_config, load_config
from agent.core.cron import CronError, cron_trigger, parse_cron
from tests.agent_harness import wait_for
from tests.test_agent_signals import BASE_CONFIG, Daemon


def check_config(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agent", "check-config", str(path)],
                          capture_output=True, text=True, timeout=60)


# --- cron ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("expression", "weekdays"), [
    ("0 3 * * *", "*"),
    ("0 3 * * 0", "sun"),  # crontab: 0 is Sunday (APScheduler 3 alone would read Monday)
    ("0 3 * * 7", "sun"),
    ("0 3 * * 1", "mon"),
    ("0 3 * * 6", "sat"),
    ("0 3 * * 1-5", "mon,tue,wed,thu,fri"),
    ("0 3 * * 5-7", "sun,fri,sat"),
    ("0 3 * * */2", "sun,tue,thu,sat"),
    ("0 3 * * sat,sun", "sun,sat"),
])
def test_crontab_weekdays(expression: str, weekdays: str) -> None:
    assert parse_cron(expression)[4] == weekdays


def test_a_sunday_cron_fires_on_sunday_in_the_given_zone() -> None:
    zone = dt.timezone(dt.timedelta(hours=8))
    trigger = cron_trigger("30 2 * * 0", timezone=zone)
    after = dt.datetime(2026, 12, 2, 12, 0, tzinfo=zone)  # a Wednesday
    fire = trigger.get_next_fire_time(None, after)
    assert fire is not None
    assert (fire.weekday(), fire.hour, fire.minute) == (6, 2, 30)  # Sunday 02:30 in that zone
    assert fire.utcoffset() == dt.timedelta(hours=8)


def test_cron_jitter_is_kept() -> None:
    assert cron_trigger("0 * * * *", jitter_s=300).jitter == 300
    assert cron_trigger("0 * * * *", jitter_s=0).jitter is None


@pytest.mark.parametrize(("expression", "why"), [
    ("0 3 * *", "expected 5 fields"),
    ("0 25 * * *", "23"),
    ("0 3 * * 8", "day of week '8'"),
    ("0 3 1 * 1", "not both"),
    ("0 3 * * 5-1", "backwards"),
    ("0 3 * * */0", "positive"),
])
def test_bad_cron_is_refused_with_why(expression: str, why: str) -> None:
    with pytest.raises(CronError, match=why):
        parse_cron(expression)


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


@pytest.mark.parametrize("port", [0, 65536, 70000])
def test_ports_outside_1_to_65535_are_refused(port: int) -> None:
    with pytest.raises(ConfigError, match=r"web\.port"):
        build_config({"web": {"port": port}})


@pytest.mark.parametrize("port", [1, 9611, 65535])
def test_ports_inside_the_range_are_accepted(port: int) -> None:
    assert build_config({"web": {"port": port}}).web.port == port


@pytest.mark.parametrize(("size", "ok"), [
    ("64MiB", True), ("1GiB", True), ("4096", True), ("1TiB", True), ("10MB", True),
    ("64 MiB", False), ("64 MB", False), ("64mb", False), ("64MiBs", False), (" 64MiB", False),
])
def test_sizes_take_no_space_and_only_known_units(size: str, ok: bool) -> None:
    raw = {"collectors": {"hccl_logs": {"byte_budget": size}}}
    if ok:
        assert build_config(raw).collectors.hccl_logs.byte_budget > 0
    else:
        with pytest.raises(ConfigError, match="byte_budget"):
            build_config(raw)


@pytest.mark.parametrize(("where", "names", "valid"), [
    ("npu_smi", {"disable": ["npu_smi_hccs_bw", "npu_smi_topo"]}, True),
    ("npu_smi", {"enable": ["npu_smi_topo"]}, True),
    ("npu_smi", {"enable": ["npu_smi_info"]}, False),  # on by default: not an opt-in
    ("npu_smi", {"disable": ["hccn_link"]}, False),  # another tool's source
    ("hccn_tool", {"disable": ["hccn_speed", "hccn_optical"]}, True),
    ("hccn_tool", {"disable": ["hccn_optics"]}, False),
])
def test_source_names_are_checked(where: str, names: dict, valid: bool) -> None:
    raw = {"collectors": {where: names}}
    if valid:
        build_config(raw)
    else:
        with pytest.raises(ConfigError, match=f"collectors.{where}"):
            build_config(raw)


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


def test_an_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for index in range(8):
        prev, name = "abcdefgh"[index], "bcdefghi"[index]
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="aliases"):
        load_config(bomb)
    assert time.monotonic() - started < 1.0


def test_aliases_a_real_config_uses_are_fine(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("probes:\n  gemm: {jitter: &j 1m}\n  allreduce: {jitter: *j}\n")
    assert load_config(path).probes.allreduce.jitter == 60.0


def test_a_file_over_one_mib_is_refused_unparsed(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# " + "y" * (1 << 20) + "\n")
    started = time.monotonic()
    with pytest.raises(ConfigError, match="larger than 1 MiB"):
        load_config(path)
    assert time.monotonic() - started < 1.0


def test_a_file_just_under_one_mib_is_read(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("log_level: debug\n# " + "y" * ((1 << 20) - 40) + "\n")
    assert path.stat().st_size <= 1 << 20
    assert load_config(path).log_level == "debug"


def test_deep_nesting_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError):
        load_config(path)


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
    from tests.agent_harness import get

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
                            capture_output=True, text=True, timeout=60, env=env, cwd=Path(__file__).parents[1])
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("npu-smi: not found") == 1, result.stderr
    assert "npu_smi_info" in result.stderr.splitlines()[-1]
    assert "npuwatch_collector_up" in result.stdout  # the exposition is still printed
    verbose = subprocess.run([sys.executable, "-m", "agent", "once", "--config", str(config), "-v"],
                             capture_output=True, text=True, timeout=60, env=env, cwd=Path(__file__).parents[1])
    assert verbose.returncode == 1
    assert " DEBUG " in verbose.stderr
