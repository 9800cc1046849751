"""The daemon as operators run it: `npuwatch run` in its own process, driven by signals."""

from __future__ import annotations

import base64
import json
import signal
import time
from pathlib import Path

import bcrypt
import psutil
import yaml

from tests.support.agent_harness import get, wait_for
from tests.support.daemon import BASE_CONFIG, Daemon


def _scrape_during(daemon: Daemon, seconds: float) -> list[int]:
    statuses = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        statuses.append(get(daemon.url + "/metrics", timeout=2)[0])
        time.sleep(0.1)  # 10 scrapes/s: busy, but under the per-client rate limit (20/s)
    return statuses


def test_sighup_with_a_broken_config_keeps_the_old_one(daemon: Daemon) -> None:
    daemon.config_path.write_text("collectors:\n  npu_smi:\n    interval: fast\n")
    daemon.proc.send_signal(signal.SIGHUP)
    statuses = _scrape_during(daemon, 1.5)
    assert set(statuses) == {200}
    assert daemon.proc.poll() is None
    assert wait_for(lambda: "keeping the running config" in daemon.log_text(), timeout=5), daemon.log_text()
    assert 'collectors.npu_smi.interval: expected a duration like 10s, got "fast"' in daemon.log_text()
    assert 'node="before"' in daemon.metrics()


def test_sighup_with_an_interval_the_scheduler_cannot_take_keeps_the_agent(daemon: Daemon) -> None:
    daemon.config_path.write_text("collectors:\n  npu_smi:\n    interval: .inf\n  host:\n    interval: 1.0e-7\n")
    daemon.proc.send_signal(signal.SIGHUP)
    statuses = _scrape_during(daemon, 1.5)
    assert set(statuses) == {200}
    assert daemon.proc.poll() is None
    assert wait_for(lambda: "keeping the running config" in daemon.log_text(), timeout=5), daemon.log_text()
    assert "collectors.npu_smi.interval: expected a finite duration of at most 365d, got inf" in daemon.log_text()
    assert "collectors.host.interval: expected an interval between 1s and 30d, got 1e-07" in daemon.log_text()
    assert 'node="before"' in daemon.metrics()


def test_sighup_with_an_escalation_file_holding_infinity_keeps_the_agent(daemon: Daemon) -> None:
    escalation = daemon.config_path.parent / "faultCustomization.json"
    escalation.write_text('{"FaultFrequency": [{"EventId": ["80C98000"], "TimeWindow": Infinity, "Times": 2, '
                          '"FaultHandling": "ManuallySeparateNPU"}]}')
    daemon.config_path.write_text(yaml.safe_dump({**BASE_CONFIG, "labels": {"node": "after"},
                                                  "faults": {"escalation_file": str(escalation)}}))
    daemon.proc.send_signal(signal.SIGHUP)
    statuses = _scrape_during(daemon, 1.5)
    assert set(statuses) == {200}
    assert wait_for(lambda: 'node="after"' in daemon.metrics(), timeout=10), daemon.log_text()
    assert daemon.proc.poll() is None
    assert f"fault escalation not loaded ({escalation}: Infinity is not a number JSON allows); using the packaged " \
           "fault_escalation.json" in daemon.log_text()


def _reload_gauges(daemon: Daemon) -> tuple[float, float]:
    values = {}
    for line in daemon.metrics().splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name.startswith("npuwatch_config_last_reload_"):
            values[name] = float(line.rsplit(" ", 1)[-1])
    return (values["npuwatch_config_last_reload_successful"],
            values["npuwatch_config_last_reload_success_timestamp_seconds"])


def test_a_failed_reload_is_exported_until_one_works(daemon: Daemon) -> None:
    successful, loaded_at = _reload_gauges(daemon)
    assert successful == 1 and loaded_at > 0  # the start is a successful load
    daemon.config_path.write_text("collectors:\n  npu_smi:\n    interval: fast\n")
    daemon.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: _reload_gauges(daemon)[0] == 0, timeout=10), daemon.log_text()
    assert _reload_gauges(daemon)[1] == loaded_at  # the last success stays the start's
    daemon.config_path.write_text(yaml.safe_dump(BASE_CONFIG))
    daemon.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: _reload_gauges(daemon)[0] == 1, timeout=10), daemon.log_text()
    assert _reload_gauges(daemon)[1] > loaded_at


def test_sighup_with_a_good_config_applies_it_without_dropping_a_scrape(daemon: Daemon) -> None:
    daemon.config_path.write_text(yaml.safe_dump({**BASE_CONFIG, "labels": {"node": "after"}}))
    daemon.proc.send_signal(signal.SIGHUP)
    statuses = _scrape_during(daemon, 1.0)
    assert set(statuses) == {200}
    assert wait_for(lambda: 'npu_power_watts{chip="0",node="after",npu="0"}' in daemon.metrics(), timeout=10)
    assert daemon.proc.poll() is None


def _collector_up(daemon: Daemon) -> set[str]:
    return {line.split('collector="', 1)[1].split('"', 1)[0] for line in daemon.metrics().splitlines()
            if line.startswith("npuwatch_collector_up{")}


def _readyz_collectors(daemon: Daemon) -> list[str]:
    return sorted(state["name"] for state in json.loads(get(daemon.url + "/readyz")[1])["collectors"])


def test_every_collector_survives_a_reload(daemon: Daemon) -> None:
    assert wait_for(lambda: "fault_table" in _collector_up(daemon), timeout=10)
    before, ready_before = _collector_up(daemon), _readyz_collectors(daemon)
    assert "fault_table" in ready_before and len(ready_before) == len(before)
    for turn in range(2):
        daemon.config_path.write_text(yaml.safe_dump({**BASE_CONFIG, "labels": {"node": f"after{turn}"}}))
        daemon.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda turn=turn: f'node="after{turn}"' in daemon.metrics(), timeout=10), daemon.log_text()
        assert _collector_up(daemon) == before
        assert _readyz_collectors(daemon) == ready_before


def test_sigterm_stops_within_five_seconds(daemon: Daemon) -> None:
    started = time.monotonic()
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(10) == 0
    assert time.monotonic() - started < 5


def test_sigterm_during_a_probe_leaves_no_child(tmp_path: Path) -> None:
    config = {**BASE_CONFIG, "probes": {
        "enabled": True, "backend": "cpu", "idle_aicore_threshold": 1.0,
        "lock_file": str(tmp_path / "probe.lock"), "deadline": "60s",
        "gemm": {"interval": "1h", "jitter": "0s", "size": 64},
        "allreduce": {"enabled": False},
    }}
    # Every GEMM rank stalls in its exec stage, so the probe is still running when SIGTERM arrives.
    running = Daemon(tmp_path, config, env={"NPUWATCH_PROBE_STALL": "exec"})
    try:
        def probe_workers() -> list[psutil.Process]:
            """This daemon's GEMM ranks only: other test runs may share the machine."""
            found = []
            for proc in psutil.process_iter(["cmdline", "ppid"]):
                try:
                    if proc.info["ppid"] == running.proc.pid and any(
                            "collectors/probes/gemm.py" in part for part in proc.info["cmdline"] or []):
                        found.append(proc)
                except psutil.Error:
                    continue
            return found

        def gone(proc: psutil.Process) -> bool:
            try:
                return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
            except psutil.Error:
                return True

        assert wait_for(lambda: bool(probe_workers()), timeout=60), running.log_text()
        workers = probe_workers()
        started = time.monotonic()
        running.proc.send_signal(signal.SIGTERM)
        assert running.proc.wait(10) == 0, running.log_text()
        assert time.monotonic() - started < 5
        assert wait_for(lambda: all(gone(proc) for proc in workers), timeout=3)
    finally:
        running.stop()


def _with_auth(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_sighup_reloads_the_web_config(tmp_path: Path) -> None:
    """A revoked basic-auth password stops working on SIGHUP; a broken web config keeps the old one."""
    web = tmp_path / "web.yml"
    alice = bcrypt.hashpw(b"alice-pw", bcrypt.gensalt(rounds=4)).decode()
    bob = bcrypt.hashpw(b"bob-pw", bcrypt.gensalt(rounds=4)).decode()
    web.write_text(f"basic_auth_users:\n  alice: {alice}\n")
    running = Daemon(tmp_path, {**BASE_CONFIG, "web": {**BASE_CONFIG["web"], "config_file": str(web)}})
    try:
        as_alice, as_bob = _with_auth("alice", "alice-pw"), _with_auth("bob", "bob-pw")
        assert wait_for(lambda: get(running.url + "/metrics", as_alice, timeout=1)[0] == 200, timeout=30), \
            running.log_text()
        assert get(running.url + "/metrics", as_bob)[0] == 401

        web.write_text(f"basic_auth_users:\n  bob: {bob}\n")
        running.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: running.log_text().count("SIGHUP: config reloaded") == 1, timeout=10)
        assert get(running.url + "/metrics", as_alice)[0] == 401  # applied by the time the reload is logged
        assert get(running.url + "/metrics", as_bob)[0] == 200

        web.write_text("basic_auth_users: [\n")
        running.proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: running.log_text().count("SIGHUP: config reloaded") == 2, timeout=10)
        assert "keeping the running web config" in running.log_text()
        assert get(running.url + "/metrics", as_bob)[0] == 200
        assert get(running.url + "/metrics")[0] == 401  # never drops to no auth
        assert running.proc.poll() is None
    finally:
        running.stop()
