"""The whole pipeline on the demo node: real subprocesses, real parsers, real HTTP."""

from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import time
from pathlib import Path

import psutil
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as text_openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from agent.core.config import apply_overrides, build_config
from agent.daemon.assemble import build_agent
from tests.support.agent_harness import ServedAgent, demo_bundle, fast_config, get, serving, wait_for


def _values(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _get(values: dict, name: str, **labels: str) -> float | None:
    return values.get((name, tuple(sorted(labels.items()))))


def _fake_processes(demo_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
            if "agent.demo.fake_" in cmd or str(demo_dir / "bin") in cmd:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_demo_node_exports_every_source(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path)
    bundle.agent.collect_once()
    values = _values(bundle.agent.cache.render().body)
    assert _get(values, "npu_chips") == 8
    for npu in range(8):
        chip = {"npu": str(npu), "chip": "0"}
        assert _get(values, "npu_healthy", **chip) == 1
        assert 70 <= (_get(values, "npu_power_watts", **chip) or 0) <= 350
        assert _get(values, "npu_hbm_total_bytes", **chip) == 65536 * 2**20
        assert _get(values, "npu_aicore_frequency_hertz", **chip) is not None
        assert _get(values, "npu_roce_link_up", npu=str(npu), chip="0") == 1
    infos = [dict(labels) for (name, labels), _ in values.items() if name == "npu_info"]
    assert len(infos) == 8
    assert all(info["model"] == "910B3" and info["firmware"] and info["driver"] for info in infos), infos
    assert {info["logic_id"] for info in infos} == {str(i) for i in range(8)}
    ups = {labels: v for (name, labels), v in values.items() if name == "npuwatch_collector_up"}
    assert len(ups) >= 17 and all(v == 1 for v in ups.values()), ups
    bundle.agent.stop()


def test_promtool_check_metrics_is_clean(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: install the Debian package prometheus"
    bundle = demo_bundle(tmp_path, {"collectors": {"npu_smi": {"per_process_metrics": True}}})
    bundle.demo.set_fault("process", chip=2)
    bundle.demo.set_fault("hbm_dbe", chip=1)
    bundle.agent.collect_once()
    body = bundle.agent.cache.render().body
    assert b"npu_process_memory_bytes{" in body and b"npu_hbm_ecc_errors_total{" in body
    result = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=30)
    assert result.returncode == 0, (result.stdout + result.stderr).decode()
    assert not (result.stdout + result.stderr).strip(), (result.stdout + result.stderr).decode()
    # promtool lints the text format; the OpenMetrics rendering must parse as OpenMetrics.
    openmetrics = bundle.agent.cache.render(openmetrics=True).body.decode()
    names = [family.name for family in text_openmetrics_families(openmetrics)]
    assert len(names) == len(set(names)) and "npu_hbm_ecc_errors" in names
    bundle.agent.stop()


def test_hung_npu_smi_does_not_slow_scrapes_and_is_killed(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path)
    agent = bundle.agent
    agent.collect_once()
    with serving(bundle) as url:
        bundle.demo.set_fault("npu_smi_hang")
        collecting = threading.Thread(target=agent.collect_group, args=["info"])
        collecting.start()
        time.sleep(0.2)  # the fake is now hanging inside the collection
        latencies = []
        while collecting.is_alive():
            status, body, elapsed = get(url + "/metrics")
            assert status == 200 and b"npu_power_watts" in body
            latencies.append(elapsed)
            time.sleep(0.05)
        collecting.join()
        # Scrapes that waited on the hung tool would take the rest of its timeout (seconds), every one of
        # them: the median tells that apart from one slow scrape on a loaded shared 2-core machine. The speed
        # target itself (p99 < 5 ms) is bench/agent.py's.
        latencies.sort()
        assert latencies and latencies[len(latencies) // 2] < 0.15, latencies
        values = _values(get(url + "/metrics")[1])
        assert _get(values, "npuwatch_collector_up", collector="npu_smi_info") == 0
        assert _get(values, "npuwatch_collector_errors_total", collector="npu_smi_info", reason="timeout") == 1
        # Other collectors are untouched.
        assert _get(values, "npuwatch_collector_up", collector="hccn_link") == 1
    time.sleep(0.2)
    assert _fake_processes(tmp_path / "demo") == []


def test_hung_npu_smi_keeps_roce_collecting_on_the_last_known_chips(tmp_path: Path) -> None:
    """The hardware does not change while npu-smi hangs: hccn_tool keeps collecting every chip."""
    bundle = demo_bundle(tmp_path, {"collectors": {"npu_smi": {"interval": "1s", "timeout": "200ms"}}})
    agent = bundle.agent
    agent.collect_once()
    bundle.demo.set_fault("npu_smi_hang")
    deadline = time.monotonic() + 3.5  # past 3x the table's interval: its records are stale now
    while time.monotonic() < deadline:
        agent.collect_group("info")
    assert agent.store.records("npu_smi_info") is None
    agent.collect_group("roce")
    values = _values(agent.cache.render().body)
    assert _get(values, "npuwatch_collector_up", collector="hccn_link") == 1
    assert [_get(values, "npu_roce_link_up", npu=str(n), chip="0") for n in range(8)] == [1.0] * 8
    assert _get(values, "npuwatch_collector_down_reason", collector="npu_smi_info", reason="timeout") == 1
    assert _get(values, "npuwatch_collector_down_reason", collector="hccn_link", reason="timeout") is None
    agent.stop()


def test_a_chip_leaving_ok_gets_its_error_codes_read_at_once(tmp_path: Path) -> None:
    """The table runs every 10 s, -t health every 60 s: the first page must not say "codes: none"."""
    bundle = demo_bundle(tmp_path)
    agent = bundle.agent
    agent.collect_once()
    bundle.demo.set_fault("health", chip=5, state="Alarm", codes=["8C084E00"])
    agent.collect_group("info")  # the table only; the health group does not run
    values = _values(agent.cache.render().body)
    assert _get(values, "npu_healthy", npu="5", chip="0") == 0
    assert _get(values, "npu_error_code_active", npu="5", chip="0", code="8C084E00", handling="FreeRestartNPU") == 1
    agent.stop()


def test_every_down_collector_says_why(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path)
    (tmp_path / "demo" / "bin" / "npu-smi").unlink()
    bundle.agent.collect_once()
    values = _values(bundle.agent.cache.render().body)
    ups = {dict(labels)["collector"]: v for (name, labels), v in values.items() if name == "npuwatch_collector_up"}
    reasons = {dict(labels)["collector"]: dict(labels)["reason"]
               for (name, labels), _ in values.items() if name == "npuwatch_collector_down_reason"}
    assert {c for c, up in ups.items() if up == 0} == set(reasons)
    assert reasons["npu_smi_info"] == "missing_tool"
    assert reasons["hccn_link"] == "no_inventory"  # no chip list: nothing to ask hccn_tool about
    assert "host" not in reasons
    bundle.agent.stop()


def test_fifty_hangs_leave_no_process(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, {"collectors": {"npu_smi": {"timeout": "100ms"}}})
    bundle.demo.set_fault("npu_smi_hang")
    for _ in range(50):
        bundle.agent.collect_group("info")
    snap = bundle.agent.store.get("npu_smi_info")
    assert snap is not None and snap.errors["timeout"] == 50
    time.sleep(0.3)
    assert _fake_processes(tmp_path / "demo") == []
    assert [c for c in psutil.Process().children(recursive=True) if c.status() == psutil.STATUS_ZOMBIE] == []
    bundle.agent.stop()


@pytest.mark.parametrize(("fault", "reason"), [
    ("npu_smi_garbage", "parse"),
    ("npu_smi_crash", "exit"),
])
def test_bad_output_counts_an_error_and_spares_other_collectors(tmp_path: Path, fault: str, reason: str) -> None:
    bundle = demo_bundle(tmp_path)
    bundle.agent.collect_once()
    bundle.demo.set_fault(fault)
    bundle.agent.collect_once()
    store = bundle.agent.store
    info = store.get("npu_smi_info")
    assert info is not None and not info.ok and info.errors[reason] >= 1
    assert store.get("hccn_link").ok  # type: ignore[union-attr]
    assert store.get("host").ok  # type: ignore[union-attr]
    bundle.agent.stop()


def test_a_table_padded_past_the_output_cap_is_refused_not_parsed(tmp_path: Path) -> None:
    """The first MiB of an over-long answer would parse as a table: a broken tool is not data."""
    bundle = demo_bundle(tmp_path)
    bundle.agent.collect_group("info")
    fake = tmp_path / "demo" / "bin" / "npu-smi"
    fake.rename(fake.with_name("npu-smi.real"))
    fake.write_text(f'#!/bin/sh\n"{fake}.real" "$@"\nhead -c 5000000 /dev/zero | tr "\\0" " "\n')
    fake.chmod(0o755)
    bundle.agent.collect_group("info")
    snap = bundle.agent.store.get("npu_smi_info")
    assert snap is not None and not snap.ok and snap.errors["parse"] == 1
    assert "more than 1048576 bytes of output" in (snap.error or "")
    values = _values(bundle.agent.cache.render().body)
    assert _get(values, "npuwatch_collector_down_reason", collector="npu_smi_info", reason="parse") == 1
    bundle.agent.stop()


def test_truncated_table_keeps_what_it_can(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path)
    bundle.demo.set_fault("npu_smi_truncate")
    bundle.agent.collect_group("info")
    snap = bundle.agent.store.get("npu_smi_info")
    assert snap is not None
    values = _values(bundle.agent.cache.render().body)
    if snap.ok:  # the chips before the cut are kept and counted as they are
        chips = _get(values, "npu_chips")
        assert chips is not None and 0 < chips < 8
        assert _get(values, "npu_healthy", npu="0", chip="0") == 1
    else:
        assert snap.errors["parse"] == 1 and _get(values, "npu_chips") is None
    bundle.agent.stop()


def test_faults_show_in_metrics(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path)
    demo = bundle.demo
    demo.set_fault("health", chip=5, state="Alarm", codes=["8C084E00"])
    demo.set_fault("link_down", chip=3)
    demo.set_fault("vanish", chip=7)
    demo.set_fault("optics_no_light", chip=4)
    bundle.agent.collect_once()
    values = _values(bundle.agent.cache.render().body)
    assert _get(values, "npu_chips") == 7
    assert _get(values, "npu_healthy", npu="5", chip="0") == 0
    assert _get(values, "npu_health_state", npu="5", chip="0", state="alarm") == 1
    assert _get(values, "npu_error_code_active", npu="5", chip="0", code="8C084E00", handling="FreeRestartNPU") == 1
    assert _get(values, "npu_roce_link_up", npu="3", chip="0") == 0
    assert _get(values, "npu_roce_link_up", npu="2", chip="0") == 1
    assert _get(values, "npu_optical_signal_lost", npu="4", chip="0") == 1
    assert _get(values, "npu_power_watts", npu="7", chip="0") is None
    bundle.agent.stop()


def test_readyz_reports_missing_tool_while_healthz_stays_ok(tmp_path: Path) -> None:
    config = build_config(fast_config({
        "collectors": {"npu_smi": {"path": str(tmp_path / "no-npu-smi")}}, "state_dir": str(tmp_path)}))
    bundle = build_agent(config)
    with serving(bundle) as url:
        status, body, _ = get(url + "/readyz")
        assert status == 503 and b"not run yet" in body
        bundle.agent.collect_group("info")
        status, body, _ = get(url + "/readyz")
        assert status == 503 and b"not found" in body
        assert get(url + "/healthz")[0] == 200  # a missing tool is not the agent being dead
        values = _values(get(url + "/metrics")[1])
        assert _get(values, "npuwatch_collector_errors_total", collector="npu_smi_info", reason="missing_tool") == 1


def test_readyz_ok_once_the_chip_list_is_read(demo_agent: ServedAgent) -> None:
    demo_agent.bundle.agent.collect_group("inventory")
    demo_agent.bundle.agent.collect_group("info")
    status, body, _ = get(demo_agent.url + "/readyz")
    assert status == 200 and b'"ready": true' in body
    status, body, _ = get(demo_agent.url + "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0"})
    assert status == 200 and body.endswith(b"# EOF\n")


def test_missing_hccn_tool_is_no_data_not_an_error(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path)
    bundle.agent.collect_once()
    bundle.agent.reload(apply_overrides(bundle.agent.config, {"collectors.hccn_tool.path": str(tmp_path / "none")}))
    bundle.agent.collect_group("roce")
    snap = bundle.agent.store.get("hccn_link")
    assert snap is not None and snap.no_data and sum(snap.errors.values()) == 0
    bundle.agent.stop()


def test_running_agent_collects_on_its_schedule(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, {"collectors": {"npu_smi": {"interval": "1s"}}})
    agent = bundle.agent
    agent.start()
    try:
        url = f"http://127.0.0.1:{agent.http_port}"
        assert wait_for(lambda: get(url + "/healthz")[0] == 200, timeout=20)
        first = agent.store.get("npu_smi_info").last_success  # type: ignore[union-attr]
        assert wait_for(lambda: agent.store.get("npu_smi_info").last_success != first, timeout=10)  # type: ignore[union-attr]
    finally:
        agent.stop()


def test_log_scanner_counts_an_hccl_timeout_once_across_restarts(tmp_path: Path) -> None:
    extra = {"collectors": {"hccl_logs": {"enabled": True}}}
    bundle = demo_bundle(tmp_path, extra)
    plog = tmp_path / "demo" / "log" / "debug" / "plog"
    plog.mkdir(parents=True)
    (plog / "plog-4242_20261129.log").write_text(
        "[INFO] HCCL(4242,python):2026-11-29-10:25:40.000.000 [hccl.cc:1][4242]init ok\n"
        "EI0002: [PID: 4242] 2026-11-29-10:25:50.645.648 The wait execution of the Notify register times out."
        " Reason: The Notify register has not received the Notify record from remote rank [5].\n"
    )
    bundle.agent.collect_once()
    values = _values(bundle.agent.cache.render().body)
    assert _get(values, "npu_hccl_errors_total", code="EI0002", category="exec_timeout") == 1
    bundle.agent.stop()
    restarted = demo_bundle(tmp_path, extra)
    restarted.agent.collect_once()
    values = _values(restarted.agent.cache.render().body)
    assert _get(values, "npu_hccl_errors_total", code="EI0002", category="exec_timeout") == 1
    restarted.agent.stop()


@pytest.mark.parametrize(("require_idle", "runs"), [(True, False), (False, True)])
def test_ascend_dmi_waits_for_an_idle_node(tmp_path: Path, require_idle: bool, runs: bool) -> None:
    bundle = demo_bundle(tmp_path, {"collectors": {"ascend_dmi": {"enabled": True, "require_idle": require_idle}}},
                         chips=2)
    bundle.demo.set_fault("process", chip=1)
    bundle.agent.collect_once()
    snap = bundle.agent.store.get("ascend_dmi_flops")
    assert snap is not None
    assert (snap.started_at is not None) is runs
    if runs:
        values = _values(bundle.agent.cache.render().body)
        assert (_get(values, "npu_dmi_flops", npu="0", dtype="fp16") or 0) > 1e14
    bundle.agent.stop()


def test_demo_probes_run_when_idle_and_skip_while_a_process_is_listed(tmp_path: Path) -> None:
    extra = {"probes": {"enabled": True, "gemm": {"size": 64}, "allreduce": {"enabled": False}}}
    bundle = demo_bundle(tmp_path, extra, chips=2)
    agent = bundle.agent
    agent.collect_once()
    result = agent.probe_controller.run("gemm")
    assert result.outcome == "pass", result.message
    agent.run_internal_by_name("probes")
    values = _values(agent.cache.render().body)
    assert _get(values, "npuwatch_probe_runs_total", probe="gemm", outcome="pass") == 1
    assert (_get(values, "npu_probe_gemm_flops", npu="0", chip="0", dtype="fp32") or 0) > 0
    assert _get(values, "npu_probe_gemm_correct", npu="0", chip="0", dtype="fp32") == 1
    # No efficiency: the cpu's model is in no peak table (npu-smi's 910B3 is not what ran).
    assert _get(values, "npu_probe_gemm_efficiency_ratio", npu="0", chip="0", dtype="fp32") is None

    bundle.demo.set_fault("process", chip=1)
    agent.collect_group("info")
    skipped = agent.probe_controller.run("gemm")
    assert skipped.outcome == "skipped" and "process" in (skipped.message or "")
    agent.run_internal_by_name("probes")
    values = _values(agent.cache.render().body)
    assert _get(values, "npuwatch_probe_runs_total", probe="gemm", outcome="skipped") == 1
    agent.stop()


def test_reload_reschedules_probe_jobs(tmp_path: Path) -> None:
    # No demo: the demo pins its own short probe intervals.
    config = build_config(fast_config({"state_dir": str(tmp_path), "probes": {
        "enabled": True, "gemm": {"interval": "1h"}, "allreduce": {"enabled": False}}}))
    agent = build_agent(config).agent
    agent.start(serve_http=False)
    from agent.probes.job import schedule_probes

    schedule_probes(agent)
    try:
        def probe_jobs() -> dict[str, float]:
            assert agent._scheduler is not None
            return {job.id: job.trigger.interval.total_seconds() for job in agent._scheduler.get_jobs()
                    if job.id.startswith("timed:probe:")}

        assert probe_jobs() == {"timed:probe:gemm": 3600.0}
        agent.reload(apply_overrides(agent.config, {"probes.gemm.interval": 600.0,
                                                    "probes.allreduce.enabled": True}))
        assert probe_jobs() == {"timed:probe:gemm": 600.0, "timed:probe:allreduce": 6 * 3600.0}
    finally:
        agent.stop()


def test_a_run_with_too_many_series_exports_nothing(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, {"max_series_per_source": 100}, chips=16)
    bundle.agent.collect_once()
    values = _values(bundle.agent.cache.render().body)
    # A 16-chip info table makes ~190 series: over the cap, refused whole; a small source still exports.
    assert _get(values, "npu_chips") is None
    assert _get(values, "npuwatch_collector_down_reason", collector="npu_smi_info", reason="parse") == 1
    assert _get(values, "npuwatch_collector_up", collector="npu_smi_mapping") == 1
    bundle.agent.stop()


def test_more_chips_than_max_chips_is_refused(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path, {"collectors": {"npu_smi": {"max_chips": 4}}})
    bundle.agent.collect_group("info")
    snap = bundle.agent.store.get("npu_smi_info")
    assert snap is not None and not snap.ok and snap.errors["parse"] == 1
    assert "more than max_chips=4" in (snap.error or "")
    bundle.agent.stop()


def test_refused_values_are_counted_and_the_rest_exported(tmp_path: Path) -> None:
    bundle = demo_bundle(tmp_path)
    bundle.agent.collect_once()
    bundle.demo.set_fault("hot", chip=2, celsius=400)  # no chip runs at 400 C: a broken sensor reading
    bundle.agent.collect_group("info")
    values = _values(bundle.agent.cache.render().body)
    assert _get(values, "npu_temperature_celsius", npu="2", chip="0") is None
    assert _get(values, "npu_power_watts", npu="2", chip="0") is not None
    assert (_get(values, "npuwatch_parse_rejections_total", collector="npu_smi_info") or 0) >= 1
    assert _get(values, "npuwatch_collector_up", collector="npu_smi_info") == 1
    bundle.agent.stop()


def test_a_reload_that_moves_state_dir_says_it_waits_for_a_restart(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    config = build_config(fast_config({"state_dir": str(tmp_path / "a")}))
    agent = build_agent(config).agent
    try:
        with caplog.at_level(logging.WARNING, logger="agent.daemon.service"):
            agent.reload(apply_overrides(agent.config, {"state_dir": str(tmp_path / "b")}))
        assert f"state_dir changes take effect at the next restart (probe counters and the fault history stay in " \
               f"{tmp_path / 'a'})" in caplog.text
        assert agent.fault_levels.history.path == tmp_path / "a" / "fault_history.json"
    finally:
        agent.stop()


def _said(caplog: pytest.LogCaptureFixture, text: str) -> list[logging.LogRecord]:
    return [record for record in caplog.records if text in record.getMessage()]


def test_a_recovery_and_a_chip_count_change_are_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    bundle = demo_bundle(tmp_path, chips=4)
    try:
        bundle.agent.collect_group("info")
        assert len(bundle.agent.chips()) == 4
        bundle.demo.set_fault("npu_smi_crash")
        for _ in range(2):
            bundle.agent.collect_group("info")
        assert len(_said(caplog, "npu_smi_info: npu-smi exited")) == 1
        bundle.demo.clear_fault("npu_smi_crash")
        for _ in range(3):
            bundle.agent.collect_group("info")
        back = _said(caplog, "npu_smi_info: collecting again (was down: the tool failed)")
        assert len(back) == 1 and back[0].levelno == logging.INFO, [r.getMessage() for r in caplog.records]
        bundle.demo.set_fault("vanish", chip=2)
        for _ in range(3):
            bundle.agent.collect_group("info")
            bundle.agent.chips()
        changed = _said(caplog, "chip count changed")
        assert [(r.levelno, r.getMessage()) for r in changed] == [
            (logging.WARNING, "chip count changed: npu-smi lists 3 chips, 4 before (gone: NPU 2 chip 0)")]
        bundle.demo.clear_fault("vanish", chip=2)
        bundle.agent.collect_group("info")
        bundle.agent.chips()
        assert _said(caplog, "chip count changed")[-1].getMessage() == \
            "chip count changed: npu-smi lists 4 chips, 3 before"
    finally:
        bundle.agent.stop()


def test_a_reload_that_fails_for_any_reason_keeps_the_running_config(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    import dataclasses

    config = build_config(fast_config({"state_dir": str(tmp_path)}))
    agent = build_agent(config).agent
    agent.start(serve_http=False)
    try:
        assert agent._scheduler is not None
        before = {job.id: job.trigger.interval for job in agent._scheduler.get_jobs() if job.id.startswith("group:")}
        # Past validation (as a config built in code could be): the scheduler refuses this interval.
        npu_smi = dataclasses.replace(config.collectors.npu_smi, interval=float("inf"))
        broken = dataclasses.replace(config, labels={"node": "after"},
                                     collectors=dataclasses.replace(config.collectors, npu_smi=npu_smi))
        with caplog.at_level(logging.ERROR, logger="agent.daemon.service"):
            assert agent.reload(broken) is False
        assert "the new config could not be applied; keeping the running one" in caplog.text
        assert agent.config is config
        assert {job.id: job.trigger.interval for job in agent._scheduler.get_jobs()
                if job.id.startswith("group:")} == before
        body = agent.cache.render().body.decode()
        assert "npuwatch_config_last_reload_successful 0" in body
        assert 'node="after"' not in body
    finally:
        agent.stop()


def test_stop_after_a_start_that_failed_half_way_raises_nothing_and_closes_the_port(tmp_path: Path) -> None:
    import dataclasses
    import socket

    config = build_config(fast_config({"state_dir": str(tmp_path), "web": {"listen_address": "127.0.0.1"}}))
    # Past validation: the scheduler refuses this interval after the HTTP server is up.
    npu_smi = dataclasses.replace(config.collectors.npu_smi, interval=float("inf"))
    agent = build_agent(dataclasses.replace(
        config, collectors=dataclasses.replace(config.collectors, npu_smi=npu_smi))).agent
    with pytest.raises((OverflowError, ValueError)):
        agent.start()
    agent.stop()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", config.web.port))  # the port was given back
