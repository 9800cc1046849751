"""Production faults on the real paths: fake tools as subprocesses, the real log scanner, real
HTTP scrapes and real cpu probe workers (issue 6). Complements test_agent_pipeline.py (npu-smi
hang/garbage/crash), test_agent_signals.py, test_textfile.py and test_probe_runner.py.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.core.config import apply_overrides
from agent.daemon.assemble import AgentBundle
from agent.probes import job as probes_job
from agent.probes.records import ProbeResult
from agent.web.security import ServerLimits
from agent.web.server import make_server
from tests.support.agent_harness import demo_bundle, get, wait_for

HCCN_COLLECTORS = ("hccn_link", "hccn_link_stat", "hccn_net_health", "hccn_optical", "hccn_stat", "hccn_speed")
# A scrape that waited on a tool or on a log read would take its whole time (>= 600 ms here); these
# bounds catch that on a loaded shared 2-core machine without making a speed target of a unit test
# (the speed targets, p99 < 5 ms, are bench/agent.py's and bench/attack.py's).
SCRAPE_BUDGET_S = 0.15
ERRORS = "npu_hccl_errors_total"

Values = dict[tuple[str, tuple[tuple[str, str], ...]], float]


# --------------------------------------------------------------------------- helpers


def values_of(body: bytes) -> Values:
    out: Values = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(values: Values, name: str, **labels: str) -> float | None:
    return values.get((name, tuple(sorted(labels.items()))))


def demo_of(bundle: AgentBundle) -> Any:
    assert bundle.demo is not None
    return bundle.demo


def exported(bundle: AgentBundle) -> Values:
    return values_of(bundle.agent.cache.render().body)


@contextmanager
def scrapeable(bundle: AgentBundle) -> Iterator[str]:
    """The agent's HTTP endpoints on 127.0.0.1:0 without the per-IP rate limit (every scraper
    here is 127.0.0.1, and the point is latency under load, not rate limiting)."""
    limits = ServerLimits(rate_per_s=1e6, burst=1_000_000, max_connections=64)
    server = make_server("127.0.0.1", 0, bundle.agent.cache, bundle.agent.health, limits=limits)
    server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()
        bundle.agent.stop()


def scrape_while(url: str, busy: Callable[[], bool], threads: int = 1, pause_s: float = 0.0) -> list[tuple[int, float]]:
    """(status, seconds) of every /metrics scrape made by ``threads`` scrapers while ``busy()``."""
    results: list[tuple[int, float]] = []
    lock = threading.Lock()

    def scraper() -> None:
        while busy():
            status, body, elapsed = get(url + "/metrics")
            ok = status == 200 and b"npuwatch_collector_up" in body
            with lock:
                results.append((status if ok else -status, elapsed))
            if pause_s:
                time.sleep(pause_s)

    workers = [threading.Thread(target=scraper, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    return results


def answered_latencies(results: list[tuple[int, float]]) -> list[float]:
    """The latencies, after checking that every scrape was answered 200 with a full body."""
    assert {status for status, _ in results} <= {200}, sorted({status for status, _ in results})
    return [elapsed for _, elapsed in results]


def run_in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(target()), daemon=True)
    thread.start()
    return thread, out


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def assert_scrapes_fast(latencies: list[float], q: float = 0.95) -> None:
    """Scrapes did not wait for the broken tool: the median is within SCRAPE_BUDGET_S.

    A scrape that waited would take the rest of the tool's run (hundreds of ms to seconds), and so would
    every scrape behind it, so the median would be far over budget; one slow scrape on a loaded machine
    is not that. The tail (``q``) is reported, and judged by bench/attack.py, not here.
    """
    assert latencies, "no scrape was made"
    summary = (f"{len(latencies)} scrapes: median {statistics.median(latencies) * 1e3:.1f} ms, "
               f"p{q * 100:g} {percentile(latencies, q) * 1e3:.1f} ms, max {max(latencies) * 1e3:.1f} ms")
    assert statistics.median(latencies) < SCRAPE_BUDGET_S, summary


def tool_processes(demo_dir: Path, name: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if str(demo_dir / "bin" / name) in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def hccl_line(minute: int, code: str = "EI0002") -> str:
    """An Ascend error-code block line; different minutes are different incidents (60 s dedup)."""
    return (f"{code}: [PID: 4242] 2026-11-29-10:{minute:02d}:50.645.648 The wait execution of the Notify "
            "register times out. Reason: The Notify register has not received the Notify record from "
            "remote rank [5].\n")


def plog_dir(bundle_root: Path) -> Path:
    return bundle_root / "demo" / "log" / "debug" / "plog"


def log_bundle(tmp_path: Path, **hccl: Any) -> AgentBundle:
    return demo_bundle(tmp_path, {"collectors": {"hccl_logs": {"enabled": True, **hccl}}}, chips=2)


def collect_logs(bundle: AgentBundle) -> None:
    bundle.agent.run_internal_by_name("hccl_logs")


def scanner(bundle: AgentBundle) -> Any:
    """The agent's HcclLogCollector (the bound ``collect`` of its internal job)."""
    job = bundle.agent.internal_job("hccl_logs")
    assert job is not None
    return job.collect.__self__  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- 1. hccn_tool faults


@pytest.mark.parametrize(("fault", "reason", "timeout"), [
    ("hccn_tool_hang", "timeout", "600ms"),
    ("hccn_tool_crash", "exit", "2s"),
    ("hccn_tool_garbage", "parse", "2s"),
])
def test_hccn_tool_fault_downs_only_its_collectors(tmp_path: Path, fault: str, reason: str, timeout: str) -> None:
    bundle = demo_bundle(tmp_path, {"collectors": {"hccn_tool": {"timeout": timeout}}}, chips=2)
    agent = bundle.agent
    agent.collect_once()
    assert all(agent.store.get(name).ok for name in HCCN_COLLECTORS)  # type: ignore[union-attr]
    with scrapeable(bundle) as url:
        demo_of(bundle).set_fault(fault)
        # every RoCE collector: -stat runs in a group of its own (collectors.hccn_tool.stat_interval)
        roce, _ = run_in_thread(lambda: [agent.collect_group(group) for group in ("roce", "roce_stat")])
        latencies = answered_latencies(scrape_while(url, roce.is_alive, pause_s=0.02))
        roce.join()
        for group in ("info", "usages", "health"):  # npu-smi keeps working beside the broken hccn_tool
            agent.collect_group(group)
        values = values_of(get(url + "/metrics")[1])
    assert_scrapes_fast(latencies)
    for name in HCCN_COLLECTORS:
        assert value(values, "npuwatch_collector_up", collector=name) == 0, name
        assert value(values, "npuwatch_collector_errors_total", collector=name, reason=reason) == 1, name
        others = [r for r in ("timeout", "exit", "parse", "missing_tool") if r != reason]
        assert all(value(values, "npuwatch_collector_errors_total", collector=name, reason=r) == 0
                   for r in others), name
    npu_smi = [labels[0][1] for (name, labels), v in values.items()
               if name == "npuwatch_collector_up" and labels[0][1].startswith("npu_smi_")]
    assert len(npu_smi) >= 10
    assert all(value(values, "npuwatch_collector_up", collector=c) == 1 for c in npu_smi)
    assert value(values, "npu_power_watts", npu="1", chip="0") is not None
    if reason == "timeout":
        # A hang is killed at the timeout: no hccn_tool process is left behind.
        assert wait_for(lambda: not tool_processes(tmp_path / "demo", "hccn_tool"), timeout=3)


# --------------------------------------------------------------------------- 2. slow npu-smi under load


def test_slow_npu_smi_with_four_scrapers_keeps_scrapes_fast(tmp_path: Path) -> None:
    extra = {"collectors": {
        "npu_smi": {"timeout": "2s", "max_parallel": 4,
                    # one source per group is enough to keep a full pass a few seconds long
                    "disable": ["npu_smi_topo", "npu_smi_common", "npu_smi_ecc", "npu_smi_memory",
                                "npu_smi_board", "npu_smi_hccs", "npu_smi_hccs_bw"]},
        "hccn_tool": {"enabled": False},
        "host": {"enabled": False}}}
    bundle = demo_bundle(tmp_path, extra, chips=4)
    agent = bundle.agent
    agent.collect_once()  # something to serve
    demo_of(bundle).set_delay(0.8)
    with scrapeable(bundle) as url:
        started = time.monotonic()
        collection, _ = run_in_thread(agent.collect_once)
        results = scrape_while(url, collection.is_alive, threads=4)
        collection.join()
        took = time.monotonic() - started
        values = values_of(get(url + "/metrics")[1])
    latencies = answered_latencies(results)
    assert took >= 4 * 0.8, took  # the collection really was slow (inventory, info, usages, health)
    assert len(latencies) >= 100
    assert_scrapes_fast(latencies, q=0.99)
    for source in agent.sources:
        assert value(values, "npuwatch_collector_up", collector=source.name) == 1, source.name
        assert value(values, "npuwatch_collector_errors_total", collector=source.name, reason="timeout") == 0
        duration = value(values, "npuwatch_collector_duration_seconds", collector=source.name)
        assert duration is not None and duration >= 0.8, (source.name, duration)


# --------------------------------------------------------------------------- 3. log directory vanishes


def test_log_directory_vanishing_keeps_counters_and_recovers(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    bundle = log_bundle(tmp_path)
    plogs = plog_dir(tmp_path)
    plogs.mkdir(parents=True)
    (plogs / "plog-4242_1.log").write_text(hccl_line(10))
    collect_logs(bundle)
    before = exported(bundle)
    assert value(before, ERRORS, code="EI0002", category="exec_timeout") == 1

    log_root = tmp_path / "demo" / "log"
    shutil.rmtree(log_root)
    with caplog.at_level(logging.WARNING):
        collect_logs(bundle)
        collect_logs(bundle)
    after = exported(bundle)
    # No crash, no counter going backwards: every counted series is still exported unchanged.
    for key, count in before.items():
        if key[0] in (ERRORS, "npuwatch_log_bytes_read_total"):
            assert after.get(key) == count, key
    # ... and the collector says what is wrong: logged once, and kept as its current problem.
    vanished = [r for r in caplog.records if r.levelno >= logging.WARNING and str(log_root) in r.getMessage()]
    assert len(vanished) == 1, [r.getMessage() for r in caplog.records]
    assert vanished[0].levelno == logging.WARNING
    assert scanner(bundle).problem is not None and str(log_root) in scanner(bundle).problem

    plogs.mkdir(parents=True)
    (plogs / "plog-4242_2.log").write_text(hccl_line(30))
    collect_logs(bundle)
    recovered = exported(bundle)
    assert value(recovered, ERRORS, code="EI0002", category="exec_timeout") == 2
    assert scanner(bundle).problem is None
    assert value(recovered, "npuwatch_collector_up", collector="hccl_logs") == 1


def test_log_file_back_with_the_same_inode_and_size_is_read_as_new(tmp_path: Path) -> None:
    # What a deleted and recreated log directory may look like to the tailer: the new file got
    # the old one's inode and has the very same size. Made deterministic here by moving the
    # directory away, rewriting the file in place, and moving it back.
    bundle = log_bundle(tmp_path)
    plog = plog_dir(tmp_path) / "plog-4242_1.log"
    plog.parent.mkdir(parents=True)
    plog.write_text(hccl_line(10))
    collect_logs(bundle)
    log_root, away = tmp_path / "demo" / "log", tmp_path / "demo" / "log.gone"
    log_root.rename(away)
    collect_logs(bundle)
    moved = away / "debug" / "plog" / plog.name
    inode = moved.stat().st_ino
    moved.write_text(hccl_line(30))  # same length, other content, same inode
    away.rename(log_root)
    assert plog.stat().st_ino == inode and plog.stat().st_size == len(hccl_line(10))
    collect_logs(bundle)
    assert value(exported(bundle), ERRORS, code="EI0002", category="exec_timeout") == 2


def test_degraded_log_collector_is_up_zero_and_keeps_its_counters(tmp_path: Path) -> None:
    bundle = log_bundle(tmp_path)
    plogs = plog_dir(tmp_path)
    plogs.mkdir(parents=True)
    (plogs / "plog-4242_1.log").write_text(hccl_line(10))
    collect_logs(bundle)
    shutil.rmtree(tmp_path / "demo" / "log")
    collect_logs(bundle)
    values = exported(bundle)
    assert value(values, ERRORS, code="EI0002", category="exec_timeout") == 1
    assert value(values, "npuwatch_collector_up", collector="hccl_logs") == 0
    snap = bundle.agent.store.get("hccl_logs")
    assert snap is not None and snap.error and "no watched log location" in snap.error
    assert sum(snap.errors.values()) == 0  # a degraded collector is not a failed run


def test_no_log_directory_from_the_start_is_no_data(tmp_path: Path) -> None:
    bundle = log_bundle(tmp_path)
    shutil.rmtree(tmp_path / "demo" / "log")
    collect_logs(bundle)
    snap = bundle.agent.store.get("hccl_logs")
    assert snap is not None and snap.no_data and not snap.ok and sum(snap.errors.values()) == 0
    assert value(exported(bundle), ERRORS, code="EI0002", category="exec_timeout") is None


# --------------------------------------------------------------------------- 4. a multi-GB log file


def _sparse_log(path: Path, size: int, tail: str) -> None:
    """``size`` bytes of NULs (a hole: nothing on disk) with no newline, then ``tail``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.truncate(size)
        handle.seek(size)
        handle.write(b"\n" + tail.encode())  # ends the 3 GiB "line", which is cut and skipped


def test_multi_gb_log_is_read_within_a_byte_budget_per_cycle(tmp_path: Path) -> None:
    # A file first seen within first_start_window is read from its start (it may hold the
    # errors of the incident that just happened), byte_budget per cycle: 13 cycles here.
    size, budget = 3 << 30, 256 << 20
    bundle = log_bundle(tmp_path, byte_budget=budget)
    big = plog_dir(tmp_path) / "plog-4242_big.log"
    _sparse_log(big, size, hccl_line(10))
    cycles: list[float] = []

    def collect_until_counted() -> None:
        for _ in range(size // budget + 3):
            started = time.monotonic()
            collect_logs(bundle)
            cycles.append(time.monotonic() - started)
            if value(exported(bundle), ERRORS, code="EI0002", category="exec_timeout") == 1:
                return

    with scrapeable(bundle) as url:
        reading, _ = run_in_thread(collect_until_counted)
        results = scrape_while(url, reading.is_alive, pause_s=0.01)
        reading.join()
        values = values_of(get(url + "/metrics")[1])
    assert value(values, ERRORS, code="EI0002", category="exec_timeout") == 1
    assert len(cycles) == size // budget + 1, cycles  # the budget really bounded each cycle
    assert max(cycles) < 10, cycles
    assert value(values, "npuwatch_log_bytes_read_total") == big.stat().st_size
    assert value(values, "npuwatch_collector_up", collector="hccl_logs") == 1
    latencies = answered_latencies(results)
    assert len(latencies) >= 10
    assert_scrapes_fast(latencies)


def test_old_multi_gb_log_is_skipped_at_first_start_and_followed_after(tmp_path: Path) -> None:
    # A file last written before first_start_window is history: followed from its end, so
    # first start costs no read at all, and only what is appended later is counted.
    bundle = log_bundle(tmp_path)
    big = plog_dir(tmp_path) / "plog-4242_old.log"
    _sparse_log(big, 3 << 30, hccl_line(10))
    old = time.time() - 2 * 3600
    os.utime(big, (old, old))
    started = time.monotonic()
    collect_logs(bundle)
    assert time.monotonic() - started < 2
    values = exported(bundle)
    assert value(values, ERRORS, code="EI0002", category="exec_timeout") == 0
    assert value(values, "npuwatch_log_bytes_read_total") == 0
    with big.open("a") as handle:
        handle.write(hccl_line(40))
    collect_logs(bundle)
    assert value(exported(bundle), ERRORS, code="EI0002", category="exec_timeout") == 1


# --------------------------------------------------------------------------- 5. state file unwritable


def _state_unusable(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], str]:
    """Config overrides and the path the warning must name. Root ignores file modes, so the
    cases are made of things no user can write through: a file where a directory should be,
    a directory where the state file should be, and a disk that is full."""
    if kind == "state_dir_is_under_a_file":
        blocker = tmp_path / "blocker"
        blocker.write_text("not a directory\n")
        return {"state_dir": str(blocker / "sub")}, str(blocker / "sub")
    state_dir = tmp_path / "state"
    state_file = state_dir / "hccl_logs.json"
    if kind == "state_file_is_a_directory":
        state_file.mkdir(parents=True)
    else:  # disk full: every fsync of the state file's temp copy fails with ENOSPC
        real_fsync = os.fsync

        def fsync(fd: int) -> None:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(str(state_dir)):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", fsync)
    return {"state_dir": str(state_dir)}, str(state_file)


@pytest.mark.parametrize("kind", ["state_dir_is_under_a_file", "state_file_is_a_directory", "disk_full"])
def test_unwritable_state_keeps_counting_in_memory_and_says_so(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    bundle = log_bundle(tmp_path)
    overrides, named = _state_unusable(kind, tmp_path, monkeypatch)

    def warnings_naming_it() -> list[str]:
        return [r.getMessage() for r in caplog.records
                if r.levelno >= logging.WARNING and named in r.getMessage()]

    plogs = plog_dir(tmp_path)
    plogs.mkdir(parents=True)
    (plogs / "plog-1.log").write_text(hccl_line(10))
    with caplog.at_level(logging.INFO), scrapeable(bundle) as url:
        # As an operator would: change state_dir and reload (SIGHUP).
        bundle.agent.reload(apply_overrides(bundle.agent.config, overrides))
        collect_logs(bundle)
        status, body, _ = get(url + "/metrics")
        assert status == 200
        assert value(values_of(body), ERRORS, code="EI0002", category="exec_timeout") == 1
        said = warnings_naming_it()
        assert said and any("memory" in message for message in said), [r.getMessage() for r in caplog.records]
        with (plogs / "plog-1.log").open("a") as handle:
            handle.write(hccl_line(20))
        for _ in range(3):
            collect_logs(bundle)
        status, body, _ = get(url + "/metrics")
        assert status == 200
        assert value(values_of(body), ERRORS, code="EI0002", category="exec_timeout") == 2
        assert warnings_naming_it() == said  # said once, not every cycle
    problem = scanner(bundle).problem
    assert problem is not None and named in problem
    assert not list((tmp_path / "state").glob("*.tmp"))  # no half-written temp file left behind


# --------------------------------------------------------------------------- 6. a probe worker killed


def test_probe_rank_killed_mid_run_is_counted_and_leaves_no_orphan(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"probes": {
        "enabled": True, "backend": "cpu", "idle_aicore_threshold": 1.0, "deadline": "60s",
        "allreduce": {"size": 64 << 10}, "gemm": {"enabled": False}}}
    bundle = demo_bundle(tmp_path, extra, chips=2)
    agent = bundle.agent
    agent.collect_group("info")  # fresh npu-smi data: the idle gate passes
    # Rank 0 stops on entering exec, so rank 1 sits inside the all-reduce waiting for it.
    monkeypatch.setenv("NPUWATCH_PROBE_STALL", "exec:0")
    stages: dict[int, str] = {}
    real_run_allreduce = probes_job.run_allreduce

    def traced(settings: Any, scope: Any = "node", **kwargs: Any) -> ProbeResult:
        def on_event(event: dict[str, Any]) -> None:
            if event.get("kind") == "stage":
                stages[int(event["worker"])] = str(event["stage"])
        return real_run_allreduce(settings, scope, on_event=on_event, **kwargs)

    monkeypatch.setattr(probes_job, "run_allreduce", traced)
    tag = agent.probe_controller.settings().tag
    assert tag

    def workers() -> list[psutil.Process]:
        found = []
        for proc in psutil.process_iter(["cmdline"]):
            try:
                cmdline = proc.info["cmdline"] or []
                if tag in cmdline and any(part.endswith("collectors/probes/allreduce.py") for part in cmdline):
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    with scrapeable(bundle) as url:
        probe, out = run_in_thread(lambda: agent.probe_controller.run("allreduce"))
        assert wait_for(lambda: stages.get(0) == "exec" and stages.get(1) == "exec", timeout=60), stages
        time.sleep(0.3)  # rank 1 is now blocked in the collective
        (victim,) = [p for p in workers() if p.cmdline()[-2:] == ["--device", "1"]]
        victim.send_signal(signal.SIGKILL)
        latencies = answered_latencies(scrape_while(url, probe.is_alive, pause_s=0.02))
        probe.join(timeout=30)
        assert not probe.is_alive()
        result: ProbeResult = out[0]
        agent.run_internal_by_name("probes")
        values = values_of(get(url + "/metrics")[1])
        assert get(url + "/metrics")[0] == 200
    assert result.outcome in ("fail", "error"), (result.outcome, result.message)
    assert result.ranks[1].returncode == -signal.SIGKILL
    assert "rank 1" in result.message
    assert_scrapes_fast(latencies)
    assert value(values, "npuwatch_probe_runs_total", probe="allreduce", outcome=result.outcome) == 1
    assert value(values, "npuwatch_probe_runs_total", probe="allreduce", outcome="pass") == 0
    assert value(values, "npuwatch_probe_duration_seconds", probe="allreduce") == pytest.approx(result.duration_s)
    assert value(values, "npuwatch_probe_last_success_timestamp_seconds", probe="allreduce") is None
    assert wait_for(lambda: not workers(), timeout=3), workers()
    assert [c for c in psutil.Process().children(recursive=True) if c.status() == psutil.STATUS_ZOMBIE] == []
